"""A sharded benchmark (`shards: K`) as ONE status row, from its shards' (pure; states.py folds them).

The record keeps one entry per benchmark and every shard's current job id in
`executor_metadata["shards.<bench>"]` (state/shards.py); `status`, `resubmit`, `cancel`, `logs` and
`results` read each shard's job at `<bench dir>/shards/<k>` and fold them into the benchmark's row:
what a user follows is the benchmark, and its score is the merged one.

The benchmark's state (`derive`, over each shard's kind as states.kind counts it): RUNNING while any
shard runs, else PENDING while any waits for resources, else UNKNOWN while any cannot be told, else
WAITING (for room under the quota) while a shard has no job for that reason; COMPLETED only when
every shard completed AND the merged rollouts exist (the last shard to end merges them); otherwise
the first ended shard that did not complete gives it (FAILED, CANCELLED, TIMEOUT, NOT QUEUED ...),
and every shard completed with no merge is FAILED, with a note. Its rows (`rows_of`): the merged
count once merged, else the sum of the shards', out of the benchmark's expected rows (the whole
materialized inputs once written; until then the sum of what the shards expect).
"""

from __future__ import annotations

from collections.abc import Sequence

from gymbuild.plan import shard_rel_dir
from gymbuild.state.rollouts import Progress

# What derive says of the benchmark, beside the shard whose row it shows.
AS_SHOWN = "as shown"  # the shown shard's own state is the benchmark's
ROOM = "waiting for room"  # a shard has no job, waiting for room: the benchmark waits
MERGED = "completed"  # every shard completed and the merge exists
NOT_MERGED = "not merged"  # every shard completed, no merge: FAILED

NOT_MERGED_NOTE = (
    "every shard completed but the merged rollouts.jsonl is missing (`gymbuild resubmit` queues the "
    "last shard again, which merges)"
)
_LIVE_FIRST = ("running", "pending", "unknown", "waiting")


def shard_dir(job_dir: str, k: int) -> str:
    """Where shard k's job runs: `<bench dir>/shards/<k>` (plan.shard_rel_dir)."""
    return f"{job_dir.rstrip('/')}/{shard_rel_dir(k)}"


def merged(at_bench: Progress | None) -> bool:
    """The benchmark's merged rollouts.jsonl has rows (its count at the benchmark's own dir)."""
    return at_bench is not None and at_bench.done > 0


def derive(kinds: Sequence[str], is_merged: bool) -> tuple[int, str]:
    """(the shard whose row the benchmark's shows, what the benchmark's state is: AS_SHOWN,
    ROOM, MERGED or NOT_MERGED) from each shard's kind (pending, running, completed,
    failed, unknown, waiting), in shard order; at least one shard."""
    for wanted in _LIVE_FIRST:
        if wanted in kinds:
            return kinds.index(wanted), ROOM if wanted == "waiting" else AS_SHOWN
    for k, what in enumerate(kinds):
        if what != "completed":
            return k, AS_SHOWN
    return (0, MERGED) if is_merged else (len(kinds) - 1, NOT_MERGED)


def rows_of(shards: Sequence[Progress | None], at_bench: Progress | None) -> Progress | None:
    """The benchmark's rollouts: merged, or summed over its shards, out of its expected rows."""
    if merged(at_bench):
        return at_bench
    counted = [p for p in shards if p is not None]
    if not counted and at_bench is None:
        return None
    expected = at_bench.expected if at_bench is not None else None
    if expected is None and counted and len(counted) == len(shards):
        known = [p.expected for p in counted]
        expected = None if None in known else sum(e or 0 for e in known)
    return Progress(sum(p.done for p in counted), expected, sum(p.failed for p in counted))


def to_requeue(kinds: Sequence[str], partial: Sequence[bool], is_merged: bool) -> list[int]:
    """The shards `resubmit` queues again: none while any shard is live (or its state unknown); else
    each that did not complete with all its slice's rows (failed, cancelled, never queued, short of
    rows). Every shard complete but nothing merged: the last one (a complete shard asks the model for
    nothing, finds every slice complete and merges)."""
    if not kinds or any(k in ("running", "pending", "unknown") for k in kinds):
        return []
    missing = [
        k for k, (what, short) in enumerate(zip(kinds, partial, strict=True)) if what != "completed" or short
    ]
    if missing or is_merged:
        return missing
    return [len(kinds) - 1]
