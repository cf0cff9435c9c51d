"""NeMo Gym 0.7.0's own `gym eval compare` on two runs' rollouts, for tests/results/test_compare_oracle.py.

    /opt/nemo-gym-0.7.0/bin/python tests/oracle/scripts/compare_runs.py BASE_ROLLOUTS CAND_ROLLOUTS OUT_DIR

Each rollouts.jsonl is first aggregated as a resources server's `/aggregate_metrics` does by default
(nemo_gym.reward_profile.compute_aggregate_metrics, one entry per agent) and written beside it as
`rollouts_aggregate_metrics.json`, in the layout `gym eval run` writes; then `gym eval compare`'s own
code (its CLI entry point, with its config read from the command line as `gym` reads it) writes
OUT_DIR/compare_report.json.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from nemo_gym.reward_profile import compute_aggregate_metrics


def aggregate(rollouts: Path) -> None:
    rows = [json.loads(line) for line in rollouts.read_text().splitlines() if line.strip()]
    by_agent: dict[str, list[dict]] = {}
    for row in rows:
        by_agent.setdefault(row["agent_ref"]["name"], []).append(row)
    entries = []
    for agent, mine in sorted(by_agent.items()):
        got = compute_aggregate_metrics(mine)
        entries.append(
            {
                "agent_ref": {"name": agent},
                "_ng_environment_server": f"{agent}_env",
                "agent_metrics": got.agent_metrics,
                "key_metrics": got.key_metrics,
                "group_level_metrics": got.group_level_metrics,
                "repeat_level_metrics": got.repeat_level_metrics,
            }
        )
    rollouts.with_name("rollouts_aggregate_metrics.json").write_text(json.dumps(entries, indent=2))


def main(base: Path, cand: Path, out: Path) -> None:
    aggregate(base)
    aggregate(cand)
    gym = Path(sys.executable).parent / "gym"
    subprocess.run(
        [
            str(gym),
            "eval",
            "compare",
            "--baseline",
            str(base),
            "--candidates",
            str(cand),
            "--output-dir",
            str(out),
        ],
        check=True,
    )


if __name__ == "__main__":
    main(*(Path(a) for a in sys.argv[1:4]))
