"""Sync: the staged tree copied into the run directory over the run's connection.

Only when something will be queued; the first sync goes into a fresh directory, and nothing a job
wrote there is ever deleted or overwritten (executors/rundir.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gymbuild.plan.job import job_dir_of
from gymbuild.state.workspace import digest
from gymbuild.submit import stage

if TYPE_CHECKING:
    from gymbuild.submit.session import Session

SYNC_STAMP = "sync"  # the workspace stamp naming the tree last sent (sync's doit target)


def tree_digest(ctx: Session) -> str:
    """What the synced tree was made from: each staged benchmark's stamp and the resolved tree's
    digest (the one resolved-config.yaml is stamped with; not its YAML text)."""
    plans, packing = ctx.plans, ctx.packing()
    return digest([plans.stage_want(b, packing) for b in ctx.selected()], ctx.resolved_digest)


def synced(ctx: Session) -> bool:
    """Nothing to queue (so nothing to copy), or the run directory already has this staged tree."""
    return not ctx.to_queue() or ctx.workspace.stamp(SYNC_STAMP) == tree_digest(ctx)


def sync(ctx: Session) -> None:
    """Check the mounts (where the executor does), make the run directory (fresh the first time) and
    copy the staged tree into it; the stamp says which tree was sent."""
    prepare_sync(ctx)
    copy(ctx)
    synced_now(ctx)


def copy(ctx: Session) -> None:
    """The staged tree copied into the run directory (made by prepare_sync)."""
    from gymbuild.executors import rundir

    sub, conn = ctx.submission(), ctx.connection()
    ctx.progress.show(f"copying the run directory to {conn.target}:{sub.run_dir}")
    rundir.sync(conn, str(ctx.workspace.stage), sub.run_dir)
    ctx.progress.done(keep=False)


def prepare_sync(ctx: Session, *, check_mounts: bool = True) -> None:
    """Everything of the sync before the copy: the mounts checked (unless a sweep checked them for
    all its combinations at once), the run directory made, the resolved config staged."""
    from gymbuild.executors import rundir

    sub = ctx.submission()
    conn = ctx.connection()
    if check_mounts and ctx.executor.CHECKS_MOUNTS:
        rundir.check_mounts(conn, rundir.mount_sources(ctx.config), str(ctx.inv.config))
    # The intent is stamped before the directory is made: a run killed after the remote mkdir must
    # not find its own run directory "already existing" and refuse to go on (only new=1 would help).
    fresh = ctx.workspace.stamp(SYNC_STAMP) is None and ctx.workspace.stamp("run-dir") != sub.run_dir
    if fresh:
        ctx.workspace.set_stamp("run-dir", sub.run_dir)
    try:
        rundir.prepare_run_dir(conn, sub.run_dir, _dirs_to_make(ctx), fresh=fresh)
    except rundir.RunDirExists:
        (ctx.workspace.stamps_dir / "run-dir").unlink(missing_ok=True)  # not ours after all
        raise
    stage.write_resolved(ctx)


def _dirs_to_make(ctx: Session) -> list[str]:
    """The directories (relative to the run dir) whose logs/ must exist before their job is queued:
    each benchmark's, and each shared job's own (its Slurm output goes there)."""
    to_queue, packing = ctx.to_queue(), ctx.packing()
    shared = [g for g in packing.jobs(to_queue) if len(g) > 1]
    return [*to_queue, *(job_dir_of(g) for g in shared)]


def synced_now(ctx: Session) -> None:
    """The staged tree is in the run directory: say so for the next run's uptodate check."""
    ctx.workspace.set_stamp(SYNC_STAMP, tree_digest(ctx))
