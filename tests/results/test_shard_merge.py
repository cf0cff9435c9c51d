"""A sharded benchmark's merge, on real files, by NeMo Gym 0.7.0's own aggregation (in its venv).

tests/oracle/scripts/shard_merge.py lays the rollouts of two benchmarks (mcqa: one agent, 4 tasks x 2
repeats; weather: two agents behind two environment servers on the same 3 tasks) out as K shard jobs
leave them, runs the merge the last shard runs (gymbuild_shard._merge: NeMo Gym's
RolloutAggregationHelper over the slices) and scores the same rows unsharded. The merged benchmark
must be the unsharded one: the same rows (task identities) and the same aggregate metrics."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "oracle" / "scripts" / "shard_merge.py"
MODULE = ROOT / "gymbuild" / "render" / "templates" / "gymbuild_shard.py"

pytestmark = pytest.mark.oracle


def _by_agent(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(metrics, key=lambda entry: entry["agent_ref"]["name"])


def _rows(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def test_merged_shards_score_as_the_unsharded_benchmark(nemo_gym: Any, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(nemo_gym.python), str(SCRIPT), str(tmp_path), str(MODULE), "2", "3", "5"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads((tmp_path / "result.json").read_text())
    for bench, (rows, sizes) in {
        "mcqa": (8, {2: [4, 4], 3: [2, 2, 4]}),
        "weather": (6, {2: [2, 4], 3: [2, 2, 2]}),
    }.items():
        whole = found[bench]["unsharded"]
        assert len(whole["rows"]) == rows and whole["metrics"]
        for count in (2, 3, 5):
            merged = found[bench][f"shards-{count}"]
            assert sum(merged["sizes"]) == rows  # every row in one shard
            if count in sizes:
                assert merged["sizes"] == sizes[count]
            assert _rows(merged["rows"]) == _rows(whole["rows"])
            assert _by_agent(merged["metrics"]) == _by_agent(whole["metrics"])
    mcqa = {e["agent_ref"]["name"]: e for e in found["mcqa"]["shards-3"]["metrics"]}
    assert mcqa["mcqa_simple_agent"]["agent_metrics"]["mean/reward"] == 0.5  # a real score, not an empty one
