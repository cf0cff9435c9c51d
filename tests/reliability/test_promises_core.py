"""The core promise (issue 40): a dry run acts on nothing, nothing is queued twice.

Real `gymbuild` subprocesses under the local executor (tests/e2e_helpers.py), real jobs, real files:

- looking (render, resolve, status, results, logs, runs, doit's list and info, with new=1, only=,
  json=1) leaves the workspace, its history, the claims, the local index and its notes as they were,
  searched by hypothesis over sequences of those verbs on a live submission;
- a dry run of a fresh submission does not forget the live one, and the submit settles the id;
- every spelling of one config file (symlinks, `./`, `a/../`) is one workspace, one submission;
- the local index guards a submission whose workspace is gone;
- the resolved config a queued job ran with is never overwritten by a later submit;
- `results` does not cache a benchmark whose metrics said nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import gymbuild, kill_local_jobs, local_index_file, user_env, workspaces, write_config
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from gymbuild.state.workspace import Workspace

LONG = "01:00:00"


def local_config(home: Path, benchmarks: dict[str, Any], name: str = "submit.yaml") -> Path:
    config = {
        "services": {},
        "compute": {"here": {"type": "local", "walltime": LONG}},
        "driver": {"benchmarks": benchmarks},
        "job": {"output_path": "runs"},
        "otel": {"enabled": False},
    }
    return write_config(home / "par", config, name)


class User:
    """A user whose state (workspaces, claims, notes, local index) lives under `home`, typing
    commands in `home/else` (not the config's directory)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.cwd = home / "else"
        self.cwd.mkdir(exist_ok=True)

    def run(self, *args: str) -> Any:
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        return gymbuild(*args, cwd=self.cwd, env=user_env(self.home, PATH=path), timeout=120)

    def ok(self, *args: str) -> str:
        done = self.run(*args)
        assert done.rc == 0, f"gymbuild {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def status(self, config: Path) -> dict[str, str]:
        payload = json.loads(self.ok("status", "json=1", f"config={config}"))
        return {row["benchmark"]: row["state"] for row in payload["benchmarks"]}

    def wait(self, config: Path, want: Any, timeout: float = 90) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while not want(rows := self.status(config)):
            if time.monotonic() > deadline:
                pytest.fail(f"status did not reach the wanted states in {timeout}s: {rows}")
            time.sleep(0.5)
        return rows

    def index(self) -> list[Path]:
        return sorted((self.home / "xdg-cache" / "nemo-gym" / "jobs").glob("*.json"))

    def run_dirs(self) -> list[Path]:
        return sorted((self.home / "par" / "runs").glob("gym-job-*"))


@pytest.fixture
def user(tmp_path: Path) -> Iterator[User]:
    try:
        yield User(tmp_path)
    finally:  # a failed test leaves no process behind
        kill_local_jobs(tmp_path / "par" / "runs")


# --- looking writes no state ------------------------------------------------------------------------

DRAFT = "draft"  # a dry run's corner of the workspace: derived files only (its staged tree, stamps)


def snapshot(home: Path) -> dict[str, bytes]:
    """Every file of the user's gymbuild state that says what was submitted: the workspaces (but a
    dry run's draft), the claims, the notes beside the index, and the local index itself."""
    roots = [
        home / "xdg-state" / "gymbuild",
        home / "xdg-cache" / "nemo-gym" / "jobs",
    ]
    found = {}
    for root in roots:
        for path in sorted(root.rglob("*")) if root.exists() else []:
            rel = path.relative_to(home).as_posix()
            if DRAFT in path.relative_to(root).parts or not path.is_file():
                continue
            found[rel] = path.read_bytes()
    return found


LOOKS = st.sampled_from(
    [
        ("render",),
        ("resolve",),
        (),  # bare gymbuild: the dry run
        ("status",),
        ("results",),
        ("logs",),
        ("runs",),
        ("list", "--status", "--all"),
        ("info", "submit"),
        ("info", "queue:live"),
    ]
)
FLAGS = st.lists(st.sampled_from(["new=1", "only=live", "only=done", "json=1"]), unique=True, max_size=3)


@pytest.fixture(scope="module")
def looked_at() -> Iterator[tuple[User, Path]]:
    """A submission of two benchmarks, one COMPLETED and one RUNNING, for the looks to look at."""
    home = Path(tempfile.mkdtemp(prefix="gymbuild-looks-"))
    user = User(home)
    config = local_config(home, {"done": {"command": "echo done"}, "live": {"command": "sleep 300"}})
    try:
        user.ok("submit", f"config={config}")
        user.wait(config, lambda rows: rows == {"done": "COMPLETED", "live": "RUNNING"})
        yield user, config
    finally:
        kill_local_jobs(home / "par" / "runs")
        shutil.rmtree(home, ignore_errors=True)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(looks=st.lists(st.tuples(LOOKS, FLAGS), min_size=1, max_size=3))
def test_looking_in_any_order_with_any_flags_writes_no_state(
    looked_at: tuple[User, Path], looks: list[tuple[tuple[str, ...], list[str]]]
) -> None:
    user, config = looked_at
    for verb, flags in looks:
        before = snapshot(user.home)
        user.run(*verb, f"config={config}", *flags)  # whatever it answers (an error too), it writes nothing
        after = snapshot(user.home)
        assert after == before, f"gymbuild {' '.join((*verb, *flags))} changed {set(after) ^ set(before)}"
    # and the submission is the one submitted: nothing forgotten, nothing to queue again
    assert user.status(config) == {"done": "COMPLETED", "live": "RUNNING"}
    assert len(user.index()) == 1


# --- item 2: a dry run of a fresh submission forgets nothing --------------------------------------


def test_a_dry_run_of_a_fresh_submission_keeps_the_live_one_and_the_submit_settles_its_id(
    user: User,
) -> None:
    config = local_config(user.home, {"a": {"command": "sleep 300"}, "b": {"command": "sleep 300"}})
    cfg = f"config={config}"
    drafted = json.loads(user.ok("render", cfg, "json=1"))["run_dir"]
    before_submit = datetime.now(UTC).replace(microsecond=0)
    user.ok("submit", cfg)
    (run_dir,) = user.run_dirs()
    record = json.loads((run_dir / "gym-job.json").read_text())
    assert record["run_dir"] != drafted  # the render's draft is not what was submitted
    assert datetime.fromisoformat(record["submitted_at"].replace("Z", "+00:00")) >= before_submit
    user.wait(config, lambda rows: rows == {"a": "RUNNING", "b": "RUNNING"})

    fresh = json.loads(user.ok("render", cfg, "new=1", "json=1"))["run_dir"]
    assert fresh != record["run_dir"]
    assert "has not been submitted" not in user.ok("status", cfg)
    compared = user.ok("results", cfg, "run=all")  # every submission of the config: the one made
    assert record["gym_job_id"] in compared and Path(fresh).name not in compared
    assert user.status(config) == {"a": "RUNNING", "b": "RUNNING"}
    again = user.ok("submit", cfg)
    assert again.startswith("nothing to submit: all 2 benchmarks are queued"), again
    assert user.run_dirs() == [run_dir] and len(user.index()) == 1
    (history,) = workspaces(user.home).glob("submit-*/submissions.jsonl")
    assert [json.loads(line)["gym_job_id"] for line in history.read_text().splitlines()] == [
        record["gym_job_id"]
    ]


# --- item 3: one submission per real file --------------------------------------------------------


def spellings(draw: Any, real: Path, base: Path) -> Path:
    """A path that reaches `real`: through a chain of symlinks (to the file or to its directory),
    with `./` and `x/../` detours, absolute or relative to `base`."""
    target = real
    for n in range(draw(st.integers(0, 3))):
        link = base / f"link{n}-{draw(st.sampled_from(['a', 'submit', 'other']))}.yaml"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target if draw(st.booleans()) else os.path.relpath(target, base))
        target = link
    if draw(st.booleans()):
        dir_link = base / "dirlink"
        if not dir_link.is_symlink():
            dir_link.symlink_to(target.parent)
        target = dir_link / target.name
    parts = list(target.relative_to(base).parts) if target.is_relative_to(base) else list(target.parts)
    spelled: list[str] = []
    for n, part in enumerate(parts):
        spelled.append(part)
        if n == len(parts) - 1:
            break  # the file itself: `file/..` reaches nothing
        if draw(st.booleans()):
            spelled.append(".")
        so_far = Path(base if not Path(parts[0]).is_absolute() else "/", *parts[: n + 1])
        if (
            draw(st.booleans()) and part != "/" and not so_far.is_symlink()
        ):  # `link/..` is the target's parent
            spelled.extend(["..", part])
    text = os.path.join(*spelled)
    return Path(text) if draw(st.booleans()) or not target.is_relative_to(base) else base / text


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_spelling_of_one_file_is_one_workspace(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp).resolve()
        real = base / "par" / "submit.yaml"
        real.parent.mkdir()
        real.write_text("{}\n")
        root = base / "ws"
        want = Workspace(root, real)
        cwd = os.getcwd()
        os.chdir(base)  # the relative spellings are relative to here
        try:
            spelled = spellings(data.draw, real, base)
            note(f"spelled: {spelled}")
            assert os.path.samefile(spelled, real)  # the spelling reaches the file
            got = Workspace(root, spelled)
        finally:
            os.chdir(cwd)
        assert (got.config_dir, got.claim_file) == (want.config_dir, want.claim_file)
        assert got.config_dir.name.startswith("submit-")


def test_a_symlink_to_a_submitted_config_finds_its_submission(user: User) -> None:
    config = local_config(user.home, {"a": {"command": "sleep 300"}, "b": {"command": "sleep 300"}})
    user.ok("submit", f"config={config}")
    (user.home / "link.yaml").symlink_to("par/submit.yaml")
    for spelled in (user.home / "link.yaml", "../par/./submit.yaml", "../par/../par/submit.yaml"):
        done = user.ok("submit", f"config={spelled}")
        assert done.startswith("nothing to submit: all 2 benchmarks are queued"), done
    assert len(user.run_dirs()) == 1 and len(user.index()) == 1


# --- item 5: the local index is a second guard ---------------------------------------------------


def test_a_live_submission_the_workspace_lost_is_refused_not_queued_again(user: User) -> None:
    config = local_config(user.home, {"a": {"command": "sleep 300"}, "b": {"command": "sleep 300"}})
    cfg = f"config={config}"
    user.ok("submit", cfg)
    (run_dir,) = user.run_dirs()
    gym_job_id = run_dir.name
    user.wait(config, lambda rows: rows == {"a": "RUNNING", "b": "RUNNING"})
    shutil.rmtree(workspaces(user.home))  # deleted, or the submit was made on another machine

    refused = user.run("submit", cfg)
    assert refused.rc == 1 and refused.stdout == "", refused
    errors = [line for line in refused.stderr.splitlines() if not line.startswith("warning:")]
    assert len(errors) == 2 and errors[0].startswith(
        f"error: {cfg[7:]}: its submission {gym_job_id} is RUNNING"
    )
    assert f"status run={gym_job_id}" in errors[1] and "new=1" in errors[1]
    assert user.run_dirs() == [run_dir] and user.index() == [local_index_file(user.home, gym_job_id)]
    assert not list(workspaces(user.home).glob("*/submission.json"))  # nothing half-written

    user.ok("submit", cfg, "new=1")  # the fix: a fresh one beside it, on purpose
    assert len(user.run_dirs()) == 2 and len(user.index()) == 2


def test_an_ended_submission_the_workspace_lost_does_not_block_a_submit(user: User) -> None:
    config = local_config(user.home, {"a": {"command": "echo a"}})
    user.ok("submit", f"config={config}")
    user.wait(config, lambda rows: rows == {"a": "COMPLETED"})
    shutil.rmtree(workspaces(user.home))
    user.ok("submit", f"config={config}")
    assert len(user.run_dirs()) == 2


# --- the record keeps the resolved config of each submit -----------------------------------------


def test_a_later_submit_of_a_changed_config_keeps_the_first_resolved_config(user: User) -> None:
    from gymbuild.state.records import SubmissionRecord

    config = local_config(user.home, {"a": {"command": "echo first"}, "b": {"command": "echo b"}})
    cfg = f"config={config}"
    user.ok("submit", cfg, "only=a")
    (run_dir,) = user.run_dirs()
    first = (run_dir / "resolved-config.yaml").read_text()
    assert "echo first" in first

    user.ok("submit", cfg, "only=b", "driver.benchmarks.a.command=echo second")
    assert (run_dir / "resolved-config.yaml").read_text() == first  # what `a` ran with
    assert "echo second" in (run_dir / "resolved-config.2.yaml").read_text()
    record = json.loads((run_dir / "gym-job.json").read_text())
    assert record["executor_metadata"]["resolved_configs"] == "resolved-config.yaml,resolved-config.2.yaml"
    assert SubmissionRecord.load(record).gym_job_id == run_dir.name  # still NeMo Gym's record

    user.ok("submit", cfg, "only=b")  # nothing to queue: nothing rewritten
    assert (run_dir / "resolved-config.yaml").read_text() == first


# --- results caches only what it read whole ------------------------------------------------------


EMPTY_METRICS = 'cd "$NEMO_GYM_BENCH_DIR" && mkdir -p artifacts && echo {} > artifacts/metrics.json'


def test_results_does_not_cache_a_metrics_file_that_said_nothing(user: User) -> None:
    config = local_config(user.home, {"m": {"command": EMPTY_METRICS}})
    cfg = f"config={config}"
    user.ok("submit", cfg)
    user.wait(config, lambda rows: rows == {"m": "COMPLETED"})
    (run_dir,) = user.run_dirs()
    metrics = run_dir / "m" / "artifacts" / "metrics.json"
    assert json.loads(metrics.read_text()) == {}
    user.ok("results", cfg)
    metrics.write_text('{"accuracy": 0.75}\n')  # the file fixed
    shown = user.ok("results", cfg, "json=1")
    assert "0.75" in shown, shown
