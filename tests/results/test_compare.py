"""`gymbuild compare`: two runs paired by task and repeat, with exact numbers for small cases a reader
can check by hand, and the verb end to end on this machine (records in the local index, run
directories in tmp_path, read through the local connection's one round trip)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from compare_helpers import A, B, record, rollouts
from e2e_helpers import gymbuild, user_env

from gymbuild.results import compare, compare_text, gate, stats

# 4 tasks x 2 repeats. Pairs (task, repeat): t1r0 and t3r0 go pass->fail, t2r1 fail->pass.
BASE = {0: [1, 1], 1: [1, 0], 2: [0, 0], 3: [1, 1]}
CAND = {0: [1, 1], 1: [0, 0], 2: [0, 1], 3: [0, 1]}


def side(scores: dict[int, list[int]], **files: str) -> compare.Side:
    got = compare.parse_side({compare.ROLLOUTS_FILE: rollouts(scores), **files})
    assert got is not None
    return got


def reward(a: compare.AgentDiff) -> compare.MetricDiff:
    return next(m for m in a.metrics if m.metric == compare.REWARD)


T_975_3 = 3.182446305284263  # Student's t, 0.975 quantile, 3 degrees of freedom (tables; scipy agrees)


def test_a_small_pass_fail_comparison_has_the_numbers_worked_by_hand() -> None:
    (a,), skipped = compare.diff_benchmark("quiz", side(BASE), side(CAND))
    m = reward(a)
    assert skipped == [] and a.pairs == m.pairs == 8 and m.tasks == 4 and a.primary == compare.REWARD
    # Task deltas (each task's mean over its 2 paired repeats): 0, -0.5, +0.5, -0.5.
    assert (m.baseline, m.candidate, m.delta) == (0.625, 0.5, -0.125)
    spread = math.sqrt((0.125**2 + 0.375**2 + 0.625**2 + 0.375**2) / 3)
    assert m.spread == pytest.approx(spread, rel=1e-12)
    half = T_975_3 * spread / 2  # t * s / sqrt(4)
    assert m.ci == pytest.approx((-0.125 - half, -0.125 + half), rel=1e-12)
    assert m.binary and (m.pass_to_fail, m.fail_to_pass) == (2, 1)
    assert m.mcnemar is None  # two repeats a task: the pairs are not independent, no McNemar
    # NeMo Gym's method on the same rows: per-repeat means 0.75, 0.5 against 0.25, 0.75 (scipy's Welch).
    assert m.gym_delta == -0.125
    assert m.gym_ci == pytest.approx((-1.854630707517766, 1.604630707517766), rel=1e-12)
    assert m.gym_task_flips == (0, 0)  # every task that moved has a tie (mean 0.5) on one side


def test_mcnemar_is_the_exact_binomial_test_of_the_flips_and_only_for_one_repeat_a_task() -> None:
    assert stats.mcnemar(0, 0) == 1.0
    assert stats.mcnemar(0, 6) == pytest.approx(2 / 64, rel=1e-12)
    assert stats.mcnemar(10, 3) == pytest.approx(2 * 378 / 2**13, rel=1e-12)  # C(13,0..3) = 1+13+78+286
    assert stats.mcnemar(3, 10) == stats.mcnemar(10, 3)
    assert stats.mcnemar(30_000, 30_000) == 1.0  # 60,000 flips: one CDF call, not a sum over them
    one = {t: [1] for t in range(10)}
    flipped = {t: [0] if t < 6 else [1] for t in range(10)}
    (a,), _ = compare.diff_benchmark("quiz", side(one), side(flipped))
    assert reward(a).mcnemar == pytest.approx(2 / 64, rel=1e-12)


def test_with_every_task_delta_equal_the_interval_is_the_rule_of_three_not_zero_width() -> None:
    # Three identical pass/fail tasks say little: a t interval of zero width would pass any gate.
    assert stats.zero_spread_bound(3) == pytest.approx(1 - 0.025 ** (1 / 3), rel=1e-12)
    (a,), _ = compare.diff_benchmark(
        "quiz", side({t: [1] for t in range(3)}), side({t: [1] for t in range(3)})
    )
    low, high = reward(a).ci or (0, 0)
    assert low < -0.7 and high > 0.7
    # Three tasks that all failed where they passed: no spread, so the sign test (2 / 2^3), not p = 0,
    # and an interval that stays within the [-1, 1] a difference of pass/fail scores can take.
    moved = stats.evidence([-1.0, -1.0, -1.0], bounded=True)
    assert moved.p_value == 0.25 and moved.interval == (-1.0, pytest.approx(-1 + stats.zero_spread_bound(3)))


def test_a_clear_drop_fails_the_gate_and_a_small_one_within_the_noise_does_not() -> None:
    tasks = range(50)
    base = {t: [1, 1] for t in tasks}
    cand = {t: [0, 0] if t % 5 < 2 else [1, 1] for t in tasks}  # 40% of tasks now fail
    (a,), _ = compare.diff_benchmark("quiz", side(base), side(cand))
    c = compare.Comparison("A", "B", "a", "b", (a,), benchmarks=("quiz",))
    m = reward(a)
    assert m.delta == -0.4 and m.ci is not None and m.ci[1] < -0.2
    assert m.p_value is not None and m.p_value < 1e-5  # 50 tasks, not 100 independent pairs
    (v,) = gate.verdicts(c, 0.2)
    assert (v.outcome, v.metric, v.tasks, v.estimate) == (gate.Outcome.DROP, "mean/reward", 50, -0.4)
    (v,) = gate.verdicts(c, 0.7)
    assert v.outcome is gate.Outcome.PASS
    (v,) = gate.verdicts(c, 0.5)  # the interval straddles -0.5: neither ruled out nor shown
    assert v.outcome is gate.Outcome.INCONCLUSIVE and v.tasks_needed is not None and v.tasks_needed > 50
    one = {t: [0, 0] if t == 0 else [1, 1] for t in tasks}  # one task of fifty: could be noise
    (small,), _ = compare.diff_benchmark("quiz", side(base), side(one))
    (v,) = gate.verdicts(compare.Comparison("A", "B", "a", "b", (small,), benchmarks=("quiz",)), 0.0)
    assert v.outcome is gate.Outcome.INCONCLUSIVE
    # The same files give the same interval on every call (the bootstrap's seed is fixed).
    assert compare.diff_benchmark("quiz", side(base), side(one))[0][0].metrics == small.metrics


def test_a_partial_side_is_said_and_only_pairs_are_compared() -> None:
    # The candidate was asked for 8 rollouts (materialized inputs), scored 6, failed 2; its last
    # line was cut short when the job was killed.
    cand = rollouts({0: [1, 1], 1: [0, 0], 2: [0, 1]}) + '{"_ng_task_index": 3, "_ng_rol'
    files = {compare.MATERIALIZED_FILE: "{}\n" * 8, compare.FAILURES_FILE: "{}\n{}\n"}
    c_side = compare.parse_side({compare.ROLLOUTS_FILE: cand, **files})
    assert c_side is not None and (c_side.scored, c_side.expected, c_side.failed, c_side.partial) == (
        6,
        8,
        2,
        True,
    )
    (a,), _ = compare.diff_benchmark("quiz", side(BASE), c_side)
    assert a.pairs == 6 and (reward(a).baseline, reward(a).candidate) == (0.5, 0.5)
    assert a.notes == (
        "2 baseline rollout(s) have no partner in the other run and are left out",
        "candidate is partial: 6/8 rollouts scored",
    )
    assert a.partial == ("candidate",)
    text = compare_text.format_table(compare.Comparison("A", "B", "a", "b", (a,)))
    assert "8 6/8 PARTIAL" in text
    assert "quiz (agent): candidate is partial: 6/8 rollouts scored" in text


def test_token_counts_are_compared_as_numbers_without_flips() -> None:
    base = compare.parse_side({compare.ROLLOUTS_FILE: rollouts(BASE, tokens=10)})
    cand = compare.parse_side({compare.ROLLOUTS_FILE: rollouts(CAND, tokens=12)})
    assert base is not None and cand is not None
    (a,), _ = compare.diff_benchmark("quiz", base, cand)
    assert [m.metric for m in a.metrics] == ["mean/reward", "mean/input_tokens", "mean/output_tokens"]
    out = a.metrics[2]
    # Every task's delta is +2 tokens: no spread, and tokens are no [0, 1] score, so no widening.
    assert (out.delta, out.ci, out.binary, out.pass_to_fail, out.mcnemar) == (
        2.0,
        (2.0, 2.0),
        False,
        None,
        None,
    )


def test_an_agent_only_one_run_has_is_named_not_compared() -> None:
    both = compare.parse_side({compare.ROLLOUTS_FILE: rollouts(BASE) + rollouts(BASE, agent="other")})
    assert both is not None
    agents, skipped = compare.diff_benchmark("quiz", both, side(CAND))
    assert [a.agent for a in agents] == ["agent"]
    assert skipped == ["quiz: agent other is only in the baseline"]


# --- the verb, on this machine ---------------------------------------------------------------------


def test_compare_prints_the_paired_table_and_gates_on_max_drop(tmp_path: Path) -> None:
    drop = {t: [0, 0] if t % 5 < 2 else [1, 1] for t in range(50)}
    same = {t: [1, 0] for t in range(200)}  # no task moves, and 200 of them rule out a drop of 0.2
    record(
        tmp_path,
        A,
        "Qwen/Qwen3-8B",
        {"quiz": rollouts({t: [1, 1] for t in range(50)}), "same": rollouts(same)},
    )
    record(tmp_path, B, "Qwen/Qwen3-32B", {"quiz": rollouts(drop), "same": rollouts(same)})
    env = user_env(tmp_path)
    rc, out, err = gymbuild("compare", f"run={A},{B}", cwd=tmp_path, env=env, timeout=120)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == "compare Qwen/Qwen3-8B (baseline) -> Qwen/Qwen3-32B (candidate)"
    quiz = next(line.split() for line in lines if line.startswith("quiz"))
    assert quiz[:6] == ["quiz", "agent", "mean/reward*", "1", "0.6", "-0.4"]
    assert quiz[-5:] == ["50", quiz[-4], "40/0", "100/100", "100/100"]  # tasks, MDE, flips, coverage
    rc, out, err = gymbuild("compare", f"run={A},{B}", "max_drop=0.2", cwd=tmp_path, env=env, timeout=120)
    assert rc == 1 and "DROP quiz (agent) mean/reward -0.4" in err and "same" not in err
    assert "Traceback" not in err and out.startswith("compare ") and "gate: DROP (exit 1)" in out
    rc, out, err = gymbuild(
        "compare", f"run={A},{B}", "max_drop=0.7", "json=1", cwd=tmp_path, env=env, timeout=120
    )
    assert rc == 0, err
    data = json.loads(out)
    assert data["dropped"] == [] and [a["benchmark"] for a in data["agents"]] == ["quiz", "same"]
    assert (data["verdict"], data["exit_status"]) == ("pass", 0)
    assert [(v["benchmark"], v["outcome"], v["metric"]) for v in data["verdicts"]] == [
        ("quiz", "PASS", "mean/reward"),
        ("same", "PASS", "mean/reward"),
    ]
    assert data["agents"][0]["metrics"][0]["pass_to_fail"] == 40


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((f"run={A}",), "compare compares two runs"),
        ((f"run={A},{B}", "max_drop=lots"), "max_drop=lots is not a difference"),
        ((f"run={A},{B}", "max_drop=-0.1"), "max_drop=-0.1 is not a difference"),
        ((f"run={A},{B}", "max_drop=nan"), "max_drop=nan is not a difference"),
        ((f"run={A},gym-job-20260103T000000Z-cccccc", "max_drop=0.1"), "gym-job-20260103T000000Z-cccccc"),
        ((f"run={A},{B}", "max_drop=0.1", "only=qiuz"), "only= names benchmark(s) neither run has: qiuz"),
        ((f"run={A},{B}", "max_drop=0.1", "metric=acuracy"), "metric=acuracy names no metric"),
    ],
)
def test_an_argument_the_gate_cannot_use_is_one_message_and_exit_64(
    tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    """Never 0, 1 or 2: a CI step must not read a typo as a pass, a drop or an undecided gate."""
    record(tmp_path, A, "m1", {"quiz": rollouts(BASE)})
    record(tmp_path, B, "m2", {"quiz": rollouts(CAND)})
    rc, out, err = gymbuild("compare", *args, cwd=tmp_path, env=user_env(tmp_path), timeout=120)
    assert rc == gate.USAGE_STATUS == 64, (rc, err)
    assert says in err and "Traceback" not in err and out == ""
