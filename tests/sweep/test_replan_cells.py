"""A sweep's resubmit shows each combination's plan (day_two/replan.py), as a resubmit of one
submission does, and queues exactly what the plans say: real `gymbuild` subprocesses under the local
executor, real jobs that write gym's row files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from e2e_helpers import gymbuild, kill_local_jobs, local_command_config, user_env, write_config
from promises_helpers import wait_until

# Writes $ROWS of 4 rows as gym does, then fails: ROWS=4 is complete, ROWS=1 is not.
COMMAND = (
    'a="$NEMO_GYM_BENCH_DIR/artifacts"; mkdir -p "$a"; '
    'seq 4 > "$a/rollouts_materialized_inputs.jsonl"; seq "$ROWS" > "$a/rollouts.jsonl"; exit 3'
)


def test_a_sweeps_resubmit_plans_each_combination_and_queues_what_they_say(tmp_path: Path) -> None:
    config = write_config(tmp_path, local_command_config(COMMAND), "sweep.yaml")
    line = (f"config={config}", "multirun=1", "+driver.env.ROWS=lit:1,lit:4")
    env = user_env(tmp_path)

    def run(*args: str) -> Any:
        done = gymbuild(*args, *line, cwd=tmp_path, env=env, timeout=120)
        assert done.rc == 0, f"{args}:\n{done.stdout}\n{done.stderr}"
        return done

    def cells() -> dict[str, dict[str, Any]]:
        found = json.loads(run("status", "json=1").stdout)["cells"]
        return {c["label"]: c["status"]["benchmarks"][0] for c in found}

    try:
        run("submit")
        wait_until(
            lambda: all(c["state"] == "FAILED" for c in cells().values()) or None, "both combinations failed"
        )
        before = {label: c["job_id"] for label, c in cells().items()}
        dry = json.loads(run("resubmit", "--dry-run", "json=1").stdout)["cells"]
        plans = {c["label"]: c["resubmit"]["plan"] for c in dry}
        assert sorted(p["queued"] for p in plans.values()) == [[], ["demo"]]
        (partial,) = [label for label, p in plans.items() if p["queued"]]
        (complete,) = [label for label in plans if label != partial]
        assert plans[complete]["benchmarks"][0]["rows"]["scored"] == 4
        assert plans[partial]["benchmarks"][0]["rows"]["scored"] == 1
        assert {label: c["job_id"] for label, c in cells().items()} == before  # the dry run queued nothing

        out = run("resubmit").stdout
        heads = [x for x in out.splitlines() if x.startswith("plan for ")]
        assert sorted(h.split(": ", 1)[1].split(",")[0] for h in heads) == [
            "queue 0 of 1 benchmark(s)",
            "queue 1 of 1 benchmark(s)",
        ]
        assert "  demo: FAILED (job " in out and "-> nothing: complete: every row is scored" in out
        after = {label: c["job_id"] for label, c in cells().items()}
        assert after[complete] == before[complete] and after[partial] != before[partial]
    finally:
        kill_local_jobs(tmp_path / "runs")
