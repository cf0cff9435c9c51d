"""End to end with the REAL driver: jobs on the test cluster whose `gym eval run` is nemo-gym 0.7.0's.

The configs are tests/realgym/configs/*.yaml, submitted with `gymbuild submit` as a user would; the
driver's env puts the oracle venv's bin first on PATH, so these jobs (and no others) run the real gym
instead of the cluster's fake one. Gym runs offline (tests/realgym/README.md): its openai_model talks
to the cluster's fake vllm (or, for vllm_pd, the fake router in front of it) through /v1/responses,
its servers run from links to the oracle venv, and the benchmark is tests/realgym's realgym_echo,
whose data its own prepare.py wrote through the real `gym eval prepare`.

Every job is submitted at once by a module fixture; each test waits for its own and checks what a
user looks at: sacct's verdict and the artifacts gym wrote.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from e2e_helpers import gymbuild, job_ids, manifest, read_jsonl, sacct_jobs, user_env, wait_for_jobs

from tests.realgym.stage import CONFIGS, DATA, make_stage, prepare

pytestmark = pytest.mark.cluster

LIMIT = 4  # the plain benchmark's `limit`, given through ${oc.env:REALGYM_LIMIT} as a string


class Jobs(NamedTuple):
    """Every real-driver job, all submitted at once: benchmark -> (Slurm job id, bench dir)."""

    by_bench: dict[str, tuple[str, Path]]
    data_rows: int  # rows the benchmark's prepare.py wrote


@pytest.fixture(scope="module")
def jobs(cluster: Any, nemo_gym: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jobs]:
    base = cluster.run_dir("realgym")
    stage = make_stage(base, nemo_gym.venv)
    prepared = prepare(stage)
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    rows = (stage.root / DATA).read_text().splitlines()
    assert len(rows) > LIMIT, "the limit must cut the data for the plain benchmark to show it"
    found: dict[str, tuple[str, Path]] = {}
    for name in ("vllm", "vllm-pd"):
        home = tmp_path_factory.mktemp(f"realgym-{name}")
        output = base / f"runs-{name}"
        env = user_env(home, **stage.environ(output, REALGYM_LIMIT=str(LIMIT)))
        done = gymbuild("submit", f"config={CONFIGS / f'{name}.yaml'}", cwd=home, env=env)
        assert done.rc == 0, f"submit {name} failed:\n{done.stdout}{done.stderr}"
        record = manifest(output)
        for bench, job_id in job_ids(record).items():
            assert job_id, record
            found[bench] = (job_id, output / record["gym_job_id"] / bench)
    yield Jobs(found, len(rows))
    # A failed test leaves no job behind: not its own, nor a resumable chain's successor.
    left = [j for bench in found for j in sacct_jobs(f"gym-{bench}", base)]
    subprocess.run(["scancel", *left], capture_output=True, check=False, timeout=60)


def time_limit(job_id: str) -> float:
    """The job's time limit in seconds, as Slurm holds it (the config's walltime): Slurm ends it there."""
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "TimelimitRaw"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout.split()
    return 60 * float(out[0]) if out and out[0].isdigit() else 600


def completed(cluster: Any, jobs: Jobs, bench: str) -> Path:
    """Wait for the benchmark's job; it COMPLETED with exit 0 (else show its logs). The wait is as long
    as the job may take: one real gym per node, so it may queue behind every other job of the module,
    and each runs at most its own time limit (a loaded machine makes them slow, never endless)."""
    job_id, bench_dir = jobs.by_bench[bench]
    bound = sum(time_limit(j) for j, _ in jobs.by_bench.values()) + 60
    result = wait_for_jobs(cluster, [job_id], timeout=bound)[job_id]
    if (result.state, result.exit_code) != ("COMPLETED", 0):
        logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(bench_dir.glob("logs/*")))
        pytest.fail(f"{bench}: job {job_id} ended {result.state} {result.exit_code}\n{logs}")
    return bench_dir


def rollouts(bench_dir: Path, served_model: str) -> list[dict[str, Any]]:
    """The real artifacts: one rollout per row, verified (reward 0 or 1) on the double's answers, and the
    aggregate metrics agreeing with them."""
    artifacts = bench_dir / "artifacts"
    rows = read_jsonl(artifacts / "rollouts.jsonl")
    assert rows and {r["reward"] for r in rows} <= {0.0, 1.0}
    for row in rows:
        text = row["response"]["output"][0]["content"][0]["text"]
        assert text.startswith(f"fake-vllm reply from model {served_model} on host node")
    (metrics,) = json.loads((artifacts / "rollouts_aggregate_metrics.json").read_text())
    mean = statistics.mean(r["reward"] for r in rows)
    assert metrics["agent_metrics"]["mean/reward"] == pytest.approx(mean)
    return rows


def test_plain_benchmark_completes_with_real_rollouts_cut_to_its_limit(cluster: Any, jobs: Jobs) -> None:
    bench_dir = completed(cluster, jobs, "plain")
    rows = rollouts(bench_dir, "Qwen/Qwen3-8B")
    assert len(rows) == LIMIT  # the limit from the environment reached gym as a number
    # Observability is on by default: gym captured every model call where the driver said.
    assert len(list((bench_dir / "model-calls").glob("*.capture.jsonl"))) == LIMIT


def test_user_set_observability_and_require_complete_are_taken_once(cluster: Any, jobs: Jobs) -> None:
    """Written twice, Hydra refused them and the job failed at start; now the user's values are used."""
    bench_dir = completed(cluster, jobs, "user_set")
    rows = rollouts(bench_dir, "Qwen/Qwen3-8B")
    assert len(rows) == jobs.data_rows
    # observability_enabled: false, so gym captured no model call.
    assert not list(bench_dir.glob("model-calls/*"))


def test_resumable_benchmark_completes_on_its_first_job(cluster: Any, jobs: Jobs) -> None:
    bench_dir = completed(cluster, jobs, "resumable")
    assert rollouts(bench_dir, "Qwen/Qwen3-8B")
    driver_log = "".join(p.read_text() for p in (bench_dir / "logs").glob("driver-*.log"))
    # resume_from_cache=True on a cold start: gym keeps (finds no) cached rollouts instead of clearing.
    assert "Clearing output fpath since `resume_from_cache=False`" not in driver_log


def test_vllm_pd_benchmark_completes_through_the_router(cluster: Any, jobs: Jobs) -> None:
    bench_dir = completed(cluster, jobs, "pd")
    rows = rollouts(bench_dir, "qwen3-8b")
    # The router sent every call to the decode tier, on the decode pool's node.
    hosts = {r["response"]["output"][0]["content"][0]["text"].split(" on host ")[1].split()[0] for r in rows}
    assert hosts == {"node2"}
