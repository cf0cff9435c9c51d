"""`gymbuild logs`: a benchmark's driver log (or a shared job's), read or followed over the run's
connection."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from typing import TYPE_CHECKING

from gymbuild import interrupts
from gymbuild.day_two.status import current_statuses
from gymbuild.errors import UserError
from gymbuild.executors.base import executor_for
from gymbuild.executors.shard_states import shard_dir
from gymbuild.executors.states import BenchStatus, shared_job_dirs, unqueued_reason
from gymbuild.request.verb_args import LogsArgs
from gymbuild.shell import quote

if TYPE_CHECKING:
    from gymbuild.executors.base import Executor
    from gymbuild.executors.connection import Connection
    from gymbuild.submit.session import Session


def show_logs(
    conn: Connection,
    executor: Executor,
    job_dir: str,
    job_id: str,
    *,
    follow: bool,
    shared_dir: str | None = None,
) -> None:
    """Print (or follow) the job's service and driver logs: `logs/*-<job id>.log` of its newest job
    (and of its shared job's own directory, where the services' logs are, for a benchmark in one).
    An array task's job.sh names its logs after the task's own number, Slurm's output is named
    `<array id>_<index>`: both are shown (the executor finds the task's own number)."""
    own = executor.own_number(conn, shared_dir or job_dir, job_id)
    ids = [job_id, own] if own else [job_id]
    pattern = " ".join(f"{quote(d)}/logs/*-{quote(i)}.log" for d in (shared_dir, job_dir) if d for i in ids)
    if follow:
        # The driver's log is named even before it exists: the driver starts after the services are
        # healthy, and a glob expanded when tail starts would leave it out for good. POSIX sh only:
        # over SSH this runs in the login shell, whatever it is.
        driver = quote(f"{job_dir}/logs/driver-{own or job_id}.log")
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


def print_logs(s: Session, args: LogsArgs) -> None:
    if args.json and args.follow:
        raise UserError(
            "error: logs json=1 prints one JSON document, and follow=1 never ends\n"
            "    fix: drop follow=1 for the logs as JSON, or json=1 to follow them"
        )
    record, rows = current_statuses(s, args)
    if len(rows) != 1:  # only=<bench>, or a submission of one benchmark
        names = ", ".join(r.benchmark for r in rows)
        raise UserError(f"error: name one benchmark with only=<bench> (one of: {names})")
    row = rows[0]
    if not row.job_id:
        raise UserError(f"error: {row.benchmark} has no job, so no logs: {unqueued_reason(row.error)}")
    # The newest job of its chain (status follows it): its dir is the recorded job's.
    job = next(j for j in record.benchmarks if j.benchmark == row.benchmark)
    job_dir = job.job_dir
    executor = executor_for(record.executor)
    if row.shards:  # a sharded benchmark: every shard's logs, each under its name
        return _shard_logs(s, executor, record.gym_job_id, row, job_dir, args)
    shared = shared_job_dirs(record).get(job.job_id or "")
    if args.json and not args.follow:  # the logs as one JSON document: json=1 on every verb
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            show_logs(s.connection(), executor, job_dir, row.job_id, follow=False, shared_dir=shared)
        doc: dict[str, object] = {
            "gym_job_id": record.gym_job_id,
            "benchmark": row.benchmark,
            "job_id": row.job_id,
        }
        if row.chain is not None:  # which attempt of its resume chain these logs are
            doc["attempt"] = row.chain.attempt
        sys.stdout.write(json.dumps({**doc, "logs": text.getvalue()}, indent=2) + "\n")
        return
    show_logs(s.connection(), executor, job_dir, row.job_id, follow=args.follow, shared_dir=shared)


def _shard_logs(
    s: Session, executor: Executor, gym_job_id: str, row: BenchStatus, job_dir: str, args: LogsArgs
) -> None:
    """Each shard's logs (its newest job's, in `<bench dir>/shards/<k>/logs`), one after the other
    under a line naming the shard; follow=1 follows them all at once (tail names each file)."""
    conn = s.connection()
    shards = [(k, shard_dir(job_dir, k), x.job_id) for k, x in enumerate(row.shards) if x.job_id]
    if args.follow:
        pattern = " ".join(f"{quote(d)}/logs/*-{quote(i)}.log" for _, d, i in shards)
        subprocess.run(conn.command_argv(f"exec tail -n 50 -F {pattern}"), check=False)
        return
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        for k, d, job_id in shards:
            print(f"=== {row.benchmark} shard {k} (job {job_id}) ===")
            try:
                show_logs(conn, executor, d, job_id, follow=False)
            except UserError as err:  # a shard with no logs yet: said, the others still shown
                print(str(err))
    if args.json:
        doc = {"gym_job_id": gym_job_id, "benchmark": row.benchmark, "job_id": row.job_id}
        sys.stdout.write(json.dumps({**doc, "logs": text.getvalue()}, indent=2) + "\n")
    else:
        sys.stdout.write(text.getvalue())
