"""A sharded benchmark's one status row and what resubmit queues again, derived from its shards'
states and rows (executors/shard_states.py): searched over any K and any mix of shard states."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gymbuild.executors.shard_states import MERGED, NOT_MERGED, ROOM, derive, rows_of, to_requeue
from gymbuild.state.rollouts import Progress

KINDS = ("pending", "running", "completed", "failed", "unknown", "waiting")
LIVE = {"pending", "running", "unknown"}

kinds = st.lists(st.sampled_from(KINDS), min_size=1, max_size=12)


@given(kinds, st.booleans())
def test_the_benchmark_runs_while_any_shard_runs_and_completes_only_merged(
    found: list[str], merged: bool
) -> None:
    k, what = derive(found, merged)
    shown = found[k]
    if "running" in found:
        assert shown == "running" and k == found.index("running")
    elif "pending" in found:
        assert shown == "pending"
    elif "unknown" in found:
        assert shown == "unknown"
    elif "waiting" in found:
        assert what == ROOM
    elif all(f == "completed" for f in found):
        assert what == (MERGED if merged else NOT_MERGED)  # all completed but no merge is not COMPLETED
    else:  # none live, some ended without completing: the first such shard's end is the benchmark's
        assert shown == "failed" and k == found.index("failed")
    if what == MERGED:
        assert all(f == "completed" for f in found) and merged


@given(kinds, st.data(), st.booleans())
def test_resubmit_queues_exactly_the_ended_shards_short_of_rows(found: list[str], data, merged: bool) -> None:
    partial = data.draw(st.lists(st.booleans(), min_size=len(found), max_size=len(found)))
    picked = to_requeue(found, partial, merged)
    if LIVE & set(found):
        assert picked == []  # a live shard may still complete: nothing is queued beside it
        return
    short = [k for k, (f, p) in enumerate(zip(found, partial, strict=True)) if f != "completed" or p]
    if short:
        assert picked == short  # a shard completed with all its rows is left alone
    else:
        assert picked == ([] if merged else [len(found) - 1])  # no merge: the last shard merges


progress = st.one_of(
    st.none(),
    st.builds(Progress, st.integers(0, 50), st.one_of(st.none(), st.integers(0, 50)), st.integers(0, 5)),
)


@given(st.lists(progress, min_size=1, max_size=8), progress)
def test_the_rows_are_the_merged_count_or_the_sum_of_the_shards(shards: list, at_bench) -> None:
    rows = rows_of(shards, at_bench)
    if at_bench is not None and at_bench.done > 0:
        assert rows == at_bench
        return
    counted = [p for p in shards if p is not None]
    if not counted and at_bench is None:
        assert rows is None
        return
    assert rows is not None
    assert rows.done == sum(p.done for p in counted) and rows.failed == sum(p.failed for p in counted)
    if at_bench is not None and at_bench.expected is not None:
        assert rows.expected == at_bench.expected  # the whole materialized inputs, once written
    elif len(counted) < len(shards) or any(p.expected is None for p in counted):
        assert rows.expected is None  # never a total short of a shard that has not said
    else:
        assert rows.expected == sum(p.expected or 0 for p in counted)


def test_two_shards_one_killed_after_the_other_completed() -> None:
    """The e2e case, pinned: shard 1 cancelled, shard 0 completed whole: only shard 1 again."""
    assert derive(["completed", "failed"], False) == (1, "as shown")
    assert to_requeue(["completed", "failed"], [False, True], False) == [1]
