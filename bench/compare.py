"""`gymbuild compare`'s own cost, in process: parse two runs' rollouts, pair them, the statistics and
the gate, on N tasks x R repeats (pass/fail reward plus three token counts), against a floor that only
json-parses the same lines (the least any reader of these files pays). Timing lives here, never in the
tests (bench/README.md). docs/compare.md has the latest figures.

    python bench/compare.py                     # 12,000 x 4, 3 runs
    python bench/compare.py -n 2000 -r 4 --runs 5
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from gymbuild.results import compare, gate


def rollouts(tasks: int, repeats: int, passes: float, seed: int) -> str:
    rng = random.Random(seed)
    rows = []
    for task in range(tasks):
        easy = rng.random()
        for repeat in range(repeats):
            row = {
                "_ng_task_index": task,
                "_ng_rollout_index": repeat,
                "agent_ref": {"name": "agent"},
                "reward": float(rng.random() < (easy + passes) / 2),
                "response": {"usage": {"input_tokens": 40, "output_tokens": rng.randrange(50, 500)}},
            }
            row["response"]["usage"]["total_tokens"] = 40 + row["response"]["usage"]["output_tokens"]
            rows.append(json.dumps(row) + "\n")
    return "".join(rows)


def measure(base: str, cand: str) -> float:
    start = time.perf_counter()
    b = compare.parse_side({compare.ROLLOUTS_FILE: base})
    c = compare.parse_side({compare.ROLLOUTS_FILE: cand})
    assert b is not None and c is not None
    agents, _ = compare.diff_benchmark("bench", b, c)
    comparison = compare.Comparison("A", "B", "a", "b", tuple(agents), benchmarks=("bench",))
    gate.verdicts(comparison, 0.02)
    return time.perf_counter() - start


def floor(base: str, cand: str) -> float:
    start = time.perf_counter()
    for text in (base, cand):
        for line in text.splitlines():
            json.loads(line)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=12000, help="tasks")
    parser.add_argument("-r", type=int, default=4, help="repeats")
    parser.add_argument("--runs", type=int, default=3)
    opts = parser.parse_args()
    base, cand = rollouts(opts.n, opts.r, 0.5, 1), rollouts(opts.n, opts.r, 0.48, 2)
    measure(base, cand)  # warm: scipy's import and first calls
    ours, least = [], []
    for _ in range(opts.runs):
        ours.append(measure(base, cand))
        least.append(floor(base, cand))
    o, f = statistics.median(ours), statistics.median(least)
    print(f"compare {opts.n} tasks x {opts.r} repeats, 4 metrics, median of {opts.runs}:")
    print(f"  gymbuild (parse, pair, statistics, gate): {o:.2f} s (min {min(ours):.2f}, max {max(ours):.2f})")
    print(f"  floor (json.loads of the same lines):     {f:.2f} s")
    print(f"  ratio: {o / f:.1f}x")


if __name__ == "__main__":
    main()
