"""The one submit pipeline: stage, sync, queue, and the record, for `submit` and `resubmit` alike.

`submit` reaches it through doit's graph (tasks.py): the stage and sync tasks run their steps first,
and the first queue:<bench> task runs this for every benchmark the run queues (the one batched step:
one pipelined pass in the run's shell), finding stage and sync done. `resubmit` calls it with the
benchmarks it re-queues. Each step is a function of the run context in gymbuild/steps/.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gymbuild.steps import queue, record, stage, sync

if TYPE_CHECKING:
    from gymbuild.session import Session


def run(ctx: Session, benches: Sequence[str] | None = None) -> None:
    """Stage what is stale, sync when something is to be queued, queue what has no job id yet, and
    write the record once anything was queued, even when queueing stopped half-way (a job id that
    Slurm holds must reach the record). `benches` defaults to the run's selection."""
    wanted = list(ctx.selected() if benches is None else benches)
    stage.stage_all(ctx, wanted)
    if not sync.synced(ctx):
        sync.sync(ctx)
    to_queue = set(ctx.to_queue())
    todo = [b for b in wanted if b in to_queue and b not in ctx.queue_done]
    if not todo:
        return  # nothing to queue: a no-op opens no connection
    try:
        queue.queue_many(ctx, todo)
    finally:
        if ctx.queued_now:
            record.record(ctx)
