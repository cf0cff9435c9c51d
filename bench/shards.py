"""Wallclock of a sharded benchmark against the same benchmark unsharded, on the test cluster.

The REAL driver (nemo-gym 0.7.0's `gym eval run`, tests/realgym) on N rows of realgym_echo, against
a model double that takes S seconds to load (FAKE_VLLM_STARTUP_SECONDS) and d seconds per answer
(this script's copy of the cluster's fake vllm, first on the policy's PATH), c answers at a time
(num_samples_in_parallel). Run the same way twice, one after the other, both through `gymbuild
submit`: unsharded (one job) and with `shards: K` (K jobs, one record entry; their ids from the
record's executor_metadata["shards.plain"]). The shards are queued held (`--hold`, an extra_args
directive) and released each on a node of its own (`scontrol update ReqNodeList`, then `scontrol
release`), so K shards run on K allocations, the goal's premise (two on one node would share its
2 cores; the head server's port is settled at run time, so they would not clash). The wallclock of
each is from its first job's start to its last job's end, as sacct records them (queue waits
excluded, model load included); the goal is sharded <= 1.2 x unsharded / K. Run by hand from the
repository root, with the cluster up and the oracle venv:

    python bench/shards.py                          # N = 60, d = 2, c = 1, S = 10, K = 2
    python bench/shards.py --rows 60 --delay 2 --markdown /tmp/shards.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from tests.realgym.stage import CONFIGS, DATA, prepared_stage  # noqa: E402

RUNS_ROOT = Path("/var/tmp/gymbuild-cluster/runs")
NODES = ("node1", "node2")
PATH_TAIL = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def slow_vllm(directory: Path) -> Path:
    """A copy of the cluster's fake vllm that waits BENCH_ANSWER_SECONDS before each answer."""
    text = (ROOT / "tests" / "cluster" / "bin" / "vllm").read_text()
    hook = "            if not answer_allowed():\n"
    assert text.count(hook) == 1, "the fake vllm changed: find where it answers /v1/responses"
    text = text.replace(
        hook, '            time.sleep(float(os.environ.get("BENCH_ANSWER_SECONDS", "0")))\n' + hook
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vllm").write_text(text)
    (directory / "vllm").chmod(0o755)
    return directory


def write_rows(root: Path, count: int) -> None:
    """`count` distinct tasks of realgym_echo's shape (its prepare.py wrote five)."""
    first = json.loads((root / DATA).read_text().splitlines()[0])
    with (root / DATA).open("w") as out:
        for i in range(count):
            row = json.loads(json.dumps(first))
            row["responses_create_params"]["input"][0]["content"][0]["text"] = (
                f"Question {i}: Reply with \\boxed{{Paris}}."
            )
            out.write(json.dumps(row) + "\n")


def wallclock(job_ids: list[str]) -> tuple[float, float, list[str]]:
    """(the longest job's End - Start, last End - first Start, the jobs' states) in seconds, once every
    job has ended. The first is the wallclock on K allocations that start together; the second also
    holds a shard's wait for its allocation (or a license other users of the cluster hold)."""
    while True:
        out = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-o", "JobID,State,Start,End", "-j", ",".join(job_ids)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        rows = [line.split("|") for line in out]
        if len(rows) == len(job_ids) and all(r[3] not in ("Unknown", "") for r in rows):
            break
        time.sleep(2)
    starts = [datetime.fromisoformat(r[2]) for r in rows]
    ends = [datetime.fromisoformat(r[3]) for r in rows]
    longest = max((end - start).total_seconds() for start, end in zip(starts, ends, strict=True))
    return longest, (max(ends) - min(starts)).total_seconds(), [r[1] for r in rows]


def gymbuild(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["gymbuild", *args], env=env, cwd=cwd, capture_output=True, text=True, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=60)
    parser.add_argument("--delay", type=float, default=2.0, help="seconds per answer")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--startup", type=int, default=10, help="the model's load, seconds")
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--venv", default=os.environ.get("GYMBUILD_NEMO_GYM_VENV", "/opt/nemo-gym-0.7.0"))
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    base = RUNS_ROOT / f"bench-shards-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
    base.mkdir(parents=True)
    stage = prepared_stage(base, Path(args.venv))
    write_rows(stage.root, args.rows)
    slow = slow_vllm(base / "bin")
    common = (
        "only=plain",
        f"+driver.benchmarks.plain.run.num_samples_in_parallel={args.concurrency}",
        f"+services.policy.env.PATH=lit:{slow}:{PATH_TAIL}",
        f"+services.policy.env.BENCH_ANSWER_SECONDS=lit:{args.delay}",
        f"+services.policy.env.FAKE_VLLM_STARTUP_SECONDS=lit:{args.startup}",
        "compute.cluster.walltime=00:30:00",
    )
    config = f"config={CONFIGS / 'vllm.yaml'}"
    home = base / "home"

    def env_for(output: Path) -> dict[str, str]:
        env = {**os.environ, "XDG_CACHE_HOME": str(home / "cache"), "XDG_STATE_HOME": str(home / output.name)}
        return {**env, **stage.environ(output, REALGYM_LIMIT=str(args.rows))}

    # --- unsharded, as gymbuild submits it
    whole_out = base / "whole"
    done = gymbuild("submit", config, *common, "json=1", env=env_for(whole_out), cwd=base)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    whole_ids = [b["job_id"] for b in record["benchmarks"]]
    whole_s, _, whole_states = wallclock(whole_ids)

    # --- sharded, as gymbuild submits it: K jobs, held, then each released on a node of its own
    shard_out = base / "sharded"
    done = gymbuild(
        "submit",
        config,
        *common,
        "json=1",
        f"+driver.benchmarks.plain.shards={args.shards}",
        "+compute.cluster.extra_args.hold=true",
        env=env_for(shard_out),
        cwd=base,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    shard_ids = record["executor_metadata"]["shards.plain"].split(",")
    assert len(shard_ids) == args.shards and all(shard_ids), record
    for k, job in enumerate(shard_ids):
        node = NODES[k % len(NODES)]
        subprocess.run(["scontrol", "update", f"JobId={job}", f"ReqNodeList={node}"], check=True)
    subprocess.run(["scontrol", "release", ",".join(shard_ids)], check=True)
    shard_s, shard_span, shard_states = wallclock(shard_ids)
    merged = Path(record["run_dir"]) / "plain" / "artifacts"
    rows = (
        len((merged / "rollouts.jsonl").read_text().splitlines())
        if (merged / "rollouts.jsonl").exists()
        else 0
    )

    ideal = whole_s / args.shards
    table = [
        "| run | jobs | states | wallclock (s): longest job | first start to last end |",
        "| --- | --- | --- | --- | --- |",
        f"| unsharded | 1 | {','.join(whole_states)} | {whole_s:.0f} | {whole_s:.0f} |",
        f"| shards: {args.shards} | {args.shards} | {','.join(shard_states)} | {shard_s:.0f} "
        f"| {shard_span:.0f} |",
        "",
        f"N = {args.rows} rows, {args.delay} s an answer, {args.concurrency} at a time, "
        f"model load {args.startup} s; "
        f"merged rows {rows}/{args.rows}; sharded / (unsharded / K) = {shard_s / ideal:.2f} (goal <= 1.2)",
    ]
    text = "\n".join(table) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
