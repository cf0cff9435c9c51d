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

from gymbuild.plan import shard_of
from gymbuild.state.records import RESOLVED_CONFIG_NAME
from gymbuild.state.workspace import atomic_write
from gymbuild.submit.plans import keep_compiled_templates

if TYPE_CHECKING:
    from gymbuild.plan.job import Packing
    from gymbuild.state.workspace import Workspace
    from gymbuild.submit.settled import Settled

RESOLVED_STAMP = "resolved"  # the digest of the tree the staged resolved config was last written from
RESOLVED_NAMES_STAMP = "resolved-configs"  # digest -> file name of every resolved config staged


def staged(run: Settled, packing: Packing, bench: str) -> bool:
    """Up to date when queued already (its script is never touched again) or staged from these
    inputs (stage_want): the stamp first, then the outcome."""
    if run.workspace.stage_stamp(bench) == run.plans.stage_want(bench, packing):
        return True
    outcome = run.workspace.outcome(bench)
    return outcome is not None and bool(outcome.job_id)


def stage_all(run: Settled, packing: Packing, benches: Sequence[str]) -> None:
    """Stage what is not staged yet of `benches`, in one pass: the first stage task of a run stages
    every benchmark the run will stage and the tasks after it find theirs done. A staged benchmark is
    never rendered again."""
    stage_many(run, packing, [b for b in benches if not staged(run, packing, b)])


def stage_many(run: Settled, packing: Packing, benches: list[str]) -> None:
    """Render the job of each of `benches` (once a job: a shared one has several) and write it into
    the staged tree, in order; the first error (a plan the config cannot express) stops the pass,
    as a held error stops the steps after it."""
    from gymbuild.render.shared import render_job_plan  # late: Jinja2 (House rules)

    keep_compiled_templates()
    plans, secrets, progress = run.plans, run.resolved.secrets, run.memory.progress
    groups = plans.groups(packing, benches)  # a sharded benchmark's jobs are its shards'
    for done, group in enumerate(groups):
        if done % 25 == 0 and len(groups) >= 100:
            progress.show(f"rendering job scripts {done}/{len(groups)}")
        job = plans.job(group)
        rendered = render_job_plan(job, secrets)
        run.memory.rendered[job.rel_dir] = rendered  # job.sh holds no secret value: the dry run prints it
        # No empty dirs: the sync makes logs/ (Slurm opens logs/slurm-<id>.log before the job
        # runs), and the job makes the rest (artifacts/, model-calls/, ...) as it starts.
        run.workspace.write_staged(job.rel_dir, {r: (f.text, f.mode) for r, f in rendered.files.items()})
        for bench in group:  # a shard stamps its benchmark (staged when its last shard is written)
            bench = shard[0] if (shard := shard_of(bench)) else bench
            run.workspace.set_stage_stamp(bench, plans.stage_want(bench, packing))
    progress.done(keep=False)


def resolved_path(workspace: Workspace) -> Path:
    """The submission's first resolved-config.yaml: what the stage tasks name as their input."""
    return workspace.stage / RESOLVED_CONFIG_NAME


def resolved_names(workspace: Workspace) -> dict[str, str]:
    """The resolved configs this submission staged, by the digest of each: resolved-config.yaml, then
    resolved-config.2.yaml, ... for a later submit (resubmit, only=) of a changed config."""
    try:
        names = json.loads(workspace.stamp(RESOLVED_NAMES_STAMP) or "{}")
    except ValueError:
        return {}
    return names if isinstance(names, dict) else {}


def resolved_target(run: Settled) -> Path:
    """Where this run's resolved config goes. The first file is kept once a job was queued under it
    (it says what ran): a changed config then goes beside it, numbered, and the record names them."""
    workspace = run.workspace
    names, want = resolved_names(workspace), run.resolved_digest
    if want in names:
        return workspace.stage / names[want]
    outcomes = workspace.outcomes().values()
    ran = not workspace.draft and any(o.job_id or o.previous_job_ids for o in outcomes)
    first = resolved_path(workspace)
    if not ran:
        return first
    count = len({*names.values(), first.name})
    return workspace.stage / f"resolved-config.{count + 1}.yaml"


def resolved_written(run: Settled) -> bool:
    """The staged resolved config was written from what this run resolved (its stamp: the resolved
    tree's digest)."""
    return run.workspace.stamp(RESOLVED_STAMP) == run.resolved_digest and resolved_target(run).exists()


def write_resolved(run: Settled) -> None:
    """The resolved config in the staged tree (it goes to the run directory with the scripts), never
    over one that a queued job ran with (resolved_target)."""
    if resolved_written(run):
        return
    target, workspace = resolved_target(run), run.workspace
    atomic_write(target, run.resolved_yaml)
    names = {d: n for d, n in resolved_names(workspace).items() if n != target.name}
    names[run.resolved_digest] = target.name
    workspace.set_stamp(RESOLVED_NAMES_STAMP, json.dumps(names, sort_keys=True), durable=False)
    workspace.set_stamp(RESOLVED_STAMP, run.resolved_digest, durable=False)


def unstage(workspace: Workspace, bench: str, files: Sequence[str]) -> None:
    """stage:<bench>'s `doit clean`: remove its staged files and the stamp that vouched for them.

    Not for a queued benchmark: its staged script is the one its job runs and the sync's record of
    the run directory; only an unqueued benchmark's files are derived and safe to drop.
    """
    outcome = workspace.outcome(bench)
    if outcome is not None and outcome.job_id:
        return
    for path in files:
        Path(path).unlink(missing_ok=True)
    workspace.drop_stage_stamp(bench)
    workspace.save_stage_stamps()
