"""Resume chains end by themselves, on the test cluster, with NeMo Gym's REAL `gym eval run`.

tests/realgym's `plain` benchmark (tests/e2e/test_real_driver.py says how the real gym runs offline)
against the cluster's fake vllm told to fail every request (FAKE_VLLM_FAIL_AFTER_FILE holding 0): the
model stops answering, so each job's driver fails with no rollout. Made resumable by gymbuild's one
switch (`driver.resumable`) or by the benchmark's own `resumable:`. Each chain must stop by itself,
say why in .gym_chain_end, and leave nothing queued:

- its jobs cannot reach the accounting daemon: their `sacct` runs with a copy of slurm.conf whose
  AccountingStoragePort is wrong (a `sacct` first on the job's PATH, which sbatch exports to the
  job and the job to its successor; slurmdbd itself is never touched, other tests use it);
- sacct answers: FAILED twice without progress;
- the submission's budget (driver.budget.gpu_hours) is spent after the first job.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import job_ids, manifest, wait_for_file, wait_for_jobs

from tests.realgym.stage import submit_realgym

pytestmark = pytest.mark.cluster

SACCT = shutil.which("sacct") or "sacct"  # the real one (a test puts a broken one first on PATH)
N = 4  # rows the benchmark sets out to score; none is scored: the model fails every request


def attempts(bench_dir: Path) -> list[list[str]]:
    """The chain's .gym_attempts, one list of 7 fields per job start."""
    return [line.split("\t") for line in (bench_dir / ".gym_attempts").read_text().splitlines()]


def failing_model(base: Path) -> tuple[str, ...]:
    """Overrides that make the policy fail every request from its first."""
    (base / "fail-after").write_text("0\n")
    return (f"+services.policy.env.FAKE_VLLM_FAIL_AFTER_FILE=lit:{base / 'fail-after'}",)


def run_chain(
    cluster: Any, output: Path, timeout: float = 900
) -> tuple[Path, list[list[str]], dict[str, Any]]:
    """Wait (bounded) for the chain of the submission's one benchmark to write its end, then for
    each of its jobs to have ended: (bench dir, .gym_attempts, job id -> the cluster's JobResult)."""
    record = manifest(output)
    (bench,) = job_ids(record)
    bench_dir = output / record["gym_job_id"] / bench
    try:
        wait_for_file(bench_dir / ".gym_chain_end", timeout=timeout)
        lines = attempts(bench_dir)
        ended = wait_for_jobs(cluster, [line[0] for line in lines], timeout=300)
    finally:
        chain = (
            (bench_dir / ".gym_job_chain").read_text().split()
            if (bench_dir / ".gym_job_chain").exists()
            else []
        )
        successors = [p.read_text().strip() for p in bench_dir.glob(".gym_successor-*")]
        subprocess.run(["scancel", *chain, *successors], capture_output=True, check=False, timeout=60)
    for line in lines:
        print(f"job {line[0]}: attempt {line[1]}, {line[5]} ({line[6]}); elapsed {elapsed(line[0])} s")
    return bench_dir, lines, ended


def elapsed(job: str) -> str:
    return subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", job, "-o", "ElapsedRaw"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()


def no_sacct_path(base: Path) -> str:
    """A bin dir whose `sacct` is the real one with a slurm.conf whose accounting port is wrong."""
    conf = base / "no-accounting.conf"
    text = Path("/etc/slurm/slurm.conf").read_text()
    assert "AccountingStoragePort=6819" in text
    # srun in the job finds the fake pyxis through plugstack.conf, which is read beside slurm.conf.
    conf.write_text(
        text.replace("AccountingStoragePort=6819", "AccountingStoragePort=6999")
        + "\nPlugStackConfig=/etc/slurm/plugstack.conf\n"
    )
    real = SACCT
    bin_dir = base / "no-sacct-bin"
    bin_dir.mkdir()
    (bin_dir / "sacct").write_text(f'#!/bin/bash\nSLURM_CONF={conf} exec {real} "$@"\n')
    (bin_dir / "sacct").chmod(0o755)
    probe = subprocess.run(
        [str(bin_dir / "sacct"), "-n", "-j", "1"], capture_output=True, text=True, check=False
    )
    assert probe.returncode != 0 and "Connection refused" in probe.stderr, probe
    return str(bin_dir)


def test_a_chain_whose_jobs_cannot_reach_sacct_stops_by_itself(
    cluster: Any, nemo_gym: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's runaway: UNKNOWN is never a free retry, and the second attempt without a row stops."""
    base = cluster.run_dir("chain-no-sacct")
    # Submitted from this machine (the login node too), whose environment sbatch hands the job; the
    # test's own sacct (the cluster fixture's waits) keeps the real one.
    here = "compute.cluster.hostname=null"
    overrides = ("only=plain", "+driver.resumable=true", here, *failing_model(base))
    with monkeypatch.context() as patch:
        patch.setenv("PATH", f"{no_sacct_path(base)}:{os.environ['PATH']}")
        output, _env, _config = submit_realgym(base, nemo_gym.venv, tmp_path, str(N), *overrides)
    bench_dir, lines, ended = run_chain(cluster, output)
    first, second, third = (line[0] for line in lines)
    assert [line[5] for line in lines] == ["head", "retry", "stop"]
    assert [line[3] for line in lines] == ["-", "UNKNOWN", "UNKNOWN"]
    assert "sacct silent; exit status 1" in lines[1][6]
    end = (bench_dir / ".gym_chain_end").read_text()
    assert end == f"stopped: no progress in 2 attempts in a row (jobs {first}, {second})\n"
    assert [ended[j].state for j in (first, second, third)] == ["FAILED", "FAILED", "FAILED"]
    assert not (bench_dir / f".gym_successor-{third}").exists()  # nothing queued after the stop
    assert not list(bench_dir.glob(f"logs/driver-{third}*"))  # the stopping job ran no driver


def test_a_failing_benchmark_stops_after_one_retry(cluster: Any, nemo_gym: Any, tmp_path: Path) -> None:
    base = cluster.run_dir("chain-failing")
    overrides = ("only=plain", "+driver.benchmarks.plain.resumable={max_retries: 5}", *failing_model(base))
    output, _env, _config = submit_realgym(base, nemo_gym.venv, tmp_path, str(N), *overrides)
    bench_dir, lines, _ended = run_chain(cluster, output)
    assert [line[5] for line in lines] == ["head", "retry", "stop"]
    assert [line[3] for line in lines] == ["-", "FAILED", "FAILED"]
    assert lines[1][6] == "FAILED, no new rows (retry 1 of 5)"
    assert (bench_dir / ".gym_infra_retries").read_text() == "1\n"
    assert (
        (bench_dir / ".gym_chain_end").read_text().startswith("stopped: no progress in 2 attempts in a row")
    )
    assert not (bench_dir / f".gym_successor-{lines[2][0]}").exists()


def test_the_budget_stops_a_chain(cluster: Any, nemo_gym: Any, tmp_path: Path) -> None:
    """0.001 GPU-hours (3.6 s of one GPU): the first job's own time spends it, as sacct counts it."""
    base = cluster.run_dir("chain-budget")
    overrides = (
        "only=plain",
        "+driver.resumable=true",
        "+driver.budget={gpu_hours: 0.001}",
        "+compute.cluster.node_pools.gpu.gpus_per_node=1",
        *failing_model(base),
    )
    output, _env, _config = submit_realgym(base, nemo_gym.venv, tmp_path, str(N), *overrides)
    bench_dir, lines, _ended = run_chain(cluster, output)
    assert [line[5] for line in lines] == ["head", "stop"]
    end = (bench_dir / ".gym_chain_end").read_text()
    assert end.startswith("stopped: budget spent (") and end.endswith(" GPU-hours spent of 0.001)\n"), end
    ledger = [line.split("\t") for line in (bench_dir.parent / ".gym_budget").read_text().splitlines()]
    assert ledger[0][:2] == ["start", lines[0][0]]
    (used,) = [line for line in ledger if line[0] == "used"]
    assert used[1] == lines[0][0] and used[3] == "1" and int(used[2]) == int(elapsed(lines[0][0]))
