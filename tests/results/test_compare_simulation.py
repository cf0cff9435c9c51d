"""The gate validated by simulation, in process and seeded, so every run of the suite
sees the same datasets and the same figures (docs/compare.md quotes them).

Each dataset is a benchmark of pass/fail tasks with task-level heterogeneity: every task has its own
pass rate (some easy, some hard), and the candidate's own change on it (better on some tasks, worse on
others: the true drop is the mean of those changes), so the repeats of one task move together, as a
real benchmark's do, and counting them as independent pairs understates the uncertainty. Each
dataset goes through the comparison (compare.diff_agent: pairing, the task deltas, the statistics)
and the gate (gate.judge).
"""

from __future__ import annotations

import random

import pytest
from scipy import stats as scipy_stats

from gymbuild.results import compare, gate, stats

AGENT = "agent"


def benchmark(rng: random.Random, tasks: int, repeats: int, drop: float) -> tuple[compare.Side, compare.Side]:
    """Two sides of one benchmark: per task a pass rate in [0.5, 0.7] (the baseline's), the
    candidate's `drop` lower, then 0.3 higher or lower (a coin per task, mean 0: so the mean change is
    exactly -drop, and no rate leaves [0, 1] for drop <= 0.2); each repeat a pass (1.0) or a fail at
    its rate."""
    base: dict[compare.Key, dict[str, float]] = {}
    cand: dict[compare.Key, dict[str, float]] = {}
    for task in range(tasks):
        rate = rng.uniform(0.5, 0.7)
        moved = rate - drop + rng.choice((-0.3, 0.3))
        for repeat in range(repeats):
            base[(task, repeat)] = {compare.REWARD: float(rng.random() < rate)}
            cand[(task, repeat)] = {compare.REWARD: float(rng.random() < moved)}
    return compare.Side({AGENT: base}, None, None), compare.Side({AGENT: cand}, None, None)


def verdicts(
    seed: int, runs: int, tasks: int, repeats: int, drop: float, max_drop: float
) -> list[gate.Verdict]:
    rng = random.Random(seed)
    out = []
    for _ in range(runs):
        a = compare.diff_agent("sim", AGENT, *benchmark(rng, tasks, repeats, drop))
        m = a.metric(a.primary)
        assert m is not None
        out.append(gate.judge("sim", AGENT, a.primary, m.evidence, max_drop))
    return out


def share(found: list[gate.Verdict], outcome: gate.Outcome) -> float:
    return sum(v.outcome is outcome for v in found) / len(found)


def test_under_a_true_null_the_p_values_are_uniform_and_a_drop_is_rarely_claimed() -> None:
    """300 datasets of 100 tasks x 8 repeats, no change. A one-sided gate at max_drop=0 (DROP when the
    interval lies below 0) is the hardest null to keep: its false DROP rate is 2.5% by design."""
    rng = random.Random(44)
    p_values, naive, drops = [], [], 0
    for _ in range(300):
        a = compare.diff_agent("sim", AGENT, *benchmark(rng, 100, 8, 0.0))
        m = a.metric(compare.REWARD)
        assert m is not None and m.p_value is not None
        p_values.append(m.p_value)
        drops += gate.judge("sim", AGENT, m.metric, m.evidence, 0.0).outcome is gate.Outcome.DROP
        # What compare did before: McNemar over every (task, repeat) pair, as if independent.
        assert m.pass_to_fail is not None and m.fail_to_pass is not None
        naive.append(stats.mcnemar(m.pass_to_fail, m.fail_to_pass))
    assert drops / 300 <= 0.05
    assert scipy_stats.kstest(p_values, "uniform").pvalue > 0.01
    assert sum(p < 0.05 for p in p_values) / 300 <= 0.07
    # The heterogeneity is real enough to matter: McNemar over every pair, as compare did before,
    # claims a change (p < 0.05) far more often than 5% on the same data.
    assert sum(p < 0.05 for p in naive) / 300 > 0.10


def test_a_true_drop_of_twice_max_drop_on_200_tasks_is_a_drop_at_least_80_percent_of_the_time() -> None:
    found = verdicts(seed=7, runs=100, tasks=200, repeats=8, drop=0.2, max_drop=0.1)
    assert share(found, gate.Outcome.DROP) >= 0.8
    assert share(found, gate.Outcome.PASS) == 0  # a drop of 0.2 is never passed as under 0.1


def test_with_three_tasks_the_gate_is_inconclusive_and_says_how_many_would_do() -> None:
    found = verdicts(seed=3, runs=100, tasks=3, repeats=8, drop=0.2, max_drop=0.1)
    assert share(found, gate.Outcome.INCONCLUSIVE) == 1
    assert all(v.tasks_needed == gate.MIN_TASKS and "needs 10 or more" in v.reason for v in found)
    # Past the minimum, an undecided gate says what these tasks detect and what would settle it.
    found = verdicts(seed=3, runs=20, tasks=12, repeats=8, drop=0.2, max_drop=0.1)
    unsure = [v for v in found if v.outcome is gate.Outcome.INCONCLUSIVE]
    assert unsure and all("80% power" in v.reason for v in unsure)
    assert all(v.tasks_needed is not None and v.tasks_needed > 12 for v in unsure)


def test_no_change_on_many_tasks_passes_a_generous_margin() -> None:
    """The other side of non-inferiority: enough tasks rule out a drop of max_drop when there is none."""
    found = verdicts(seed=11, runs=50, tasks=400, repeats=8, drop=0.0, max_drop=0.1)
    assert share(found, gate.Outcome.PASS) >= 0.9


def test_the_statistics_agree_with_their_closed_forms() -> None:
    """Without scipy: the t interval from a t table value, the detectable effect from the normal
    approximation at large n, the bootstrap close to the t interval where the CLT holds."""
    deltas = [0.5, -0.25, 0.0, 0.25, -0.5, 0.75, 0.0, -0.25, 0.25, 0.5]
    ev = stats.evidence(deltas, bounded=True)
    n, mean = len(deltas), sum(deltas) / len(deltas)
    sd = (sum((d - mean) ** 2 for d in deltas) / (n - 1)) ** 0.5
    t_975_9 = 2.262157162798205  # Student's t, 0.975 quantile, 9 degrees of freedom (tables)
    assert ev.estimate == pytest.approx(mean, rel=1e-12)
    assert ev.interval == pytest.approx(
        (mean - t_975_9 * sd / n**0.5, mean + t_975_9 * sd / n**0.5), rel=1e-12
    )
    # (z_0.975 + z_0.8) * s / sqrt(n) at n = 10,000: the t quantiles are the normal's to 1e-4.
    assert stats.detectable(1.0, 10_000) == pytest.approx((1.959964 + 0.841621) / 100, rel=1e-3)
    rng = random.Random(5)
    many = [rng.gauss(0, 1) for _ in range(2000)]
    ev = stats.evidence(many, bounded=False, bootstrap=True)
    assert ev.boot_interval is not None and ev.t_interval is not None
    assert ev.boot_interval == pytest.approx(ev.t_interval, abs=0.01)
