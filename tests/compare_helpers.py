"""Two finished local runs for `gymbuild compare` to read (tests/results/test_compare*.py): real run
directories with gym's files, real records in the local index, and the exit file the local executor's
status reads, so a job can be COMPLETED, FAILED (it crashed: no exit file, no process) or partial."""

from __future__ import annotations

import json
from pathlib import Path

from gymbuild.results import compare


def rollouts(scores: dict[int, list[int]], agent: str = "agent", tokens: int | None = None) -> str:
    """rollouts.jsonl of one agent: per task, a reward per repeat."""
    rows = []
    for task, repeats in scores.items():
        for repeat, reward in enumerate(repeats):
            row: dict = {"_ng_task_index": task, "_ng_rollout_index": repeat, "agent_ref": {"name": agent}}
            row["reward"] = float(reward)
            if tokens is not None:
                row["response"] = {"usage": {"output_tokens": tokens + task, "input_tokens": 40}}
            rows.append(json.dumps(row) + "\n")
    return "".join(rows)


def asked(scores: dict[int, list[int]], agent: str = "agent") -> str:
    """rollouts_materialized_inputs.jsonl of one agent: a line per (task, repeat) asked for, naming
    the agent as gym's materialized inputs do."""
    return "".join(
        json.dumps({"_ng_task_index": t, "_ng_rollout_index": r, "agent_ref": {"name": agent}}) + "\n"
        for t, repeats in scores.items()
        for r in range(len(repeats))
    )


def record(
    home: Path,
    gym_job_id: str,
    model: str,
    benches: dict[str, str | None],
    *,
    expected: dict[str, int] | None = None,
    crashed: tuple[str, ...] = (),
    materialized: dict[str, str] | None = None,
    aggregates: dict[str, str] | None = None,
) -> None:
    """A local submission: its run directory and its record in the local index. Per benchmark its
    rollouts.jsonl (None: none written), asked for `expected[bench]` rollouts (default: as many as
    written), or the materialized inputs `materialized[bench]` as written, and gym's aggregate
    `aggregates[bench]` if given; a benchmark in `crashed` has no exit file (its job is gone: FAILED),
    the others exit 0."""
    run_dir = home / "runs" / gym_job_id
    run_dir.mkdir(parents=True)
    (run_dir / "resolved-config.yaml").write_text(
        f"services: {{policy: {{type: vllm, model: {model}}}}}\ndriver: {{policy_model: policy}}\n"
    )
    jobs = []
    for bench, text in benches.items():
        artifacts = run_dir / bench / "artifacts"
        artifacts.mkdir(parents=True)
        lines = len(text.splitlines()) if text is not None else 0
        if text is not None:
            (artifacts / compare.ROLLOUTS_FILE).write_text(text)
        count = (expected or {}).get(bench, lines)
        text_asked = (materialized or {}).get(bench, "{}\n" * count)
        (artifacts / compare.MATERIALIZED_FILE).write_text(text_asked)
        if bench in (aggregates or {}):
            (artifacts / compare.AGGREGATE_FILE).write_text((aggregates or {})[bench])
        if bench not in crashed:
            (run_dir / bench / ".gym_exit-1").write_text("0\n")
        jobs.append({"benchmark": bench, "job_dir": str(run_dir / bench), "job_id": "1", "error": None})
    doc = {
        "gym_job_id": gym_job_id,
        "gym_version": "0.7.0",
        "submitted_at": "2026-01-01T00:00:00Z",
        "run_dir": str(run_dir),
        "cluster": "workstation",
        "executor": "local",
        "hostname": None,
        "submitted_by": "me",
        "benchmarks": jobs,
        "executor_metadata": {},
        "schema_version": 1,
    }
    index = home / "xdg-cache" / "nemo-gym" / "jobs"
    index.mkdir(parents=True, exist_ok=True)
    (index / f"{gym_job_id}.json").write_text(json.dumps(doc))


A, B = "gym-job-20260101T000000Z-aaaaaa", "gym-job-20260102T000000Z-bbbbbb"


def agent_diff(
    bench: str, baseline: float, delta: float, width: float, tasks: int = 200, metric: str = "mean/reward"
) -> compare.AgentDiff:
    """One agent's diff as compare.py makes it, for the pure gate tests: `tasks` tasks whose mean
    difference is `delta` with a 95% interval of +-`width`."""
    m = compare.MetricDiff(
        metric,
        tasks,
        tasks,
        baseline,
        baseline + delta,
        delta,
        (delta - width, delta + width),
        binary=False,
        detectable=width,
        spread=0.2,
    )
    return compare.AgentDiff(bench, "agent", tasks, tasks, tasks, tasks, tasks, (m,), primary=metric)


def comparison_of(*agents: compare.AgentDiff) -> compare.Comparison:
    """The comparison of these agents' benchmarks, each asked for and compared in full."""
    return compare.Comparison("A", "B", "ida", "idb", agents, benchmarks=tuple(a.benchmark for a in agents))
