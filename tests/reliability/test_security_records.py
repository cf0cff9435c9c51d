"""A record, an index entry or `run=` is never a path: hostile ids are refused, nothing outside is touched.

Issue 45: a `gym-job.json` planted in a run directory under a shared output path, with
`"gym_job_id": "../../victim-dir"`, made its owner's `gymbuild cancel run=...` delete `victim-dir`
(`rm -rf ~/.gymbuild-secrets/<gym_job_id>`); the same field steered `runs prune=` and `results`, and
`run=` itself took `../` and absolute paths. Issue 40: `runs prune=` deleted NeMo Gym's own records.

The searches run gymbuild in this process (main.main, as a user's command line reaches it) over hostile
ids, planted where each reader finds them: on the command line, in a run directory's record, in the
local index. Each answer must be one line on stderr and status 1 (a listing: a warning, and the rest
listed), with every sentinel outside intact. The regressions run the real `gymbuild` on a real local
submission.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import gymbuild, kill_local_jobs, user_env, write_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gymbuild.cli import main

DATA = Path(__file__).parents[1] / "data"
# The id format, spelled here independently of gymbuild/state/ids.py: what a hostile id must not be.
ID = re.compile(r"gym-job-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}", re.ASCII)
PLANTED = "gym-job-20260101T000000Z-abcdef"  # the run directory / index entry the user names
OTHER = "gym-job-20260102T000000Z-fedcba"
# The verbs that take run=; compare needs two runs, export and runs read no record by it.
VERBS = ("status", "logs", "cancel", "resubmit", "results", "compare", "export", "runs")
RECORD_VERBS = ("status", "logs", "cancel", "resubmit", "results", "compare")
# The site is made once per test and each example plants over it: the searches share it on purpose.
SEARCH = settings(
    max_examples=80,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

hostile_ids = st.one_of(
    st.sampled_from(
        [
            ".",
            "..",
            "/",
            "~",
            "/etc",
            "../../victim-dir",
            "../../../../evil/rec2",
            "../" * 12 + "victim-dir",
            PLANTED.upper(),
            PLANTED[:-1],
            PLANTED.replace("2026", "٢٠٢٦"),  # digits of another script
            PLANTED * 20,  # overlong
        ]
    ),
    # valid-looking ids with a traversal, separator, NUL, newline or space around them
    st.builds(
        lambda before, after: before + PLANTED + after,
        st.sampled_from(["", "../", "/", "./", "~/", " "]),
        st.sampled_from(["", "/..", "/../../victim-dir", "\n", "\0", " ", "/", "\n../victim-dir"]),
    ),
    st.text(min_size=1, max_size=40),
    st.text(min_size=256, max_size=300),
).filter(lambda v: ID.fullmatch(v) is None and "," not in v and v != "all")


@dataclass
class Site:
    """A user's machine: home, local index, state, a config whose output path is shared, sentinels."""

    root: Path
    config: Path

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def index(self) -> Path:
        return self.root / "xdg-cache" / "nemo-gym" / "jobs"

    @property
    def notes(self) -> Path:
        return self.root / "xdg-state" / "gymbuild" / "runs"

    @property
    def sentinels(self) -> list[Path]:
        """What hostile ids aim at: beside the home, inside it, beside the run directories."""
        return [self.root / "victim-dir" / "keep", self.root / "home" / "victim-dir" / "keep"]

    def clear(self) -> None:
        """Remove what an earlier example planted: the examples of a search share one site."""
        (self.index / f"{PLANTED}.json").unlink(missing_ok=True)
        (self.runs / PLANTED / "gym-job.json").unlink(missing_ok=True)

    def intact(self) -> None:
        for sentinel in self.sentinels:
            assert sentinel.read_text() == "mine", f"{sentinel} was touched"
        assert not list(self.root.rglob("*victim*.json")), "a file was written from a hostile id"


def _record(gym_job_id: str, run_dir: str) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "gym_job_id": gym_job_id,
        "gym_version": "0.7.0",
        "submitted_at": "2026-01-01T00:00:00Z",
        "run_dir": run_dir,
        "cluster": "here",
        "executor": "local",
        "submitted_by": "mallory",
        "hostname": None,
        "benchmarks": [{"benchmark": "ok", "job_dir": f"{run_dir}/ok", "job_id": "999999"}],
    }


def _site(root: Path, command: str = "echo fine") -> Site:
    for sentinel in (root / "victim-dir" / "keep", root / "home" / "victim-dir" / "keep"):
        sentinel.parent.mkdir(parents=True, exist_ok=True)
        sentinel.write_text("mine")
    config = {
        "services": {},
        "compute": {"here": {"type": "local", "walltime": "01:00:00"}},
        "driver": {"benchmarks": {"ok": {"command": command}}},
        "job": {"output_path": "runs"},
        "otel": {"enabled": False},
    }
    return Site(root, write_config(root, config, "local.yaml"))


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Site:
    """The site, and this process's environment pointed at it (HOME too: the secrets directory)."""
    found = _site(tmp_path)
    for name, value in user_env(tmp_path, HOME=str(tmp_path / "home")).items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    return found


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main.main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def _refused(rc: int, out: str, err: str, *names: str, verb: str = "") -> None:
    """One line on stderr naming what was refused (each of `names`), status 1 (a gate's usage error:
    its own, 64, so `compare` never reads as a drop), no traceback."""
    assert rc == (64 if verb == "compare" else 1), (rc, out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    for name in names:
        assert name in lines[0], (name, lines[0])


def _plant_manifest(site: Site, gym_job_id: str, directory: str = PLANTED) -> Path:
    site.clear()
    run_dir = site.runs / directory
    run_dir.mkdir(parents=True, exist_ok=True)
    manifest = run_dir / "gym-job.json"
    manifest.write_text(json.dumps(_record(gym_job_id, f"{site.runs}/{gym_job_id}")))
    return manifest


def _plant_index_entry(site: Site, gym_job_id: str, name: str = PLANTED) -> Path:
    site.clear()
    site.index.mkdir(parents=True, exist_ok=True)
    entry = site.index / f"{name}.json"
    entry.write_text(json.dumps(_record(gym_job_id, f"{site.runs}/{gym_job_id}")))
    return entry


def _run_args(verb: str, site: Site, run: str) -> list[str]:
    extra = {"compare": [f"run={run},{OTHER}"], "export": [f"run={run}", "to=mlflow"]}
    return [verb, f"config={site.config}", *extra.get(verb, [f"run={run}"])]


# --- searches --------------------------------------------------------------------------------------


@SEARCH
@given(verb=st.sampled_from(VERBS), run=hostile_ids)
def test_a_run_argument_that_is_not_an_id_is_refused_by_every_verb(
    site: Site, capsys: pytest.CaptureFixture[str], verb: str, run: str
) -> None:
    rc, out, err = _main(capsys, *_run_args(verb, site, run))

    _refused(rc, out, err, "run=", "is not a gym_job_id", verb=verb)
    assert out == ""
    site.intact()


@SEARCH
@given(verb=st.sampled_from(RECORD_VERBS), planted=hostile_ids, where=st.sampled_from(["manifest", "index"]))
def test_a_record_with_a_hostile_id_in_a_run_directory_or_the_index_is_refused_naming_it(
    site: Site, capsys: pytest.CaptureFixture[str], verb: str, planted: str, where: str
) -> None:
    path = _plant_manifest(site, planted) if where == "manifest" else _plant_index_entry(site, planted)

    rc, out, err = _main(capsys, *_run_args(verb, site, PLANTED))

    _refused(rc, out, err, str(path), verb=verb)
    assert path.is_file()
    site.intact()


@SEARCH
@given(planted=hostile_ids, days=st.sampled_from(["", "0"]))
def test_runs_and_prune_skip_an_index_entry_with_a_hostile_id_and_keep_it(
    site: Site, capsys: pytest.CaptureFixture[str], planted: str, days: str
) -> None:
    entry = _plant_index_entry(site, planted)
    # gymbuild's receipt for the planted id, as if it had noted a submission by that name: still
    # nothing is removed by a name that is not an id.
    site.notes.mkdir(parents=True, exist_ok=True)
    (site.notes / f"{PLANTED}.json").write_text("{}")
    nemo_gym = site.index / "gym-job-20250611T142233Z-3fa9c1.json"
    nemo_gym.write_text((DATA / "nemo-gym-0.7.0-gym-job.json").read_text())

    rc, out, err = _main(capsys, "runs", "json=1", *([f"prune={days}"] if days else []))

    assert rc == 0, err
    assert "Traceback" not in err
    assert next(line for line in err.splitlines() if str(entry) in line).startswith("warning: skipping ")
    assert entry.is_file() and nemo_gym.is_file()
    if not days:
        assert [row["gym_job_id"] for row in json.loads(out)] == ["gym-job-20250611T142233Z-3fa9c1"]
    site.intact()


@settings(SEARCH, max_examples=20)
@given(verb=st.sampled_from(RECORD_VERBS), where=st.sampled_from(["manifest", "index"]))
def test_a_valid_record_found_under_another_ids_name_is_refused(
    site: Site, capsys: pytest.CaptureFixture[str], verb: str, where: str
) -> None:
    # The record is OTHER's; found in PLANTED's directory (or index entry) it would steer cancel to
    # OTHER's jobs and secrets.
    path = _plant_manifest(site, OTHER) if where == "manifest" else _plant_index_entry(site, OTHER)

    rc, out, err = _main(capsys, *_run_args(verb, site, PLANTED))

    _refused(rc, out, err, str(path), OTHER, verb=verb)


# --- the reproductions, with the real gymbuild -----------------------------------------------------


@dataclass
class Submitted:
    site: Site
    env: dict[str, str]
    gym_job_id: str

    def run(self, *args: str) -> Any:
        return gymbuild(*args, cwd=self.site.root, env=self.env, timeout=120)

    def state(self) -> str:
        done = self.run("status", f"config={self.site.config}", "json=1")
        assert done.rc == 0, done.stderr
        (row,) = json.loads(done.stdout)["benchmarks"]
        return str(row["state"])

    def wait_for(self, state: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while (seen := self.state()) != state:
            assert time.monotonic() < deadline, f"the job stayed {seen}, not {state}"
            time.sleep(0.5)


def _submitted(root: Path, command: str) -> Iterator[Submitted]:
    site = _site(root, command)
    env = user_env(root, HOME=str(root / "home"))
    done = gymbuild("submit", f"config={site.config}", cwd=root, env=env, timeout=120)
    assert done.rc == 0, done.stderr
    (run_dir,) = site.runs.glob("gym-job-*")
    try:
        yield Submitted(site, env, run_dir.name)
    finally:
        kill_local_jobs(site.runs)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Submitted]:
    """A real local submission whose one job runs until it is cancelled."""
    yield from _submitted(tmp_path, "sleep 300")


@pytest.fixture
def finished(tmp_path: Path) -> Iterator[Submitted]:
    """A real local submission whose one job has completed."""
    for submitted in _submitted(tmp_path, "echo fine"):
        submitted.wait_for("COMPLETED")
        yield submitted


def test_a_planted_record_with_a_traversal_id_cannot_make_cancel_delete_a_directory(
    running: Submitted,
) -> None:
    # Issue 45.1: the real record, copied into a run directory of the shared output path, its id a path.
    site = running.site
    real = json.loads((site.runs / running.gym_job_id / "gym-job.json").read_text())
    planted = site.runs / PLANTED / "gym-job.json"
    planted.parent.mkdir()
    planted.write_text(json.dumps({**real, "gym_job_id": "../../victim-dir"}))

    done = running.run("cancel", f"config={site.config}", f"run={PLANTED}")

    _refused(done.rc, done.stdout, done.stderr, str(planted), "'../../victim-dir' is not a gym_job_id")
    site.intact()
    assert running.state() == "RUNNING"  # and the owner's own job was not cancelled either


def test_cancel_of_a_run_that_is_a_path_deletes_nothing(running: Submitted) -> None:
    # Issue 45.1: `cancel run=../../../../evil/rec2` read the record there and deleted a directory.
    site = running.site
    evil = site.root / "evil" / "rec2" / "gym-job.json"
    evil.parent.mkdir(parents=True)
    evil.write_text(json.dumps(_record("../../victim-dir", str(site.root / "victim-dir"))))
    run = os.path.relpath(evil.parent, site.runs)

    done = running.run("cancel", f"config={site.config}", f"run={run}")

    _refused(done.rc, done.stdout, done.stderr, f"run='{run}'")
    assert evil.is_file()
    site.intact()
    assert running.state() == "RUNNING"


def test_results_of_a_planted_index_entry_writes_no_file_from_its_id(finished: Submitted) -> None:
    # Issue 45.1: `results run=...` wrote its cache file at a path made of the entry's id.
    site = finished.site
    entry = _plant_index_entry(site, "../../../victim-dir/x")

    done = finished.run("results", f"config={site.config}", f"run={PLANTED}")

    _refused(done.rc, done.stdout, done.stderr, str(entry))
    assert not list(site.root.rglob("x.json"))
    site.intact()


def test_prune_removes_only_gymbuilds_own_entries_and_says_which(finished: Submitted) -> None:
    # Issue 40.7: prune=30 deleted NeMo Gym's own records in the shared index by their age.
    site = finished.site
    own = site.index / f"{finished.gym_job_id}.json"
    theirs = [site.index / f"{json.loads((DATA / name).read_text())['gym_job_id']}.json" for name in NEMO_GYM]
    for path, name in zip(theirs, NEMO_GYM, strict=True):
        path.write_text((DATA / name).read_text())
    assert own.is_file() and (site.notes / own.name).is_file()

    done = finished.run("runs", "prune=0")

    assert done.rc == 0, done.stderr
    assert not own.exists() and not (site.notes / own.name).exists()
    assert all(path.is_file() for path in theirs)
    assert f"removed {own}" in done.stdout
    assert f"kept {len(theirs)} older entries gymbuild did not write" in done.stdout
    listed = json.loads(finished.run("runs", "json=1").stdout)
    assert sorted(row["gym_job_id"] for row in listed) == sorted(path.stem for path in theirs)


NEMO_GYM = ("nemo-gym-0.7.0-gym-job.json", "nemo-gym-kubernetes-gym-job.json")


def test_cancel_removes_only_the_secrets_files_gymbuild_writes(finished: Submitted) -> None:
    secrets = finished.site.root / "home" / ".gymbuild-secrets" / finished.gym_job_id
    secrets.mkdir(parents=True)
    (secrets / "ok").write_text("the benchmark's, gymbuild's own")
    (secrets / "notes.txt").write_text("not gymbuild's")

    done = finished.run("cancel", f"config={finished.site.config}")

    assert done.rc == 0, done.stderr
    assert not (secrets / "ok").exists()
    assert (secrets / "notes.txt").read_text() == "not gymbuild's"


def test_cancel_follows_no_symlink_planted_for_a_secrets_directory(finished: Submitted) -> None:
    victim = finished.site.root / "victim-dir"
    (victim / "ok").write_text("named like the benchmark")
    home = finished.site.root / "home"
    (home / ".gymbuild-secrets").mkdir()
    link = home / ".gymbuild-secrets" / finished.gym_job_id
    link.symlink_to(victim)

    done = finished.run("cancel", f"config={finished.site.config}")

    assert done.rc == 0, done.stderr
    assert (victim / "ok").read_text() == "named like the benchmark"
    assert link.is_symlink()
    finished.site.intact()
