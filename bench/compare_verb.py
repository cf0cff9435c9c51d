"""The whole `gymbuild compare` verb on N tasks x R repeats: two finished local runs on this machine
(real run directories with gym's files, real records in a local index of their own), timed as whole
processes from the command to the exit. bench/compare.py times the in-process part alone.

    python bench/compare_verb.py setup DIR            # 12,000 x 4: two runs under DIR, prints the env
    python bench/compare_verb.py setup DIR -n 2000 -r 4 --text 2000

Then, with the printed XDG_CACHE_HOME and XDG_STATE_HOME exported, time (whole processes, several
runs, against the floor; docs/performance.md, "compare"):

    gymbuild compare run=gym-job-20260101T000000Z-aaaaaa,gym-job-20260102T000000Z-bbbbbb max_drop=0.02
    python bench/compare_verb.py floor DIR    # the floor: json.loads of both runs' rollouts lines

Each rollout line is shaped as NeMo Gym 0.7.0 writes it (its request, its response with one
assistant message of --text characters and usage, reward, gym's bookkeeping keys), so the reader
cuts what a real file carries: about 1.4 kB a line at the default --text 600.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=("setup", "floor"))
    parser.add_argument("dir", type=Path)
    parser.add_argument("-n", type=int, default=12000, help="tasks")
    parser.add_argument("-r", type=int, default=4, help="repeats")
    parser.add_argument("--text", type=int, default=600, help="characters of each answer")
    opts = parser.parse_args()
    home = opts.dir.resolve()
    if opts.what == "floor":
        floor(home)
        return
    if (home / "runs").exists():
        sys.exit(f"{home}/runs exists: pick a new directory")
    write_run(home, A, "Qwen/Qwen3-8B", opts.n, opts.r, 0.5, 1, opts.text)
    write_run(home, B, "Qwen/Qwen3-32B", opts.n, opts.r, 0.48, 2, opts.text)
    os.makedirs(home / "xdg-state", exist_ok=True)
    print(f"export XDG_CACHE_HOME={home / 'xdg-cache'} XDG_STATE_HOME={home / 'xdg-state'}")
    print(f"gymbuild compare run={A},{B} max_drop=0.02")


if __name__ == "__main__":
    main()
