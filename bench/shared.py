"""Allocation-seconds of shared jobs (driver.benchmarks_per_job) on the test cluster.

A vLLM double that becomes healthy after S seconds (FAKE_VLLM_STARTUP_SECONDS) and B command
benchmarks of b seconds each, submitted three ways: one job per benchmark, all in one job, and all in
one job two at a time. For each: the allocation-seconds sacct accounts (ElapsedRaw x NNodes summed
over the submission's jobs), the floor it is set against (S + B*b, or S + B*b/2 two at a time, for a
shared job; B*(S + b) for one job per benchmark), how many times the model was loaded (service
logs), and each benchmark's outcome. Run by hand from the repository root, with the cluster up:

    python bench/shared.py                 # S = 20, B = 8, b = 5
    python bench/shared.py --startup 20 --benchmarks 8 --seconds 5 --markdown /tmp/shared.md
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

RUNS_ROOT = Path("/var/tmp/gymbuild-cluster/runs")  # seen by the login node and every node


def config(
    output: Path, startup: int, count: int, seconds: int, per_job: Any, concurrent: int
) -> dict[str, Any]:
    policy = {
        "type": "vllm",
        "container": "vllm/vllm-openai:v0.10.1",
        "model": "Qwen/Qwen3-8B",
        "env": {"FAKE_VLLM_STARTUP_SECONDS": f"lit:{startup}"},
    }
    benchmarks = {f"b{i}": {"command": f"sleep {seconds}"} for i in range(count)}
    driver: dict[str, Any] = {"policy_model": "policy", "benchmarks": benchmarks}
    if per_job != 1:
        driver.update(benchmarks_per_job=per_job, concurrent_benchmarks=concurrent)
    return {
        "services": {"policy": policy},
        "compute": {
            "cluster": {
                "type": "slurm",
                "account": "gym",
                "walltime": "00:20:00",
                "node_pools": {"gpu": {"partition": "gpu", "nodes": 1}},
            }
        },
        "driver": driver,
        "job": {"output_path": str(output)},
        "otel": {"enabled": False},
    }


def sacct(job_ids: set[str]) -> dict[str, tuple[str, int, int]]:
    """job id -> (state, ElapsedRaw, NNodes), once every job has ended."""
    while True:
        out = subprocess.run(
            [
                "sacct",
                "-X",
                "-n",
                "-P",
                "-j",
                ",".join(sorted(job_ids)),
                "-o",
                "JobID,State,ElapsedRaw,NNodes",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        rows = {}
        for line in out.splitlines():
            job, state, elapsed, nodes = line.split("|")
            rows[job] = (state.split()[0], int(elapsed or 0), int(nodes or 0))
        live = {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "REQUEUED"}
        if set(rows) >= job_ids and not any(r[0] in live for r in rows.values()):
            return rows
        time.sleep(3)


def measure(label: str, args: argparse.Namespace, per_job: Any, concurrent: int) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="gb-shared-"))
    output = RUNS_ROOT / f"bench-shared-{uuid.uuid4().hex[:8]}"
    output.mkdir(parents=True, mode=0o755)
    path = home / "submit.yaml"
    data = config(output, args.startup, args.benchmarks, args.seconds, per_job, concurrent)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    env = {**os.environ, "XDG_CACHE_HOME": str(home / "cache")}
    gymbuild = shutil.which("gymbuild") or sys.exit("the gymbuild console script is not on PATH")
    done = subprocess.run(
        [gymbuild, "submit", f"config={path}"], cwd=home, env=env, capture_output=True, text=True
    )
    if done.returncode:
        sys.exit(f"{label}: submit failed:\n{done.stdout}{done.stderr}")
    (run_dir,) = output.glob("gym-job-*")
    record = json.loads((run_dir / "gym-job.json").read_text())
    ids = {b["job_id"] for b in record["benchmarks"]}
    jobs = sacct(ids)
    status = subprocess.run(
        [gymbuild, "status", f"config={path}", "json=1"], cwd=home, env=env, capture_output=True, text=True
    )
    outcomes = {row["benchmark"]: row["state"] for row in json.loads(status.stdout)["benchmarks"]}
    loads = len(list(run_dir.glob("**/logs/policy-*.log")))
    seconds = sum(elapsed * nodes for _state, elapsed, nodes in jobs.values())
    count, b, s = args.benchmarks, args.seconds, args.startup
    floor = count * (s + b) if per_job == 1 else s + count * b / concurrent
    return {
        "variant": label,
        "jobs": len(ids),
        "model_loads": loads,
        "allocation_seconds": seconds,
        "floor": floor,
        "ratio": round(seconds / floor, 2),
        "outcomes": outcomes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--startup", type=int, default=20, help="S: seconds until the vLLM double is healthy")
    parser.add_argument("--benchmarks", type=int, default=8, help="how many command benchmarks")
    parser.add_argument("--seconds", type=int, default=5, help="b: seconds each benchmark takes")
    parser.add_argument("--markdown", type=Path, help="write the table here too")
    args = parser.parse_args()
    variants = [
        ("benchmarks_per_job: 1", 1, 1),
        (f"benchmarks_per_job: {args.benchmarks}", args.benchmarks, 1),
        (f"benchmarks_per_job: {args.benchmarks}, concurrent_benchmarks: 2", args.benchmarks, 2),
    ]
    rows = [measure(label, args, per_job, concurrent) for label, per_job, concurrent in variants]
    same = len({json.dumps(r["outcomes"], sort_keys=True) for r in rows}) == 1
    lines = [
        f"S = {args.startup} s, {args.benchmarks} benchmarks of b = {args.seconds} s; "
        f"the same per-benchmark outcomes in every variant: {'yes' if same else 'NO'}",
        "",
        "| variant | jobs | model loads | allocation-seconds (sacct) | floor | ratio |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['jobs']} | {r['model_loads']} | {r['allocation_seconds']} | "
            f"{r['floor']:g} | {r['ratio']} |"
        )
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
