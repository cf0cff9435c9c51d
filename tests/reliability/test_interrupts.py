"""A signal at any moment of a local submit: every started job recorded, and none started twice.

Issue 40, item 4: Ctrl-C during a local submit of 40-60 benchmarks left a record holding 2, 14 or 39 of
the 17, 29 or 54 jobs that had started, exited 1 ("lost the connection") instead of 130, `status` hid
the never-queued benchmarks, and the next submit ran 15 benchmarks twice.

The jobs here are cheap `command` benchmarks (`sleep`) under the local executor. A job that started is
found by the file its process group's leader writes first, `logs/local-<pid>.log` (the pid is the job
id), and its live copies by the process groups whose leader runs `bash <bench dir>/job.sh`. The signal
is sent once a drawn number of jobs have started (seen through those files, not timing), to gymbuild's
process group as a terminal does, or to gymbuild alone as `kill` does.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_helpers import gymbuild, gymbuild_argv, job_ids, kill_local_jobs, manifest, slurm_config, user_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from promises_helpers import signal_while_alive, wait_until
from reliability_helpers import Faults, cancel, jobs_queued, start_gymbuild, wait_accounted

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads process groups from /proc")

SIGNALS = {
    "SIGINT": signal.SIGINT,
    "SIGTERM": signal.SIGTERM,
    "SIGHUP": signal.SIGHUP,
    "SIGKILL": signal.SIGKILL,
}
WAIT = 120  # seconds: the bound on every wait (a broken submit must not hang the suite)


def _config(home: Path, count: int) -> Path:
    benches = {f"b{i:02d}": {"command": "sleep 600"} for i in range(count)}
    config = {
        "services": {},
        "compute": {"here": {"type": "local"}},
        "driver": {"benchmarks": benches},
        "job": {"output_path": "runs"},
        "otel": {"enabled": False},
    }
    path = home / "submit.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "XDG_CACHE_HOME": str(home / "cache"), "XDG_STATE_HOME": str(home / "state")}


def _starts(home: Path) -> dict[str, set[str]]:
    """bench -> the job ids of every job started in its bench dir (their logs' names)."""
    found: dict[str, set[str]] = {}
    for log in (home / "runs").glob("gym-job-*/*/logs/local-*.log"):
        found.setdefault(log.parent.parent.name, set()).add(log.stem.removeprefix("local-"))
    return found


def _live_copies(home: Path) -> dict[str, list[int]]:
    """bench -> the live process groups whose leader runs its job.sh (from /proc)."""
    runs = str(home / "runs")
    found: dict[str, list[int]] = {}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
            stat = (cmdline.parent / "stat").read_text()
        except OSError:
            continue
        pid = int(cmdline.parent.name)
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z" or int(fields[2]) != pid or argv[:1] != [b"bash"] or len(argv) < 2:
            continue
        script = argv[1].decode(errors="replace")
        if script.startswith(runs) and script.endswith("/job.sh"):
            found.setdefault(Path(script).parent.name, []).append(pid)
    return found


def _record(home: Path) -> dict[str, dict[str, Any]]:
    manifests = list((home / "runs").glob("gym-job-*/gym-job.json"))
    if not manifests:
        return {}
    (manifest,) = manifests
    return {b["benchmark"]: b for b in json.loads(manifest.read_text())["benchmarks"]}


def _kill_all(home: Path) -> None:
    """SIGKILL every job started under `home`, recorded or not (by its process group, while its
    leader still runs a job.sh of these runs: pids are reused). First the run dir's queue lock is
    taken (bounded): a killed submit's shell holds it while it may still start jobs."""
    for lock in (home / "runs").glob("gym-job-*/.gym_queue.lock"):
        with lock.open("a") as held:
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline:
                try:
                    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    time.sleep(0.05)
    kill_local_jobs(home / "runs")
    for pids in _live_copies(home).values():
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def _submit(home: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        gymbuild_argv("submit", f"config={config}"),
        cwd=home,
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=WAIT,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _interrupt(
    home: Path, config: Path, sig: signal.Signals, after: int, group: bool
) -> tuple[int, str, bool]:
    """Start a submit, send `sig` once `after` jobs have started (0: once the run dir exists), to its
    process group (a terminal's Ctrl-C, a hangup) or to gymbuild alone; its exit status, stderr, and
    whether the signal reached it before it began to exit (promises_helpers.signal_while_alive)."""
    proc = start_gymbuild(["submit", f"config={config}"], cwd=home, env=_env(home))
    deadline = time.monotonic() + WAIT
    while proc.poll() is None and time.monotonic() < deadline:
        if (home / "runs").exists() and sum(map(len, _starts(home).values())) >= after:
            break
        time.sleep(0.005)
    delivered = signal_while_alive(proc, sig, group=group)
    _, stderr = proc.communicate(timeout=WAIT)
    return proc.returncode, stderr, delivered


def _check_interrupted_submit(home: Path, count: int, name: str, after: int, group: bool) -> None:
    sig = SIGNALS[name]
    config = _config(home, count)
    status, stderr, delivered = _interrupt(home, config, sig, after, group)
    started = _starts(home)
    record = _record(home)
    if not delivered:  # the submit was done before the signal could reach it
        assert status == 0, stderr
        assert set(started) == set(record) == {f"b{i:02d}" for i in range(count)}
    elif sig == signal.SIGKILL:
        assert status == -signal.SIGKILL
    else:
        assert status == 128 + sig, (status, stderr)
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("interrupted"), stderr
        assert "Traceback" not in stderr
        # Every started job is in the record under its own id: nothing left for the next submit.
        for bench, ids in started.items():
            assert ids == {record[bench]["job_id"]}, (bench, ids, record.get(bench))
        # A benchmark the pass did not start is listed too, without a job id, saying why.
        for bench, row in record.items():
            assert row["job_id"] or row["error"].startswith("not queued"), row
            assert row["job_id"] or bench not in started

    again = _submit(home, config)
    assert again.returncode == 0, again.stdout + again.stderr
    final = _record(home)
    after_all = _starts(home)
    assert set(final) == set(after_all) == {f"b{i:02d}" for i in range(count)}
    for bench, ids in after_all.items():
        assert len(ids) == 1, f"{bench} was started {len(ids)} times: {sorted(ids)}"
        assert ids == {final[bench]["job_id"]}, (bench, ids, final[bench])
        if bench in started:
            assert ids == started[bench], f"{bench}: the next submit started it again"
    copies = _live_copies(home)
    assert all(len(pids) == 1 for pids in copies.values()), copies


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    count=st.integers(20, 32),
    name=st.sampled_from(sorted(SIGNALS)),
    share=st.floats(0, 1),
    group=st.booleans(),
)
def test_a_signal_at_any_moment_leaves_every_started_job_recorded_and_none_started_twice(
    count: int, name: str, share: float, group: bool
) -> None:
    with tempfile.TemporaryDirectory(prefix="gym-interrupt-") as tmp:
        home = Path(tmp)
        try:
            _check_interrupted_submit(home, count, name, round(share * count), group)
        finally:
            _kill_all(home)


def test_ctrl_c_half_way_through_40_benchmarks_exits_130_and_status_lists_every_benchmark(
    tmp_path: Path,
) -> None:
    """Issue 40, item 4, as reported: Ctrl-C (SIGINT to the terminal's process group) half-way."""
    try:
        config = _config(tmp_path, 40)
        status, stderr, _ = _interrupt(tmp_path, config, signal.SIGINT, 20, group=True)
        assert status == 130, stderr
        assert stderr.count("\n") == 1 and "interrupted" in stderr
        started = _starts(tmp_path)
        shown = subprocess.run(
            gymbuild_argv("status", "json=1", f"config={config}"),
            cwd=tmp_path,
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=WAIT,
            check=True,
        )
        rows = {row["benchmark"]: row for row in json.loads(shown.stdout)["benchmarks"]}
        assert set(rows) == {f"b{i:02d}" for i in range(40)}  # the never-queued too
        for bench, row in rows.items():
            if bench in started:
                assert {row["job_id"]} == started[bench] and row["state"] == "RUNNING", row
            else:
                assert row["job_id"] is None and row["state"] == "NOT QUEUED", row
        again = _submit(tmp_path, config)
        assert again.returncode == 0, again.stderr
        copies = _live_copies(tmp_path)
        assert sorted(copies) == sorted(rows) and all(len(p) == 1 for p in copies.values()), copies
    finally:
        _kill_all(tmp_path)


def test_a_second_copy_of_a_job_in_its_bench_dir_refuses_and_leaves_the_first_alone(tmp_path: Path) -> None:
    try:
        config = _config(tmp_path, 1)
        assert _submit(tmp_path, config).returncode == 0
        (bench_dir,) = (tmp_path / "runs").glob("gym-job-*/b00")
        first = _record(tmp_path)["b00"]["job_id"]
        lock = bench_dir / ".gym_job.lock"
        deadline = time.monotonic() + WAIT
        while not lock.exists() or not lock.read_text().startswith(f"{first} "):
            assert time.monotonic() < deadline, "the first copy never took its lock"
            time.sleep(0.05)
        before = sorted(p.relative_to(bench_dir) for p in bench_dir.rglob("*"))
        second = subprocess.run(
            ["bash", str(bench_dir / "job.sh")],
            cwd=bench_dir,
            env={**os.environ, "GYM_JOB_LOCK_WAIT_SECONDS": "0.5"},  # the first holds it for good
            capture_output=True,
            text=True,
            timeout=WAIT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert second.returncode == 75, second.stderr
        assert f"job {first} on " in second.stderr and "second copy" in second.stderr, second.stderr
        assert sorted(p.relative_to(bench_dir) for p in bench_dir.rglob("*")) == before
        assert lock.read_text().startswith(f"{first} ")
        assert _live_copies(tmp_path) == {"b00": [int(first)]}
    finally:
        _kill_all(tmp_path)


def test_a_copy_started_as_the_first_ends_waits_for_its_lock_and_runs(tmp_path: Path) -> None:
    """A resumable chain's successor starts the moment its predecessor's script ends, while the
    processes that hold the bench dir's lock are still being ended (seen on the test cluster: the
    successor refused with 75 and the chain stopped). A copy that finds the lock held waits for it
    (GYM_JOB_LOCK_WAIT_SECONDS) and runs once the first copy's last process has gone."""
    try:
        config = _config(tmp_path, 1)
        assert _submit(tmp_path, config).returncode == 0
        (bench_dir,) = (tmp_path / "runs").glob("gym-job-*/b00")
        first = _record(tmp_path)["b00"]["job_id"]
        lock = bench_dir / ".gym_job.lock"
        deadline = time.monotonic() + WAIT
        while not lock.exists() or not lock.read_text().startswith(f"{first} "):
            assert time.monotonic() < deadline, "the first copy never took its lock"
            time.sleep(0.05)
        env = {**os.environ, "GYM_JOB_LOCK_WAIT_SECONDS": str(WAIT)}
        second = subprocess.Popen(
            ["bash", str(bench_dir / "job.sh")],
            cwd=bench_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            inode = f":{lock.stat().st_ino} "
            deadline = time.monotonic() + WAIT
            # /proc/locks shows a blocked request as `->`: the second copy is waiting for the lock.
            while not any(
                "->" in line and inode in line for line in Path("/proc/locks").read_text().splitlines()
            ):
                assert second.poll() is None, (
                    f"the second copy gave up: {second.stderr.read() if second.stderr else ''}"
                )
                assert time.monotonic() < deadline, "the second copy never waited for the lock"
                time.sleep(0.05)
            os.killpg(int(first), signal.SIGKILL)  # the first copy ends, however it ends
            deadline = time.monotonic() + WAIT
            while not lock.read_text().startswith(f"{second.pid} "):  # a local job's id is its pid
                assert second.poll() is None, (
                    f"the second copy gave up: {second.stderr.read() if second.stderr else ''}"
                )
                assert time.monotonic() < deadline, "the second copy never took the lock"
                time.sleep(0.05)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(second.pid, signal.SIGKILL)
            second.wait(timeout=WAIT)
    finally:
        _kill_all(tmp_path)


@pytest.mark.cluster
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_during_a_slurm_submit_records_every_job(cluster: Any, tmp_path: Path, name: str) -> None:
    """The same promise on the test cluster. The signal comes while the third sbatch of six is held
    (a PATH wrapper on the login node), with all six sent to the login shell: gymbuild reads every
    answer in flight before it stops, so the five that queued are in the record and the exit status
    is the signal's; the next submit queues the held one, and each benchmark has exactly one job
    (Slurm's accounting, by job name and work dir)."""
    benches = [f"s{i}" for i in range(6)]
    output = cluster.run_dir(f"interrupt-{name}")
    run = {"config_paths": ["benchmarks/gpqa/config.yaml"], "fake_num_calls": 1}
    config = tmp_path / "submit.yaml"
    config.write_text(yaml.safe_dump(slurm_config(output, {b: {"run": run} for b in benches})))
    env = user_env(tmp_path)
    faults = Faults(tmp_path / "faults")
    faults.wrap("sbatch", side="login", at=3, when="before")
    recorded: dict[str, str | None] = {}
    try:
        proc = start_gymbuild(["submit", f"config={config}"], cwd=tmp_path, env=faults.env(env))
        faults.wait_reached("sbatch", proc)
        os.killpg(proc.pid, SIGNALS[name])
        faults.release()  # the held sbatch fails: that benchmark is not queued
        _, stderr = proc.communicate(timeout=WAIT)
        assert proc.returncode == 128 + SIGNALS[name], stderr
        assert len(stderr.strip().splitlines()) == 1, stderr
        recorded = job_ids(manifest(output))
        assert sorted(b for b, j in recorded.items() if j) == [b for b in benches if b != "s2"], recorded

        again = gymbuild("submit", f"config={config}", cwd=tmp_path, env=env)
        assert again.rc == 0, again.stderr
        recorded = job_ids(manifest(output))
        assert set(recorded) == set(benches) and all(recorded.values()), recorded
        wait_accounted([j for j in recorded.values() if j])
        for bench in benches:
            assert jobs_queued(f"gym-{bench}", output, recorded[bench]) == [recorded[bench]], bench
    finally:
        faults.release()
        cancel(list(recorded.values()))


def _slurm_jobs(output: Path) -> dict[str, str]:
    """job id -> bench of every job slurmctld holds whose working directory is a bench dir under `output`."""
    out = subprocess.run(
        ["squeue", "-h", "-a", "-o", "%i|%Z"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    rows = (line.split("|", 1) for line in out.splitlines() if "|" in line)
    return {job: Path(wd).name for job, wd in rows if wd.startswith(f"{output}/")}


def _recorded(output: Path) -> dict[str, str | None]:
    """bench -> job id in the gym-job.json of the one submission under `output` ({} before it is written)."""
    with contextlib.suppress(FileNotFoundError, ValueError):
        return job_ids(json.loads(next(output.glob("*/gym-job.json"), output / "none").read_text()))
    return {}


def _released(lock: Path) -> bool:
    """The workspace's lock is free (gymbuild lets it go at exit)."""
    with lock.open("a") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(held, fcntl.LOCK_UN)
        return True


@pytest.mark.cluster
@pytest.mark.parametrize("round_", [1, 2])
@pytest.mark.parametrize("moment", ["job1", "recorded", "unlocked"])
def test_sigterm_to_a_slurm_submit_from_its_first_job_to_its_exit_ends_it_with_143(
    cluster: Any, tmp_path: Path, moment: str, round_: int
) -> None:
    """SIGTERM to gymbuild alone (as `kill` sends it) at a moment picked by an event, from the first job
    of three seen in squeue (the promises model found exit 0 there), through the record written, to the
    workspace's lock let go at exit: 143 and one line, or killed by it (a shell says 143 too), every
    queued job in the record. The signal is only sent to a gymbuild not yet exiting (it is stopped
    first: promises_helpers.signal_while_alive); one that had ended on its own exits 0 with all three
    recorded."""
    output = cluster.run_dir(f"sigterm-{moment}-{round_}")
    benches = ["a", "b", "c"]
    config = slurm_config(output, {b: {"command": "sleep 300"} for b in benches}, services={})
    del config["driver"]["policy_model"]  # a `command` benchmark asks no policy
    path = tmp_path / "submit.yaml"
    path.write_text(yaml.safe_dump(config))
    env = user_env(tmp_path)
    proc = start_gymbuild(["submit", f"config={path}"], cwd=tmp_path, env=env)
    workspaces = tmp_path / "xdg-state" / "gymbuild" / "workspaces"

    def reached() -> bool:
        if proc.poll() is not None:
            return True
        if moment == "job1":
            return bool(_slurm_jobs(output))
        if moment == "recorded":
            return all(_recorded(output).get(b) for b in benches)
        held = [lock for lock in workspaces.glob("*/lock") if f"pid {proc.pid} " in lock.read_text()]
        return any(_released(lock) for lock in held)  # taken by this submit, then let go

    try:
        wait_until(reached, f"the submit reaching {moment}", timeout=WAIT, poll=0.005)
        delivered = signal_while_alive(proc, signal.SIGTERM, group=False)
        _, stderr = proc.communicate(timeout=WAIT)
        assert "Traceback" not in stderr, stderr
        if not delivered:
            assert proc.returncode == 0, stderr
        else:
            assert proc.returncode in (143, -signal.SIGTERM), f"exited {proc.returncode}:\n{stderr}"
            assert len(stderr.strip().splitlines()) <= 1, stderr
            assert proc.returncode != 143 or stderr.startswith("interrupted (SIGTERM)"), stderr
        queued = _slurm_jobs(output)
        recorded = _recorded(output)
        assert {recorded[bench] for bench in queued.values()} >= set(queued), (queued, recorded)
        assert sorted(queued.values()) == sorted(set(queued.values())), f"a benchmark queued twice: {queued}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        cancel(list(_slurm_jobs(output)))


class _SignalledWhileRead(dict):
    """The handlers to put back, whose reading sends `sig` to this process: a signal landing while
    interrupts.restore puts them back, as one sent when a submit ends does (CPython runs a pending
    handler before signal.signal changes one)."""

    def __init__(self, handlers: dict[signal.Signals, Any], sig: signal.Signals) -> None:
        super().__init__(handlers)
        self.sig = sig

    def items(self) -> Any:
        os.kill(os.getpid(), self.sig)
        return super().items()


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_while_gymbuild_puts_its_handlers_back_is_answered_not_raised(name: str) -> None:
    """cli.main puts back the handlers it found as it ends; a signal then used to raise Interrupted
    out of its `finally` (a traceback, and Python's own exit status). It is returned, for main to
    answer with its one line and 128 + its number, and the handlers are back all the same."""
    from gymbuild import interrupts

    sig = SIGNALS[name]
    assert threading.current_thread() is threading.main_thread(), "signal handlers are the main thread's"
    inherited = {s: signal.getsignal(s) for s in interrupts.SIGNALS}
    try:
        # As a terminal starts gymbuild, whatever this test run ignores (under nohup: SIGHUP, which
        # gymbuild would rightly leave ignored); what the run inherited is put back after.
        for s, handler in inherited.items():
            if handler is signal.SIG_IGN:
                signal.signal(s, signal.SIG_DFL)
        before = {s: signal.getsignal(s) for s in interrupts.SIGNALS}
        interrupts.install()
        try:
            late = interrupts.restore(_SignalledWhileRead(before, sig))
        finally:
            after = {s: signal.getsignal(s) for s in interrupts.SIGNALS}
            for s, handler in before.items():
                signal.signal(s, handler)
    finally:
        for s, handler in inherited.items():
            signal.signal(s, handler)
    assert late == sig
    assert after == before
    assert not interrupts.pending()


# A handler that raises inside a finalizer: Python cannot raise there (it prints "Exception ignored",
# a traceback, and goes on). The import system runs such a callback whenever a module lock goes, so
# a Ctrl-C during any import could land in one.
_SIGNAL_IN_A_FINALIZER = """
import os, signal, sys, time
from gymbuild import interrupts

interrupts.install()

class Finalized:
    def __del__(self):
        os.kill(os.getpid(), signal.{name})
        for _ in range(1000):  # the handler runs here, inside the finalizer
            pass

try:
    Finalized()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until the signal's exception arrives
        pass
except interrupts.Interrupted as err:
    print("interrupted", err.signum)
    sys.exit(err.status)
print("lost")
"""


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_that_lands_in_a_finalizer_still_stops_the_run_without_a_traceback(name: str) -> None:
    signum = signal.Signals[name]
    run = subprocess.run(
        [sys.executable, "-c", _SIGNAL_IN_A_FINALIZER.format(name=name)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (run.returncode, run.stdout.strip()) == (128 + signum, f"interrupted {int(signum)}"), run
    assert "Traceback" not in run.stderr and "Exception ignored" not in run.stderr, run.stderr
