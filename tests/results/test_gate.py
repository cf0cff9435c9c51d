"""gate.judge, searched: the verdict is the non-inferiority rule for any interval, margin and task
count, and anything that kept a benchmark from being compared in full is never a PASS."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gymbuild.results import gate, stats

finite = st.floats(-2, 2, allow_nan=False)


@given(
    ends=st.tuples(finite, finite).map(sorted),
    max_drop=st.floats(0, 1, allow_nan=False),
    tasks=st.integers(0, 5000),
    problems=st.lists(
        st.sampled_from(["quiz: the candidate's job is FAILED, not COMPLETED", "x"]), max_size=2
    ),
)
def test_the_verdict_is_the_non_inferiority_rule(
    ends: list[float], max_drop: float, tasks: int, problems: list[str]
) -> None:
    low, high = ends
    evidence = stats.Evidence(tasks, (low + high) / 2, (low, high), 0.1, 0.5, None, True, 0.05)
    v = gate.judge("quiz", "agent", "mean/reward", evidence, max_drop, problems)
    if problems or tasks < gate.MIN_TASKS:
        expected = gate.Outcome.INCONCLUSIVE
    elif low > -max_drop:
        expected = gate.Outcome.PASS
    elif high < -max_drop:
        expected = gate.Outcome.DROP
    else:
        expected = gate.Outcome.INCONCLUSIVE
    assert v.outcome is expected, v
    assert v.reason and v.line().startswith(f"{expected.value} quiz (agent) mean/reward")
    for problem in problems:
        assert problem in v.reason
    if expected is gate.Outcome.INCONCLUSIVE and not problems and tasks >= gate.MIN_TASKS:
        assert "80% power" in v.reason


@given(st.lists(st.sampled_from(list(gate.Outcome)), max_size=6))
def test_the_overall_verdict_never_passes_on_nothing_or_on_doubt(outcomes: list[gate.Outcome]) -> None:
    verdicts = [gate.Verdict("b", None, None, o, 0.1, reason="r") for o in outcomes]
    got = gate.overall(verdicts)
    if gate.Outcome.DROP in outcomes:
        assert got is gate.Outcome.DROP
    elif outcomes and all(o is gate.Outcome.PASS for o in outcomes):
        assert got is gate.Outcome.PASS
    else:
        assert got is gate.Outcome.INCONCLUSIVE
    assert gate.EXIT[got] == {"PASS": 0, "DROP": 1, "INCONCLUSIVE": 2}[got.value]


def test_an_estimate_a_hair_from_the_margin_needs_no_number_of_tasks_not_an_overflow() -> None:
    """Found by the search above: ((t + t) * s / d)^2 with d = 1e-309 overflowed math.ceil."""
    assert stats.tasks_to_settle(0.1, 2.2e-309, 10) is None
    assert stats.tasks_to_settle(0.1, 0.0, 10) is None
    assert stats.tasks_to_settle(0.3, 0.05, 200) == pytest.approx(283, abs=3)  # (1.97 + 0.84)^2 * 36
