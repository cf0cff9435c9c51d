"""`gymbuild results` of a job whose driver is the REAL `gym eval run` of nemo-gym 0.7.0.

tests/realgym's config (its `plain` benchmark only: one real gym job) on the test cluster, submitted
over SSH as a user would (see tests/e2e/test_real_driver.py for how gym runs offline there). The table
shows what gym wrote into rollouts_aggregate_metrics.json, under its own agent and metric names, and
its mean reward is the mean of the rewards in gym's rollouts.jsonl; asked again, nothing is read.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import gymbuild, job_ids, manifest, read_jsonl, wait_for_jobs
from results_helpers import Sessions

from gymbuild.results.table import number
from tests.realgym.stage import submit_realgym

pytestmark = pytest.mark.cluster


def test_results_of_a_real_gym_eval_run(cluster: Any, nemo_gym: Any, tmp_path: Path) -> None:
    base = cluster.run_dir("results-realgym")
    output, env, config = submit_realgym(base, nemo_gym.venv, tmp_path, "3", "only=plain")
    record = manifest(output)
    job_id = job_ids(record)["plain"]
    try:
        result = wait_for_jobs(cluster, [job_id], timeout=420)[job_id]
    finally:  # a job that outlived the wait is not left behind (an ended one is not touched)
        subprocess.run(["scancel", job_id], capture_output=True, check=False, timeout=60)
    assert (result.state, result.exit_code) == ("COMPLETED", 0)

    artifacts = output / record["gym_job_id"] / "plain" / "artifacts"
    (entry,) = json.loads((artifacts / "rollouts_aggregate_metrics.json").read_text())
    rewards = [r["reward"] for r in read_jsonl(artifacts / "rollouts.jsonl")]
    ssh = Sessions(tmp_path / "count", "ssh")
    counted = {**env, "PATH": f"{ssh.bin}{os.pathsep}{env['PATH']}"}
    shown = gymbuild("results", config, cwd=tmp_path, env=counted)
    assert shown.rc == 0, shown.stdout + shown.stderr
    rows = [line.split() for line in shown.stdout.splitlines()]
    assert "policy Qwen/Qwen3-8B" in shown.stdout.splitlines()[0]
    agent = entry["agent_ref"]["name"]
    # What the score covers, as gym counts it: its materialized inputs (the limit) all scored.
    materialized = (artifacts / "rollouts_materialized_inputs.jsonl").read_text().splitlines()
    assert len(materialized) == len(rewards) == 3
    scored = ["3/3"]
    assert rows[2] == ["plain", agent, "COMPLETED", *scored, "mean/reward", number(statistics.mean(rewards))]
    shown_metrics = {r[-2]: r[-1] for r in rows[2:] if r}
    assert shown_metrics == {name: number(value) for name, value in entry["key_metrics"].items()}
    assert (len(ssh.status_reads()), len(ssh.metrics_reads())) == (1, 1)

    ssh.reset()
    again = gymbuild("results", config, "json=1", cwd=tmp_path, env=counted)
    assert again.rc == 0 and ssh.invocations() == []
    (bench,) = json.loads(again.stdout)["runs"][0]["benchmarks"]
    assert bench["agents"] == [{"agent": agent, "key_metrics": entry["key_metrics"]}]
    assert bench["coverage"] == {"scored": 3, "expected": 3, "failed": 0, "partial": False}
