"""A sharded benchmark with the REAL driver on the test cluster: its merge scores as the unsharded run.

tests/realgym's `plain` benchmark (5 rows; tests/e2e/test_real_driver.py says how nemo-gym 0.7.0's
`gym eval run` runs offline there) is run twice: unsharded, through `gymbuild submit`, and with
`shards: 2`, whose two jobs are the scripts `gymbuild render` prints. `submit` refuses a sharded
benchmark until its queueing is built (tests/submit/test_shards_refused.py), so this test sbatches the
rendered scripts itself, into the run dir layout the stage step makes, one after the other (the two
gyms of one config want the same head-server port, and the cluster's nodes are shared).

The model double fails every request after its second answer (FAKE_VLLM_FAIL_AFTER_FILE, one count
per job): shard 0 (tasks 0-1) completes, shard 1 (tasks 2-4) fails with two of its three rows, and no
merge is made. With the failure lifted, shard 1 alone is queued again: it asks the model only for its
missing row and, finding every slice complete, merges them with NeMo Gym's aggregation. A complete
shard queued once more asks for nothing and leaves the merge as it was. The merged benchmark has the
unsharded run's task identities, coverage and score, and the model was asked once per row in all.
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


def _sbatch(script: Path, *extra: str) -> str:
    done = subprocess.run(
        ["sbatch", "--parsable", *extra, str(script)],
        cwd=script.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def _ended(cluster: Any, job_id: str) -> tuple[str, int]:
    found = wait_for_jobs(cluster, [job_id], timeout=600)[job_id]
    return found.state, found.exit_code


def _logs(bench_dir: Path) -> str:
    return "\n".join(
        f"--- {p}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(bench_dir.glob("logs/*"))
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


def test_shards_merge_into_the_unsharded_score_and_a_failed_shard_reruns_alone(
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

        # --- the same benchmark in two shards, the model failing after two answers per job
        fail_after, calls = base / "fail-after", base / "model-calls"
        fail_after.write_text("2\n")
        sharded = (
            "only=plain",
            "+driver.benchmarks.plain.shards=2",
            "+driver.benchmarks.plain.run.num_samples_in_parallel=1",
            f"+services.policy.env.FAKE_VLLM_FAIL_AFTER_FILE=lit:{fail_after}",
            f"+services.policy.env.FAKE_VLLM_CALLS_FILE=lit:{calls}",
        )
        shard_out = base / "sharded"
        env = user_env(tmp_path / "sharded", **stage.environ(shard_out, REALGYM_LIMIT=str(ROWS)))
        shown = gymbuild("render", config, "json=1", *sharded, cwd=tmp_path, env=env)
        assert shown.rc == 0, shown.stderr
        payload = json.loads(shown.stdout)
        assert payload["shards"] == {"plain": ["plain/shards/0", "plain/shards/1"]}
        bench_dir = Path(payload["run_dir"]) / "plain"
        scripts = []
        for rel, files in payload["benchmarks"].items():
            shard_dir = Path(payload["run_dir"]) / rel
            for sub in ("logs", "artifacts"):
                (shard_dir / sub).mkdir(parents=True)
            (shard_dir / "job.sh").write_text(files["job.sh"])
            scripts.append(shard_dir / "job.sh")
        first = _sbatch(scripts[0])
        second = _sbatch(scripts[1], f"--dependency=afterany:{first}")
        jobs += [first, second]
        assert _ended(cluster, first) == ("COMPLETED", 0), _logs(scripts[0].parent)
        assert _ended(cluster, second)[0] == "FAILED", _logs(scripts[1].parent)
        artifacts = bench_dir / "artifacts"
        # materialized once, for the whole benchmark; shard 1 has two of its three rows; no merge yet
        assert _lines(artifacts / "rollouts_materialized_inputs.jsonl") == ROWS
        assert _lines(scripts[1].parent / "artifacts" / "rollouts.jsonl") == 2
        assert not (artifacts / "rollouts.jsonl").exists()

        # --- shard 1 alone, queued again with the model well
        fail_after.unlink()
        again = _sbatch(scripts[1])
        jobs.append(again)
        assert _ended(cluster, again) == ("COMPLETED", 0), _logs(scripts[1].parent)
        driver_log = next(scripts[1].parent.glob(f"logs/driver-*{again}*")).read_text(errors="replace")
        assert "every shard complete, merging" in driver_log

        # a complete shard queued again (a user's mistake, a requeue) asks for nothing and merges nothing
        merged_before = (artifacts / "rollouts.jsonl").read_bytes()
        metrics_before = (artifacts / "rollouts_aggregate_metrics.json").read_bytes()
        repeat = _sbatch(scripts[0])
        jobs.append(repeat)
        assert _ended(cluster, repeat) == ("COMPLETED", 0), _logs(scripts[0].parent)
        assert (artifacts / "rollouts.jsonl").read_bytes() == merged_before
        assert (artifacts / "rollouts_aggregate_metrics.json").read_bytes() == metrics_before

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
    # once per row in all
    assert [asked.count(job) for job in (first, second, again, repeat)] == [2, 2, 1, 0]
