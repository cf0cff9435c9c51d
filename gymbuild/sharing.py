"""Which of a run's benchmarks share a job (`driver.benchmarks_per_job`), decided where they are queued.

The benchmarks to queue (those without a job id: a first submit's all, a resubmit's failed or not
run) are packed in config order, up to `benchmarks_per_job` a job and never two resume settings in
one (`job_groups`), so a resubmit packs what is left anew. A group of one is that benchmark's own
job, exactly as without sharing. Each benchmark keeps its own outcome: every member of a shared job
gets the job's id, which is how status and resubmit tell a shared job from its benchmarks later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gymbuild.config.derived import job_groups
from gymbuild.config.model import Config
from gymbuild.plan.shared import JOBS_DIR, job_rel_dir

Group = tuple[str, ...]


def pack(config: Config, benches: Iterable[str]) -> dict[str, Group]:
    """bench -> the benchmarks of its shared job (groups of two or more only), for `benches` in order."""
    drv = config.driver
    if not drv.shares_jobs:
        return {}
    groups = job_groups(benches, drv.benchmarks_per_job, lambda b: drv.benchmarks[b].resumable)
    return {bench: group for group in groups if len(group) > 1 for bench in group}


def units(benches: Iterable[str], packing: Mapping[str, Group]) -> list[str]:
    """What is queued for `benches`, in order: a benchmark alone, or the first of its shared job
    (standing for the job: one sbatch whose id every member gets)."""
    out: dict[str, None] = {}
    for bench in benches:
        group = packing.get(bench)
        out[group[0] if group else bench] = None
    return list(out)


# --- the run's steps (steps/stage, sync, queue, show) ask these about a run's shared jobs -----------


def packing(ctx: Any, benches: list[str] | None = None) -> dict[str, Group]:
    """bench -> its shared job's benchmarks, for the benchmarks to queue now (or `benches`); while a
    queue pass runs, the packing it started with (its benchmarks' outcomes shrink what is left)."""
    if not ctx.config.driver.shares_jobs:
        return {}
    frozen = ctx.memo.get("queue_packing")
    if benches is None and frozen is not None:
        return frozen
    key = tuple(ctx.to_queue() if benches is None else benches)
    found = ctx.memo.setdefault("packings", {})
    if key not in found:
        found[key] = pack(ctx.config, key)
    return found[key]


def freeze_packing(ctx: Any) -> dict[str, Group]:
    """The packing of a queue pass, kept for the rest of the run."""
    ctx.memo["queue_packing"] = None
    found = ctx.memo["queue_packing"] = packing(ctx)
    return found


def shared_plan(ctx: Any, group: Group) -> Any:
    """The SharedJobPlan of `group` (planned once a run)."""
    from gymbuild.plan.shared import plan_shared_job
    from gymbuild.planning import bench_plan

    found = ctx.memo.setdefault("shared_plans", {})
    if group not in found:
        plans = [bench_plan(ctx, b) for b in group]
        found[group] = plan_shared_job(plans, ctx.config.driver.concurrent_benchmarks)
    return found[group]


def stage_want(ctx: Any, bench: str) -> str:
    """The stage stamp that says `bench` is staged for this run: its own digest, and for a member of a
    shared job also the job it is packed into (a resubmit packs anew)."""
    from gymbuild.planning import stage_digest
    from gymbuild.workspace import digest

    group = packing(ctx).get(bench)
    own = stage_digest(ctx, bench)
    return own if group is None else digest(own, list(group))


def stage_shared(ctx: Any, benches: list[str]) -> list[str]:
    """Render each shared job of `benches` into the staged tree (under +jobs/), once a job; the
    benchmarks left are those that are their own job."""
    from gymbuild.render.shared import render_shared_job

    packed = packing(ctx)
    mine = [b for b in benches if b in packed]
    if mine:
        (ctx.workspace.stage / JOBS_DIR).mkdir(mode=0o755, parents=True, exist_ok=True)
    for group in dict.fromkeys(packed[b] for b in mine):
        job = render_shared_job(shared_plan(ctx, group), ctx.resolved.secrets)
        ctx.workspace.write_staged(job_rel_dir(group), {r: (f.text, f.mode) for r, f in job.files.items()})
        for bench in group:
            ctx.workspace.set_stage_stamp(bench, stage_want(ctx, bench))
    return [b for b in benches if b not in packed]


def unit_plan(ctx: Any, bench: str) -> Any:
    """The plan of what is queued for `bench`: its own, or its shared job's as a whole."""
    from gymbuild.planning import bench_plan

    group = packing(ctx).get(bench)
    return bench_plan(ctx, bench) if group is None else shared_plan(ctx, group).job


def members(ctx: Any, bench: str) -> Group:
    """The benchmarks whose outcome queueing `bench` gives: itself, or every member of its job."""
    return packing(ctx).get(bench, (bench,))


def dirs_to_make(ctx: Any) -> list[str]:
    """The directories (relative to the run dir) whose logs/ must exist before their job is queued:
    each benchmark's, and each shared job's own (its Slurm output goes there)."""
    to_queue, packed = ctx.to_queue(), packing(ctx)
    jobs = dict.fromkeys(packed[b] for b in to_queue if b in packed)
    return [*to_queue, *(job_rel_dir(g) for g in jobs)]


def dry_run_jobs(ctx: Any, mask: Mapping[str, str], render_one: Any) -> dict[str, Any]:
    """What `render` shows for the selection: each benchmark's own job, or its shared job once (keyed
    by the job's directory, relative to the run dir)."""
    from gymbuild.render.shared import render_shared_job

    packed = packing(ctx, ctx.selected())
    jobs = {}
    for bench in ctx.selected():
        group = packed.get(bench)
        if group is None:
            jobs[bench] = render_one(bench)
        elif group[0] == bench:
            jobs[job_rel_dir(group)] = render_shared_job(shared_plan(ctx, group), mask)
    return jobs
