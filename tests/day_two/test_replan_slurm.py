"""resubmit's plan on the test cluster, against the files a real failed job wrote.

NeMo Gym 0.7.0's real `gym eval run` (tests/realgym: offline, on the cluster) runs N samples one at a
time against the cluster's fake vllm, told to fail every request after its first K answers
(FAKE_VLLM_FAIL_AFTER_FILE): the job ends FAILED with K rollouts written. `resubmit --dry-run`'s plan
must say FAILED, the rows scored / expected / failed that gym's own three files hold (counted here
with Python, not with the status script's wc), a continuation with the K rows (a `run` benchmark's
re-queued job finds both files and adds +resume_from_cache), and as its cost bound the walltime times
the GPUs the job asked for and Slurm allocated; nothing is queued by it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import gymbuild, job_ids, manifest, wait_for_jobs

from tests.realgym.stage import submit_realgym

pytestmark = pytest.mark.cluster

N, K, GPUS = 4, 2, 2


def lines(path: Path) -> int:
    """Complete lines of one of gym's files (0 when gym did not write it), as gym counts rows."""
    return path.read_text().count("\n") if path.exists() else 0


def allocated_gpus(job_id: str) -> int:
    """The GPUs Slurm allocated to the job (sacct's AllocTRES gres/gpu)."""
    out = subprocess.run(
        ["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "AllocTRES"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    tres = dict(item.split("=", 1) for item in out.strip().split(",") if "=" in item)
    return int(tres.get("gres/gpu", 0))


def test_the_plan_counts_what_the_failed_job_wrote(cluster: Any, nemo_gym: Any, tmp_path: Path) -> None:
    base = cluster.run_dir("replan-realgym")
    fail_after = base / "fail-after"
    fail_after.write_text(f"{K}\n")
    overrides = (
        f"+services.policy.env.FAKE_VLLM_FAIL_AFTER_FILE=lit:{fail_after}",
        "+driver.benchmarks.plain.run.num_samples_in_parallel=1",
        f"+compute.cluster.node_pools.gpu.gpus_per_node={GPUS}",
    )
    output, env, config = submit_realgym(base, nemo_gym.venv, tmp_path, str(N), "only=plain", *overrides)
    record = manifest(output)
    first = job_ids(record)["plain"]
    assert first is not None
    artifacts = output / record["gym_job_id"] / "plain" / "artifacts"
    try:
        assert wait_for_jobs(cluster, [first], timeout=420)[first].state == "FAILED"
        dry = gymbuild("resubmit", config, *overrides, "--dry-run", "json=1", cwd=tmp_path, env=env)
        assert dry.rc == 0, dry.stdout + dry.stderr
        assert job_ids(manifest(output))["plain"] == first  # the dry run queued nothing
    finally:
        subprocess.run(["scancel", first], capture_output=True, check=False, timeout=60)

    plan = json.loads(dry.stdout)["plan"]
    (step,) = plan["benchmarks"]
    scored, expected = (
        lines(artifacts / "rollouts.jsonl"),
        lines(artifacts / "rollouts_materialized_inputs.jsonl"),
    )
    failed = lines(artifacts / "rollouts_failures.jsonl")
    assert (scored, expected) == (K, N)  # what the model double let the job write
    assert (step["job_id"], step["state"]) == (first, "FAILED")
    assert step["rows"] == {"scored": scored, "expected": expected, "failed": failed, "partial": True}
    assert (step["complete"], step["queue"], step["resumes"]) == (False, "continue", "when_written")
    assert step["why"].startswith(
        f"continues from its {K} scored rows (+resume_from_cache): {N - K} left to run"
    )
    assert plan["queued"] == ["plain"]

    # the bound: the job's --time times the GPUs it asked for, which Slurm allocated
    assert (step["walltime_seconds"], step["gpus"]) == (600, GPUS) and allocated_gpus(first) == GPUS
    assert step["gpu_hours_upper_bound"] == plan["gpu_hours_upper_bound"] == GPUS * 600 / 3600

    text = gymbuild("resubmit", config, *overrides, "dry_run=1", cwd=tmp_path, env=env).stdout.splitlines()
    assert text[2] == (
        f"  plain: FAILED (job {first}), rows {K}/{N} scored"
        + (f", {failed} failed" if failed else "")
        + f" -> continue: {step['why']}; at most 0.34 GPU-hours per job (10m00s walltime x {GPUS} GPUs)"
    )
