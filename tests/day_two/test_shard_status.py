"""`status` of a sharded benchmark: ONE row, its state and rows derived from its shards' jobs, each
shard's job id and state in json=1 (executors/shard_states.py, states.fold_shards).

The local executor's status round trip on real files and real processes: each shard's job is what
the local executor reads (its exit file, or a live `bash <shard dir>/job.sh`), the rollout counts are
gym's files in each shard's artifacts/ and the merged ones in the benchmark's.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gymbuild.day_two.status import format_statuses, statuses_json
from gymbuild.executors.connection import Connection
from gymbuild.executors.states import states_of
from gymbuild.state.records import BenchmarkJob, SubmissionRecord
from tests.day_two.test_rollouts import write_artifacts

IDS = ("900000001", "900000002")  # no such processes: a shard's state is its exit file


def _record(run_dir: Path, ids: tuple[str | None, ...] = IDS) -> SubmissionRecord:
    return SubmissionRecord(
        gym_job_id="gym-job-20260101T000000Z-aaaaaa",
        gym_version="0.1.0",
        submitted_at="2026-01-01T00:00:00Z",
        run_dir=str(run_dir),
        cluster="workstation",
        executor="local",
        submitted_by="me",
        executor_metadata={"shards.big": ",".join(i or "" for i in ids)},
        benchmarks=(BenchmarkJob("big", str(run_dir / "big"), ids[0] if all(ids) else None),),
    )


def _shard(run_dir: Path, k: int, done: int, expected: int, code: str | None) -> Path:
    shard = run_dir / "big" / "shards" / str(k)
    write_artifacts(shard, done=done, expected=expected)
    if code is not None:
        (shard / f".gym_exit-{IDS[k]}").write_text(code)
    return shard


def _look(record: SubmissionRecord):
    with Connection(None) as conn:
        ((row,),) = states_of(conn, [record])
    return row


def test_a_failed_shard_fails_the_benchmark_its_rows_the_shards_sum(tmp_path: Path) -> None:
    write_artifacts(tmp_path / "big", done=0, expected=5)  # materialized once, nothing merged yet
    _shard(tmp_path, 0, done=2, expected=2, code="0")
    _shard(tmp_path, 1, done=1, expected=3, code="1")
    record = _record(tmp_path)
    row = _look(record)
    assert (row.benchmark, row.job_id, row.state, row.exit_code) == ("big", IDS[0], "FAILED", "1:0")
    assert row.progress is not None and row.progress.text() == "3/5"  # summed, of the whole benchmark
    text = format_statuses(record, [row])
    assert len([line for line in text.splitlines() if line.startswith("big ")]) == 1  # one row
    assert "big: 0: 900000001 COMPLETED 2/2, 1: 900000002 FAILED 1/3" in text
    (doc,) = json.loads(statuses_json(record, [row]))["benchmarks"]
    assert [(s["job_id"], s["state"]) for s in doc["shards"]] == [(IDS[0], "COMPLETED"), (IDS[1], "FAILED")]


def test_completed_only_once_every_shard_completed_and_the_merge_exists(tmp_path: Path) -> None:
    _shard(tmp_path, 0, done=2, expected=2, code="0")
    _shard(tmp_path, 1, done=3, expected=3, code="0")
    write_artifacts(tmp_path / "big", done=0, expected=5)
    row = _look(_record(tmp_path))
    assert row.state == "FAILED" and row.error and "merged rollouts.jsonl is missing" in row.error
    (tmp_path / "big" / "artifacts" / "rollouts.jsonl").write_text('{"t": 0}\n' * 5)  # the merge
    row = _look(_record(tmp_path))
    assert (row.state, row.error, row.progress and row.progress.text()) == ("COMPLETED", None, "5/5")


def test_a_running_shard_runs_the_benchmark(tmp_path: Path) -> None:
    _shard(tmp_path, 0, done=2, expected=2, code="0")
    shard = _shard(tmp_path, 1, done=1, expected=3, code=None)
    (shard / "job.sh").write_text("sleep 60\n")
    job = subprocess.Popen(["bash", str(shard / "job.sh")])
    try:
        row = _look(_record(tmp_path, (IDS[0], str(job.pid))))
    finally:
        job.kill()
        job.wait()
    assert (row.state, row.job_id) == ("RUNNING", IDS[0])
    assert row.progress is not None and row.progress.text() == "3/5"
    assert [s.state for s in row.shards] == ["COMPLETED", "RUNNING"]


@pytest.mark.parametrize(
    ("error", "state"),
    [("waiting for room: MaxSubmitJobs 1", "WAITING"), ("shard 1: sbatch: no", "NOT QUEUED")],
)
def test_a_shard_with_no_job_is_named_as_its_entry_says(tmp_path: Path, error: str, state: str) -> None:
    _shard(tmp_path, 0, done=2, expected=2, code="0")
    record = _record(tmp_path, (IDS[0], None))
    record = record.with_jobs(BenchmarkJob("big", str(tmp_path / "big"), None, error))
    row = _look(record)
    assert row.state == state and row.error == error
    assert [s.job_id for s in row.shards] == [IDS[0], None]
