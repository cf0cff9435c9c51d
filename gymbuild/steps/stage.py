"""Stage: each benchmark's plan, rendered into its job script in the workspace's staged tree.

Whether a benchmark is staged is told from a digest of what its script is made from
(stage_digest), without planning or rendering it; the stage stamps in the workspace say which digest
each staged script was rendered from.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gymbuild import sharing
from gymbuild.planning import bench_plan, renderer, stage_digest
from gymbuild.workspace import atomic_write, digest

if TYPE_CHECKING:
    from gymbuild.session import Session

RESOLVED_STAMP = "resolved"  # the digest of the tree the staged resolved-config.yaml was written from


def staged(ctx: Session, bench: str) -> bool:
    """Up to date when queued already (its script is never touched again) or staged from these
    inputs (stage_digest). The digest first: it settles the submission (new=1 empties the stamps)."""
    wanted = sharing.stage_want(ctx, bench)
    if ctx.workspace.stage_stamp(bench) == wanted:
        return True
    outcome = ctx.current_outcome(bench)
    return outcome is not None and bool(outcome.job_id)


def stage_all(ctx: Session, benches: list[str] | None = None) -> None:
    """Stage what is not staged yet of `benches` (default: the run's selection), in one pass: doit's
    stage:<bench> calls it, so the first stage task of a run stages every benchmark the run will stage
    and the tasks after it find theirs done. A staged benchmark is never rendered again."""
    stage_many(ctx, [b for b in (ctx.selected() if benches is None else benches) if not staged(ctx, b)])


def stage_many(ctx: Session, benches: list[str]) -> None:
    """Render each benchmark's job and write it into the staged tree, in order; the first error (a
    plan the config cannot express) stops the pass, as a held error stops the steps after it."""
    assert ctx.resolved is not None
    render, secrets = renderer(), ctx.resolved.secrets
    benches = sharing.stage_shared(ctx, benches)  # the shared jobs' (sharing.py); the rest here
    for done, bench in enumerate(benches):
        if done % 25 == 0 and len(benches) >= 100:
            ctx.progress.show(f"rendering job scripts {done}/{len(benches)}")
        plan = bench_plan(ctx, bench)
        job = render.render_job(plan, secrets)
        ctx.rendered[bench] = job  # job.sh holds no secret value: the dry run prints this text
        files = {rel: (f.text, f.mode) for rel, f in job.files.items()}
        # No empty dirs: the sync makes logs/ (Slurm opens logs/slurm-<id>.log before the job
        # runs), and the job makes the rest (artifacts/, model-calls/, ...) as it starts.
        ctx.workspace.write_staged(bench, files)
        ctx.workspace.set_stage_stamp(bench, stage_digest(ctx, bench))
    ctx.progress.done(keep=False)


def resolved_text(ctx: Session) -> str:
    """The resolved config as YAML, host: values kept as references (the YAML dump of 1000 benchmarks
    takes a twentieth of a second: once a run)."""
    found = ctx.memo.get("resolved_text")
    if found is None:
        from gymbuild.config.output import dump_tree

        assert ctx.resolved is not None
        found = ctx.memo["resolved_text"] = dump_tree(ctx.resolved.tree)
    return str(found)


def resolved_path(ctx: Session) -> Path:
    from gymbuild.jobs import RESOLVED_CONFIG_NAME

    return ctx.workspace.stage / RESOLVED_CONFIG_NAME


def _resolved_digest(ctx: Session) -> str:
    from gymbuild.config.model import thaw

    assert ctx.resolved is not None
    found = ctx.memo.get("resolved_digest")
    if found is None:
        found = ctx.memo["resolved_digest"] = digest(thaw(ctx.resolved.tree))
    return str(found)


def resolved_written(ctx: Session) -> bool:
    """The staged resolved-config.yaml was written from what this run resolved (its stamp: a digest
    of the tree, not the YAML text, whose dump for 1000 benchmarks is a tenth of a render). The
    submission is settled first: a fresh one (new=1) empties the staged tree and the stamps."""
    ctx.submission()
    return ctx.workspace.stamp(RESOLVED_STAMP) == _resolved_digest(ctx) and resolved_path(ctx).exists()


def write_resolved(ctx: Session) -> None:
    """resolved-config.yaml in the staged tree (it goes to the run directory with the scripts)."""
    if not resolved_written(ctx):
        atomic_write(resolved_path(ctx), resolved_text(ctx))
        ctx.workspace.set_stamp(RESOLVED_STAMP, _resolved_digest(ctx), durable=False)


def stage_step(ctx: Session, bench: str) -> None:
    """stage:<bench>'s action: nothing when `bench` is staged (doit may run it because a file it
    reads changed), else the one pass of stage_all, after which the other stage tasks find theirs
    done."""
    if not staged(ctx, bench):
        stage_all(ctx)


def unstage(ctx: Session, bench: str, files: Sequence[str]) -> None:
    """stage:<bench>'s `doit clean`: remove its staged files and the stamp that vouched for them.

    Not for a queued benchmark: its staged script is the one its job runs and the sync's record of
    the run directory; only an unqueued benchmark's files are derived and safe to drop.
    """
    outcome = ctx.workspace.outcome(bench)
    if outcome is not None and outcome.job_id:
        return
    for path in files:
        Path(path).unlink(missing_ok=True)
    ctx.workspace.drop_stage_stamp(bench)
    ctx.workspace.save_stage_stamps()
