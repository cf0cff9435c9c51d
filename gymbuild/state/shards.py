"""Where a record keeps a sharded benchmark's jobs (docs/compatibility.md, "gymbuild's extensions").

One record entry per benchmark, as DESIGN says: its `job_id` is shard 0's current job (a real job
NeMo Gym's `SubmissionRecord.load` and `gym job status` read as any other), and every shard's current
id, in shard order, comma-separated (the schema's metadata values are strings), is in
`executor_metadata["shards.<benchmark>"]`; a shard with no job yet is an empty field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

PREFIX = "shards."


def key(bench: str) -> str:
    """The executor_metadata key of `bench`'s shards."""
    return PREFIX + bench


def format_ids(ids: Sequence[str | None]) -> str:
    return ",".join(i or "" for i in ids)


def shard_ids(metadata: Mapping[str, str], bench: str) -> tuple[str | None, ...]:
    """`bench`'s shards' current job ids, in shard order (None: that shard has no job); () when the
    record does not shard it."""
    value = metadata.get(key(bench))
    if value is None:
        return ()
    return tuple(i.strip() or None for i in value.split(","))


def sharded(metadata: Mapping[str, str]) -> dict[str, tuple[str | None, ...]]:
    """Every sharded benchmark of a record's metadata, with its shards' ids."""
    return {
        k.removeprefix(PREFIX): shard_ids(metadata, k.removeprefix(PREFIX))
        for k in metadata
        if k.startswith(PREFIX)
    }
