"""A benchmark waiting for room under the quota, as the executors' side sees it: sbatch's refusal
naming a limit is a wait (not a failure), and a record entry that waits is a WAITING row that
`status` counts apart from the failed (executors/states.py)."""

from __future__ import annotations

from pathlib import Path

from gymbuild.executors import slurm
from gymbuild.executors.base import JobState
from gymbuild.executors.connection import Result
from gymbuild.executors.states import WAITING_FOR_ROOM, kind, run_state, status_rows, tally
from gymbuild.state.records import BenchmarkJob

REFUSED = (Path(__file__).resolve().parents[1] / "data" / "slurm-limits" / "sbatch-refused.txt").read_text()


def test_an_sbatch_refused_by_a_limit_waits_and_one_refused_otherwise_fails() -> None:
    by_limit = slurm.queued(Result(1, "", REFUSED))
    assert by_limit.job_id is None and by_limit.waits
    assert "AssocMaxSubmitJobLimit" in (by_limit.error or "")
    other = slurm.queued(Result(1, "", "sbatch: error: Batch job submission failed: Invalid partition name"))
    assert other.job_id is None and not other.waits
    assert not slurm.queued(Result(0, "123\n", "")).waits


def test_a_waiting_entry_is_a_waiting_row_never_a_failed_one() -> None:
    jobs = [
        BenchmarkJob("a", "/r/a", "11"),
        BenchmarkJob("b", "/r/b", None, f"{WAITING_FOR_ROOM}MaxSubmitJobs=4 of association q/root"),
        BenchmarkJob("c", "/r/c", None, "sbatch: error: Invalid partition name"),
    ]
    rows = status_rows(jobs, {"/r/a": JobState("11", "COMPLETED", "0:0")})
    assert [(r.benchmark, r.state) for r in rows] == [
        ("a", "COMPLETED"),
        ("b", "WAITING"),
        ("c", "NOT QUEUED"),
    ]
    live = slurm.LIVE
    assert [kind(r, live) for r in rows] == ["completed", "waiting", "failed"]
    summary = tally(rows, live)
    assert (summary.completed, summary.waiting, summary.failed) == (1, 1, 1)
    assert summary.ended  # no job can change: status watch=1 stops; submit watch=1 goes on feeding
    assert summary.line() == "3 benchmarks: 0 pending, 0 running, 1 completed, 1 failed, 1 waiting for room"


def test_a_run_with_benchmarks_waiting_for_room_has_not_ended() -> None:
    # `runs` shows it PENDING, and a submit from a workspace that lost it does not queue it again.
    assert run_state({"completed": 4, "waiting": 2}) == "PENDING"
    assert run_state({"completed": 4, "failed": 1}) == "FAILED"
