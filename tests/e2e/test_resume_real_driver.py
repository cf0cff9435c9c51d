"""`resubmit` continues a benchmark from the rollouts its failed job wrote, with the REAL driver.

tests/realgym's `plain` benchmark (see tests/e2e/test_real_driver.py for how nemo-gym 0.7.0's `gym eval
run` runs offline on the test cluster) of N samples, one at a time, against the cluster's fake vllm
told to fail every request after its first K answers (FAKE_VLLM_FAIL_AFTER_FILE) and to write down
each call it answers (FAKE_VLLM_CALLS_FILE). The job fails with K rollouts written; status reads it
FAILED with K/N. With the failure lifted, `resubmit` queues it again in the same directory, where the
job finds those rollouts and runs gym with +resume_from_cache=True: it ends with N rollouts, and the
model was asked N-K more times, not N.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import gymbuild, job_ids, manifest, read_jsonl, wait_for_jobs

from tests.realgym.stage import submit_realgym

pytestmark = pytest.mark.cluster

N, K = 4, 2


def test_a_resubmitted_benchmark_asks_the_model_only_for_what_is_missing(
    cluster: Any, nemo_gym: Any, tmp_path: Path
) -> None:
    base = cluster.run_dir("resume-realgym")
    fail_after, calls = base / "fail-after", base / "model-calls"
    fail_after.write_text(f"{K}\n")
    overrides = (
        f"+services.policy.env.FAKE_VLLM_FAIL_AFTER_FILE=lit:{fail_after}",
        f"+services.policy.env.FAKE_VLLM_CALLS_FILE=lit:{calls}",
        "+driver.benchmarks.plain.run.num_samples_in_parallel=1",
    )
    output, env, config = submit_realgym(base, nemo_gym.venv, tmp_path, str(N), "only=plain", *overrides)
    record = manifest(output)
    first = job_ids(record)["plain"]
    bench_dir = output / record["gym_job_id"] / "plain"
    artifacts = bench_dir / "artifacts"
    jobs = [first]
    try:
        assert wait_for_jobs(cluster, [first], timeout=420)[first].state == "FAILED"
        assert len(read_jsonl(artifacts / "rollouts.jsonl")) == K
        assert len((artifacts / "rollouts_materialized_inputs.jsonl").read_text().splitlines()) == N
        status = gymbuild("status", config, "json=1", cwd=tmp_path, env=env)
        (row,) = json.loads(status.stdout)["benchmarks"]
        assert (row["state"], row["progress"]["done"], row["progress"]["expected"]) == ("FAILED", K, N)
        shown = gymbuild("status", config, cwd=tmp_path, env=env)
        assert f"{K}/{N}" in shown.stdout and "partial" in shown.stdout

        fail_after.unlink()  # the model server is well again
        again = gymbuild("resubmit", config, *overrides, cwd=tmp_path, env=env)  # the same config
        assert again.rc == 0, again.stdout + again.stderr
        second = job_ids(manifest(output))["plain"]
        assert second != first
        jobs.append(second)
        done = wait_for_jobs(cluster, [second], timeout=420)[second]
        log = "\n".join(
            p.read_text(errors="replace") for p in (bench_dir / "logs").glob(f"driver-*{second}*")
        )
        assert (done.state, done.exit_code) == ("COMPLETED", 0), log[-3000:]
    finally:
        subprocess.run(["scancel", *jobs], capture_output=True, check=False, timeout=60)
    rollouts = read_jsonl(artifacts / "rollouts.jsonl")
    assert len(rollouts) == N
    assert sorted(r["_ng_task_index"] for r in rollouts) == list(range(N))
    asked = calls.read_text().split()
    assert (asked.count(first), asked.count(second)) == (K, N - K)
    assert f"continuing from the rollouts an earlier job wrote ({K} of {N})" in log
