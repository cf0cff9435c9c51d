"""`status watch=1` and the progress of long work, as a user sees them.

watch is run as the real `gymbuild` command on real jobs: local process groups (no cluster needed)
and Slurm jobs on the test cluster, where `squeue` and `sacct` wrappers first on PATH count every
call the looks make (the submission has no hostname, so the run's one connection is a local
`bash -s` that inherits that PATH; the status script is the same text over SSH). The waits between
looks come from GYMBUILD_WATCH_INTERVALS, so a test waits for its jobs, not for the back-off.

On a terminal (a pseudo-terminal here) the table is redrawn in place and submit shows progress;
piped, or with json=1, nothing but the result is printed.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from e2e_helpers import Run, gymbuild, gymbuild_argv, kill_local_jobs, slurm_config, user_env, write_config

from gymbuild.day_two import watch
from gymbuild.day_two.status import format_statuses
from gymbuild.errors import UserError
from gymbuild.executors.states import BenchStatus, Tally

if TYPE_CHECKING:
    from tests.conftest import Cluster

FAST = {"GYMBUILD_WATCH_INTERVALS": "0.5,1,2"}


# --- the back-off ---------------------------------------------------------------------------------


def test_the_looks_back_off_from_a_few_seconds_to_about_a_minute() -> None:
    waits = watch.intervals({})
    first = [next(waits) for _ in range(12)]
    assert first[0] <= 10  # a job failing at once is seen failing soon
    assert first == sorted(first) and first[-1] > first[0]  # then further apart ...
    assert 30 <= max(first) <= 90 and first[-3:] == [first[-1]] * 3  # ... up to a cap that holds


def test_the_help_of_status_tells_the_waits_watch_uses() -> None:
    from gymbuild.request import verbs

    status = verbs.verb("status")
    assert status is not None
    said = dict(status.arguments)["watch"]
    numbers = [float(n) for n in re.findall(r"\d+", said.split("(")[0])]
    assert numbers == list(watch.INTERVALS) and watch.INTERVALS_ENV in said


def test_the_waits_can_be_set_and_a_bad_setting_is_one_clear_error() -> None:
    waits = watch.intervals({watch.INTERVALS_ENV: "0.5, 2"})
    assert [next(waits) for _ in range(4)] == [0.5, 2, 2, 2]
    for bad in ("soon", "1,-2", ","):
        with pytest.raises(UserError, match=rf"(?s){watch.INTERVALS_ENV}=.*fix: seconds between looks"):
            watch.intervals({watch.INTERVALS_ENV: bad})


def test_a_state_nothing_can_tell_is_waited_out_a_few_looks_then_given_up() -> None:
    """A controller down for a moment: UNKNOWN, then the job's state again. A job nothing will ever
    describe again must not keep watch looking for ever."""
    from gymbuild.state.records import BenchmarkJob, SubmissionRecord

    record = SubmissionRecord(
        gym_job_id="gym-job-20260101T000000Z-abcdef",
        gym_version="0.1.0",
        submitted_at="2026-01-01T00:00:00Z",
        run_dir="/r",
        cluster="c",
        executor="slurm",
        submitted_by="me",
        benchmarks=(BenchmarkJob("b", "/r/b", "1"),),
    )

    def row(state: str) -> list[BenchStatus]:
        return [BenchStatus("b", "1", state, None, None, None, None)]

    def draw(rows: list[BenchStatus], summary: Tally) -> str:
        return format_statuses(record, rows, summary)

    seen = iter([row("RUNNING"), row("UNKNOWN"), row("UNKNOWN"), row("COMPLETED")])
    rows, summary, looks = watch.watch(
        lambda: next(seen), frozenset({"RUNNING"}), as_json=True, draw=draw, what="x", wait=lambda _: None
    )
    assert (rows[0].state, summary.completed, looks) == ("COMPLETED", 1, 4)
    waits: list[float] = []
    rows, summary, looks = watch.watch(
        lambda: row("UNKNOWN"),
        frozenset({"RUNNING"}),
        as_json=True,
        draw=draw,
        what="x",
        backoff=iter([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        wait=waits.append,
    )
    assert (summary.unknown, looks) == (1, watch.UNKNOWN_LOOKS)
    assert waits == [1.0, 2.0, 3.0, 4.0][: watch.UNKNOWN_LOOKS - 1]


# --- helpers -------------------------------------------------------------------------------------


def counting_wrappers(directory: Path, names: tuple[str, ...] = ("squeue", "sacct")) -> tuple[Path, Path]:
    """Programs that run the real one, then log their name once it has answered; (bin dir, log)."""
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "calls.log"
    for name in names:
        real = shutil.which(name)
        assert real, f"{name} is not installed"
        (directory / name).write_text(f'#!/bin/bash\n{real} "$@"\nrc=$?\necho {name} >>"{log}"\nexit $rc\n')
        (directory / name).chmod(0o755)
    return directory, log


def calls(log: Path, names: tuple[str, ...] = ("squeue", "sacct")) -> dict[str, int]:
    said = log.read_text().split() if log.exists() else []
    return {name: said.count(name) for name in names}


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    """Until `condition()` holds (polled every 0.05 s); fails the test with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not seen within {timeout}s")
        time.sleep(0.05)


def start(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        gymbuild_argv(*args),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 300) -> Run:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"watch did not end within {timeout}s:\n{out}\n{err}")
    return Run(proc.returncode, out, err)


def in_a_terminal(
    *args: str,
    cwd: Path,
    env: dict[str, str],
    timeout: float = 120,
    ctrl_c_after: str | None = None,
    when: tuple[str, Callable[[], None]] | None = None,
) -> tuple[int, str]:
    """Run gymbuild with stdout and stderr on a pseudo-terminal (200 columns, 50 rows), as in a
    shell window; its exit status and everything it wrote there. With `ctrl_c_after`, SIGINT (the
    user's Ctrl-C) is sent once that text has appeared; with `when` (text, action), the action runs
    once that text has appeared (after the Ctrl-C, when both wait for the same text)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    proc = subprocess.Popen(
        gymbuild_argv(*args), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave
    )
    os.close(slave)
    screen = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer has closed the terminal
                    break
                if not chunk:
                    break
                screen += chunk
                if ctrl_c_after is not None and ctrl_c_after.encode() in screen:
                    proc.send_signal(signal.SIGINT)
                    ctrl_c_after = None
                if when is not None and when[0].encode() in screen:
                    when[1]()
                    when = None
            elif proc.poll() is not None:
                break
        else:
            proc.kill()
            pytest.fail(f"gymbuild {' '.join(args)} did not end within {timeout}s")
        return proc.wait(timeout=30), screen.decode(errors="replace").replace("\r\n", "\n")
    finally:
        os.close(master)


# --- the local executor ----------------------------------------------------------------------------


# The local jobs run until the test opens their gate (a file it creates in the working directory,
# where the jobs find it by $GATE): a test waits for watch to have seen them running, not for a sleep
# to be longer than the machine's load makes a look.
WAIT_FOR_GATE = 'until [ -e "$GATE" ]; do sleep 0.05; done'


def open_gate(tmp_path: Path) -> None:
    (tmp_path / "gate").touch()


@pytest.fixture
def local(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A local submission: `ok` completes and `fail` exits 3, each after a few seconds."""
    config = write_config(
        tmp_path,
        {
            "services": {},
            "compute": {"here": {"type": "local", "walltime": "00:05:00"}},
            "driver": {
                "benchmarks": {
                    "ok": {"command": f"{WAIT_FOR_GATE}; echo all fine"},
                    "fail": {"command": f"{WAIT_FOR_GATE}; echo failing now; exit 3"},
                }
            },
            "job": {"output_path": "runs"},
            "otel": {"enabled": False},
        },
        "local.yaml",
    )
    env = user_env(tmp_path, **FAST, GATE=str(tmp_path / "gate"))
    try:
        submitted = gymbuild("submit", f"config={config}", cwd=tmp_path, env=env)
        assert submitted.rc == 0, submitted.stderr
        yield config, env
    finally:  # no process left behind, whatever the test did
        open_gate(tmp_path)
        kill_local_jobs(tmp_path / "runs")


def test_watch_of_local_jobs_ends_when_they_end_and_exits_0_only_if_all_completed(
    local: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    config, env = local
    looks = {key: counting_wrappers(tmp_path / key, ("ps",)) for key in ("every", "ok")}

    def seen(key: str) -> dict[str, str]:  # ps answers once the job is running: a look that saw it
        return {**env, "PATH": f"{looks[key][0]}:{env['PATH']}"}

    every = start("status", f"config={config}", "watch=1", "json=1", cwd=tmp_path, env=seen("every"))
    only_ok = start("status", f"config={config}", "watch=1", "only=ok", cwd=tmp_path, env=seen("ok"))
    wait_until(
        lambda: all(calls(log, ("ps",))["ps"] for _, log in looks.values()), "both watches' first look"
    )
    open_gate(tmp_path)
    watched, ok = finish(every), finish(only_ok)

    assert watched.rc == 1, watched.stderr
    doc = json.loads(watched.stdout)  # one document, and nothing else on stdout
    assert {b["benchmark"]: (b["state"], b["exit_code"]) for b in doc["benchmarks"]} == {
        "ok": ("COMPLETED", "0:0"),
        "fail": ("FAILED", "3:0"),
    }
    assert doc["summary"] == {
        "pending": 0,
        "running": 0,
        "completed": 1,
        "failed": 1,
        "unknown": 0,
        "waiting": 0,
    }
    assert doc["looks"] >= 2  # the jobs were running at the first look
    assert "did not complete: fail (FAILED 3:0)" in watched.stderr and "Traceback" not in watched.stderr

    assert ok.rc == 0, ok.stderr
    table = ok.stdout.splitlines()
    assert table[1].split()[:3] == ["BENCHMARK", "JOB", "STATE"] and table[2].split()[2] == "COMPLETED"
    assert table[-1].startswith("1 benchmark: 0 pending, 0 running, 1 completed, 0 failed (watched: ")
    assert "next look" not in ok.stdout  # piped: the final table only, never a redraw


def test_watch_on_a_terminal_redraws_the_table_until_the_jobs_end(
    local: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    config, env = local
    rc, screen = in_a_terminal(
        "status",
        f"config={config}",
        "watch=1",
        cwd=tmp_path,
        env=env,
        when=("next look in", lambda: open_gate(tmp_path)),
    )
    assert rc == 1, screen
    draws = screen.split("\x1b[J")  # each redraw erases the last one first
    assert len(draws) >= 2, screen
    assert "running" in draws[0] and "next look in 0.5 s" in draws[0]
    final = draws[-1]
    assert "2 benchmarks: 0 pending, 0 running, 1 completed, 1 failed" in final
    assert "next look" not in final and "did not complete: fail (FAILED 3:0)" in final


def test_ctrl_c_stops_the_watching_not_the_jobs(local: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """Ctrl-C once the table is drawn: exit 1 with one line saying the jobs go on, and they do."""
    config, env = local
    rc, screen = in_a_terminal(
        "status",
        f"config={config}",
        "watch=1",
        cwd=tmp_path,
        env=env,
        ctrl_c_after="next look in",
        when=("next look in", lambda: open_gate(tmp_path)),
    )
    assert rc == 1, screen
    assert "watch stopped; the jobs of gym-job-" in screen and "Traceback" not in screen
    # The jobs went on: `ok` still completes (a job watch had ended would be FAILED or CANCELLED).
    after = gymbuild("status", f"config={config}", "watch=1", "only=ok", cwd=tmp_path, env=env)
    assert after.rc == 0, after.stdout + after.stderr


def test_a_bad_watch_interval_is_one_message(local: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    config, env = local
    done = gymbuild(
        "status", f"config={config}", "watch=1", cwd=tmp_path, env={**env, watch.INTERVALS_ENV: "soon"}
    )
    assert done.rc == 1 and done.stdout == ""
    assert done.stderr.splitlines()[0] == f"error: {watch.INTERVALS_ENV}='soon' is not a list of seconds"


# --- the test cluster ------------------------------------------------------------------------------


@pytest.mark.cluster
def test_watch_of_slurm_jobs_makes_one_squeue_and_one_sacct_per_look(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Three jobs, two complete and one fails: each look is one squeue and one sacct whatever the
    number of jobs; watch of all of them exits 1, of the two that completed exits 0."""
    output = cluster.run_dir("watch")
    gate = output / "gate"  # the jobs run until both watches have looked once (tests/cluster/bin/gym)
    held = {"fake_wait_for_file": str(gate)}
    config = write_config(
        tmp_path,
        slurm_config(
            output,
            {"ok": {"run": held}, "ok2": {"run": held}, "fail": {"run": {**held, "fake_exit_code": 3}}},
            hostname=None,
        ),
    )
    env = user_env(tmp_path, **FAST)
    submitted = gymbuild("submit", f"config={config}", cwd=tmp_path, env=env)
    try:
        assert submitted.rc == 0, submitted.stderr
        wrapped: dict[str, tuple[Path, Path]] = {k: counting_wrappers(tmp_path / k) for k in ("all", "ok")}

        def with_wrappers(key: str) -> dict[str, str]:
            return {**env, "PATH": f"{wrapped[key][0]}:{env['PATH']}"}

        every = start(
            "status", f"config={config}", "watch=1", "json=1", cwd=tmp_path, env=with_wrappers("all")
        )
        good = start(
            "status",
            f"config={config}",
            "watch=1",
            "json=1",
            "only=ok,ok2",
            cwd=tmp_path,
            env=with_wrappers("ok"),
        )
        looked = lambda: all(calls(log)["sacct"] for _, log in wrapped.values())  # noqa: E731
        wait_until(looked, "both watches' first look")
        gate.touch()
        watched, completed = finish(every), finish(good)
    finally:
        gate.touch()
        scancel_under(output)

    assert watched.rc == 1, watched.stderr
    doc = json.loads(watched.stdout)
    assert {b["benchmark"]: b["state"] for b in doc["benchmarks"]} == {
        "ok": "COMPLETED",
        "ok2": "COMPLETED",
        "fail": "FAILED",
    }
    assert doc["summary"] == {
        "pending": 0,
        "running": 0,
        "completed": 2,
        "failed": 1,
        "unknown": 0,
        "waiting": 0,
    }
    assert doc["looks"] >= 2
    assert calls(wrapped["all"][1]) == {"squeue": doc["looks"], "sacct": doc["looks"]}
    assert "fail (FAILED 3:0)" in watched.stderr

    assert completed.rc == 0, completed.stderr
    good_doc = json.loads(completed.stdout)
    assert good_doc["summary"]["completed"] == 2 and good_doc["summary"]["failed"] == 0
    assert calls(wrapped["ok"][1]) == {"squeue": good_doc["looks"], "sacct": good_doc["looks"]}


def _record(output: Path) -> dict[str, Any]:
    (run_dir,) = output.glob("gym-job-*")
    return json.loads((run_dir / "gym-job.json").read_text())


def scancel_under(output: Path) -> None:
    """Teardown: cancel every job the records under `output` name (a failed test leaves none)."""
    ids = [
        job["job_id"]
        for record in output.rglob("gym-job.json")
        for job in json.loads(record.read_text())["benchmarks"]
        if job["job_id"]
    ]
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, check=False)


@pytest.mark.cluster
def test_submit_shows_progress_on_a_terminal_and_none_when_piped_or_json(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Held jobs (they never run; cancelled at the end): on a terminal submit counts what it has
    queued, in place on one line; piped, or with json=1, stderr carries no progress at all."""
    output = cluster.run_dir("progress")
    benches = {f"b{i}": {"run": {}} for i in range(3)}
    try:
        for name, tty, flags in (("tty", True, ()), ("pipe", False, ()), ("json", True, ("json=1",))):
            config = write_config(
                tmp_path / name,
                slurm_config(output / name, benches, hostname=None, extra_args={"hold": True}),
            )
            env = user_env(tmp_path)
            if tty:
                rc, screen = in_a_terminal("submit", f"config={config}", *flags, cwd=tmp_path / name, env=env)
                text = screen
            else:
                done = gymbuild("submit", f"config={config}", cwd=tmp_path / name, env=env)
                rc, text = done.rc, done.stdout + done.stderr
            assert rc == 0, text
            assert all(b["job_id"] for b in _record(output / name)["benchmarks"])
            if name == "tty":
                assert "\r\x1b[Kqueued 1/3" in text and "\r\x1b[Kqueued 3/3\n" in text
            else:
                assert "queued 1/3" not in text and "\x1b[" not in text
    finally:
        scancel_under(output)


@pytest.mark.cluster
def test_a_large_submit_and_status_show_their_progress_on_a_terminal_only(
    cluster: Cluster, tmp_path: Path
) -> None:
    """100 held jobs: on a terminal submit shows the rendering and the queueing, and status says it
    is asking about the jobs, then wipes that line for the table; piped, status prints the table
    alone."""
    output = cluster.run_dir("progress-large")
    benches = {f"b{i:03d}": {"run": {}} for i in range(100)}
    config = write_config(tmp_path, slurm_config(output, benches, hostname=None, extra_args={"hold": True}))
    env = user_env(tmp_path)
    try:
        rc, screen = in_a_terminal("submit", f"config={config}", cwd=tmp_path, env=env)
        assert rc == 0, screen
        assert "\r\x1b[Krendering job scripts 0/100" in screen and "\r\x1b[Kqueued 100/100\n" in screen
        rc, screen = in_a_terminal("status", f"config={config}", cwd=tmp_path, env=env)
        assert rc == 0, screen
        asking, wiped, table = screen.rpartition("\r\x1b[K")
        assert "asking about the 100 jobs of gym-job-" in asking and wiped
        assert table.splitlines()[1].split()[:3] == ["BENCHMARK", "JOB", "STATE"]
        assert table.splitlines()[-1] == "100 benchmarks: 100 pending, 0 running, 0 completed, 0 failed"
        piped = gymbuild("status", f"config={config}", cwd=tmp_path, env=env)
        assert piped.rc == 0 and "\x1b" not in piped.stdout + piped.stderr
        assert piped.stdout.splitlines()[-1] == table.splitlines()[-1]
    finally:
        scancel_under(output)
