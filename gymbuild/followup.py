"""Day two: find a submission again, and say what became of its jobs.

A submission is found from the workspace (the config's current one), the local index (`run=<id>`),
or the manifest in the run directory. Its jobs are read with one squeue and one sacct per call, over
the run's one connection, whatever the number of benchmarks.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from gymbuild.errors import UserError
from gymbuild.jobs import (
    MANIFEST_NAME,
    BenchmarkJob,
    RecordError,
    SubmissionRecord,
    iter_local_index,
    local_index_dir,
)


@dataclass(frozen=True)
class BenchStatus:
    benchmark: str
    job_id: str | None
    state: str
    exit_code: str | None
    elapsed: str | None
    nodes: str | None
    error: str | None
    job_state: str | None = None  # a benchmark in a shared job: its job's own state (sharing.py)


def executor_module(name: str) -> ModuleType:
    """The executor that wrote a record; the record's `executor` field is what a reader branches on."""
    if name == "slurm":
        from gymbuild.executors import slurm

        return slurm
    if name == "local":
        from gymbuild.executors import local

        return local
    raise UserError(f"error: this record was written by the '{name}' executor, which gymbuild does not know")


def record_from_index(gym_job_id: str) -> SubmissionRecord | None:
    path = local_index_dir() / f"{gym_job_id}.json"
    if not path.is_file():
        return None
    try:
        return SubmissionRecord.load(json.loads(path.read_text()))
    except (ValueError, OSError) as err:
        raise UserError(f"error: {path}: cannot read the record: {err}") from None


def record_from_run_dir(conn: Any, run_dir: str) -> SubmissionRecord:
    from gymbuild.shell import quote

    result = conn.run(f"cat {quote(run_dir + '/' + MANIFEST_NAME)}")
    if not result.ok:
        raise UserError(
            f"error: no record at {conn.target}:{run_dir}/{MANIFEST_NAME}: {result.stderr.strip()}\n"
            "    fix: check run=<gym_job_id> against `doit runs`"
        )
    try:
        return SubmissionRecord.load(json.loads(result.stdout))
    except ValueError as err:
        raise RecordError(f"error: {run_dir}/{MANIFEST_NAME}: not a JSON record: {err}") from None


def statuses(conn: Any, record: SubmissionRecord) -> list[BenchStatus]:
    """Every benchmark of the record with its newest job's state, from one status round trip."""
    from gymbuild import sharing

    executor = executor_module(record.executor)
    shared = sharing.shared_jobs(record.benchmarks)  # a shared job's state is read at its own dir
    queued = {job.job_dir: job.job_id for job in record.benchmarks if job.job_id and job.job_id not in shared}
    found = executor.states(conn, {**queued, **sharing.job_dirs(record, shared)}, since=record.submitted_at)
    rows = status_rows(record.benchmarks, found)
    return sharing.member_rows(conn, record, rows, found, shared, executor.LIVE) if shared else rows


def status_rows(jobs: Iterable[BenchmarkJob], found: Mapping[str, Any]) -> list[BenchStatus]:
    """Each job's row from the states its executor found (bench dir -> JobState); `results` asks for
    the states of several records at once and splits them up again here."""
    rows = []
    for job in jobs:
        if not job.job_id:
            rows.append(BenchStatus(job.benchmark, None, "NOT QUEUED", None, None, None, job.error))
            continue
        state = found.get(job.job_dir)
        rows.append(
            BenchStatus(
                job.benchmark,
                state.job_id if state else job.job_id,
                state.state if state else "UNKNOWN",
                state.exit_code if state else None,
                state.elapsed if state else None,
                state.nodes if state else None,
                state.note if state else None,  # why it is UNKNOWN, when it is
            )
        )
    return rows


# What `status` counts a benchmark as, for its summary line and for `watch=1` (which waits while any
# is pending or running). PENDING and REQUEUED wait for resources; any other live state (the executor's
# LIVE) holds them. Every end but COMPLETED (a job FAILED, TIMEOUT, CANCELLED..., or NOT QUEUED at all)
# is a failure: the benchmark has no result. UNKNOWN is a look that could not tell, not an end.
WAITING = frozenset({"PENDING", "REQUEUED", "WAITING"})  # WAITING: in its shared job, not started yet
COMPLETED = "COMPLETED"
UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class Tally:
    pending: int = 0
    running: int = 0
    completed: int = 0
    failed: int = 0
    unknown: int = 0

    @property
    def ended(self) -> bool:
        """Nothing can change any more: no job pending, running or of unknown state."""
        return not (self.pending or self.running or self.unknown)

    def line(self) -> str:
        """`5 benchmarks: 1 pending, 1 running, 2 completed, 1 failed` (and `, 1 unknown` if any)."""
        counts = dataclasses.asdict(self)
        shown = [f"{n} {name}" for name, n in counts.items() if n or name != "unknown"]
        total = sum(counts.values())
        return f"{total} benchmark{'' if total == 1 else 's'}: {', '.join(shown)}"


def kind(row: BenchStatus, live: frozenset[str]) -> str:
    """pending, running, completed, failed or unknown: what a row counts as in the Tally."""
    if row.state in WAITING:
        return "pending"
    if row.state in live:
        return "running"
    if row.state == COMPLETED:
        return "completed"
    return "unknown" if row.state == UNKNOWN else "failed"


def tally(rows: Sequence[BenchStatus], live: frozenset[str]) -> Tally:
    counts = collections.Counter(kind(row, live) for row in rows)
    return Tally(**counts)


def format_statuses(
    record: SubmissionRecord,
    rows: Sequence[BenchStatus],
    summary: Tally | None = None,
    looks: int | None = None,
) -> str:
    """The submission, one row per benchmark, then why a benchmark has no job or no known state, and
    the summary line last (where a watching eye finds it), with how many looks a watch took.

    The reasons go below the table, not in it: an sbatch error is a long line, and in the STATE
    column it would push every other row's EXIT, ELAPSED and NODES off the screen.
    """
    head = f"{record.gym_job_id}  {record.executor} on {record.cluster}  {record.run_dir}"
    table: list[tuple[str, ...]] = [("BENCHMARK", "JOB", "STATE", "EXIT", "ELAPSED", "NODES")]
    shared = any(row.job_state for row in rows)  # a shared job's state goes beside its benchmarks'
    if shared:
        table = [("BENCHMARK", "JOB", "STATE", "EXIT", "JOB STATE", "ELAPSED", "NODES")]
    for row in rows:
        cells: tuple[str | None, ...] = (row.job_id, row.state, row.exit_code, row.elapsed, row.nodes)
        if shared:
            cells = (row.job_id, row.state, row.exit_code, row.job_state, row.elapsed, row.nodes)
        table.append((row.benchmark, *(c or "-" for c in cells)))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]) - 1)]
    lines = ["  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]) for r in table]
    for title, notes in (
        ("not queued (`doit submit` queues these again)", [r for r in rows if r.error and not r.job_id]),
        ("state unknown", [r for r in rows if r.error and r.job_id]),
    ):
        if notes:
            lines += ["", f"{title}:", *(f"  {r.benchmark}: {r.error}" for r in notes)]
    if summary is not None:
        lines += ["", summary.line() + (f" (watched: {looks} looks)" if looks else "")]
    return head + "\n" + "\n".join(line.rstrip() for line in lines) + "\n"


def statuses_json(
    record: SubmissionRecord,
    rows: Sequence[BenchStatus],
    summary: Tally | None = None,
    looks: int | None = None,
) -> str:
    payload: dict[str, Any] = {
        "gym_job_id": record.gym_job_id,
        "executor": record.executor,
        "cluster": record.cluster,
        "run_dir": record.run_dir,
        "benchmarks": [{k: v for k, v in row.__dict__.items() if k != "job_state" or v} for row in rows],
    }
    if summary is not None:
        payload["summary"] = dataclasses.asdict(summary)
    if looks is not None:
        payload["looks"] = looks  # status watch=1: how many status round trips it took
    return json.dumps(payload, indent=2) + "\n"


def format_runs(records: Sequence[SubmissionRecord], as_json: bool) -> str:
    """The local index, newest first: when, where, how many queued and failed, and the run dir."""
    if as_json:
        rows = [
            {
                "gym_job_id": r.gym_job_id,
                "submitted_at": r.submitted_at,
                "executor": r.executor,
                "cluster": r.cluster,
                "hostname": r.hostname,
                "queued": sum(1 for j in r.benchmarks if j.job_id),
                "failed": len(r.failed),
                "run_dir": r.run_dir,
            }
            for r in records
        ]
        return json.dumps(rows, indent=2) + "\n"
    if not records:
        return f"no submissions in {local_index_dir()}\n"
    lines = []
    for r in records:
        queued = sum(1 for j in r.benchmarks if j.job_id)
        where = f"{r.executor}:{r.cluster}" + (f"@{r.hostname}" if r.hostname else "")
        lines.append(
            f"{r.gym_job_id}  {r.submitted_at}  {where}  {queued} queued, {len(r.failed)} failed  {r.run_dir}"
        )
    return "\n".join(lines) + "\n"


def all_runs() -> list[SubmissionRecord]:
    return sorted(iter_local_index(), key=lambda r: (r.submitted_at, r.gym_job_id), reverse=True)


def to_resubmit(rows: Sequence[BenchStatus], only: Sequence[str], retryable: frozenset[str]) -> list[str]:
    """Benchmarks whose newest job ended in a state worth retrying; CANCELLED only when named."""
    picked = []
    for row in rows:
        if only and row.benchmark not in only:
            continue
        # NOT RUN: its shared job ended before it started (sharing.py)
        if (
            row.state in retryable
            or row.state == "NOT RUN"
            or (row.state == "CANCELLED" and row.benchmark in only)
        ):
            picked.append(row.benchmark)
    return picked


def live_job_ids(rows: Sequence[BenchStatus], only: Sequence[str], live: frozenset[str]) -> list[str]:
    # A benchmark waiting in its running shared job is live through its job (sharing.py).
    return list(
        dict.fromkeys(
            r.job_id
            for r in rows
            if r.job_id and (r.state in live or r.job_state in live) and (not only or r.benchmark in only)
        )
    )


def jobs_by_dir(record: SubmissionRecord) -> Mapping[str, str]:
    return {job.job_dir: job.job_id for job in record.benchmarks if job.job_id}


def show_logs(conn: Any, job_dir: str, job_id: str, *, follow: bool, shared_dir: str | None = None) -> None:
    """Print (or follow) the job's service and driver logs: `logs/*-<job id>.log` of its newest job
    (and of its shared job's own directory, where the services' logs are, for a benchmark in one)."""
    import subprocess
    import sys

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
        except KeyboardInterrupt:  # Ctrl-C is how a user stops following: not an error
            sys.stdout.flush()
        return
    result = conn.run(f"tail -n 200 {pattern}")
    if not result.ok and not result.stdout:
        raise UserError(f"error: no logs for job {job_id} in {job_dir}/logs yet: {result.stderr.strip()}")
    sys.stdout.write(result.stdout)
