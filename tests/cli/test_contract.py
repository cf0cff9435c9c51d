"""The command line's contract (issue 40, items 1 and 10), searched over what a user can type.

One local submission (`done` completes, `fail` exits 3, `live` runs for an hour), then real
`gymbuild` subprocesses: every verb, with NeMo Gym's --dry-run and --resolve-only in any mix, with
json=1 or --json, with -c or config=. Whatever the combination, stdout is one JSON document or
nothing (a refusal says why on stderr), never a traceback; and under --dry-run nothing acts: the
live job runs on, no benchmark is re-queued, no run directory or file appears. An acting verb
without --dry-run (cancel, resubmit) is left out of the search: it would change what the next
example looks at; the plain tests below run each once.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import gymbuild, gymbuild_argv, kill_local_jobs, local_command_config, user_env, write_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gymbuild.request import verbs

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Submitted:
    home: Path
    config: Path

    def run(self, *args: str, **env: str) -> Any:
        return gymbuild(*args, cwd=self.home, env=user_env(self.home, **env), timeout=120)

    def status(self) -> dict[str, dict[str, Any]]:
        done = self.run("status", f"config={self.config}", "json=1")
        assert done.rc == 0, done.stderr
        return {row["benchmark"]: row for row in json.loads(done.stdout)["benchmarks"]}

    def looks(self) -> tuple[Any, ...]:
        """What an acting verb would change: the record's job ids, whether `live` runs, the run
        directories, the files in the directory gymbuild runs in."""
        (run_dir,) = (self.home / "runs").glob("gym-job-*")
        record = json.loads((run_dir / "gym-job.json").read_text())
        ids = {
            b["benchmark"]: (b["job_id"], tuple(b.get("previous_job_ids") or ()))
            for b in record["benchmarks"]
        }
        return (
            ids,
            group_alive(ids["live"][0]),
            sorted(p.name for p in (self.home / "runs").iterdir()),
            sorted(p.name for p in self.home.iterdir()),
        )


def group_alive(job_id: str) -> bool:
    try:
        os.killpg(int(job_id), 0)
    except ProcessLookupError:
        return False
    return True


def local_config(home: Path) -> Path:
    benchmarks = {
        "done": {"command": "echo fine"},
        "fail": {"command": "exit 3"},
        "live": {"command": "sleep 3600"},
    }
    return write_config(
        home,
        {
            "services": {},
            "compute": {"here": {"type": "local", "walltime": "01:00:00"}},
            "driver": {"benchmarks": benchmarks},
            "job": {"output_path": "runs"},
            "otel": {"enabled": False},
        },
        "eval.yaml",
    )


def wait_for(user: Submitted, want: dict[str, str], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while True:
        states = {b: r["state"] for b, r in user.status().items()}
        if states == want:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"the jobs did not reach {want} in {timeout}s: {states}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def submitted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Submitted]:
    home = tmp_path_factory.mktemp("contract")
    user = Submitted(home, local_config(home))
    try:
        done = user.run("submit", f"config={user.config}")
        assert done.rc == 0, done.stderr
        wait_for(user, {"done": "COMPLETED", "fail": "FAILED", "live": "RUNNING"})
        yield user
    finally:
        kill_local_jobs(home / "runs")


VERB_NAMES = [v.name for v in verbs.VERBS]
# The verbs that act unless given their own dry run (cancel, resubmit).
ACTING_WITHOUT_A_DRY_RUN = {v.name for v in verbs.VERBS if v.flag(verbs.DRY_RUN).becomes == "dry_run=1"}


@st.composite
def command_lines(draw: st.DrawFn, config: str) -> tuple[list[str], bool]:
    """A command line, in any order of its parts, and whether it asks for --dry-run."""
    named = [
        draw(st.sampled_from([None, *VERB_NAMES])),
        draw(st.sampled_from([None, None, None, *VERB_NAMES])),
    ]
    named = [v for v in named if v]  # two of them: `render cancel`, refused
    flags = draw(st.lists(st.sampled_from([verbs.DRY_RUN, verbs.RESOLVE_ONLY]), unique=True, max_size=2))
    if ACTING_WITHOUT_A_DRY_RUN & set(named) and verbs.DRY_RUN not in flags:
        flags.append(verbs.DRY_RUN)
    parts = [[v] for v in named] + [[f] for f in flags]
    parts.append([draw(st.sampled_from(["json=1", "--json"]))])
    parts.append(draw(st.sampled_from([["-c", config], [f"config={config}"], [config]])))
    parts += draw(st.sampled_from([[], [["only=live"]], [["only=done"]]]))
    ordered = draw(st.permutations(parts))
    return [word for part in ordered for word in part], verbs.DRY_RUN in flags


def one_document(stdout: str) -> Any:
    """stdout parsed as exactly one JSON document (json.loads refuses a second one: "Extra data")."""
    return json.loads(stdout)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_command_line_with_json_prints_one_document_and_a_dry_run_acts_on_nothing(
    submitted: Submitted, data: st.DataObject
) -> None:
    args, dry = data.draw(command_lines(str(submitted.config)))
    before = submitted.looks()
    done = submitted.run(*args)
    what = f"gymbuild {' '.join(args)}: rc={done.rc}\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, what
    if done.rc == 0:
        one_document(done.stdout)
    else:
        # A mistake is 1; a gate's (compare's) usage error its own, 64 (verbs.Verb.usage_error).
        gate = any(v.usage_error for v in verbs.VERBS if v.name in args)
        assert done.rc in ((1, 64) if gate else (1,)), what
        assert done.stdout == "" or one_document(done.stdout) is not None, what
        assert done.stderr.startswith("error: ") or "\nerror: " in done.stderr, what
    if dry:
        assert submitted.looks() == before, what


def test_cancel_and_resubmit_dry_runs_say_what_they_would_do_and_do_nothing(submitted: Submitted) -> None:
    """The reproductions: `cancel --dry-run` and `resubmit --dry-run` (and their JSON) used to act."""
    config = str(submitted.config)
    before = submitted.looks()
    live_id, fail_id = before[0]["live"][0], before[0]["fail"][0]
    cancel = submitted.run("cancel", "--dry-run", "-c", config)
    assert cancel.rc == 0, cancel.stderr
    assert cancel.stdout.startswith("would cancel 1 job(s) of gym-job-")
    assert f"{live_id} (live RUNNING)" in cancel.stdout and "none cancelled" in cancel.stdout
    as_json = one_document(submitted.run("cancel", "-c", config, "--dry-run", "--json").stdout)
    assert (as_json["dry_run"], as_json["would_cancel"], as_json["cancelled"]) == (True, [live_id], [])
    resubmit = submitted.run("resubmit", "--dry-run", "-c", config)
    assert resubmit.rc == 0, resubmit.stderr
    assert resubmit.stdout.startswith("would re-queue 1 benchmark(s) of gym-job-")
    assert f"fail (FAILED, job {fail_id})" in resubmit.stdout and "submitted" not in resubmit.stdout
    as_json = one_document(submitted.run("resubmit", "dry_run=1", f"config={config}", "json=1").stdout)
    assert as_json["would_resubmit"] == [{"benchmark": "fail", "job_id": fail_id, "state": "FAILED"}]
    assert submitted.looks() == before


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["resubmit", "--resolve-only", "--json"],
            "`gymbuild resubmit --resolve-only`: only submit reads it",
        ),
        (["cancel", "--resolve-only"], "`gymbuild cancel --resolve-only`: only submit reads it"),
        (["render", "cancel"], "a command line names one verb, and this one names 2: render, cancel"),
        (["export", "--dry-run"], "`gymbuild export --dry-run`: export has no dry run"),
        (["submit", "dry_run=1"], "`gymbuild submit` has no dry_run= (cancel and resubmit do)"),
        (["logs", "only=live", "follow=1", "json=1"], "logs json=1 prints one JSON document"),
    ],
)
def test_a_flag_or_verb_that_would_act_beside_a_dry_run_is_refused(
    submitted: Submitted, args: list[str], says: str
) -> None:
    before = submitted.looks()
    done = submitted.run(*args, f"config={submitted.config}")
    assert (done.rc, done.stdout) == (1, "")
    lines = done.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"error: {says}") and lines[1].startswith("    fix: ")
    assert submitted.looks() == before


def test_nothing_live_to_cancel_and_nothing_to_resubmit_are_one_document(tmp_path: Path) -> None:
    home = tmp_path
    config = write_config(
        home,
        {
            "services": {},
            "compute": {"here": {"type": "local"}},
            "driver": {"benchmarks": {"done": {"command": "echo fine"}}},
            "job": {"output_path": "runs"},
            "otel": {"enabled": False},
        },
        "quick.yaml",
    )
    user = Submitted(home, config)
    try:
        assert user.run("submit", f"config={config}").rc == 0
        wait_for(user, {"done": "COMPLETED"})
        for verb in ("cancel", "resubmit"):
            for flags in ([], ["--dry-run"]):
                done = user.run(verb, f"config={config}", "json=1", *flags)
                assert done.rc == 0, done.stderr
                doc = one_document(done.stdout)
                assert doc["gym_job_id"].startswith("gym-job-"), doc
    finally:
        kill_local_jobs(home / "runs")


@pytest.mark.parametrize(
    "args",
    [
        ["render", f"config={ROOT / 'examples' / 'minimal.yaml'}"],
        ["--help"],
        ["help", "submit"],
        ["list", "--all"],  # doit's own command
    ],
)
def test_a_reader_that_has_gone_ends_the_output_quietly(tmp_path: Path, args: list[str]) -> None:
    """`gymbuild render | head -1`: a closed stdout ends gymbuild with the status a shell gives a
    command SIGPIPE ended (141), without a traceback or Python's "Exception ignored" line."""
    read, write = os.pipe()
    os.close(read)  # the reader has gone before gymbuild writes a byte: no race
    try:
        done = subprocess.run(
            gymbuild_argv(*args),
            cwd=tmp_path,
            env=user_env(tmp_path),
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert done.returncode == 141, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert "BrokenPipe" not in done.stderr


def test_a_sweeps_cancel_and_resubmit_dry_runs_are_one_document_and_act_on_nothing(tmp_path: Path) -> None:
    """`cancel multirun=1 --dry-run` and `resubmit multirun=1 --dry-run`: each combination's dry run
    in one document; the live combination runs on, the failed one is not re-queued."""
    config = write_config(tmp_path, local_command_config(), "sweep.yaml")
    line = (f"config={config}", "multirun=1", "driver.benchmarks.demo.command=exit 3,sleep 3600")
    env = user_env(tmp_path)

    def run(*args: str) -> Any:
        return gymbuild(*args, *line, cwd=tmp_path, env=env, timeout=120)

    def jobs() -> dict[str, Any]:
        """Each combination's label -> its benchmark's job id and earlier ids; and the run dirs."""
        cells = json.loads(run("status", "json=1").stdout)["cells"]
        found: dict[str, Any] = {c["label"]: c["status"]["benchmarks"][0] for c in cells}
        return {
            **{label: (row["job_id"], row["state"]) for label, row in found.items()},
            "run dirs": sorted(p.name for p in (tmp_path / "runs").iterdir()),
        }

    try:
        assert run("submit").rc == 0
        deadline = time.monotonic() + 90
        while True:  # the event: the failing combination has failed, the other runs
            before = jobs()
            if (before["command=exit 3"][1], before["command=sleep 3600"][1]) == ("FAILED", "RUNNING"):
                break
            assert time.monotonic() < deadline, before
            time.sleep(0.5)
        live = before["command=sleep 3600"][0]
        cancel = run("cancel", "--dry-run", "--json")
        assert cancel.rc == 0, cancel.stderr
        would = [c["cancel"]["would_cancel"] for c in one_document(cancel.stdout)["cells"]]
        assert sorted(would) == [[], [live]]
        resubmit = run("resubmit", "--dry-run", "json=1")
        assert resubmit.rc == 0, resubmit.stderr
        picked = [c["resubmit"]["would_resubmit"] for c in one_document(resubmit.stdout)["cells"]]
        assert sorted(len(p) for p in picked) == [0, 1]
        assert jobs() == before and group_alive(live)
    finally:
        kill_local_jobs(tmp_path / "runs")
