"""`gymbuild compare` against NeMo Gym 0.7.0's own `gym eval compare` on the same files.

Where the method is the same the numbers are the same: NeMo Gym's difference (of the means of
per-repeat means), its Welch interval over per-repeat means, and its per-task flips (a task passes
when most of its repeats do) are what gymbuild reports as gym_delta, gym_ci and gym_task_flips. The
interval gymbuild leads with is its own paired bootstrap, which differs on purpose
(docs/compare.md); here it is only checked to be an interval around the same difference.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from gymbuild.results import compare

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "oracle" / "scripts" / "compare_runs.py"


def _row(agent: str, task: int, repeat: int, reward: float, out_tokens: int) -> dict:
    return {
        "_ng_task_index": task,
        "_ng_rollout_index": repeat,
        "agent_ref": {"name": agent},
        "responses_create_params": {"input": [{"role": "user", "content": f"question {task}"}]},
        "response": {
            "usage": {"input_tokens": 40, "output_tokens": out_tokens, "total_tokens": 40 + out_tokens}
        },
        "reward": reward,
    }


def _rows(seed: int, passes: float) -> list[dict]:
    """12 tasks x 4 repeats of a pass/fail benchmark, each rollout passing with chance `passes`."""
    rng = random.Random(seed)
    return [
        _row("agent", t, r, float(rng.random() < passes), rng.randrange(2, 9))
        for r in range(4)
        for t in range(12)
    ]


@pytest.fixture(scope="module")
def both(nemo_gym, tmp_path_factory) -> tuple[dict, compare.AgentDiff]:
    root = tmp_path_factory.mktemp("compare-oracle")
    texts = {}
    for name, seed, passes in (("base", 1, 0.5), ("cand", 2, 0.7)):
        path = root / name / "rollouts.jsonl"
        path.parent.mkdir()
        texts[name] = "".join(json.dumps(r) + "\n" for r in _rows(seed, passes))
        path.write_text(texts[name])
    done = subprocess.run(
        [
            str(nemo_gym.python),
            str(SCRIPT),
            str(root / "base" / "rollouts.jsonl"),
            str(root / "cand" / "rollouts.jsonl"),
            str(root / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,  # gym writes an outputs/ directory where it runs
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((root / "out" / "compare_report.json").read_text())
    sides = [compare.parse_side({compare.ROLLOUTS_FILE: texts[n]}) for n in ("base", "cand")]
    assert sides[0] is not None and sides[1] is not None
    (ours,), skipped = compare.diff_benchmark("b", sides[0], sides[1])
    assert skipped == []
    return report, ours


def test_nemo_gyms_difference_and_welch_interval_are_ours_on_the_same_files(both) -> None:
    report, ours = both
    (theirs,) = report["comparisons"]
    rows = {row["metric"]: row for row in theirs["metrics"]}
    checked = 0
    for m in ours.metrics:
        cand = rows[m.metric]["candidates"][0]
        assert m.gym_delta == pytest.approx(cand["delta"], abs=1e-12), m.metric
        assert m.gym_ci is not None and cand["delta_ci_low"] is not None, m.metric
        assert m.gym_ci[0] == pytest.approx(cand["delta_ci_low"], rel=1e-9, abs=1e-12), m.metric
        assert m.gym_ci[1] == pytest.approx(cand["delta_ci_high"], rel=1e-9, abs=1e-12), m.metric
        checked += 1
    assert checked == 4  # reward and the three token counts
    # Complete runs on the same tasks: the paired difference is NeMo Gym's difference too.
    reward = next(m for m in ours.metrics if m.metric == "mean/reward")
    assert reward.delta == pytest.approx(rows["mean/reward"]["candidates"][0]["delta"], abs=1e-12)
    assert reward.ci[0] <= reward.delta <= reward.ci[1]


def test_nemo_gyms_per_task_flips_are_ours(both) -> None:
    report, ours = both
    (flips,) = report["comparisons"][0]["flips"]
    assert flips["mode"] == "binary"
    reward = next(m for m in ours.metrics if m.metric == "mean/reward")
    assert reward.gym_task_flips == (flips["fail_to_pass_count"], flips["pass_to_fail_count"])
    assert reward.pass_to_fail is not None and reward.fail_to_pass is not None
    # Per pair there are at least as many flips as per task (a task's majority hides some).
    assert reward.pass_to_fail + reward.fail_to_pass >= sum(reward.gym_task_flips)
