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
    from gymbuild.executors.connection import Connection
    from gymbuild.plan.job import Packing
    from gymbuild.submit.settled import Settled

SYNC_STAMP = "sync"  # the workspace stamp naming the tree last sent (sync's doit target)


def tree_digest(run: Settled, packing: Packing) -> str:
    """What the synced tree was made from: each staged benchmark's stamp and the resolved tree's
    digest (the one resolved-config.yaml is stamped with; not its YAML text)."""
    plans = run.plans
    return digest([plans.stage_want(b, packing) for b in run.selected], run.resolved_digest)


def synced(run: Settled, packing: Packing, to_queue: list[str]) -> bool:
    """Nothing to queue (so nothing to copy), or the run directory already has this staged tree."""
    return not to_queue or run.workspace.stamp(SYNC_STAMP) == tree_digest(run, packing)


def copy(run: Settled, conn: Connection) -> None:
    """The staged tree copied into the run directory (made by prepare_sync)."""
    from gymbuild.executors import rundir  # late: measured, off resolve, list (House rules)

    run_dir, progress = run.submission.run_dir, run.memory.progress
    progress.show(f"copying the run directory to {conn.target}:{run_dir}")
    rundir.sync(conn, str(run.workspace.stage), run_dir)
    progress.done(keep=False)


def prepare_sync(run: Settled, conn: Connection, packing: Packing, to_queue: list[str]) -> None:
    """Everything of the sync before the copy but the mounts' check (pipeline.py checks the mounts of
    every run of a batch at once): the run directory made, the resolved config staged."""
    from gymbuild.executors import rundir  # late: as in copy

    run_dir, workspace = run.submission.run_dir, run.workspace
    # The intent is stamped before the directory is made: a run killed after the remote mkdir must
    # not find its own run directory "already existing" and refuse to go on (only new=1 would help).
    fresh = workspace.stamp(SYNC_STAMP) is None and workspace.stamp("run-dir") != run_dir
    if fresh:
        workspace.set_stamp("run-dir", run_dir)
    try:
        rundir.prepare_run_dir(conn, run_dir, _dirs_to_make(run, packing, to_queue), fresh=fresh)
    except rundir.RunDirExists:
        (workspace.stamps_dir / "run-dir").unlink(missing_ok=True)  # not ours after all
        raise
    stage.write_resolved(run)


def _dirs_to_make(run: Settled, packing: Packing, to_queue: list[str]) -> list[str]:
    """The directories (relative to the run dir) whose logs/ must exist before their job is queued:
    each benchmark's, each shared job's own and each shard's (their Slurm output goes there)."""
    jobs = [job_dir_of(g) for g in run.plans.groups(packing, to_queue)]
    return list(dict.fromkeys([*to_queue, *jobs]))


def synced_now(run: Settled, packing: Packing) -> None:
    """The staged tree is in the run directory: say so for the next run's uptodate check."""
    run.workspace.set_stamp(SYNC_STAMP, tree_digest(run, packing))
