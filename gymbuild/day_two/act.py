"""Acting on a submission: `cancel` its live jobs, `resubmit` the benchmarks that ended in a retryable
state (through the one submit pipeline), and `requeue`, which a sweep and `submit follow=1` share."""

from __future__ import annotations

import json
import posixpath
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gymbuild.day_two import replan
from gymbuild.day_two.find import find_checked, find_record, no_submission
from gymbuild.day_two.status import current_statuses
from gymbuild.errors import UserError
from gymbuild.executors.base import executor_for
from gymbuild.executors.chain import Stopped, parse_stopped
from gymbuild.executors.shard_states import shard_dir
from gymbuild.executors.states import (
    BenchStatus,
    shared_job_dirs,
    shared_jobs,
    states_of,
    waiting_note,
)
from gymbuild.plan.shared import shared_job_name
from gymbuild.request.verb_args import CancelArgs, DryRunnable, ResubmitArgs
from gymbuild.state.records import BenchmarkJob, SubmissionRecord
from gymbuild.state.shards import sharded
from gymbuild.submit import pipeline, show
from gymbuild.submit.shards import refuse_changed

if TYPE_CHECKING:
    from gymbuild.submit.session import Session


def live_job_ids(rows: Sequence[BenchStatus], only: Sequence[str], live: frozenset[str]) -> list[str]:
    """The live jobs of the benchmarks (of `only`): a chain's every live job (its running one and the
    successor queued behind it), else the row's job while it (or its shared job) is live."""
    found: list[str] = []
    for r in rows:
        if only and r.benchmark not in only:
            continue
        if r.shards:  # a sharded benchmark: each shard's live job
            found += live_job_ids(r.shards, (), live)
        elif r.chain is not None and r.chain.live:
            found += r.chain.live
        elif r.job_id and (r.state in live or r.job_state in live):  # waiting in its running shared job
            found.append(r.job_id)
    return list(dict.fromkeys(found))


def cancel(s: Session, args: CancelArgs) -> None:
    """Cancel the submission's live jobs, every chain's queued successors with them (the executor
    finds those in the same call, as they are then); dry_run=1 (--dry-run) names them, and touches
    nothing."""
    record, rows = current_statuses(s, args)
    executor = executor_for(record.executor)
    live = live_job_ids(rows, args.only, executor.LIVE)
    waits = waiting_note(rows)  # what waits for room has no job: said, as status says it
    recorded = {job_id for j in record.benchmarks for job_id in (j.job_id, *j.previous_job_ids) if job_id}
    recorded |= {i for ids in sharded(record.executor_metadata).values() for i in ids if i}  # shards' jobs
    if args.dry_run:
        named = [f"{job} ({_benches_of(rows, job)}{_successor(job, recorded)})" for job in live]
        message = (
            f"would cancel {len(live)} job(s) of {record.gym_job_id}: {', '.join(named)} "
            "(dry run: none cancelled)"
            if live
            else f"nothing to cancel: no job of {record.gym_job_id} is pending or running"
        ) + waits
        _said(args, record, [], message, would_cancel=live)
        return
    if not live:
        # A job killed without its EXIT trap (SIGKILL, a lost node) left its secrets file behind.
        executor.forget_secrets(s.connection(), record.gym_job_id, _secret_names(args, record, rows))
        none = f"nothing to cancel: no job of {record.gym_job_id} is pending or running"
        _said(args, record, [], none + waits)
        return
    by_name = {j.benchmark: j for j in record.benchmarks}
    # A shared job is cancelled at its own directory (states.py), where status reads its marks.
    shared = shared_job_dirs(record)
    dirs = {
        shared.get(by_name[r.benchmark].job_id or "", by_name[r.benchmark].job_dir): r.job_id
        for r in rows
        if r.job_id and not r.shards and set(live_job_ids([r], (), executor.LIVE))
    }
    dirs |= live_shards(rows, by_name, executor.LIVE)  # a sharded benchmark's at each shard's own dir
    result = executor.cancel(s.connection(), dirs)
    if not result.ok:
        raise UserError(f"error: cancelling {', '.join(live)} failed: {result.stderr.strip()}")
    # Their successors are cancelled too, so no later run reads these benchmarks' secrets again.
    executor.forget_secrets(s.connection(), record.gym_job_id, _secret_names(args, record, rows))
    stopped = parse_stopped(result.stdout) or [Stopped(j, "", d) for d, j in dirs.items()]
    ids = list(dict.fromkeys(x.job_id for x in stopped))
    where = {posixpath.normpath(by_name[r.benchmark].job_dir): r.benchmark for r in rows}
    groups = shared_jobs(record.benchmarks)
    where.update({posixpath.normpath(d): "+".join(groups[j]) for j, d in shared.items()})
    where.update(
        {posixpath.normpath(d): f"{r.benchmark} shard {k}" for r in rows for k, d in _shard_dirs(r, by_name)}
    )
    named = [
        f"{x.job_id} ({where.get(posixpath.normpath(x.bench_dir), '?')}"
        f"{' ' + x.state if x.state else ''}{_successor(x.job_id, recorded)})"
        for x in stopped
    ]
    message = f"cancelled {len(ids)} job(s) of {record.gym_job_id}: {', '.join(named)}"
    if not ids:
        message = f"nothing to cancel: the jobs of {record.gym_job_id} ended meanwhile"
    _said(args, record, ids, message + waits, stopped=stopped, recorded=recorded)


def _shard_dirs(row: BenchStatus, by_name: dict[str, BenchmarkJob]) -> list[tuple[int, str]]:
    return [(k, shard_dir(by_name[row.benchmark].job_dir, k)) for k in range(len(row.shards))]


def live_shards(
    rows: Sequence[BenchStatus], by_name: dict[str, BenchmarkJob], live: frozenset[str]
) -> dict[str, str]:
    """Each live shard's directory -> its job id, of the sharded benchmarks among `rows`."""
    return {
        d: shard.job_id
        for r in rows
        for (k, d), shard in zip(_shard_dirs(r, by_name), r.shards, strict=True)
        if shard.job_id and live_job_ids([shard], (), live)
    }


def _successor(job_id: str, recorded: set[str]) -> str:
    """`, successor` for a job of a chain that no record holds: a job queued by a job."""
    return "" if job_id in recorded else ", successor"


def _benches_of(rows: Sequence[BenchStatus], job_id: str) -> str:
    """`gpqa RUNNING`, or for a shared job each of its benchmarks with its state; a chain's other
    live job (the successor queued behind the running one) with its own state."""
    named = [
        f"{r.benchmark} shard {k} {x.state}"
        for r in rows
        for k, x in enumerate(r.shards)
        if x.job_id == job_id
    ]
    named = named or [f"{r.benchmark} {r.state}" for r in rows if r.job_id == job_id]
    if not named:
        named = [
            f"{r.benchmark} {next((st.state for st in r.chain.steps if st.job_id == job_id), '?')}"
            for r in rows
            if r.chain is not None and job_id in r.chain.live
        ]
    return ", ".join(named)


def replan_runs(
    runs: Sequence[Session], records: Sequence[SubmissionRecord], only: Sequence[str]
) -> list[replan.Plan]:
    """Each run's resubmit plan (day_two/replan.py) from one look at all the runs' jobs."""
    if not runs:
        return []
    conn = runs[0].connection(records[0].hostname, use_config=False)
    plans = []
    for ctx, record, rows in zip(runs, records, states_of(conn, records), strict=True):
        executor = executor_for(record.executor)
        how = replan.how_it_runs(ctx.config, scheduled=executor.SCHEDULED) if ctx.error is None else {}
        plans.append(replan.plan(record.gym_job_id, rows, only, executor.RETRYABLE, how, executor.LIVE))
    return plans


def requeue(
    runs: Sequence[Session],
    records: Sequence[SubmissionRecord],
    only: Sequence[str],
    plans: Sequence[replan.Plan] | None = None,
) -> list[list[str]]:
    """Release each run's benchmarks its plan queues (`plans`, else one look for all the runs:
    replan_runs) and queue them again in one pipeline (pipeline.run_batch): per run, what it re-queued."""
    if not runs:
        return []
    for ctx in runs:  # nothing released for a run whose K changed (shards.refuse_changed)
        refuse_changed(ctx.settled, ctx.selected())
    picked = []
    for ctx, one in zip(runs, plans or replan_runs(runs, records, only), strict=True):
        for step in one.steps:
            if step.action != replan.NOTHING:  # a sharded benchmark: the shards it picked, alone
                for unit in step.units:
                    ctx.workspace.release(unit, step.state)
        picked.append(one.queued)
    pipeline.run_batch(runs, picked)
    return picked


def tell_plan(args: ResubmitArgs, one: replan.Plan) -> None:
    """A real resubmit's first lines: its plan (on stderr under json=1, whose stdout is the manifest)."""
    print("\n".join(replan.lines(one)), file=sys.stderr if args.json else sys.stdout)


def resubmit(s: Session, args: ResubmitArgs) -> None:
    """Re-queue what ended FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED or BOOT_FAIL.

    Each such benchmark's outcome gives up its job id (kept in its history), then the submit
    pipeline runs for exactly those benchmarks (requeue, as for every cell of a sweep).
    """
    if s.error is not None:
        raise s.error
    if args.run:  # a record that is refused (ids.py) is refused before a submission is started
        find_record(s, args.run, connect=False)
    if s.workspace.submission() is None:  # nothing to resubmit, and no fresh submission started for it
        raise no_submission(s)
    # A config that now submits elsewhere asks for new=1 before anything is re-queued.
    current = s.submission()
    record = find_checked(s, args)
    if record.gym_job_id != current.gym_job_id:
        raise UserError(
            f"error: resubmit works on the config's current submission ({current.gym_job_id}),"
            f" not {record.gym_job_id}\n    fix: drop run=, or submit that config again"
        )
    refuse_changed(s.settled, s.selected())  # a dry run too: it says what resubmit will do
    if args.dry_run:
        return _would_resubmit(s, args, record)
    (plan,) = replan_runs([s], [record], args.only)
    tell_plan(args, plan)
    (picked,) = requeue([s], [record], args.only, [plan])
    if not picked:
        message = replan.nothing_message(plan, record.gym_job_id, args.config)
        if args.json:  # the manifest, and nothing else on stdout, as a resubmit that re-queued prints
            print(message, file=sys.stderr)
            sys.stdout.write(record.dumps())
        else:
            print(message)
        return
    failure = show.report_submit(s, args, picked)
    if failure is not None:
        raise UserError(failure)


def _would_resubmit(s: Session, args: ResubmitArgs, record: SubmissionRecord) -> None:
    """resubmit's dry run: one look, and its plan (day_two/replan.py: each benchmark's state, rows,
    what would be queued and why, an upper bound of the cost); nothing is released, copied or queued."""
    (plan,) = replan_runs([s], [record], args.only)
    would = [
        {"benchmark": step.benchmark, "job_id": step.job_id, "state": step.state}
        for step in plan.steps
        if step.action != replan.NOTHING
    ]
    named = ", ".join(f"{w['benchmark']} ({w['state']}, job {w['job_id'] or 'none'})" for w in would)
    message = (
        f"would re-queue {len(would)} benchmark(s) of {record.gym_job_id}: {named} (dry run: none queued)"
        if would
        else replan.nothing_message(plan, record.gym_job_id, args.config)
    )
    if args.json:
        doc = {
            "gym_job_id": record.gym_job_id,
            "dry_run": True,
            "would_resubmit": would,
            "plan": replan.as_json(plan),
            "message": message,
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        print("\n".join([message, *replan.lines(plan)]))


def _said(
    args: DryRunnable,
    record: SubmissionRecord,
    cancelled: Sequence[str],
    message: str,
    *,
    stopped: Sequence[Stopped] = (),
    recorded: set[str] | None = None,
    **dry_run: object,
) -> None:
    """cancel's (and a dry run's) answer: its line, or (json=1) one JSON document naming the jobs it
    cancelled (`stopped`: each with its state then, bench dir, and whether a job queued it: a chain's
    successor); a dry run's says `"dry_run": true` and what it would have done."""
    if args.json:
        doc: dict[str, object] = {
            "gym_job_id": record.gym_job_id,
            "cancelled": list(cancelled),
            "message": message,
        }
        if stopped:
            doc["stopped"] = [
                {**x.__dict__, "successor": x.job_id not in (recorded or set())} for x in stopped
            ]
        if args.dry_run:
            doc = {**doc, "dry_run": True, **dry_run}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        print(message)


def _secret_names(args: CancelArgs, record: SubmissionRecord, rows: Sequence[BenchStatus]) -> list[str]:
    """The secrets files `cancel` removes: the named benchmarks', or (without only=) every name the
    submission's files can have (each benchmark's, each shared job's). Named, never the directory
    whole: what else is there is not gymbuild's (executors/secrets.py)."""
    if args.only:
        return [r.benchmark for r in rows]

    groups = shared_jobs(record.benchmarks).values()
    return [*(j.benchmark for j in record.benchmarks), *(shared_job_name(g) for g in groups)]
