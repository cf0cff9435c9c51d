"""Show: what the verbs print about the pipeline: the resolved config, the dry run, the submit report."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from gymbuild.executors.base import executor_for
from gymbuild.executors.states import WAITING_FOR_ROOM, waits_for_room
from gymbuild.plan import shard_rel_dir
from gymbuild.request.verb_args import RenderArgs, ResolveArgs, ResubmitArgs, SubmitArgs
from gymbuild.submit import quota
from gymbuild.submit.arrays import refuse_shards
from gymbuild.submit.plans import keep_compiled_templates
from gymbuild.submit.record import build_record
from gymbuild.submit.shards import refuse_changed

if TYPE_CHECKING:
    from gymbuild.plan.arrays import ArrayJob
    from gymbuild.plan.job import JobPlan
    from gymbuild.state.records import BenchmarkJob
    from gymbuild.state.workspace import Outcome, Workspace
    from gymbuild.submit.plans import RunPlans
    from gymbuild.submit.session import Session


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def print_resolved(ctx: Session, args: ResolveArgs) -> None:
    from gymbuild.config.output import dump_tree  # late: PyYAML (House rules)

    assert ctx.resolved is not None
    ctx.warn()
    sys.stdout.write(dump_tree(ctx.resolved.tree, as_json=args.json))


def print_dry_run(ctx: Session, args: RenderArgs) -> None:
    """The job of every selected benchmark (once a job, keyed by its directory relative to the run
    dir), rendered with secrets masked; nothing is queued or recorded. A job this run staged is
    printed as staged: its job.sh holds no secret value."""
    from gymbuild import render  # late: Jinja2 (House rules)
    from gymbuild.render.shared import render_job_plan  # late: Jinja2

    assert ctx.resolved is not None
    refuse_changed(ctx.settled, ctx.selected())  # what submit refuses, the dry run refuses: the same
    refuse_shards(ctx.settled, ctx.selected())  # checks (pipeline.refuse_unsafe), the same messages
    ctx.warn(executor=True)
    keep_compiled_templates()
    mask = render.mask_secrets(ctx.resolved.secrets)
    plans, selected = ctx.plans, ctx.selected()
    benchmarks = ctx.resolved.config.driver.benchmarks
    sharded = {b: plans.shards(b) for b in selected if benchmarks[b].shards > 1}
    whole = [b for b in selected if b not in sharded]
    jobs = {}
    for group in plans.packing(whole).jobs(whole):
        job = plans.job(group)
        jobs[job.rel_dir] = ctx.memory.rendered.get(job.rel_dir) or render_job_plan(job, mask)
    shards: dict[str, list[str]] = {}
    for bench, shard_plans in sharded.items():
        shards[bench] = [f"{bench}/{shard_rel_dir(k)}" for k in range(len(shard_plans))]
        jobs |= {rel: render.render_job(p, mask) for rel, p in zip(shards[bench], shard_plans, strict=True)}
    run_dir = ctx.submission().run_dir
    planned = [plans.job(group) for group in plans.packing(whole).jobs(whole)]
    arrays = _arrays(ctx, planned)
    if ctx.executor.SCHEDULED and planned:  # the quota: render has no connection, so what submit checks
        _err(quota.dry_run_note(len(jobs), dict(planned[0].plan.directives)))
    if args.json:
        payload: dict[str, object] = {
            "run_dir": run_dir,
            "benchmarks": {b: {rel: f.text for rel, f in j.files.items()} for b, j in jobs.items()},
        }
        if arrays is not None:
            payload["arrays"] = [
                {"array": a.spec if a.is_array else None, "jobs": list(a.keys), "directives": a.directives}
                for a in arrays
            ]
        if shards:
            payload["shards"] = shards
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        notes = [_shards_note(bench, dirs) for bench, dirs in shards.items()]
        for chunk in render.dry_run_chunks(run_dir, jobs, notes):  # doit's stdout Writer has no writelines
            sys.stdout.write(chunk)
        if arrays is not None:
            sys.stdout.write(_arrays_text(ctx.config.compute.name, arrays, _resumable(planned)))


def _arrays(ctx: Session, jobs: Sequence[JobPlan]) -> tuple[ArrayJob[str], ...] | None:
    """The arrays a submit would queue the jobs in (by job dir), before the split under the cluster's
    MaxArraySize (the dry run asks no cluster); None when the compute queues no arrays."""
    from gymbuild.plan.arrays import plan_arrays

    array = ctx.config.compute.array
    if array is None or not executor_for(ctx.config).SCHEDULED:
        return None
    return plan_arrays([(job.rel_dir, job.plan.directives) for job in jobs], None, array.parallel)


def _resumable(jobs: Sequence[JobPlan]) -> set[str]:
    return {job.rel_dir for job in jobs if job.plan.resume}


def _arrays_text(compute: str, arrays: Sequence[ArrayJob[str]], resumable: set[str]) -> str:
    """What the dry run says of the arrays: one line each (its jobs, their --array, what they share),
    and that a resumable job's successor is a plain job."""
    count = sum(a.is_array for a in arrays)
    lines = [
        f"[dry-run] job arrays (compute.{compute}.array): {count} array{'s' * (count != 1)}, each split "
        "at submit into arrays of at most MaxArraySize tasks (the cluster's, read then), indexed from 0"
    ]
    for a in arrays:
        shared = " ".join(f"--{k}" if v is None else f"--{k}={v}" for k, v in a.directives) or "(none)"
        if a.is_array:
            jobs = ", ".join(a.keys)
            lines.append(f"[dry-run] array --array={a.spec}: {jobs}; shared directives: {shared}")
        else:
            lines.append(f"[dry-run] plain job: {a.keys[0]} (no other job has its directives: {shared})")
    in_arrays = sorted(k for a in arrays if a.is_array for k in a.keys if k in resumable)
    if in_arrays:
        lines.append(
            f"[dry-run] resumable in an array: {', '.join(in_arrays)}: a successor (the job that resumes "
            "one) is a plain job, queued by the task that needs it"
        )
    return "\n".join(lines) + "\n"


def _shards_note(bench: str, dirs: Sequence[str]) -> str:
    """What the dry run says of a sharded benchmark before its jobs' scripts."""
    return (
        f"[dry-run] {bench}: {len(dirs)} shards, one job each ({dirs[0]} .. {dirs[-1]}), each a slice of the "
        f"benchmark's materialized inputs; the last to end merges them into {bench}/artifacts/rollouts.jsonl "
        "and its aggregate metrics"
    )


def _changed_since_queued(
    workspace: Workspace, plans: RunPlans, queued_now: Sequence[str], benches: Iterable[str]
) -> list[tuple[str, Outcome]]:
    """The benchmarks of `benches` queued before this run whose script would now be another."""
    earlier = [(b, o) for b in benches if b not in queued_now and (o := workspace.outcome(b)) and o.job_id]
    return [(b, o) for b, o in earlier if o.script_digest != plans.stage_digest(b)]


def report_submit(
    ctx: Session, args: SubmitArgs | ResubmitArgs, benches: Sequence[str] | None = None
) -> str | None:
    """Print what the run queued (json=1: the manifest) and the notes on what it left alone; return
    the failure to report (exit 1) when a benchmark of `benches` (default: the selection) has no job
    id."""
    ctx.progress.done()
    ctx.warn(executor=True)
    # What the report reads, settled first: the run context is not asked again below.
    sub, workspace, plans = ctx.submission(), ctx.workspace, ctx.plans
    everyone, queued_now = ctx.selected(), ctx.queued_now
    # resubmit reports on what it re-queued; a benchmark it was not asked about fails nothing.
    selected = set(everyone if benches is None else benches)
    changed = _changed_since_queued(workspace, plans, queued_now, [b for b in everyone if b in selected])
    record = build_record(sub, workspace, commit=args.json)  # json=1 prints it as the manifest
    jobs = [j for j in record.benchmarks if j.benchmark in selected]
    label = executor_for(record.executor).JOB_LABEL
    if args.json:
        sys.stdout.write(record.dumps())
    elif not queued_now and all(j.job_id for j in jobs):
        print(
            f"nothing to submit: {_all_queued(len(jobs))} ({record.gym_job_id}); one that failed "
            f"is re-queued by `gymbuild resubmit config={args.config}` (a cancelled one: add only=NAME), "
            "a fresh submission of all by new=1"
        )
    else:
        print(f"run dir: {record.run_dir}")
        for job in jobs:
            if job.benchmark not in queued_now or waits_for_room(job.error):
                continue
            shards = [u for u in plans.units(job.benchmark) if u != job.benchmark]
            for k, unit in enumerate(shards):  # a sharded benchmark: each shard this run queued
                if unit in queued_now and (outcome := workspace.outcome(unit)) and outcome.job_id:
                    print(f"submitted {job.benchmark} shard {k} -> {label} {outcome.job_id}")
            if shards and job.job_id:
                continue
            if job.job_id:
                print(f"submitted {job.benchmark} -> {label} {job.job_id}")
            else:
                print(f"failed {job.benchmark}: {job.error}")
    waiting = [j for j in jobs if not j.job_id and waits_for_room(j.error)]
    if waiting and not args.json:
        print(_waiting_line(waiting))
    for bench, outcome in changed:
        _err(
            f"note: {bench} changed since it was queued as job {outcome.job_id}; it was left alone "
            "(new=1 submits everything again as a fresh submission)"
        )
    failed = [j.benchmark for j in jobs if not j.job_id and not waits_for_room(j.error)]
    if failed:
        return (
            f"error: {len(failed)} of {len(jobs)} benchmarks have no job id: {', '.join(failed)}\n"
            "    fix: correct the cause above and run `gymbuild submit` again: it queues only these"
        )
    return None


def _waiting_line(waiting: Sequence[BenchmarkJob]) -> str:
    """One line: how many benchmarks wait for room, under which limit (the first one's reason)."""
    names = ", ".join(j.benchmark for j in waiting[:5]) + (", ..." if len(waiting) > 5 else "")
    reason = (waiting[0].error or "").removeprefix(WAITING_FOR_ROOM)
    return f"waiting {len(waiting)} ({names}): {reason}"


def _all_queued(count: int) -> str:
    return "the benchmark is queued" if count == 1 else f"all {count} benchmarks are queued"
