"""Behaviour parity with NeMo Gym 0.7.0: both tools' batch scripts run under the same recording stubs.

The harness is tests/parity/behaviour.py (what is run, compared and normalized, and why). One test
per config and layout: it fails on every difference between what NeMo Gym's script did and what
gymbuild's job.sh did, except the ones listed: in KNOWN (still open, each naming who fixes it) or in
differences.yaml's `behaviour` (on purpose, each with its reason). An entry that no longer matches
anything fails too, so the lists shrink as fixes land. Every case runs once per session. What the
simulation cannot see (how the real sbatch reads the directives, the layout the real srun gives each
step) is compared for a sample of the corpus on the test cluster: tests/parity/test_slurm_sample.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.parity import behaviour as bh
from tests.parity.cases import differences

# Differences still open: (category, regex on `<case id> <difference>`, who fixes it and why it is
# still open). An entry with no category matches a whole case. The differences that stay on purpose
# (gymbuild follows what NeMo Gym's script means, not what it does) are in differences.yaml.
KNOWN: list[tuple[str, str, str]] = []

LISTED: list[tuple[str, str, str]] = [
    (e["category"], e["pattern"], f"{e['kind']}: {e['reason']}") for e in differences().get("behaviour", [])
]


@pytest.fixture(scope="session")
def suite(nemo_gym: Any) -> bh.Suite:
    return bh.run_suite(nemo_gym.python)


def known(category: str, text: str, case_id: str = "") -> str | None:
    """Why a difference is still open (a KNOWN entry matching `<case id> <text>`), or None. An entry
    with no category matches every category (a case that is known to differ as a whole)."""
    for cat, pattern, why in [*KNOWN, *LISTED]:
        if cat in ("", category) and re.search(pattern, f"{case_id} {text}"):
            return why
    return None


CASES = [c.id for c in bh.cases(bh.Path("/nonexistent-parity"), write=False)]


@pytest.mark.parametrize("case_id", CASES)
def test_behaviour_matches_nemo_gym(suite: bh.Suite, case_id: str) -> None:
    result = suite.by_id()[case_id]
    if result.skipped.startswith("NeMo Gym refuses"):
        pytest.skip(f"not a behaviour case: {result.skipped.splitlines()[0]}")  # acceptance parity's
    if result.skipped.startswith("gymbuild refuses"):
        # A verdict difference: tests/parity/test_acceptance.py owns it (and fails or lists it there).
        pytest.skip(f"acceptance parity's: {result.skipped.splitlines()[0]}")
    if not result.compared:
        pytest.skip("the config has no benchmark: no job to compare")
    assert not result.skipped, result.skipped
    unexpected = [f"[{cat}] {text}" for cat, text in result.differences if known(cat, text, case_id) is None]
    assert not unexpected, "\n".join([*unexpected, *result.outputs])


def test_every_known_difference_is_still_seen(suite: bh.Suite) -> None:
    """The runs are deterministic (each simulated node has its own ports, every run starts on idle
    nodes), so an entry that matches nothing, a whole-case one too, is fixed: it must go."""
    entries = [*KNOWN, *LISTED]
    seen = {
        pattern
        for r in suite.results
        for cat, text in r.differences
        for c, pattern, _ in entries
        if c in ("", cat) and re.search(pattern, f"{r.case.id} {text}")
    }
    stale = [f"{cat or '<case>'}: {pattern} ({why})" for cat, pattern, why in entries if pattern not in seen]
    assert not stale, "no longer differs: remove this entry\n" + "\n".join(stale)


def test_the_suite_compares_every_category(suite: bh.Suite, record_property: Any) -> None:
    figures = bh.figures(suite)
    for key, value in figures.items():
        record_property(key, value)
    print(bh.report(suite))
    compared = figures["comparisons"]
    assert all(
        compared.get(cat, 0) > 0 for cat in bh.CATEGORIES if cat != "collector" or figures["otel_cases"]
    )
    assert figures["cases_compared"] >= 10
