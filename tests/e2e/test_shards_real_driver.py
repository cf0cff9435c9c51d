"""A sharded benchmark with the REAL driver on the test cluster, through `gymbuild submit`, `status`
and `resubmit`: its merge scores as the unsharded run.

tests/realgym's `plain` benchmark (5 rows; tests/e2e/test_real_driver.py says how nemo-gym 0.7.0's
`gym eval run` runs offline there) is submitted twice: unsharded, and with `shards: 2`, whose two jobs
`gymbuild submit` queues and records as ONE entry (job_id: shard 0's; both ids in
executor_metadata["shards.plain"]).

Shard 1 is killed (scancel) as soon as it is queued: shard 0 runs its slice (tasks 0-1) alone and
completes, and no merge is made (status: CANCELLED, the shards' rows summed). `gymbuild resubmit
only=plain` (a cancelled benchmark is re-queued when named) queues ONLY shard 1: it asks the model
only for what its slice lacks and, finding every slice complete, merges them with NeMo Gym's
aggregation. The merged benchmark has the unsharded run's task identities, coverage and score.

The two shards of one config want the same gym head-server port (a known clash of two real gyms on
one node, fixed elsewhere): here they never run at once, since shard 1 runs only after shard 0 ended.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import gymbuild, job_ids, manifest, read_jsonl, user_env, wait_for_jobs

from tests.realgym.stage import CONFIGS, prepared_stage

pytestmark = pytest.mark.cluster

ROWS = 5  # realgym_echo's data; `plain` takes them all (REALGYM_LIMIT)


def _ended(cluster: Any, job_id: str) -> tuple[str, int]:
    found = wait_for_jobs(cluster, [job_id], timeout=600)[job_id]
    return found.state, found.exit_code


def _logs(bench_dir: Path) -> str:
    return "\n".join(
        f"--- {p}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(bench_dir.glob("**/logs/*"))
    )


def _keys(rows: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return sorted((r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows)


def _prompts(rows: list[dict[str, Any]]) -> dict[int, str]:
    return {
        r["_ng_task_index"]: json.dumps(r["responses_create_params"]["input"], sort_keys=True) for r in rows
    }


def _mean_reward(artifacts: Path) -> float:
    (entry,) = json.loads((artifacts / "rollouts_aggregate_metrics.json").read_text())
    return float(entry["agent_metrics"]["mean/reward"])


def _lines(path: Path) -> int:
    """A file's rows, as gymbuild's coverage counts them (state/rollouts.py: lines of each file)."""
    return len(path.read_text().splitlines()) if path.exists() else 0


def _status(env: dict[str, str], cwd: Path, *args: str) -> dict[str, Any]:
    done = gymbuild("status", "json=1", *args, cwd=cwd, env=env)
    assert done.rc in (0, 1), done.stderr
    (row,) = [r for r in json.loads(done.stdout)["benchmarks"] if r["benchmark"] == "plain"]
    return row


def test_a_sharded_benchmark_merges_into_the_unsharded_score_and_a_killed_shard_reruns_alone(
    cluster: Any, nemo_gym: Any, tmp_path: Path
) -> None:
    base = cluster.run_dir("shards-realgym")
    stage = prepared_stage(base, nemo_gym.venv)
    config = f"config={CONFIGS / 'vllm.yaml'}"
    jobs: list[str] = []
    try:
        # --- the benchmark unsharded, as gymbuild submits it
        whole_out = base / "whole"
        env = user_env(tmp_path / "whole", **stage.environ(whole_out, REALGYM_LIMIT=str(ROWS)))
        done = gymbuild("submit", config, "only=plain", cwd=tmp_path, env=env)
        assert done.rc == 0, done.stdout + done.stderr
        record = manifest(whole_out)
        whole_job = job_ids(record)["plain"]
        assert whole_job
        jobs.append(whole_job)
        whole_dir = whole_out / record["gym_job_id"] / "plain"

        # --- the same benchmark in two shards, both queued by one submit; shard 1 killed at once
        calls = base / "model-calls"
        sharded = (
            "only=plain",
            "+driver.benchmarks.plain.shards=2",
            "+driver.benchmarks.plain.run.num_samples_in_parallel=1",
            f"+services.policy.env.FAKE_VLLM_CALLS_FILE=lit:{calls}",
        )
        shard_out = base / "sharded"
        env = user_env(tmp_path / "sharded", **stage.environ(shard_out, REALGYM_LIMIT=str(ROWS)))
        done = gymbuild("submit", config, *sharded, cwd=tmp_path, env=env)
        assert done.rc == 0, done.stdout + done.stderr
        record = manifest(shard_out)
        (entry,) = record["benchmarks"]  # one entry for the benchmark
        first, second = record["executor_metadata"]["shards.plain"].split(",")
        jobs += [first, second]
        assert entry["job_id"] == first and first != second
        subprocess.run(["scancel", second], capture_output=True, check=True, timeout=60)
        bench_dir = Path(record["run_dir"]) / "plain"
        assert _ended(cluster, first) == ("COMPLETED", 0), _logs(bench_dir)
        assert _ended(cluster, second)[0] == "CANCELLED"
        artifacts = bench_dir / "artifacts"
        # materialized once, for the whole benchmark; shard 0 has its two rows; no merge yet
        assert _lines(artifacts / "rollouts_materialized_inputs.jsonl") == ROWS
        assert _lines(bench_dir / "shards" / "0" / "artifacts" / "rollouts.jsonl") == 2
        assert not (artifacts / "rollouts.jsonl").exists()
        row = _status(env, tmp_path, config, *sharded)
        assert row["state"] == "CANCELLED" and row["job_id"] == first
        assert [(s["job_id"], s["state"]) for s in row["shards"]] == [
            (first, "COMPLETED"),
            (second, "CANCELLED"),
        ]
        had = _lines(bench_dir / "shards" / "1" / "artifacts" / "rollouts.jsonl")  # 0 unless it had started

        # --- resubmit queues shard 1 alone, which completes its slice and merges
        plan = gymbuild("resubmit", config, *sharded, "--dry-run", cwd=tmp_path, env=env)
        assert plan.rc == 0 and "shards to queue: plain+shard1" in plan.stdout, plan.stdout + plan.stderr
        done = gymbuild("resubmit", config, *sharded, cwd=tmp_path, env=env)
        assert done.rc == 0, done.stdout + done.stderr
        record = manifest(shard_out)
        ids = record["executor_metadata"]["shards.plain"].split(",")
        again = ids[1]
        jobs.append(again)
        assert ids[0] == first and again not in (first, second)  # shard 0 left alone
        assert f"submitted plain shard 1 -> Slurm job {again}" in done.stdout
        assert (
            record["benchmarks"][0]["job_id"] == first
            and second in record["benchmarks"][0]["previous_job_ids"]
        )
        assert _ended(cluster, again) == ("COMPLETED", 0), _logs(bench_dir)
        driver_log = next((bench_dir / "shards" / "1").glob(f"logs/driver-*{again}*")).read_text(
            errors="replace"
        )
        assert "every shard complete, merging" in driver_log
        row = _status(env, tmp_path, config, *sharded)
        assert row["state"] == "COMPLETED" and row["progress"]["done"] == row["progress"]["expected"] == ROWS

        assert _ended(cluster, whole_job) == ("COMPLETED", 0), _logs(whole_dir)
    finally:
        subprocess.run(["scancel", *jobs], capture_output=True, check=False, timeout=60)

    whole = read_jsonl(whole_dir / "artifacts" / "rollouts.jsonl")
    merged = read_jsonl(artifacts / "rollouts.jsonl")
    assert _keys(merged) == _keys(whole) == [(t, 0) for t in range(ROWS)]  # the same task identities
    assert _prompts(merged) == _prompts(whole)  # each task the same question
    for name in ("rollouts.jsonl", "rollouts_materialized_inputs.jsonl"):  # the same coverage: 5/5
        assert _lines(artifacts / name) == _lines(whole_dir / "artifacts" / name) == ROWS
    assert _mean_reward(artifacts) == pytest.approx(_mean_reward(whole_dir / "artifacts")) == 0.6
    asked = calls.read_text().split()
    # shard 0 asked for its two rows; the re-queued shard 1 only for what its slice still lacked
    assert asked.count(first) == 2 and asked.count(again) == 3 - had
