"""Stage: each benchmark's plan, rendered into its job script in the workspace's staged tree.

Staged job by job (planning.py: one benchmark's own, or a job several share, under +jobs/). Whether
a benchmark is staged is told from a digest of what its script is made from (RunPlans.stage_want),
without planning or rendering it; the stage stamps in the workspace say which digest each staged
benchmark was rendered from.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gymbuild.state.workspace import atomic_write
from gymbuild.submit.plans import keep_compiled_templates

if TYPE_CHECKING:
    from gymbuild.submit.session import Session

RESOLVED_STAMP = "resolved"  # the digest of the tree the staged resolved config was last written from
RESOLVED_NAMES_STAMP = "resolved-configs"  # digest -> file name of every resolved config staged


def staged(ctx: Session, bench: str) -> bool:
    """Up to date when queued already (its script is never touched again) or staged from these
    inputs (stage_want). The digest first: it settles the submission (new=1 empties the stamps)."""
    wanted = ctx.plans.stage_want(bench, ctx.packing())
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
    """Render the job of each of `benches` (once a job: a shared one has several) and write it into
    the staged tree, in order; the first error (a plan the config cannot express) stops the pass,
    as a held error stops the steps after it."""
    from gymbuild.render.shared import render_job_plan

    assert ctx.resolved is not None
    keep_compiled_templates()
    plans, packing, secrets = ctx.plans, ctx.packing(), ctx.resolved.secrets
    groups = packing.jobs(benches)
    for done, group in enumerate(groups):
        if done % 25 == 0 and len(groups) >= 100:
            ctx.progress.show(f"rendering job scripts {done}/{len(groups)}")
        job = plans.job(group)
        rendered = render_job_plan(job, secrets)
        ctx.rendered[job.rel_dir] = rendered  # job.sh holds no secret value: the dry run prints it
        # No empty dirs: the sync makes logs/ (Slurm opens logs/slurm-<id>.log before the job
        # runs), and the job makes the rest (artifacts/, model-calls/, ...) as it starts.
        ctx.workspace.write_staged(job.rel_dir, {r: (f.text, f.mode) for r, f in rendered.files.items()})
        for bench in group:
            ctx.workspace.set_stage_stamp(bench, plans.stage_want(bench, packing))
    ctx.progress.done(keep=False)


def resolved_path(ctx: Session) -> Path:
    """The submission's first resolved-config.yaml: what the stage tasks name as their input."""
    from gymbuild.state.records import RESOLVED_CONFIG_NAME

    return ctx.workspace.stage / RESOLVED_CONFIG_NAME


def resolved_names(ctx: Session) -> dict[str, str]:
    """The resolved configs this submission staged, by the digest of each: resolved-config.yaml, then
    resolved-config.2.yaml, ... for a later submit (resubmit, only=) of a changed config."""
    try:
        names = json.loads(ctx.workspace.stamp(RESOLVED_NAMES_STAMP) or "{}")
    except ValueError:
        return {}
    return names if isinstance(names, dict) else {}


def resolved_target(ctx: Session) -> Path:
    """Where this run's resolved config goes. The first file is kept once a job was queued under it
    (it says what ran): a changed config then goes beside it, numbered, and the record names them."""
    ctx.submission()
    names, want = resolved_names(ctx), ctx.resolved_digest
    if want in names:
        return ctx.workspace.stage / names[want]
    outcomes = ctx.workspace.outcomes().values()
    ran = not ctx.workspace.draft and any(o.job_id or o.previous_job_ids for o in outcomes)
    if not ran:
        return resolved_path(ctx)
    count = len({*names.values(), resolved_path(ctx).name})
    return ctx.workspace.stage / f"resolved-config.{count + 1}.yaml"


def resolved_written(ctx: Session) -> bool:
    """The staged resolved config was written from what this run resolved (its stamp: the resolved
    tree's digest). The submission is settled first: a fresh one (new=1) empties the staged tree and
    the stamps."""
    ctx.submission()
    return ctx.workspace.stamp(RESOLVED_STAMP) == ctx.resolved_digest and resolved_target(ctx).exists()


def write_resolved(ctx: Session) -> None:
    """The resolved config in the staged tree (it goes to the run directory with the scripts), never
    over one that a queued job ran with (resolved_target)."""
    if resolved_written(ctx):
        return
    target = resolved_target(ctx)
    atomic_write(target, ctx.resolved_yaml)
    names = {d: n for d, n in resolved_names(ctx).items() if n != target.name}
    names[ctx.resolved_digest] = target.name
    ctx.workspace.set_stamp(RESOLVED_NAMES_STAMP, json.dumps(names, sort_keys=True), durable=False)
    ctx.workspace.set_stamp(RESOLVED_STAMP, ctx.resolved_digest, durable=False)


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
