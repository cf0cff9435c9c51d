"""The REAL driver (nemo-gym 0.7.0's `gym eval run`, offline: tests/realgym/README.md) runs two
benchmarks in one shared job on the test cluster: the policy loads once, each benchmark's gym writes
its own rollouts into its own directory, and each completes on its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import gymbuild, job_ids, manifest, read_jsonl, wait_for_jobs

from tests.realgym.stage import submit_realgym

pytestmark = pytest.mark.cluster


def test_the_real_driver_runs_two_benchmarks_in_one_job(cluster: Any, nemo_gym: Any, tmp_path: Path) -> None:
    base = cluster.run_dir("realgym-shared")
    output, env, config = submit_realgym(
        base, nemo_gym.venv, tmp_path, "2", "+driver.benchmarks_per_job=2", "only=plain,user_set"
    )
    record = manifest(output)
    ids = job_ids(record)
    assert set(ids) == {"plain", "user_set"} and len(set(ids.values())) == 1
    (job,) = set(ids.values())
    run_dir = output / record["gym_job_id"]
    result = wait_for_jobs(cluster, [job], timeout=600)[job]
    (job_dir,) = [d for d in (run_dir / "+jobs").iterdir() if d.is_dir()]
    if (result.state, result.exit_code) != ("COMPLETED", 0):
        logs = "\n".join(f"--- {p}\n{p.read_text()[-3000:]}" for p in sorted(run_dir.glob("**/logs/*")))
        pytest.fail(f"job {job} ended {result.state} {result.exit_code}\n{logs}")
    assert len(list((job_dir / "logs").glob(f"policy-{job}.log"))) == 1  # the model loaded once
    for bench in ("plain", "user_set"):
        rows = read_jsonl(run_dir / bench / "artifacts" / "rollouts.jsonl")
        assert rows and {r["reward"] for r in rows} <= {0.0, 1.0}
        (metrics,) = json.loads(
            (run_dir / bench / "artifacts" / "rollouts_aggregate_metrics.json").read_text()
        )
        assert "mean/reward" in metrics["agent_metrics"]
    status = gymbuild("status", config, "json=1", cwd=tmp_path, env=env)
    assert status.rc == 0, status.stdout + status.stderr
    states = {r["benchmark"]: r["state"] for r in json.loads(status.stdout)["benchmarks"]}
    assert states == {"plain": "COMPLETED", "user_set": "COMPLETED"}  # only= queued these two
