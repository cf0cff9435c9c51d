"""Write a gymbuild config with N benchmarks for the benchmark suite (bench/run.py).

The jobs must never flood the shared test cluster, so every job is queued with a start time a week
away (`extra_args: {begin: now+7days}`: `#SBATCH --begin=now+7days`); it pends with reason BeginTime
until the suite cancels it with one `scancel`. (`hold: true`, the bare `#SBATCH --hold`, would do
as well; `begin` keeps the numbers comparable with earlier runs.)

    python bench/genconfig.py 100 /tmp/b100.yaml --output /var/tmp/gymbuild-cluster/bench-x
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

KINDS = ("run", "command")


def bench_name(i: int) -> str:
    return f"b{i:04d}"


def make_config(n: int, output_path: str, kind: str = "run", hostname: str = "gym-login") -> dict:
    """A slurm config on `hostname` (account gym, partition gpu) with n gym-run or command benchmarks."""
    if kind == "run":
        benchmarks = {
            bench_name(i): {"run": {"config_paths": f"benchmarks/b{i % 7}/config.yaml", "limit": i}}
            for i in range(n)
        }
    else:
        benchmarks = {
            bench_name(i): {"command": f'echo bench {i} > "$NEMO_GYM_BENCH_DIR/artifacts/out"'}
            for i in range(n)
        }
    return {
        "services": {
            "policy": {"type": "vllm", "container": "vllm/vllm-openai:v0.10.1", "model": "Qwen/Qwen3-8B"}
        },
        "compute": {
            "cluster": {
                "type": "slurm",
                "hostname": hostname,
                "account": "gym",
                "walltime": "00:10:00",
                "extra_args": {"begin": "now+7days"},
                "node_pools": {"gpu": {"partition": "gpu", "gpus_per_node": 1}},
            }
        },
        "driver": {
            "policy_model": "policy",
            **({"container": "python:3.12"} if kind == "command" else {}),
            "benchmarks": benchmarks,
        },
        "job": {"output_path": output_path},
        "otel": {"enabled": False},
    }


def write_config(path: Path, n: int, output_path: str, kind: str = "run") -> Path:
    path.write_text(yaml.safe_dump(make_config(n, output_path, kind), sort_keys=False))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("n", type=int)
    parser.add_argument("path", type=Path)
    parser.add_argument("--output", default="/var/tmp/gymbuild-cluster/bench-manual")
    parser.add_argument("--kind", choices=KINDS, default="run")
    args = parser.parse_args()
    write_config(args.path, args.n, args.output, args.kind)


if __name__ == "__main__":
    main()
