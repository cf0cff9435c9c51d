"""The one submit pipeline: stage, sync, queue, and the record, for a batch of submissions.

A batch is one submission (`submit`, `resubmit`) or every combination of a sweep (`multirun=1`): the
same steps for each, over the batch's one connection, with the costs of one submit: the mounts
checked in one round trip, one copy (rsync) per output directory however many run directories go
there, one sbatch per job. `submit` reaches it through doit's graph (tasks.py): the stage and sync
tasks run their steps first, and the first queue:<bench> task runs this for every benchmark the run
queues, finding stage and sync done. Each step is a function of the run context in gymbuild/submit/.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gymbuild import interrupts
from gymbuild.submit import queue, record, stage, sync

if TYPE_CHECKING:
    from gymbuild.submit.session import Session


def run(ctx: Session, benches: Sequence[str] | None = None) -> None:
    """One submission's pipeline: `benches` defaults to the run's selection."""
    run_batch([ctx], [list(ctx.selected() if benches is None else benches)])


def run_batch(
    runs: Sequence[Session], wanted: Sequence[Sequence[str]], headers: Sequence[str] | None = None
) -> None:
    """Stage what is stale, sync what is not synced, queue what has no job id yet, for each run with
    something to queue (a run with nothing to queue opens no connection), and write each run's record
    once anything was queued, even when queueing stopped half-way (a job id the executor holds must
    reach the record): a signal while jobs start stops the starting, not the recording. The runs
    share one connection (their Link): the first run's. `headers`: text
    put before each run's staged resolved config (a sweep's combination)."""
    todo = []
    for ctx, benches in zip(runs, wanted, strict=True):
        to_queue = set(ctx.to_queue())
        todo.append([b for b in benches if b in to_queue and b not in ctx.queue_done])
    busy = [i for i, benches in enumerate(todo) if benches]
    if not busy:
        return
    for i in busy:
        stage.stage_all(runs[i], list(wanted[i]))
    to_sync = [i for i in busy if not sync.synced(runs[i])]
    _sync([runs[i] for i in to_sync], [headers[i] for i in to_sync] if headers else None)
    with interrupts.deferred():  # a signal: the jobs in flight are read and recorded first
        for i in busy:
            if interrupts.pending():  # a sweep's later cells: nothing of them started
                break
            ctx = runs[i]
            try:
                queue.queue_many(ctx, todo[i])
            finally:
                if ctx.queued_now:
                    record.record(ctx)


def _sync(runs: Sequence[Session], headers: Sequence[str] | None) -> None:
    """Every run directory made and copied: the mounts of all checked at once, one copy per parent."""
    from gymbuild.executors import rundir
    from gymbuild.state.records import RESOLVED_CONFIG_NAME

    if not runs:
        return
    conn = runs[0].connection()
    mounts: dict[str, list[str]] = {}
    for ctx in runs:
        if ctx.executor.CHECKS_MOUNTS:
            for path, owners in rundir.mount_sources(ctx.config).items():
                mounts[path] = list(dict.fromkeys([*mounts.get(path, []), *owners]))
    rundir.check_mounts(conn, mounts, str(runs[0].inv.config))
    by_parent: dict[str, list[Session]] = {}
    for i, ctx in enumerate(runs):
        sync.prepare_sync(ctx, check_mounts=False)
        if headers:
            staged = ctx.workspace.stage / RESOLVED_CONFIG_NAME
            text = staged.read_text()
            if not text.startswith(headers[i]):  # written afresh by this sync, or headed by an earlier one
                staged.write_text(headers[i] + text)
        by_parent.setdefault(str(Path(ctx.submission().run_dir).parent), []).append(ctx)
    for parent, group in by_parent.items():
        if len(group) == 1:
            sync.copy(group[0])
        else:
            outbox = group[0].workspace.config_dir / "outbox"
            shutil.rmtree(outbox, ignore_errors=True)
            names = [_link_tree(ctx.workspace.stage, outbox / ctx.submission().gym_job_id) for ctx in group]
            group[0].progress.show(f"copying {len(names)} run directories to {conn.target}:{parent}")
            rundir.sync(conn, str(outbox), parent, names)
            shutil.rmtree(outbox, ignore_errors=True)
            group[0].progress.done(keep=False)
        for ctx in group:
            sync.synced_now(ctx)


def _link_tree(source: Path, dest: Path) -> str:
    """`dest` a copy of the staged tree made of hard links (no file is copied twice); its name."""
    for root, _dirs, files in os.walk(source):
        target = dest / Path(root).relative_to(source)
        target.mkdir(parents=True, exist_ok=True)
        shutil.copymode(root, target)
        for name in files:
            os.link(os.path.join(root, name), target / name)
    return dest.name
