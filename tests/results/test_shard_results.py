"""`results` of a sharded benchmark reads the MERGED files at the benchmark's own dir (the last shard
merges them there with NeMo Gym's aggregation): one row, the merged score; never a shard's slice, and
no score before the merge exists.

In this process with the real Slurm executor in a real bash session and the stand-in scheduler of
tests/submit/test_queue.py (its sacct reporting the states written here); real files in the run dir.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gymbuild.cli import main
from tests.day_two.test_rollouts import write_artifacts
from tests.day_two.test_shard_resubmit import sacct_says
from tests.submit.test_queue import _queued, _submit
from tests.submit.test_shards_queue import shard_record, sharded_user

AGGREGATE = Path(__file__).resolve().parents[1] / "data" / "nemo-gym-0.7.0-aggregate" / "run-a" / "weather"


def _results(user: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    rc = main.main(["results", f"config={user['config']}", "json=1"])
    out, err = capsys.readouterr()
    assert rc in (0, 1), err
    return {b["benchmark"]: b for b in json.loads(out)["runs"][0]["benchmarks"]}


def test_results_read_the_merged_score_and_none_before_the_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    user = sharded_user(tmp_path, monkeypatch, shards=2)
    monkeypatch.setenv("BASH_FUNC_sacct%%", '() { printf "$(cat "$GYM_TEST_SCHED/sacct" 2>/dev/null)"; }')
    rc, _, err = _submit(user, capsys)
    assert rc == 0, err
    queued = _queued(user)
    sacct_says(user, {ids[0]: ("COMPLETED", "0:0") for ids in queued.values()})
    big = Path(shard_record(user).run_dir) / "big"
    write_artifacts(big, done=0, expected=5)
    for k, rows in enumerate((2, 3)):  # each slice complete, each with a score of its own
        write_artifacts(big / "shards" / str(k), done=rows, expected=rows)
        shutil.copy(
            AGGREGATE / "artifacts" / "rollouts_aggregate_metrics.json", big / "shards" / str(k) / "artifacts"
        )

    before = _results(user, capsys)["big"]
    assert before["state"] == "FAILED" and not before.get("agents")  # no merge: no score, no slice's

    merged = big / "artifacts"
    (merged / "rollouts.jsonl").write_text('{"t": 0}\n' * 5)
    shutil.copy(AGGREGATE / "artifacts" / "rollouts_aggregate_metrics.json", merged)
    after = _results(user, capsys)["big"]
    assert after["state"] == "COMPLETED" and after["job_id"] == queued["gym-big+shard0"][0]
    assert after["agents"], after  # the merged file's score
    assert after["coverage"] == {"scored": 5, "expected": 5, "failed": 0, "partial": False}
