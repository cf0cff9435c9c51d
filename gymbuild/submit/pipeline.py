"""The one submit pipeline: its steps, in order (STEPS), for a batch of submissions.

STEPS is the one statement of the order: run_batch runs them one after the other, and the doit
graph (cli/graph.py) makes one task (or one per benchmark) of each, depending on the step before it.
A batch is one submission (`submit`, `resubmit`) or every combination of a sweep (`multirun=1`): the
same steps for each, over the batch's one connection, with the costs of one submit: the mounts
checked in one round trip, one copy (rsync) per output directory however many run directories go
there, one sbatch per job. Each step takes the values the run settled (settled.py, as `Work`): none
asks the run context again.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from gymbuild import interrupts
from gymbuild.plan.job import Packing
from gymbuild.state.records import RESOLVED_CONFIG_NAME
from gymbuild.submit import arrays, queue, quota, record, shards, stage, sync

if TYPE_CHECKING:
    from gymbuild.executors.connection import Connection
    from gymbuild.submit.session import Session
    from gymbuild.submit.settled import Settled


@dataclass(frozen=True)
class Work:
    """One run's share of a pass, settled when the pass starts: what it stages, what it queues, and
    how the benchmarks it still has to queue are packed into jobs (the outcomes a queue pass writes
    shrink what is left to queue, not the jobs it queues)."""

    run: Settled
    wanted: tuple[str, ...]  # what the pass stages (the run's selection, or resubmit's picks)
    to_queue: tuple[str, ...]  # every selected benchmark with no job id yet
    todo: tuple[str, ...]  # what the pass queues: wanted, not queued, not tried by this run already
    packing: Packing
    header: str | None = None  # put before the staged resolved config (a sweep's combination)

    @classmethod
    def of(cls, run: Settled, wanted: Sequence[str] | None = None, header: str | None = None) -> Work:
        wanted = tuple(run.selected if wanted is None else wanted)
        to_queue = tuple(run.to_queue())
        left = set(to_queue) - run.memory.queue_done
        shared = run.config.driver.shares_jobs
        packing = run.plans.packing(to_queue) if shared else Packing()
        return cls(run, wanted, to_queue, tuple(b for b in wanted if b in left), packing, header)

    def synced(self) -> bool:
        return sync.synced(self.run, self.packing, list(self.to_queue))


class Batch:
    """The runs of one pass and their one connection, opened by the first step that needs it (a dry
    run, or a run with nothing to queue, opens nothing)."""

    def __init__(self, works: Sequence[Work]) -> None:
        self.works = list(works)
        self.room = quota.Room()  # the user's quota, asked once for the pass (quota.py)

    @cached_property
    def conn(self) -> Connection:
        return self.works[0].run.connection()


@dataclass(frozen=True)
class Step:
    """A step of the pipeline: `name` is its doit task's (one task per benchmark, `name:<bench>`, when
    `per_bench`); `run` does it for every run of a batch."""

    name: str
    per_bench: bool
    run: Callable[[Batch], None]


def _resolve(batch: Batch) -> None:
    """The resolved config in each run's staged tree (stage.write_resolved)."""
    for work in batch.works:
        stage.write_resolved(work.run)


def _stage(batch: Batch) -> None:
    """Each run's wanted benchmarks rendered into its staged tree (only what is stale)."""
    refuse_unsafe(batch)
    for work in batch.works:
        stage.stage_all(work.run, work.packing, work.wanted)


def refuse_unsafe(batch: Batch) -> None:
    """What no step may go on with, checked by each step before it changes anything (a step of the
    doit graph may run without the one before it): a sharded benchmark in a run that queues arrays
    (arrays.refuse_shards), a benchmark whose K changed since its jobs were queued (shards.refuse_changed)."""
    for work in batch.works:
        shards.refuse_changed(work.run, work.wanted)
        arrays.refuse_shards(work.run, work.todo)


def _sync(batch: Batch) -> None:
    """Every run directory not synced yet made and copied: the mounts of all checked at once, one copy
    per parent directory."""
    from gymbuild.executors import rundir  # late: measured, off resolve, list (House rules)

    refuse_unsafe(batch)
    works = [w for w in batch.works if not w.synced()]
    if not works:
        return
    conn = batch.conn
    mounts: dict[str, list[str]] = {}
    for work in works:
        if work.run.executor.CHECKS_MOUNTS:
            for path, owners in rundir.mount_sources(work.run.config).items():
                mounts[path] = list(dict.fromkeys([*mounts.get(path, []), *owners]))
    rundir.check_mounts(conn, mounts, str(works[0].run.config_file))
    by_parent: dict[str, list[Work]] = {}
    for work in works:
        run = work.run
        sync.prepare_sync(run, conn, work.packing, list(work.to_queue))
    for work in batch.works:  # asked now, read by the queue step: the login node answers during the copy
        batch.room.ask(conn, work.run, work.packing, work.todo)
    for work in works:
        run = work.run
        if work.header:
            staged = run.workspace.stage / RESOLVED_CONFIG_NAME
            text = staged.read_text()
            if not text.startswith(work.header):  # written afresh by this sync, or headed by an earlier one
                staged.write_text(work.header + text)
        by_parent.setdefault(str(Path(run.submission.run_dir).parent), []).append(work)
    for parent, group in by_parent.items():
        if len(group) == 1:
            sync.copy(group[0].run, conn)
        else:
            first = group[0].run
            outbox = first.workspace.config_dir / "outbox"
            shutil.rmtree(outbox, ignore_errors=True)
            names = [_link_tree(w.run.workspace.stage, outbox / w.run.submission.gym_job_id) for w in group]
            first.memory.progress.show(f"copying {len(names)} run directories to {conn.target}:{parent}")
            rundir.sync(conn, str(outbox), parent, names)
            shutil.rmtree(outbox, ignore_errors=True)
            first.memory.progress.done(keep=False)
        for work in group:
            sync.synced_now(work.run, work.packing)


def _queue(batch: Batch) -> None:
    """Queue each run's todo in one pipelined pass, and record each run that queued anything as soon
    as its pass ends, even when it stopped half-way (a job id the executor holds must reach the
    record): a signal while jobs start stops the starting, not the recording. The record step after
    it finds these recorded; it is for what a killed run left unrecorded. What does not fit the
    user's quota waits (quota.py): the limits are read once for the pass."""
    refuse_unsafe(batch)
    batch.room.refuse_never(batch.conn, [(w.run, w.packing, w.todo) for w in batch.works])
    interrupts.PROCESS.summary = lambda: _queued_summary(batch)
    with interrupts.deferred():  # a signal: the jobs in flight are read and recorded first
        _queue_arrays([w for w in batch.works if arrays.enabled(w.run)], batch)
        for work in [w for w in batch.works if not arrays.enabled(w.run)]:
            if interrupts.pending():  # a sweep's later cells: nothing of them started
                break
            # A sharded benchmark queues its shards that have no job yet (shards.py), each a job.
            todo = shards.pending(work.run, [b for b in work.todo if b not in work.run.memory.queue_done])
            try:
                if todo:
                    todo = batch.room.take(batch.conn, work.run, work.packing, todo)
                if todo:
                    shards.remember(work.run, todo)  # K written down before a shard is sent
                    queue.queue_many(work.run, batch.conn, work.packing, todo)
            finally:
                shards.settle(work.run, work.todo)  # a sharded benchmark's one outcome, from its shards'
                if work.run.memory.queued_now:
                    _record_one(work.run, batch)


def _queued_summary(batch: Batch) -> str:
    """What the pass queued and what it did not, from the outcomes it wrote: the line a signal ends
    the run with says it (cli/main.py), wherever the signal lands after the pass began."""
    todo = [(w.run, b) for w in batch.works for b in w.todo]
    done = sum(1 for run, bench in todo if queue.queued(run, bench))
    left = f", {len(todo) - done} not (`gymbuild submit` queues them)" if done < len(todo) else ""
    return f"{done} of {len(todo)} benchmarks queued{left}"


def _queue_arrays(works: list[Work], batch: Batch) -> None:
    """The runs that queue job arrays, all in one pass (a sweep's cells share arrays), each recorded
    as soon as the pass ends, as `_queue` records the others."""
    passes = []
    try:
        for w in works:  # what fits the quota: an array's every task counts against MaxSubmitJobs
            todo = [b for b in w.todo if b not in w.run.memory.queue_done]
            if todo and (todo := batch.room.take(batch.conn, w.run, w.packing, todo)):
                passes.append((w.run, w.packing, todo))
        if passes:
            arrays.queue_arrays(batch.conn, passes, batch.room.max_array_size())
    finally:
        for work in works:
            if work.run.memory.queued_now:
                _record_one(work.run, batch)


def _record(batch: Batch) -> None:
    """Each run's record, where the outcomes say more than it does."""
    for work in batch.works:
        _record_one(work.run, batch)


def _record_one(run: Settled, batch: Batch) -> None:
    if not record.recorded(run.submission, run.workspace):
        record.record(run, batch.conn)


# The order of the steps: the one statement of it (cli/graph.py derives the doit graph from it).
STEPS: tuple[Step, ...] = (
    Step("resolve", False, _resolve),
    Step("stage", True, _stage),
    Step("sync", False, _sync),
    Step("queue", True, _queue),
    Step("record", False, _record),
)


def step(name: str) -> Step:
    return next(s for s in STEPS if s.name == name)


def before(name: str) -> Step | None:
    """The step that runs before `name` (None for the first): what its doit task depends on."""
    names = [s.name for s in STEPS]
    at = names.index(name)
    return STEPS[at - 1] if at else None


def run(ctx: Session, benches: Sequence[str] | None = None) -> None:
    """One submission's pipeline: `benches` defaults to the run's selection."""
    run_batch([ctx], [list(ctx.selected() if benches is None else benches)])


def run_batch(
    runs: Sequence[Session], wanted: Sequence[Sequence[str]], headers: Sequence[str] | None = None
) -> None:
    """Every step in order, for each run with something to queue (a run with nothing to queue opens
    no connection): stage what is stale, sync what is not synced, queue what has no job id yet, and
    write each run's record. The runs share one connection (their Link): the first run's.
    `headers`: text put before each run's staged resolved config (a sweep's combination)."""
    works = [
        Work.of(ctx.settled, benches, headers[i] if headers else None)
        for i, (ctx, benches) in enumerate(zip(runs, wanted, strict=True))
    ]
    busy = [w for w in works if w.todo]
    if not busy:
        return
    batch = Batch(busy)
    for each in STEPS:
        each.run(batch)


def stage_only(ctx: Session) -> None:
    """The staging of a dry run (a sweep's render): the steps up to the staged tree, no connection."""
    batch = Batch([Work.of(ctx.settled)])
    for each in STEPS[: STEPS.index(step("stage")) + 1]:
        each.run(batch)


def _link_tree(source: Path, dest: Path) -> str:
    """`dest` a copy of the staged tree made of hard links (no file is copied twice); its name."""
    for root, _dirs, files in os.walk(source):
        target = dest / Path(root).relative_to(source)
        target.mkdir(parents=True, exist_ok=True)
        shutil.copymode(root, target)
        for name in files:
            os.link(os.path.join(root, name), target / name)
    return dest.name
