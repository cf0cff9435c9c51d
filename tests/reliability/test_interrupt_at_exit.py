"""Ctrl-C after the last sbatch answer was read: every job is queued and recorded, and gymbuild is on
its way out (printing, recording, letting its workspace go, the interpreter ending). A SIGINT there
exited 130 with no line: once main() had put Python's handlers back, the interpreter's finalization
(a few hundred ms of module teardown) reset them and the signal's default action killed the process
silently. Every delivered SIGINT is now answered with the one `interrupted` line and 130; one that
came too late to be delivered leaves exit 0 (cli/main.py `_end_process`).

The signal is sent at an event (every job started, the record holding every job id, the workspace's
lock let go), then after a drawn number of further looks at it, which spreads the moments over the
stretch that follows; gymbuild is stopped first so a signal is never sent into an exit already under
way (promises_helpers.signal_while_alive). Real local jobs and the real console script.
"""

from __future__ import annotations

import json
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from promises_helpers import signal_while_alive, wait_until
from reliability_helpers import start_gymbuild

from tests.reliability.test_interrupts import (
    WAIT,
    _config,
    _env,
    _interrupt,
    _kill_all,
    _record,
    _released,
    _starts,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads process groups from /proc")

COUNT = 3  # benchmarks: enough for several answers, few enough for many examples


def _moment(home: Path, pid: int, name: str) -> Callable[[], bool]:
    """A probe of the event `name` in the submit `pid` running in `home`."""

    def started() -> bool:
        return sum(map(len, _starts(home).values())) >= COUNT

    def recorded() -> bool:
        return len(_record(home)) == COUNT and all(row["job_id"] for row in _record(home).values())

    def unlocked() -> bool:
        locks = (home / "state").glob("gymbuild/workspaces/*/lock")
        return any(f"pid {pid} " in lock.read_text() and _released(lock) for lock in locks)

    return {"started": started, "recorded": recorded, "unlocked": unlocked}[name]


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    moment=st.sampled_from(["started", "recorded", "unlocked"]), looks=st.integers(0, 60), group=st.booleans()
)
def test_sigint_after_the_last_answer_exits_130_with_its_line(moment: str, looks: int, group: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="gym-interrupt-exit-") as tmp:
        home = Path(tmp)
        try:
            config = _config(home, COUNT)
            proc = start_gymbuild(["submit", f"config={config}"], cwd=home, env=_env(home))
            probe = _moment(home, proc.pid, moment)
            wait_until(
                lambda: proc.poll() is not None or probe(), f"the submit reaching {moment}", WAIT, 0.002
            )
            for _ in range(looks):  # later points of the same stretch: each look takes a moment
                probe()
            delivered = signal_while_alive(proc, signal.SIGINT, group=group)
            _, stderr = proc.communicate(timeout=WAIT)
            said = [line for line in stderr.splitlines() if not line.startswith("warning: ")]
            if delivered:
                assert proc.returncode == 130, (proc.returncode, stderr)
                assert len(said) == 1 and said[0].startswith("interrupted (SIGINT): "), stderr
                assert f"; {COUNT} of {COUNT} benchmarks queued; " in said[0], stderr  # all, and says so
            else:
                assert (proc.returncode, said) == (0, []), stderr
            started, record = _starts(home), _record(home)
            assert set(started) == set(record)  # all of them, each under the id it started with
            for bench, ids in started.items():
                assert ids == {record[bench]["job_id"]}, json.dumps(record[bench])
        finally:
            _kill_all(home)


def test_the_line_says_how_many_were_queued_and_how_many_not(tmp_path: Path) -> None:
    """Ctrl-C half-way through a pass: the line counts the benchmarks whose jobs started and the rest."""
    try:
        config = _config(tmp_path, 12)
        status, stderr, delivered = _interrupt(tmp_path, config, signal.SIGINT, 4, group=True)
        started = len(_starts(tmp_path))
        said = [line for line in stderr.splitlines() if not line.startswith("warning: ")]
        assert delivered and status == 130 and len(said) == 1, stderr
        left = f", {12 - started} not (`gymbuild submit` queues them)" if started < 12 else ""
        assert f"gymbuild stopped; {started} of 12 benchmarks queued{left}; every job" in said[0], stderr
    finally:
        _kill_all(tmp_path)
