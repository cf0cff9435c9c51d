"""Day two under the local executor: status, resubmit, cancel, logs and runs, with no Slurm involved.

The same verbs as tests/day_two/test_slurm.py (which runs them on the test cluster), on a submission whose
jobs are process groups on this machine: `ok` completes, `fail` exits 3, `slow` outlives its
walltime, `cancelme` is cancelled. Real `gymbuild` subprocesses (tests/e2e_helpers.py), real
processes, real files; the local index lives in the test's own directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import (
    EXAMPLES,
    gymbuild,
    gymbuild_argv,
    kill_local_jobs,
    user_env,
    with_default_signals,
    write_config,
)

# `slow` meets the config's walltime (its TIMEOUT is the only event that timer decides); whatever a
# test must still find running is queued with a walltime no step of a test comes near.
WALLTIME = "00:00:08"
LONG = "compute.here.walltime=01:00:00"


@dataclass
class Local:
    home: Path
    config: Path

    def run(self, *args: str, cwd: Path | None = None, **env: str) -> Any:
        return gymbuild(*args, cwd=cwd or self.home, env=user_env(self.home, **env), timeout=120)

    def ok(self, *args: str, cwd: Path | None = None, **env: str) -> str:
        done = self.run(*args, cwd=cwd, **env)
        assert done.rc == 0, f"gymbuild {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def status(self, *args: str, cwd: Path | None = None, **env: str) -> dict[str, dict[str, Any]]:
        payload = json.loads(
            self.ok("status", "json=1", *(args or (f"config={self.config}",)), cwd=cwd, **env)
        )
        return {row["benchmark"]: row for row in payload["benchmarks"]}

    def wait(self, want: Any, timeout: float = 90) -> dict[str, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            rows = self.status()
            if want(rows):
                return rows
            if time.monotonic() > deadline:
                pytest.fail(f"status did not reach the wanted states in {timeout}s: {rows}")
            time.sleep(1)

    @property
    def record(self) -> dict[str, Any]:
        (run_dir,) = (self.home / "runs").glob("gym-job-*")
        return json.loads((run_dir / "gym-job.json").read_text())


def all_ended(rows: dict[str, dict[str, Any]]) -> bool:
    return all(r["state"] != "RUNNING" for r in rows.values())


def group_alive(job_id: str) -> bool:
    """Whether any process of the job's process group (its id) is left."""
    try:
        os.killpg(int(job_id), 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Local]:
    config = {
        "services": {},
        "compute": {"here": {"type": "local", "walltime": WALLTIME}},
        "driver": {
            "benchmarks": {
                "ok": {"command": "echo all fine"},
                "fail": {"command": "echo failing now; exit 3"},
                "slow": {"command": "sleep 300"},
                "cancelme": {"command": "sleep 300"},
            }
        },
        "job": {"output_path": "runs"},
        "otel": {"enabled": False},
    }
    user = Local(tmp_path, write_config(tmp_path, config, "local.yaml"))
    try:
        user.ok("submit", f"config={user.config}", "only=ok,fail,slow")
        user.ok("submit", f"config={user.config}", "only=cancelme", LONG)
        yield user
    finally:  # a failed test leaves no process behind: every id this submission ever had
        kill_local_jobs(tmp_path / "runs")


def test_local_status_resubmit_cancel_logs_and_runs(local: Local, tmp_path: Path) -> None:
    cfg = f"config={local.config}"
    local.wait(lambda rows: rows["cancelme"]["state"] == "RUNNING")
    local.ok("cancel", cfg, "only=cancelme")
    first = {b: r["job_id"] for b, r in local.wait(all_ended).items()}

    # Status: every fate, and no Slurm program is asked (PATH has squeue/sacct that would fail).
    no_slurm = tmp_path / "no-slurm"
    no_slurm.mkdir()
    for name in ("squeue", "sacct", "sbatch", "scancel"):
        (no_slurm / name).write_text("#!/bin/sh\necho 'not on this machine' >&2\nexit 127\n")
        (no_slurm / name).chmod(0o755)
    rows = local.status(PATH=f"{no_slurm}:{os.environ['PATH']}")
    assert {b: r["state"] for b, r in rows.items()} == {
        "ok": "COMPLETED",
        "fail": "FAILED",
        "slow": "TIMEOUT",
        "cancelme": "CANCELLED",
    }
    assert (rows["ok"]["exit_code"], rows["fail"]["exit_code"]) == ("0:0", "3:0")

    # From another directory, by id, through the local index.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    gym_job_id = local.record["gym_job_id"]
    assert local.status(f"run={gym_job_id}", cwd=elsewhere) == rows
    assert "failing now" in local.ok("logs", cfg, "only=fail")

    # Resubmit: exactly the failed and the timed-out, into the same run directory.
    out = local.ok("resubmit", cfg, LONG)
    assert "submitted fail -> local job" in out and "submitted slow -> local job" in out
    assert "submitted ok" not in out and "submitted cancelme" not in out
    record = {j["benchmark"]: j for j in local.record["benchmarks"]}
    for bench in ("fail", "slow"):
        assert record[bench]["previous_job_ids"] == [first[bench]]
        assert record[bench]["job_id"] not in (None, first[bench])
    for bench in ("ok", "cancelme"):
        assert (record[bench]["job_id"], record[bench]["previous_job_ids"]) == (first[bench], [])
    (run_dir,) = (local.home / "runs").glob("gym-job-*")
    index = local.home / "xdg-cache" / "nemo-gym" / "jobs" / f"{gym_job_id}.json"
    assert index.read_bytes() == (run_dir / "gym-job.json").read_bytes()
    fail_logs = run_dir / "fail" / "logs"
    local.wait(lambda rows: rows["fail"]["state"] == "FAILED")
    for job_id in (first["fail"], record["fail"]["job_id"]):
        assert "failing now" in (fail_logs / f"driver-{job_id}.log").read_text()

    # CANCELLED only when named; then cancel ends every live job of the submission, even after the
    # config was edited to submit elsewhere next time (only submit and resubmit ask for new=1).
    assert "submitted cancelme -> local job" in local.ok("resubmit", cfg, "only=cancelme", LONG)
    live = [j["job_id"] for j in local.record["benchmarks"] if j["benchmark"] in ("slow", "cancelme")]
    local.config.write_text(local.config.read_text().replace("output_path: runs", "output_path: runs-next"))
    assert local.status()["slow"]["state"] == "RUNNING"
    moved = local.run("resubmit", cfg, LONG)
    assert moved.rc == 1 and "new=1" in moved.stderr + moved.stdout
    cancelled = local.ok("cancel", cfg)
    assert all(job_id in cancelled for job_id in live)
    rows = local.wait(all_ended)
    assert (rows["slow"]["state"], rows["cancelme"]["state"]) == ("CANCELLED", "CANCELLED")
    deadline = time.monotonic() + 30
    while any(group_alive(j) for j in live) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not any(group_alive(j) for j in live)

    runs = json.loads(local.ok("runs", "json=1", cwd=elsewhere))
    assert [(r["gym_job_id"], r["executor"], r["state"], r["not_queued"]) for r in runs] == [
        (gym_job_id, "local", "FAILED", 0)  # two were cancelled: no result, so not COMPLETED
    ]
    assert sum(runs[0]["benchmarks"].values()) == 4
    line = local.ok("runs", cwd=elsewhere).splitlines()[1]
    assert "local:here" in line and "FAILED" in line and line.endswith(str(run_dir))


def test_a_workspace_held_by_another_run_is_one_message_without_traceback(tmp_path: Path) -> None:
    """A second render while one holds the draft (or a submit while one holds the workspace): after
    the lock's wait, the holder and the fix, exit 1, from both entry points (gymbuild, and doit's
    command). A render while a submit holds the workspace goes on: it works in the draft."""
    from gymbuild.state.workspace import Workspace, locked

    workspace = tmp_path / "ws"
    config = str(EXAMPLES / "minimal.yaml")
    with locked(Workspace(workspace, Path(config)).config_dir, "gymbuild submit (the test holds it)"):
        done = subprocess.run(
            gymbuild_argv("render", f"config={config}", f"workspace={workspace}"),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0 and done.stdout.startswith("[dry-run]"), done
    with locked(
        Workspace(workspace, Path(config)).as_draft().lock_dir, "gymbuild render (the test holds it)"
    ):
        for argv, cwd in (
            (gymbuild_argv("render", f"config={config}", f"workspace={workspace}"), tmp_path),
            (["doit", "render", f"config={config}", f"workspace={workspace}"], tmp_path),
        ):
            done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 1, done
            assert "is in use by pid" in done.stderr and "the test holds it" in done.stderr
            assert "fix: wait for that run to finish" in done.stderr
            assert "Traceback" not in done.stderr + done.stdout


def test_logs_of_a_one_benchmark_submission_need_no_only_and_unknown_names_are_refused(
    tmp_path: Path,
) -> None:
    config = {
        "services": {},
        "compute": {"here": {"type": "local", "walltime": WALLTIME}},
        "driver": {"benchmarks": {"solo": {"command": "echo hello from solo"}}},
        "job": {"output_path": "runs"},
        "otel": {"enabled": False},
    }
    user = Local(tmp_path, write_config(tmp_path, config, "solo.yaml"))
    user.ok("submit", f"config={user.config}")
    user.wait(all_ended)
    assert "hello from solo" in user.ok("logs", f"config={user.config}")

    # By id, from elsewhere, there is no config to check only= against: the record is.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = f"run={user.record['gym_job_id']}"
    for verb in ("logs", "status", "cancel"):
        done = user.run(verb, run, "only=nope", cwd=elsewhere)
        assert done.rc == 1, (verb, done)
        assert "only= names benchmark(s)" in done.stderr and "fix: pick from solo" in done.stderr
        assert "Traceback" not in done.stderr + done.stdout


@pytest.mark.parametrize(
    ("sig", "status"),
    [(signal.SIGINT, 0), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
    ids=["INT", "TERM", "HUP"],
)
def test_logs_follow_from_the_start_picks_up_the_driver_log_and_ends_on_ctrl_c(
    tmp_path: Path, sig: signal.Signals, status: int
) -> None:
    """Following a job that has just started: the driver's log does not exist yet (the driver waits
    for the service, here 5 s late), and must still be followed once it appears; Ctrl-C then ends
    the command with exit 0 and no traceback. SIGTERM and SIGHUP are not a user's "stop following"
    (a service manager, a closed terminal): the command ends as killed by them, 143 and 129."""
    config = {
        "services": {
            "echo": {
                "type": "command",
                "container": "python:3.12",
                "command": 'python3 -m gymbuild.demo.echo_server --port "$GYM_PORT"',
                "port": 18790,
                "pre_command": "sleep 5",
                "health_check": {"path": "/health", "timeout_seconds": 60},
            }
        },
        "compute": {"here": {"type": "local", "walltime": "00:02:00"}},
        "driver": {"benchmarks": {"late": {"command": "echo the driver says hello; sleep 60"}}},
        "job": {"output_path": "runs"},
        "otel": {"enabled": False},
    }
    user = Local(tmp_path, write_config(tmp_path, config, "late.yaml"))
    user.ok("submit", f"config={user.config}")
    follow = subprocess.Popen(
        with_default_signals(gymbuild_argv("logs", f"config={user.config}", "follow=1")),
        cwd=tmp_path,
        env=user_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    # If the line never comes, this ends the reading loop (and fails the test) after 90 s.
    watchdog = threading.Timer(90, lambda: os.killpg(follow.pid, signal.SIGKILL))
    watchdog.start()
    try:
        assert follow.stdout is not None and follow.stderr is not None
        seen = []
        for line in follow.stdout:
            seen.append(line)
            if "the driver says hello" in line:
                break
        assert "the driver says hello" in "".join(seen)
        os.killpg(follow.pid, sig)  # Ctrl-C: the terminal signals the foreground group
        assert follow.wait(timeout=30) == status
        assert "Traceback" not in follow.stderr.read()
    finally:
        watchdog.cancel()
        if follow.poll() is None:
            os.killpg(follow.pid, signal.SIGKILL)
        follow.wait()
        user.ok("cancel", f"config={user.config}")
