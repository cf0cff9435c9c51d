"""The whole `gymbuild compare` verb on N tasks x R repeats: two finished local runs on this machine
(real run directories with gym's files, real records in a local index of their own), timed as whole
processes from the command to the exit. bench/compare.py times the in-process part alone.

    python bench/compare_verb.py setup DIR            # 12,000 x 4: two runs under DIR, prints the env
    python bench/compare_verb.py setup DIR -n 2000 -r 4 --text 2000

    python bench/compare_verb.py run DIR --runs 7                 # the verb against the floor
    python bench/compare_verb.py run DIR --runs 7 --source OLD    # and against another checkout's

`run` makes the runs if DIR has none, byte-compiles the code it measures (as pip install does), then
times whole processes in turn: `gymbuild compare run=A,B max_drop=0.02` of this checkout (and of
--source, first on PYTHONPATH), and the floor, `floor DIR`: start Python and json.loads every line of
both runs' rollouts, the least any reader of these files pays. It prints the medians of wall and CPU
time (user + system, children included) and the ratios, pair by pair (docs/performance.md, "compare").

Each rollout line is shaped as NeMo Gym 0.7.0 writes it (its request, its response with one
assistant message of --text characters and usage, reward, gym's bookkeeping keys), so the reader
cuts what a real file carries: about 1.4 kB a line at the default --text 600.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import compare_helpers  # the tests' maker of finished local runs

A, B = compare_helpers.A, compare_helpers.B
BENCH = "bench"
AGENT = {"name": "bench_simple_agent"}


def row(task: int, repeat: int, reward: float, out_tokens: int, text: str) -> str:
    usage = {"input_tokens": 40, "output_tokens": out_tokens, "total_tokens": 40 + out_tokens}
    message = {
        "id": f"msg_{task}_{repeat}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return json.dumps(
        {
            "_ng_task_index": task,
            "_ng_rollout_index": repeat,
            "agent_ref": AGENT,
            "_ng_environment_server": "bench_env",
            "responses_create_params": {"input": [{"role": "user", "content": f"question {task}"}]},
            "response": {
                "id": f"resp_{task}_{repeat}",
                "created_at": 0,
                "model": "policy",
                "object": "response",
                "output": [message],
                "parallel_tool_calls": False,
                "tool_choice": "auto",
                "tools": [],
                "usage": usage,
            },
            "reward": reward,
            "expected_answer": "A",
            "extracted_answer": "A" if reward else "B",
        }
    )


def write_run(
    home: Path, gym_job_id: str, model: str, tasks: int, repeats: int, passes: float, seed: int, text: int
) -> None:
    """One finished local run of one benchmark, written by tests/compare_helpers.py."""
    rng = random.Random(seed)
    words = ["the", "answer", "follows", "from", "the", "question", "as", "asked"]
    lines, asked = [], []
    for task in range(tasks):
        easy = rng.random()
        for repeat in range(repeats):
            body = " ".join(rng.choice(words) for _ in range(text // 6))[:text]
            reward = float(rng.random() < (easy + passes) / 2)
            lines.append(row(task, repeat, reward, rng.randrange(50, 500), body) + "\n")
            asked.append(
                json.dumps({"_ng_task_index": task, "_ng_rollout_index": repeat, "agent_ref": AGENT}) + "\n"
            )
    aggregate = json.dumps([{"agent_ref": AGENT, "key_metrics": {"mean/reward": passes}}])
    compare_helpers.record(
        home,
        gym_job_id,
        model,
        {BENCH: "".join(lines)},
        materialized={BENCH: "".join(asked)},
        aggregates={BENCH: aggregate},
    )


def floor(home: Path) -> None:
    """What any reader of the two runs' rollouts pays: start Python, read each file, json.loads every line."""
    for gym_job_id in (A, B):
        with open(home / "runs" / gym_job_id / BENCH / "artifacts" / "rollouts.jsonl", "rb") as f:
            for line in f:
                json.loads(line)


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one whole process, its output thrown away."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def run(home: Path, runs: int, source: Path | None) -> None:
    here = Path(__file__).resolve().parent.parent
    # Run from DIR: `python -m` puts the working directory first on sys.path, before PYTHONPATH.
    env = dict(os.environ, XDG_CACHE_HOME=str(home / "xdg-cache"), XDG_STATE_HOME=str(home / "xdg-state"))
    verb = [sys.executable, "-m", "gymbuild.cli.main", "compare", f"run={A},{B}", "max_drop=0.02"]
    sides = {"gymbuild": here} | ({"other": source.resolve()} if source else {})
    commands = {name: (verb, dict(env, PYTHONPATH=str(root))) for name, root in sides.items()}
    commands["floor"] = ([sys.executable, __file__, "floor", str(home)], env)
    for root in sides.values():
        compileall.compile_dir(root / "gymbuild", quiet=1)
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for name, (argv, env_) in commands.items():  # warm (the page cache, the templates), and checked
        done = subprocess.run(argv, env=env_, cwd=home, capture_output=True, text=True, check=False)
        if done.returncode:
            sys.exit(f"{name} exited {done.returncode}: {done.stderr.strip()}")
    for _ in range(runs):
        for name, (argv, env_) in commands.items():
            got[name].append(timed(argv, env_, home))
    print(f"compare of 2 runs ({home}), {runs} runs each, in turn; load {os.getloadavg()[0]:.1f}")
    for name, pairs in got.items():
        walls, cpus = [w for w, _ in pairs], [c for _, c in pairs]
        print(
            f"  {name:8} wall {statistics.median(walls):.3f} s (min {min(walls):.3f}, max {max(walls):.3f})"
            f"  CPU {statistics.median(cpus):.3f} s"
        )
    for other in [n for n in got if n != "gymbuild"]:
        for i, what in ((0, "wall"), (1, "CPU")):
            ratios = [a[i] / b[i] for a, b in zip(got["gymbuild"], got[other], strict=True)]
            print(f"  gymbuild / {other} {what}: {statistics.median(ratios):.2f} (pair by pair, median)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=("setup", "floor", "run"))
    parser.add_argument("dir", type=Path)
    parser.add_argument("-n", type=int, default=12000, help="tasks")
    parser.add_argument("-r", type=int, default=4, help="repeats")
    parser.add_argument("--text", type=int, default=600, help="characters of each answer")
    parser.add_argument("--runs", type=int, default=5, help="run: timed runs of each command")
    parser.add_argument("--source", type=Path, help="run: another checkout's gymbuild to time too")
    opts = parser.parse_args()
    home = opts.dir.resolve()
    if opts.what == "floor":
        floor(home)
        return
    if opts.what == "run":
        if not (home / "runs").exists():
            setup(home, opts)
        run(home, opts.runs, opts.source)
        return
    if (home / "runs").exists():
        sys.exit(f"{home}/runs exists: pick a new directory")
    setup(home, opts)
    print(f"export XDG_CACHE_HOME={home / 'xdg-cache'} XDG_STATE_HOME={home / 'xdg-state'}")
    print(f"gymbuild compare run={A},{B} max_drop=0.02")


def setup(home: Path, opts: argparse.Namespace) -> None:
    write_run(home, A, "Qwen/Qwen3-8B", opts.n, opts.r, 0.5, 1, opts.text)
    write_run(home, B, "Qwen/Qwen3-32B", opts.n, opts.r, 0.48, 2, opts.text)
    os.makedirs(home / "xdg-state", exist_ok=True)


if __name__ == "__main__":
    main()
