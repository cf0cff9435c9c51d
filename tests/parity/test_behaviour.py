"""Behaviour parity with NeMo Gym 0.7.0: both tools' batch scripts run under the same recording stubs.

The harness is tests/parity/behaviour.py (what is run, compared and normalized, and why). One test
per config and layout: it fails on every difference between what NeMo Gym's script did and what
gymbuild's job.sh did, except the ones in KNOWN, each of which names the part of the work that owns
the fix and why it is still open. A KNOWN entry that no longer matches anything fails too, so the
list shrinks as fixes land. The run of every case happens once per session (about a minute).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.parity import behaviour as bh

# (category, regex on the difference's text, who fixes it / why it stays).
KNOWN: list[tuple[str, str, str]] = [
    # vllm_pd, multi-node vLLM and Ray: the `services` work.
    (
        "steps",
        r"step (router|vllm:\d+:\S+) tasks",
        "services: vllm_pd router flags, multi-node vLLM (ray symmetric-run, DP)",
    ),
    (
        "collector",
        r"collector\.yaml",
        "services: collector.yaml (span groups, renames, job names, attributes)",
    ),
    ("steps", r"step ray-serve-gateway", "services: Ray Serve (use_ray_serve, automatic) steps"),
    ("steps", r"step collector srun", "services: the collector step with otel.container"),
    ("", r"^accept/vllm-pd[-\w]*@scaled ", "services: vllm_pd tiers on multi-node pools"),
    ("", r"^accept/pinned-services@scaled ", "services: two pinned vLLM services, each over several nodes"),
    # `gym eval run` and gym_install: the `driver` work.
    (
        "overrides",
        r'override \S+: NeMo Gym \{"kind": "ADD", "value": \{"str": "None"\}\}',
        "driver: NeMo Gym writes a null run value as the string None (str(None)); to list or follow",
    ),
]


@pytest.fixture(scope="session")
def suite(nemo_gym: Any) -> bh.Suite:
    return bh.run_suite(nemo_gym.python)


def known(category: str, text: str, case_id: str = "") -> str | None:
    """Why a difference is still open (a KNOWN entry matching `<case id> <text>`), or None. An entry
    with no category matches every category (a case that is known to differ as a whole)."""
    for cat, pattern, why in KNOWN:
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
    assert not unexpected, "\n".join(unexpected)


def test_every_known_difference_is_still_seen(suite: bh.Suite) -> None:
    seen = {
        pattern
        for r in suite.results
        for cat, text in r.differences
        for c, pattern, _ in KNOWN
        if c in ("", cat) and re.search(pattern, f"{r.case.id} {text}")
    }
    # A case-wide entry (no category) may match nothing on a run where that case happens to agree.
    stale = [f"{cat}: {pattern} ({why})" for cat, pattern, why in KNOWN if cat and pattern not in seen]
    assert not stale, "fixed: remove from KNOWN\n" + "\n".join(stale)


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
