"""choose.py, searched: every checkpoint of a sweep gated against a baseline, the best non-inferior
one chosen, and its interval against the runner-up the paired interval compare gives the two.

The comparisons are real: each checkpoint's rollouts (a reward per task) paired with the baseline's by
compare.diff_benchmark, the verdicts gate.verdicts', as the sweep's edge builds them from the files.
"""

from __future__ import annotations

import random

import pytest
from compare_helpers import rollouts
from hypothesis import given, settings
from hypothesis import strategies as st

from gymbuild.results import choose, compare, gate

TASKS = 40


def side(rewards: list[int]) -> compare.Side:
    got = compare.parse_side({compare.ROLLOUTS_FILE: rollouts({t: [r] for t, r in enumerate(rewards)})})
    assert got is not None
    return got


def comparison(base: list[int], cand: list[int], ids: tuple[str, str]) -> compare.Comparison:
    agents, _ = compare.diff_benchmark("quiz", side(base), side(cand))
    return compare.Comparison(ids[0], ids[1], ids[0], ids[1], tuple(agents), benchmarks=("quiz",))


def sweep(
    base: list[int], cells: list[list[int]], max_drop: float
) -> tuple[list[choose.Checkpoint], dict[str, list[int]]]:
    rewards = {f"ckpt-{i}": r for i, r in enumerate(cells)}
    out = []
    for i, (ident, r) in enumerate(rewards.items()):
        verdicts = tuple(gate.verdicts(comparison(base, r, ("base", ident)), max_drop))
        out.append(choose.Checkpoint(f"step_{i * 100}", i * 100, ident, verdicts, gate.overall(verdicts)))
    return out, rewards


def chosen_of(cells: list[choose.Checkpoint], rewards: dict[str, list[int]]) -> choose.Choice:
    return choose.choose(
        "base",
        cells,
        lambda a, b: comparison(rewards[a.gym_job_id], rewards[b.gym_job_id], (a.gym_job_id, b.gym_job_id)),
    )


def near(base: list[int], flips: list[int]) -> list[int]:
    """The baseline with the tasks `flips` names flipped (a checkpoint close to it)."""
    return [1 - r if t in flips else r for t, r in enumerate(base)]


rewards = st.lists(st.integers(0, 1), min_size=TASKS, max_size=TASKS)
flip_sets = st.lists(st.integers(0, TASKS - 1), max_size=8, unique=True)


@settings(max_examples=40, deadline=None)
@given(
    base=rewards,
    cells=st.lists(flip_sets, min_size=1, max_size=5),
    max_drop=st.sampled_from([0.0, 0.05, 0.15, 0.3]),
    seed=st.integers(0, 1000),
)
def test_the_chosen_one_is_the_best_non_inferior_whatever_the_order_and_its_interval_is_paired(
    base: list[int], cells: list[list[int]], max_drop: float, seed: int
) -> None:
    checkpoints, by_id = sweep(base, [near(base, f) for f in cells], max_drop)
    got = chosen_of(checkpoints, by_id)
    fine = [j for j in got.judged if j.non_inferior]
    assert [j.gym_job_id for j in got.judged] == [c.gym_job_id for c in checkpoints]
    assert [j.non_inferior for j in got.judged] == [c.outcome is gate.Outcome.PASS for c in checkpoints]
    if not fine:
        assert got.chosen is None and not any(j.chosen for j in got.judged)
        assert "none chosen" in got.line()
        return
    assert got.chosen is not None and got.chosen.non_inferior and got.chosen.outcome is gate.Outcome.PASS
    assert [j.gym_job_id for j in got.judged if j.chosen] == [got.chosen.gym_job_id]
    best = max((j.score or 0.0, j.step or 0) for j in fine)  # the score, then the later step
    assert (got.chosen.score or 0.0, got.chosen.step) == best
    shuffled = list(checkpoints)
    random.Random(seed).shuffle(shuffled)
    again = chosen_of(shuffled, by_id)
    assert again.chosen == got.chosen and again.runner_up == got.runner_up and again.versus == got.versus
    if len(fine) == 1:
        assert got.runner_up is None and "the only non-inferior one" in got.line()
        return
    assert got.runner_up is not None and got.versus is not None
    (paired,), _ = compare.diff_benchmark(
        "quiz", side(by_id[got.runner_up.gym_job_id]), side(by_id[got.chosen.gym_job_id])
    )
    reward = paired.metric(compare.REWARD)
    assert reward is not None
    v = got.versus
    assert (v.estimate, v.interval, v.tasks) == (reward.delta, reward.ci, reward.tasks)
    said = got.line()
    if reward.ci is not None and reward.ci[0] > 0:
        assert f"better than {got.runner_up.label} by {reward.delta:+.4g}" in said
    else:
        assert f"but not shown better than {got.runner_up.label}" in said


def test_a_drop_is_never_chosen_and_two_close_ones_are_not_told_apart() -> None:
    base = [1] * 30 + [0] * 10
    same = list(base)
    better = near(base, [30, 31])  # two more tasks solved
    dropped = near(base, list(range(12)))  # twelve solved tasks lost
    checkpoints, by_id = sweep(base, [same, dropped, better], 0.1)
    got = chosen_of(checkpoints, by_id)
    assert [j.mark() for j in got.judged] == ["PASS", "DROP", "PASS*"]
    assert got.chosen is not None and got.chosen.label == "step_200"
    assert got.runner_up is not None and got.runner_up.label == "step_0"
    assert got.chosen.score == pytest.approx(0.05)
    assert got.line().startswith(
        "2 of 3 checkpoint(s) non-inferior to base; chosen: step_200 (score +0.05), "
        "but not shown better than step_0: +0.05 ["
    )


def test_no_non_inferior_checkpoint_chooses_none() -> None:
    base = [1] * 30 + [0] * 10
    checkpoints, by_id = sweep(base, [near(base, list(range(15))), near(base, list(range(20)))], 0.02)
    got = chosen_of(checkpoints, by_id)
    assert got.chosen is None and [j.mark() for j in got.judged] == ["DROP", "DROP"]
    assert got.line() == (
        "0 of 2 checkpoint(s) non-inferior to base: "
        "none chosen (no checkpoint rules out a drop beyond the margin)"
    )
    assert got.as_json()["chosen"] is None


def test_the_runner_up_of_several_benchmarks_pools_their_paired_intervals() -> None:
    agents = []
    for bench in ("a", "b"):
        (one,), _ = compare.diff_benchmark(bench, side([0] * 20 + [1] * 20), side([1] * 25 + [0] * 15))
        agents.append(one)
    c = compare.Comparison("x", "y", "x", "y", tuple(agents), benchmarks=("a", "b"))
    v = choose.pooled(c, {("a", "agent"): compare.REWARD, ("b", "agent"): compare.REWARD})
    m = agents[0].metric(compare.REWARD)
    assert m is not None and m.ci is not None and v.interval is not None
    assert v.estimate == pytest.approx(m.delta) and v.tasks == 80
    # Two independent equal halves: the mean's half-width is each one's over sqrt(2).
    assert v.interval[0] == pytest.approx(m.delta - (m.delta - m.ci[0]) / 2**0.5)
    assert choose.pooled(c, {("a", "agent"): compare.REWARD, ("c", "agent"): None}).interval is None
