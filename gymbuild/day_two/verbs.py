"""Day two: find a submission again, say what became of its jobs, and act on them (status, logs,
cancel, resubmit, runs).

A submission is found from the workspace (the config's current one, without loading the config:
status of a thousand jobs must not compose and validate a thousand benchmarks), the local index
(`run=<id>`), or the manifest in the run directory. Its jobs are read with one squeue and one sacct
per call, over the run's one connection, whatever the number of benchmarks. The verbs at the end
take the run's Session; what is above them reads records and rows only.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from gymbuild import interrupts
from gymbuild.day_two.states import (
    NOT_RUN,
    BenchStatus,
    Tally,
    format_statuses,
    shared_job_dirs,
    shared_jobs,
    states_of,
    statuses_json,
    tally,
)
from gymbuild.errors import UserError
from gymbuild.executors.base import executor_for
from gymbuild.state import ids
from gymbuild.state.records import MANIFEST_NAME, SubmissionRecord, local_index_dir, parse_record
from gymbuild.submit import pipeline, show
from gymbuild.submit.record import build_record

if TYPE_CHECKING:
    from gymbuild.executors.connection import Connection
    from gymbuild.submit.session import Session


def record_from_index(gym_job_id: str) -> SubmissionRecord | None:
    """The local index's entry for `gym_job_id` (checked first: it becomes a file name), or None."""
    path = ids.id_path(local_index_dir(), gym_job_id)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise UserError(f"error: {path}: cannot read the record: {err}") from None
    return parse_record(text, str(path), named=gym_job_id)


def record_from_run_dir(conn: Connection, run_dir: str) -> SubmissionRecord:
    """The manifest in `run_dir` (`<output_path>/<gym_job_id>`), which must be that submission's."""
    from gymbuild.shell import quote

    where = f"{run_dir}/{MANIFEST_NAME}"
    result = conn.run(f"cat {quote(where)}")
    if not result.ok:
        raise UserError(
            f"error: no record at {conn.target}:{where}: {result.stderr.strip()}\n"
            "    fix: check run=<gym_job_id> against `gymbuild runs`"
        )
    return parse_record(result.stdout, where, named=PurePosixPath(run_dir).name)


def statuses(conn: Connection, record: SubmissionRecord) -> list[BenchStatus]:
    """Every benchmark of the record with its newest job's state (states.py: one round trip, and
    one more for the members of shared jobs)."""
    (rows,) = states_of(conn, [record])
    return rows


def to_resubmit(rows: Sequence[BenchStatus], only: Sequence[str], retryable: frozenset[str]) -> list[str]:
    """Benchmarks whose newest job ended in a state worth retrying; CANCELLED only when named."""
    picked = []
    for row in rows:
        if only and row.benchmark not in only:
            continue
        # NOT RUN: its shared job ended before it started (states.py)
        if (
            row.state in retryable
            or row.state == NOT_RUN
            or (row.state == "CANCELLED" and row.benchmark in only)
        ):
            picked.append(row.benchmark)
    return picked


def live_job_ids(rows: Sequence[BenchStatus], only: Sequence[str], live: frozenset[str]) -> list[str]:
    # A benchmark waiting in its running shared job is live through its job (states.py).
    return list(
        dict.fromkeys(
            r.job_id
            for r in rows
            if r.job_id and (r.state in live or r.job_state in live) and (not only or r.benchmark in only)
        )
    )


def show_logs(
    conn: Connection, job_dir: str, job_id: str, *, follow: bool, shared_dir: str | None = None
) -> None:
    """Print (or follow) the job's service and driver logs: `logs/*-<job id>.log` of its newest job
    (and of its shared job's own directory, where the services' logs are, for a benchmark in one)."""
    import subprocess

    from gymbuild.shell import quote

    pattern = " ".join(f"{quote(d)}/logs/*-{quote(job_id)}.log" for d in (shared_dir, job_dir) if d)
    if follow:
        # The driver's log is named even before it exists: the driver starts after the services are
        # healthy, and a glob expanded when tail starts would leave it out for good. POSIX sh only:
        # over SSH this runs in the login shell, whatever it is.
        driver = quote(f"{job_dir}/logs/driver-{job_id}.log")
        argv = conn.command_argv(
            f'set -- {pattern}; [ -e "$1" ] || shift; '
            f'case " $* " in *" "{driver}" "*) ;; *) set -- "$@" {driver} ;; esac; '
            'exec tail -n 50 -F "$@"'
        )
        try:
            subprocess.run(argv, check=False)  # killed on the way out when interrupted
        except KeyboardInterrupt as err:  # Ctrl-C is how a user stops following: not an error
            sys.stdout.flush()
            if not interrupts.by_the_user(err):
                raise
        return
    result = conn.run(f"tail -n 200 {pattern}")
    if not result.ok and not result.stdout:
        raise UserError(f"error: no logs for job {job_id} in {job_dir}/logs yet: {result.stderr.strip()}")
    sys.stdout.write(result.stdout)


# --- the verbs, on the run's Session ----------------------------------------------------------


def find_record(s: Session, run: str | None = None, *, connect: bool = True) -> SubmissionRecord:
    """`run=<id>` (or `run`): the local index, else the run directory; otherwise (or with `run=""`)
    the config's submission. The session's connection goes to the host the record names, opened now
    unless not `connect` (`results` of finished benchmarks reads its cache and opens nothing)."""
    inv = s.inv
    run = inv.run if run is None else run
    if run:
        run = ids.gym_job_id(run, "run=")
        record = record_from_index(run)
        if record is not None:
            _askable(record)
            if connect:
                s.connection(record.hostname, use_config=False)
            return record
        if s.error is not None:
            raise UserError(
                f"error: {run} is not in this machine's local index, and without a config "
                f"gymbuild cannot tell where its run directory is\n{s.error}"
            )
        run_dir = str(Path(s.output_path) / run)
        return _askable(record_from_run_dir(s.connection(), run_dir))
    current = s.workspace.submission()
    if current is None or not s.workspace.has_outcomes():
        raise no_submission(s)
    # What was submitted, where it went, even if the config has been edited since (a new
    # output_path or host): status, logs and cancel must still reach the jobs that are queued.
    s.adopt_submission(current)
    if connect:
        s.connection(current.hostname, use_config=False)
    return build_record(s, commit=False)


def _askable(record: SubmissionRecord) -> SubmissionRecord:
    """The record, unless its executor is one gymbuild cannot ask (then one line saying so)."""
    from gymbuild.executors.base import cannot_ask

    why = cannot_ask(record.executor, record.executor_metadata, record.gym_job_id)
    if why:
        raise UserError(why)
    return record


def no_submission(s: Session) -> UserError:
    """Why the config has no submission to act on, and what to type instead: the file may not
    exist, or what was submitted from it is a sweep (multirun=1), or it was never submitted."""
    config = s.inv.config
    if not config.is_file():
        return UserError(
            f"error: {config}: no such file\n"
            "    fix: name the config you submitted with config=FILE, or a submission with "
            "run=<gym_job_id> (`gymbuild runs` lists them)"
        )
    if (s.workspace.config_dir / "sweeps").is_dir():
        return UserError(
            f"error: {config} has no single submission, but it has a sweep\n"
            "    fix: add multirun=1 (its latest sweep) or sweep=<id>, as in "
            f"gymbuild results config={config} multirun=1"
        )
    return UserError(
        f"error: {config} has not been submitted yet\n"
        f"    fix: gymbuild submit config={config}, or name a submission with run=<gym_job_id> "
        "(`gymbuild runs` lists them)"
    )


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


def _look(s: Session, record: SubmissionRecord) -> list[BenchStatus]:
    """One look at the submission's jobs (one squeue and one sacct, whatever their number)."""
    rows = statuses(s.connection(), record)
    return [r for r in rows if r.benchmark in s.inv.only] if s.inv.only else rows


def _statuses(s: Session) -> tuple[SubmissionRecord, list[BenchStatus]]:
    record = _find_checked(s)
    return record, _look(s, record)


# A large status takes a second or two: say so on a terminal, from this many jobs.
PROGRESS_FROM = 100


def print_status(s: Session) -> None:
    """The table (json=1: one document) with its summary line; watch=1 looks again until every job
    has ended and fails (exit 1) unless every benchmark completed."""
    record = _find_checked(s)
    live = executor_for(record.executor).LIVE
    looks = None
    if s.inv.watch:
        import time

        from gymbuild.day_two import watch
        from gymbuild.state.rollouts import Rates

        rates = Rates()  # each benchmark's rollouts per second since the first look: its time left

        def draw(rows: list[BenchStatus], summary: Tally) -> str:
            seen = [(r.benchmark, r.job_id, r.progress) for r in rows]
            return format_statuses(record, rows, summary, rates=rates.seen(seen, time.monotonic()))

        rows, summary, looks = watch.watch(
            lambda: _look(s, record),
            live,
            as_json=s.inv.json,
            draw=draw,
            what=record.gym_job_id,
        )
    else:
        if len(record.benchmarks) >= PROGRESS_FROM:
            s.progress.show(f"asking about the {len(record.benchmarks)} jobs of {record.gym_job_id} ...")
        rows = _look(s, record)
        s.progress.done(keep=False)
        summary = tally(rows, live)
    render = statuses_json if s.inv.json else format_statuses
    sys.stdout.write(render(record, rows, summary, looks))
    if s.inv.watch and summary.failed + summary.unknown:
        raise UserError(watch.not_completed(record, rows, live))


def cancel(s: Session) -> None:
    """Cancel the submission's live jobs; dry_run=1 (--dry-run) names them, and touches nothing."""
    record, rows = _statuses(s)
    executor = executor_for(record.executor)
    live = live_job_ids(rows, s.inv.only, executor.LIVE)
    if s.inv.dry_run:
        named = [f"{job} ({_benches_of(rows, job)})" for job in live]
        message = (
            f"would cancel {len(live)} job(s) of {record.gym_job_id}: {', '.join(named)} "
            "(dry run: none cancelled)"
            if live
            else f"nothing to cancel: no job of {record.gym_job_id} is pending or running"
        )
        _said(s, record, [], message, would_cancel=live)
        return
    if not live:
        # A job killed without its EXIT trap (SIGKILL, a lost node) left its secrets file behind.
        executor.forget_secrets(s.connection(), record.gym_job_id, _secret_names(s, record, rows))
        _said(s, record, [], f"nothing to cancel: no job of {record.gym_job_id} is pending or running")
        return
    job_dirs = {j.benchmark: j.job_dir for j in record.benchmarks}
    # A shared job is cancelled at its own directory (states.py), where status reads its marks.
    shared = shared_job_dirs(record)
    dirs = {shared.get(r.job_id, job_dirs[r.benchmark]): r.job_id for r in rows if r.job_id in live}
    result = executor.cancel(s.connection(), dirs)
    if not result.ok:
        raise UserError(f"error: cancelling {', '.join(live)} failed: {result.stderr.strip()}")
    # Their successors are cancelled too, so no later run reads these benchmarks' secrets again.
    executor.forget_secrets(s.connection(), record.gym_job_id, _secret_names(s, record, rows))
    _said(s, record, live, f"cancelled {len(live)} job(s) of {record.gym_job_id}: {', '.join(live)}")


def _benches_of(rows: Sequence[BenchStatus], job_id: str) -> str:
    """`gpqa RUNNING`, or for a shared job each of its benchmarks with its state."""
    return ", ".join(f"{r.benchmark} {r.state}" for r in rows if r.job_id == job_id)


def _said(
    s: Session, record: SubmissionRecord, cancelled: Sequence[str], message: str, **dry_run: object
) -> None:
    """cancel's (and a dry run's) answer: its line, or (json=1) one JSON document naming the jobs it
    cancelled; a dry run's says `"dry_run": true` and what it would have done."""
    if s.inv.json:
        doc: dict[str, object] = {
            "gym_job_id": record.gym_job_id,
            "cancelled": list(cancelled),
            "message": message,
        }
        if s.inv.dry_run:
            doc = {**doc, "dry_run": True, **dry_run}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        print(message)


def _secret_names(s: Session, record: SubmissionRecord, rows: Sequence[BenchStatus]) -> list[str]:
    """The secrets files `cancel` removes: the named benchmarks', or (without only=) every name the
    submission's files can have (each benchmark's, each shared job's). Named, never the directory
    whole: what else is there is not gymbuild's (executors/secrets.py)."""
    if s.inv.only:
        return [r.benchmark for r in rows]
    from gymbuild.plan.shared import shared_job_name

    groups = shared_jobs(record.benchmarks).values()
    return [*(j.benchmark for j in record.benchmarks), *(shared_job_name(g) for g in groups)]


def print_logs(s: Session) -> None:
    if s.inv.json and s.inv.follow:
        raise UserError(
            "error: logs json=1 prints one JSON document, and follow=1 never ends\n"
            "    fix: drop follow=1 for the logs as JSON, or json=1 to follow them"
        )
    record, rows = _statuses(s)
    if len(rows) != 1:  # only=<bench>, or a submission of one benchmark
        names = ", ".join(r.benchmark for r in rows)
        raise UserError(f"error: name one benchmark with only=<bench> (one of: {names})")
    row = rows[0]
    if not row.job_id:
        raise UserError(f"error: {row.benchmark} was never queued: {row.error}")
    job_dir = next(j.job_dir for j in record.benchmarks if j.benchmark == row.benchmark)
    shared = shared_job_dirs(record).get(row.job_id)
    if s.inv.json and not s.inv.follow:  # the logs as one JSON document: json=1 on every verb
        import contextlib
        import io

        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            show_logs(s.connection(), job_dir, row.job_id, follow=False, shared_dir=shared)
        doc = {"gym_job_id": record.gym_job_id, "benchmark": row.benchmark, "job_id": row.job_id}
        sys.stdout.write(json.dumps({**doc, "logs": text.getvalue()}, indent=2) + "\n")
        return
    show_logs(s.connection(), job_dir, row.job_id, follow=s.inv.follow, shared_dir=shared)


def requeue(
    runs: Sequence[Session], records: Sequence[SubmissionRecord], only: Sequence[str]
) -> list[list[str]]:
    """Release each run's benchmarks whose newest job ended in a retryable state (one look for all
    the runs) and queue them again in one pipeline (pipeline.run_batch): per run, what it re-queued."""
    if not runs:
        return []
    conn = runs[0].connection(records[0].hostname, use_config=False)
    picked = []
    for ctx, record, rows in zip(runs, records, states_of(conn, records), strict=True):
        chosen = to_resubmit(rows, only, executor_for(record.executor).RETRYABLE)
        states = {r.benchmark: r.state for r in rows}
        for bench in chosen:
            ctx.workspace.release(bench, states[bench])
        picked.append(chosen)
    pipeline.run_batch(runs, picked)
    return picked


def resubmit(s: Session) -> None:
    """Re-queue what ended FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED or BOOT_FAIL.

    Each such benchmark's outcome gives up its job id (kept in its history), then the submit
    pipeline runs for exactly those benchmarks (requeue, as for every cell of a sweep).
    """
    if s.error is not None:
        raise s.error
    if s.inv.run:  # a record that is refused (ids.py) is refused before a submission is started
        find_record(s, connect=False)
    if s.workspace.submission() is None:  # nothing to resubmit, and no fresh submission started for it
        raise no_submission(s)
    # A config that now submits elsewhere asks for new=1 before anything is re-queued.
    current = s.submission()
    record = _find_checked(s)
    if record.gym_job_id != current.gym_job_id:
        raise UserError(
            f"error: resubmit works on the config's current submission ({current.gym_job_id}),"
            f" not {record.gym_job_id}\n    fix: drop run=, or submit that config again"
        )
    if s.inv.dry_run:
        return _would_resubmit(s, record)
    (picked,) = requeue([s], [record], s.inv.only)
    if not picked:
        # one more look, only when nothing was re-queued: to name the cancelled
        message = _nothing_to_resubmit(s, record, _look(s, record))
        if s.inv.json:  # the manifest, and nothing else on stdout, as a resubmit that re-queued prints
            print(message, file=sys.stderr)
            sys.stdout.write(record.dumps())
        else:
            print(message)
        return
    failure = show.report_submit(s, picked)
    if failure is not None:
        raise UserError(failure)


def _nothing_to_resubmit(s: Session, record: SubmissionRecord, rows: Sequence[BenchStatus]) -> str:
    """Why nothing is re-queued, naming the cancelled benchmarks (re-queued only when named)."""
    cancelled = [r.benchmark for r in rows if r.state == "CANCELLED" and r.benchmark not in s.inv.only]
    hint = (
        f"; cancelled: {', '.join(cancelled)}, re-queued only when named: "
        f"gymbuild resubmit config={s.inv.config} only={','.join(cancelled)}"
        if cancelled
        else ""
    )
    return f"nothing to resubmit: no benchmark of {record.gym_job_id} ended in a retryable state{hint}"


def _would_resubmit(s: Session, record: SubmissionRecord) -> None:
    """resubmit's dry run: one look, and what it would re-queue with why (each one's state and job);
    nothing is released, copied or queued."""
    rows = _look(s, record)
    picked = set(to_resubmit(rows, s.inv.only, executor_for(record.executor).RETRYABLE))
    would = [
        {"benchmark": r.benchmark, "job_id": r.job_id, "state": r.state}
        for r in rows
        if r.benchmark in picked
    ]
    named = ", ".join(f"{w['benchmark']} ({w['state']}, job {w['job_id'] or 'none'})" for w in would)
    message = (
        f"would re-queue {len(would)} benchmark(s) of {record.gym_job_id}: {named} (dry run: none queued)"
        if would
        else _nothing_to_resubmit(s, record, rows)
    )
    if s.inv.json:
        doc = {"gym_job_id": record.gym_job_id, "dry_run": True, "would_resubmit": would, "message": message}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        print(message)
