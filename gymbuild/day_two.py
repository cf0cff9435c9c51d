"""The day-two verbs: status, logs, cancel, resubmit and runs, on a submission found again.

Each takes the run's Session. A submission is found from the workspace (the config's current one,
without loading the config: status of a thousand jobs must not compose and validate a thousand
benchmarks) or, with `run=<id>`, from the local index or the run directory (followup.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gymbuild import followup, pipeline, sharing
from gymbuild.errors import UserError
from gymbuild.steps import show
from gymbuild.steps.record import build_record

if TYPE_CHECKING:
    from gymbuild.jobs import SubmissionRecord
    from gymbuild.session import Session


def find_record(s: Session, run: str | None = None, *, connect: bool = True) -> SubmissionRecord:
    """`run=<id>` (or `run`): the local index, else the run directory; otherwise (or with `run=""`)
    the config's submission. The session's connection goes to the host the record names, opened now
    unless not `connect` (`results` of finished benchmarks reads its cache and opens nothing)."""
    inv = s.inv
    run = inv.run if run is None else run
    if run:
        record = followup.record_from_index(run)
        if record is not None:
            if connect:
                s.connection(record.hostname, use_config=False)
            return record
        if s.error is not None:
            raise UserError(
                f"error: {run} is not in this machine's local index, and without a config "
                f"gymbuild cannot tell where its run directory is\n{s.error}"
            )
        run_dir = str(Path(s.output_path) / run)
        return followup.record_from_run_dir(s.connection(), run_dir)
    current = s.workspace.submission()
    if current is None or not s.workspace.has_outcomes():
        raise UserError(
            f"error: {inv.config} has no submission in {inv.workspace} yet\n"
            "    fix: run `doit submit` first, or name one with run=<gym_job_id> (see `doit runs`)"
        )
    # What was submitted, where it went, even if the config has been edited since (a new
    # output_path or host): status, logs and cancel must still reach the jobs that are queued.
    s.adopt_submission(current)
    if connect:
        s.connection(current.hostname, use_config=False)
    return build_record(s, commit=False)


def _find_checked(s: Session) -> SubmissionRecord:
    """The submission, with only= checked against it (not the config: with run= there may be none)."""
    record = find_record(s)
    names = [job.benchmark for job in record.benchmarks]
    unknown = [b for b in s.inv.only if b not in names]
    if unknown:
        raise UserError(
            f"error: only= names benchmark(s) {record.gym_job_id} does not have: {', '.join(unknown)}\n"
            f"    fix: pick from {', '.join(names)}"
        )
    return record


def _look(s: Session, record: SubmissionRecord) -> list[followup.BenchStatus]:
    """One look at the submission's jobs (one squeue and one sacct, whatever their number)."""
    rows = followup.statuses(s.connection(), record)
    return [r for r in rows if r.benchmark in s.inv.only] if s.inv.only else rows


def _statuses(s: Session) -> tuple[SubmissionRecord, list[followup.BenchStatus]]:
    record = _find_checked(s)
    return record, _look(s, record)


# A large status takes a second or two: say so on a terminal, from this many jobs.
PROGRESS_FROM = 100


def print_status(s: Session) -> None:
    """The table (json=1: one document) with its summary line; watch=1 looks again until every job
    has ended and fails (exit 1) unless every benchmark completed."""
    record = _find_checked(s)
    live = followup.executor_module(record.executor).LIVE
    looks = None
    if s.inv.watch:
        from gymbuild import watch

        rows, summary, looks = watch.watch(lambda: _look(s, record), record, live, as_json=s.inv.json)
    else:
        if len(record.benchmarks) >= PROGRESS_FROM:
            s.progress.show(f"asking about the {len(record.benchmarks)} jobs of {record.gym_job_id} ...")
        rows = _look(s, record)
        s.progress.done(keep=False)
        summary = followup.tally(rows, live)
    render = followup.statuses_json if s.inv.json else followup.format_statuses
    sys.stdout.write(render(record, rows, summary, looks))
    if s.inv.watch and summary.failed + summary.unknown:
        raise UserError(watch.not_completed(record, rows, live))


def print_runs(s: Session) -> None:
    sys.stdout.write(followup.format_runs(followup.all_runs(), s.inv.json))


def cancel(s: Session) -> None:
    record, rows = _statuses(s)
    executor = followup.executor_module(record.executor)
    live = followup.live_job_ids(rows, s.inv.only, executor.LIVE)
    if not live:
        print(f"nothing to cancel: no job of {record.gym_job_id} is pending or running")
        return
    job_dirs = {j.benchmark: j.job_dir for j in record.benchmarks}
    # A shared job is cancelled at its own directory (sharing.py), where status reads its marks.
    shared = sharing.shared_job_dirs(record)
    dirs = {shared.get(r.job_id, job_dirs[r.benchmark]): r.job_id for r in rows if r.job_id in live}
    result = executor.cancel(s.connection(), dirs)
    if not result.ok:
        raise UserError(f"error: cancelling {', '.join(live)} failed: {result.stderr.strip()}")
    print(f"cancelled {len(live)} job(s) of {record.gym_job_id}: {', '.join(live)}")


def print_logs(s: Session) -> None:
    record, rows = _statuses(s)
    if len(rows) != 1:  # only=<bench>, or a submission of one benchmark
        names = ", ".join(r.benchmark for r in rows)
        raise UserError(f"error: name one benchmark with only=<bench> (one of: {names})")
    row = rows[0]
    if not row.job_id:
        raise UserError(f"error: {row.benchmark} was never queued: {row.error}")
    job_dir = next(j.job_dir for j in record.benchmarks if j.benchmark == row.benchmark)
    shared = sharing.shared_job_dirs(record)
    followup.show_logs(
        s.connection(), job_dir, row.job_id, follow=s.inv.follow, shared_dir=shared.get(row.job_id)
    )


def resubmit(s: Session) -> None:
    """Re-queue what ended FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED or BOOT_FAIL.

    Each such benchmark's outcome gives up its job id (kept in its history), then the submit
    pipeline (pipeline.run) runs for exactly those benchmarks.
    """
    if s.error is not None:
        raise s.error
    current = (
        s.submission()
    )  # a config that now submits elsewhere asks for new=1 before anything is re-queued
    record, rows = _statuses(s)
    if record.gym_job_id != current.gym_job_id:
        raise UserError(
            f"error: resubmit works on the config's current submission ({current.gym_job_id}),"
            f" not {record.gym_job_id}\n    fix: drop run=, or submit that config again"
        )
    executor = followup.executor_module(record.executor)
    picked = followup.to_resubmit(rows, s.inv.only, executor.RETRYABLE)
    if not picked:
        print(f"nothing to resubmit: no benchmark of {record.gym_job_id} ended in a retryable state")
        return
    states = {r.benchmark: r.state for r in rows}
    for bench in picked:
        s.workspace.release(bench, states[bench])
    pipeline.run(s, picked)
    failure = show.report_submit(s, picked)
    if failure is not None:
        raise UserError(failure)
