"""The states of many submission records' jobs in one round trip, shared jobs included.

`status` (one record), `status multirun=1` (a sweep's records), `results` (the runs it compares) and
`resubmit`/`cancel` all ask the same question: what became of these benchmarks' newest jobs. They ask
it here, and only here: one `states` call per executor for every record at once (one squeue and one
sacct on Slurm), and, when some benchmarks ran in a shared job (`driver.benchmarks_per_job`), one
more round trip that reads those benchmarks' own exit files. So every caller shows a shared job's
members with their own state and the job's own state beside it (the JOB STATE column).

A shared job's id is carried by two or more benchmarks of a record (now, or among their earlier jobs):
its executor state is read at the job's own directory (`<run dir>/+jobs/<name>`), each member's own
outcome from the `.gym_exit-<id>` / `.gym_running-<id>` / `.gym_not_run-<id>` files the job writes in
the member's directory.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gymbuild.executors.base import JobState, executor_for
from gymbuild.plan.shared import job_rel_dir

if TYPE_CHECKING:
    from gymbuild.executors.connection import Connection
    from gymbuild.state.records import BenchmarkJob, SubmissionRecord
    from gymbuild.state.rollouts import Progress, Rates

Group = tuple[str, ...]


@dataclass(frozen=True)
class BenchStatus:
    benchmark: str
    job_id: str | None
    state: str
    exit_code: str | None
    elapsed: str | None
    nodes: str | None
    error: str | None
    job_state: str | None = None  # a benchmark in a shared job: its job's own state
    progress: Progress | None = None  # rollouts done/expected and failed, from gym's files


# What `status` counts a benchmark as, for its summary line and for `watch=1` (which waits while any
# is pending or running). PENDING and REQUEUED wait for resources; any other live state (the executor's
# LIVE) holds them. Every end but COMPLETED (a job FAILED, TIMEOUT, CANCELLED..., or NOT QUEUED at all)
# is a failure: the benchmark has no result. UNKNOWN is a look that could not tell, not an end.
WAITING_IN_JOB = "WAITING"  # in its shared job, which runs and has not started it yet
NOT_RUN = "NOT RUN"  # its shared job ended (or stopped) before it started
WAITING = frozenset({"PENDING", "REQUEUED", WAITING_IN_JOB})
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


# --- the one look --------------------------------------------------------------------------------


def shared_jobs(benchmarks: Iterable[BenchmarkJob]) -> dict[str, Group]:
    """job id -> the benchmarks a record (its `BenchmarkJob`s, in record order) says it ran together:
    the ids two or more benchmarks carry, now or among their earlier jobs. A resubmit moves a shared
    job's failed members to a new job; the old job still ran them all, in the directory named after
    all of them, and its completed members' states are read there."""
    by_id: dict[str, list[str]] = {}
    for job in benchmarks:
        for job_id in dict.fromkeys((*job.previous_job_ids, job.job_id)):
            if job_id:
                by_id.setdefault(job_id, []).append(job.benchmark)
    return {job_id: tuple(names) for job_id, names in by_id.items() if len(names) > 1}


def shared_job_dirs(record: SubmissionRecord) -> dict[str, str]:
    """A record's shared jobs: job id -> the job's own directory (status, cancel and logs go there)."""
    run_dir = record.run_dir.rstrip("/")
    return {
        job_id: f"{run_dir}/{job_rel_dir(group)}" for job_id, group in shared_jobs(record.benchmarks).items()
    }


@dataclass
class _Asked:
    """One record being looked at: the benchmarks asked about, and its shared jobs' directories."""

    record: SubmissionRecord
    jobs: list[BenchmarkJob]
    shared: dict[str, str]  # shared job id -> its own directory
    rows: list[BenchStatus] = dataclasses.field(default_factory=list)


def states_of(
    conn: Connection,
    records: Sequence[SubmissionRecord],
    wanted: Sequence[Iterable[str] | None] | None = None,
) -> list[list[BenchStatus]]:
    """Per record, a row per benchmark (of `wanted[i]`, when given: `results` asks only what its cache
    cannot answer) with its newest job's state: one `states` round trip per executor for all the
    records, and one more for every member of a shared job among them (its own files)."""
    asked = []
    for i, record in enumerate(records):
        names = None if wanted is None or wanted[i] is None else set(wanted[i] or ())
        jobs = [j for j in record.benchmarks if names is None or j.benchmark in names]
        asked.append(_Asked(record, jobs, shared_job_dirs(record)))
    by_executor: dict[str, list[_Asked]] = {}
    for one in asked:
        by_executor.setdefault(one.record.executor, []).append(one)
    members: list[tuple[_Asked, Mapping[str, JobState]]] = []
    for name, group in by_executor.items():
        executor = executor_for(name)
        ids: dict[str, str] = {}  # where each job's state is read -> its id
        for one in group:
            for bench in one.jobs:
                if bench.job_id:  # a shared job's state is read at its own directory
                    ids[one.shared.get(bench.job_id, bench.job_dir)] = bench.job_id
        since = min((one.record.submitted_at for one in group), default=None)
        found = executor.states(conn, ids, since=since) if ids else {}
        for one in group:
            one.rows = status_rows(one.jobs, found)
            if any(job.job_id in one.shared for job in one.jobs):
                members.append((one, found))
    if members:
        _member_states(conn, members)
    return [one.rows for one in asked]


def status_rows(jobs: Iterable[BenchmarkJob], found: Mapping[str, JobState]) -> list[BenchStatus]:
    """Each job's row from the states its executor found (bench dir -> JobState)."""
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
                state.state if state else UNKNOWN,
                state.exit_code if state else None,
                state.elapsed if state else None,
                state.nodes if state else None,
                state.note if state else None,  # why it is UNKNOWN, when it is
                progress=state.progress if state else None,
            )
        )
    return rows


# --- a shared job's members, each with its own state -------------------------------------------------


def _files_script(dirs: Mapping[str, str]) -> str:
    """A line per file that tells a benchmark's own state in its job: every exit status it has (an
    earlier job of a resume chain may have completed it), and the running and not-run marks of the
    job `dirs` names (bench dir -> the job's newest id)."""
    from gymbuild.shell import quote
    from gymbuild.state.rollouts import count_command, dir_files

    lines = []
    for bench_dir, job_id in dirs.items():
        d, j = quote(bench_dir), quote(job_id)
        exit_line = f'printf "exit\\t%s\\t%s\\t%s\\n" {d} "${{f##*-}}" "$(cat "$f")"'
        lines.append(
            f'for f in {d}/.gym_exit-*; do [ -f "$f" ] && {exit_line}; done; '
            f'[ -f {d}/.gym_running-{j} ] && printf "running\\t%s\\n" {d}; '
            f'[ -f {d}/.gym_not_run-{j} ] && printf "notrun\\t%s\\n" {d}; true'
        )
    if lines:  # their rollout counts: one wc for them all
        files = " ".join(dir_files(quote(d)) for d in dirs)
        lines.append(f"(shopt -s nullglob; {count_command(files)}) | sed 's/^/count\\t/'")
    return "\n".join(lines) or "true"


def _member_states(conn: Connection, looked: Sequence[tuple[_Asked, Mapping[str, JobState]]]) -> None:
    """Each looked-at record's rows with every member of a shared job given its own state, from one
    round trip reading all the members' files: completed, failed with its driver's exit code,
    running, waiting in a running job, or not run; the job's own state goes beside it."""
    tails: dict[str, str] = {}  # member bench dir -> its shared job's newest id
    for one, found in looked:
        for job in one.jobs:
            if job.job_id in one.shared:
                newest = found.get(one.shared[job.job_id])
                tails[job.job_dir] = newest.job_id if newest else job.job_id
    from gymbuild.state.rollouts import parse_counts

    exits: dict[str, dict[str, str]] = {}
    marks: dict[str, set[str]] = {}
    counted: list[str] = []
    for line in conn.run(_files_script(tails)).stdout.splitlines():
        if line.startswith("count\t"):
            counted.append(line.removeprefix("count\t"))
            continue
        what, bench_dir, *rest = line.split("\t")
        if what == "exit" and len(rest) == 2:
            exits.setdefault(bench_dir, {})[rest[0]] = rest[1].strip()
        else:
            marks.setdefault(bench_dir, set()).add(what)
    counts = parse_counts("\n".join(counted))
    for one, found in looked:
        live = executor_for(one.record.executor).LIVE
        by_name = {job.benchmark: job for job in one.jobs if job.job_id in one.shared}
        rows = []
        for row in one.rows:
            member = by_name.get(row.benchmark)
            if member is None or member.job_id is None:
                rows.append(row)
                continue
            job_state = found.get(one.shared[member.job_id])
            tail = tails[member.job_dir]
            own, seen = exits.get(member.job_dir, {}), marks.get(member.job_dir, set())
            state, exit_code = _own_state(job_state, own, seen, tail, live)
            rows.append(
                replace(
                    row,
                    job_id=tail,
                    state=state,
                    exit_code=exit_code,
                    job_state=job_state.state if job_state else None,
                    elapsed=job_state.elapsed if job_state else None,
                    nodes=job_state.nodes if job_state else None,
                    progress=counts.get(member.job_dir),
                )
            )
        one.rows = rows


def _own_state(
    job_state: JobState | None, own: Mapping[str, str], marks: set[str], tail: str, live: frozenset[str]
) -> tuple[str, str | None]:
    """A member's (state, exit code) from its job's state and its own files."""
    ended = job_state is not None and job_state.state not in live
    code = own.get(tail)
    if job_state is not None and job_state.state == "CANCELLED" and code != "0" and "0" not in own.values():
        return "CANCELLED", None  # stopped (or never started) by the cancel
    if code is not None:
        return ("COMPLETED" if code == "0" else "FAILED"), f"{code}:0"
    if "0" in own.values():
        return "COMPLETED", "0:0"
    if job_state is None or job_state.state == UNKNOWN:
        return UNKNOWN, None
    if "running" in marks:
        return ("FAILED" if ended else "RUNNING"), None
    if ended or "notrun" in marks:
        return NOT_RUN, None
    if job_state.state == "RUNNING":
        return WAITING_IN_JOB, None
    return job_state.state, None  # the job itself waits (PENDING, ...)


def format_statuses(
    record: SubmissionRecord,
    rows: Sequence[BenchStatus],
    summary: Tally | None = None,
    looks: int | None = None,
    rates: Rates | None = None,
) -> str:
    """The submission, one row per benchmark, then why a benchmark has no job or no known state, and
    the summary line last (where a watching eye finds it), with how many looks a watch took.
    A ROLLOUTS column (done/expected, failed) when some benchmark has gym's rollout files; with
    `rates` (watch=1 on a terminal) a bar and the time left for each running one.

    The reasons go below the table, not in it: an sbatch error is a long line, and in the STATE
    column it would push every other row's EXIT, ELAPSED and NODES off the screen.
    """
    head = f"{record.gym_job_id}  {record.executor} on {record.cluster}  {record.run_dir}"
    table: list[tuple[str, ...]] = [("BENCHMARK", "JOB", "STATE", "EXIT", "ELAPSED", "NODES")]
    shared = any(row.job_state for row in rows)  # a shared job's state goes beside its benchmarks'
    if shared:
        table = [("BENCHMARK", "JOB", "STATE", "EXIT", "JOB STATE", "ELAPSED", "NODES")]
    counted = any(row.progress for row in rows)
    if counted:
        table[0] = (*table[0][:-1], "ROLLOUTS", table[0][-1])
    for row in rows:
        cells: tuple[str | None, ...] = (row.job_id, row.state, row.exit_code, row.elapsed, row.nodes)
        if shared:
            cells = (row.job_id, row.state, row.exit_code, row.job_state, row.elapsed, row.nodes)
        if counted:
            cells = (*cells[:-1], _rollouts_cell(row, rates), cells[-1])
        table.append((row.benchmark, *(c or "-" for c in cells)))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]) - 1)]
    lines = ["  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]) for r in table]
    for title, notes in (
        ("not queued (`gymbuild submit` queues these again)", [r for r in rows if r.error and not r.job_id]),
        ("state unknown", [r for r in rows if r.error and r.job_id]),
    ):
        if notes:
            lines += ["", f"{title}:", *(f"  {r.benchmark}: {r.error}" for r in notes)]
    if summary is not None:
        lines += ["", summary.line() + (f" (watched: {looks} looks)" if looks else "")]
    return head + "\n" + "\n".join(line.rstrip() for line in lines) + "\n"


def _rollouts_cell(row: BenchStatus, rates: Rates | None) -> str | None:
    """`3/5 (1 failed)`; a bar and the time left while it runs and is watched; `3/5 partial` for a
    job that ended without them all (gym's `EVAL FAILED: 3/5 samples completed`)."""
    if row.progress is None:
        return None
    if row.state in WAITING or row.state in (COMPLETED, UNKNOWN):
        return row.progress.text()
    if rates is not None and row.exit_code is None:  # live: an executor gives no exit code yet
        return rates.bar(row.benchmark, row.job_id, row.progress)
    if row.exit_code is not None and row.progress.partial:
        return f"{row.progress.text()} partial"
    return row.progress.text()


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
        "benchmarks": [_row_json(row) for row in rows],
    }
    if summary is not None:
        payload["summary"] = dataclasses.asdict(summary)
    if looks is not None:
        payload["looks"] = looks  # status watch=1: how many status round trips it took
    return json.dumps(payload, indent=2) + "\n"


def _row_json(row: BenchStatus) -> dict[str, Any]:
    """A row as JSON: a shared job's state and the rollout counts only where there are some."""
    doc = {k: v for k, v in row.__dict__.items() if k not in ("job_state", "progress") or v}
    if row.progress is not None:
        doc["progress"] = dataclasses.asdict(row.progress)
    return doc
