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
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gymbuild.errors import UserError
from gymbuild.executors.base import EXECUTORS, JobState, executor_for
from gymbuild.executors.shard_states import (
    MERGED,
    NOT_MERGED,
    NOT_MERGED_NOTE,
    ROOM,
    derive,
    merged,
    rows_of,
    shard_dir,
)
from gymbuild.plan import shard_name
from gymbuild.plan.shared import job_rel_dir
from gymbuild.shell import quote
from gymbuild.state.rollouts import count_command, dir_files, parse_counts
from gymbuild.state.shards import shard_ids

if TYPE_CHECKING:
    from gymbuild.executors.chain import Chain
    from gymbuild.executors.connection import Connection
    from gymbuild.state.records import BenchmarkJob, SubmissionRecord
    from gymbuild.state.rollouts import Progress

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
    chain: Chain | None = None  # a resume chain: its attempt, attempts so far, end, live jobs
    shards: tuple[BenchStatus, ...] = ()  # a sharded benchmark's: each shard's own row (shard_states.py)


# What `status` counts a benchmark as, for its summary line and for `watch=1` (which waits while any
# is pending or running). PENDING and REQUEUED wait for resources; any other live state (the executor's
# LIVE) holds them. Every end but COMPLETED (a job FAILED, TIMEOUT, CANCELLED..., or NOT QUEUED at all)
# is a failure: the benchmark has no result. UNKNOWN is a look that could not tell, not an end.
WAITING_IN_JOB = "WAITING"  # in its shared job, which runs and has not started it yet
NOT_RUN = "NOT RUN"  # its shared job ended (or stopped) before it started
WAITING = frozenset({"PENDING", "REQUEUED", WAITING_IN_JOB})
COMPLETED = "COMPLETED"
UNKNOWN = "UNKNOWN"
# A benchmark with no job that waits for room under the user's quota (submit/quota.py): its record
# entry has no job id (NeMo Gym's record has no other way to say "not queued") and an `error` that
# starts with this; `status` shows it WAITING and counts it apart, never as failed.
WAITING_FOR_ROOM = "waiting for room: "
WAITING_FOR_ROOM_STATE = "WAITING"  # its STATE in `status` (no job id tells it from WAITING_IN_JOB)


NOT_QUEUED = "NOT QUEUED"  # the STATE of a benchmark with no job that does not wait for room
NEVER_QUEUED = "never queued"


def waits_for_room(error: str | None) -> bool:
    """A record entry's error says its benchmark waits for room under a limit (it did not fail)."""
    return bool(error) and str(error).startswith(WAITING_FOR_ROOM)


def unqueued_state(error: str | None) -> str:
    """The STATE of a benchmark with no job: WAITING when it waits for room, else NOT QUEUED."""
    return WAITING_FOR_ROOM_STATE if waits_for_room(error) else NOT_QUEUED


def unqueued_reason(error: str | None) -> str:
    """What every verb (status, results, logs, compare, cancel, resubmit) says of a benchmark with no
    job, in the same words: `waiting for room under <the limit> (...); <who feeds it>`, which is
    not a failure, or `never queued: <why>`."""
    if waits_for_room(error):
        return f"waiting for room under {str(error).removeprefix(WAITING_FOR_ROOM)}"
    return f"{NEVER_QUEUED}: {error}" if error else NEVER_QUEUED


def waiting_note(rows: Iterable[BenchStatus]) -> str:
    """For cancel's line: the benchmarks of `rows` that wait for room have no job to stop (nothing
    is said of them otherwise, and a later submit still queues them); "" when none waits."""
    waiting = [r.benchmark for r in rows if r.job_id is None and waits_for_room(r.error)]
    if not waiting:
        return ""
    return (
        f"; {len(waiting)} waiting for room ({', '.join(waiting)}) have no job to cancel: "
        "a later `gymbuild submit` queues them"
    )


def is_unqueued_reason(text: str) -> bool:
    """`text` is an `unqueued_reason` (a benchmark with no job), not a job's state."""
    return text.startswith(("waiting for room under ", NEVER_QUEUED))


@dataclass(frozen=True)
class Tally:
    pending: int = 0
    running: int = 0
    completed: int = 0
    failed: int = 0
    unknown: int = 0
    waiting: int = 0  # no job yet: waiting for room under the quota (only a submit feeds them)

    @property
    def ended(self) -> bool:
        """No job can change any more: none pending, running or of unknown state (a benchmark
        waiting for room has no job; `submit watch=1` goes on while some wait)."""
        return not (self.pending or self.running or self.unknown)

    def line(self) -> str:
        """`5 benchmarks: 1 pending, 1 running, 2 completed, 1 failed` (and `, 1 unknown`, `, 2
        waiting for room` if any)."""
        counts = dataclasses.asdict(self)
        label = {"waiting": "waiting for room"}
        shown = [
            f"{n} {label.get(name, name)}"
            for name, n in counts.items()
            if n or name not in ("unknown", "waiting")
        ]
        total = sum(counts.values())
        return f"{total} benchmark{'' if total == 1 else 's'}: {', '.join(shown)}"


def kind(row: BenchStatus, live: frozenset[str]) -> str:
    """pending, running, completed, failed, unknown or waiting (for room, no job yet): what a row
    counts as in the Tally."""
    if row.job_id is None and row.state == WAITING_FOR_ROOM_STATE:
        return "waiting"
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
            ids |= shard_jobs(one.record, one.jobs)
        since = min((one.record.submitted_at for one in group), default=None)
        found = executor.states(conn, ids, since=since) if ids else {}
        for one in group:
            one.rows = fold_shards(one.record, one.jobs, status_rows(one.jobs, found), found, executor.LIVE)
            if any(job.job_id in one.shared for job in one.jobs):
                members.append((one, found))
    if members:
        _member_states(conn, members)
    return [one.rows for one in asked]


def status_rows(jobs: Iterable[BenchmarkJob], found: Mapping[str, JobState]) -> list[BenchStatus]:
    """Each job's row from the states its executor found (bench dir -> JobState)."""
    return [_row(job.benchmark, job.job_id, job.job_dir, job.error, found) for job in jobs]


def _row(
    bench: str, job_id: str | None, job_dir: str, error: str | None, found: Mapping[str, JobState]
) -> BenchStatus:
    if not job_id:
        return BenchStatus(bench, None, unqueued_state(error), None, None, None, error)
    state = found.get(job_dir)
    return BenchStatus(
        bench,
        state.job_id if state else job_id,
        state.state if state else UNKNOWN,
        state.exit_code if state else None,
        state.elapsed if state else None,
        state.nodes if state else None,
        state.note if state else None,  # why it is UNKNOWN, when it is
        progress=state.progress if state else None,
        chain=state.chain if state else None,
    )


def shard_jobs(record: SubmissionRecord, jobs: Iterable[BenchmarkJob]) -> dict[str, str]:
    """Where each shard of `jobs`' sharded benchmarks runs -> its current job id; and the benchmark's
    own dir (its merged rollouts are counted there) -> a shard's id, when the entry has none."""
    ids: dict[str, str] = {}
    for job in jobs:
        mine = shard_ids(record.executor_metadata, job.benchmark)
        ids |= {shard_dir(job.job_dir, k): i for k, i in enumerate(mine) if i}
        if mine and not job.job_id and any(mine):
            ids[job.job_dir] = next(i for i in mine if i)
    return ids


def fold_shards(
    record: SubmissionRecord,
    jobs: Iterable[BenchmarkJob],
    rows: list[BenchStatus],
    found: Mapping[str, JobState],
    live: frozenset[str],
) -> list[BenchStatus]:
    """`rows` with each sharded benchmark's row made from its shards' (shard_states.derive): its
    state, its rows (merged, or summed), and each shard's own row beside it (`shards`)."""
    entries = {j.benchmark: j for j in jobs if shard_ids(record.executor_metadata, j.benchmark)}
    if not entries:
        return rows
    out = []
    for row in rows:
        job = entries.get(row.benchmark)
        if job is None:
            out.append(row)
            continue
        ids = shard_ids(record.executor_metadata, job.benchmark)
        shards = [
            _row(shard_name(job.benchmark, k), i, shard_dir(job.job_dir, k), job.error, found)
            for k, i in enumerate(ids)
        ]
        at_bench = state.progress if (state := found.get(job.job_dir)) else None
        k, what = derive([kind(s, live) for s in shards], merged(at_bench))
        shown = shards[k]
        label = {MERGED: COMPLETED, NOT_MERGED: "FAILED", ROOM: WAITING_FOR_ROOM_STATE}.get(what, shown.state)
        first = shards[0].job_id if shards[0].job_id else shown.job_id
        out.append(
            replace(
                shown,
                benchmark=job.benchmark,
                job_id=None if what == ROOM else first,
                state=label,
                error=NOT_MERGED_NOTE if what == NOT_MERGED else shown.error,
                progress=rows_of([s.progress for s in shards], at_bench),
                chain=None,
                shards=tuple(shards),
            )
        )
    return out


# --- a shared job's members, each with its own state -------------------------------------------------


def _files_script(dirs: Mapping[str, str], job_dirs: Mapping[str, str]) -> str:
    """A line per file that tells a benchmark's own state in its job: every exit status it has (an
    earlier job of a resume chain may have completed it), and the running and not-run marks of the
    job `dirs` names (bench dir -> the job's newest id). A job that is an array task (`<id>_<index>`)
    names those files after its own number, which the mark its task script left in the job's
    directory (`job_dirs`: bench dir -> it) gives (executors/slurm/arrays.py): an `alias` line."""
    lines = []
    for bench_dir, job_id in dirs.items():
        d, j = quote(bench_dir), quote(job_id)
        if "_" in job_id and bench_dir in job_dirs:
            mark = quote(f"{job_dirs[bench_dir]}/.gym_exit-{job_id}")
            lines.append(f'j=$(readlink {mark}); j=${{j#.gym_exit-}}; printf "alias\\t%s\\t%s\\n" {d} "$j"')
            j = '"$j"'
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
    job_dirs: dict[str, str] = {}  # member bench dir -> its shared job's directory
    for one, found in looked:
        for job in one.jobs:
            if job.job_id in one.shared:
                newest = found.get(one.shared[job.job_id])
                tails[job.job_dir] = newest.job_id if newest else job.job_id
                job_dirs[job.job_dir] = one.shared[job.job_id]

    exits: dict[str, dict[str, str]] = {}
    marks: dict[str, set[str]] = {}
    counted: list[str] = []
    aliases: dict[str, str] = {}  # member bench dir -> its array task's own number
    for line in conn.run(_files_script(tails, job_dirs)).stdout.splitlines():
        if line.startswith("count\t"):
            counted.append(line.removeprefix("count\t"))
            continue
        what, bench_dir, *rest = line.split("\t")
        if what == "exit" and len(rest) == 2:
            exits.setdefault(bench_dir, {})[rest[0]] = rest[1].strip()
        elif what == "alias" and len(rest) == 1:
            aliases[bench_dir] = rest[0]
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
            state, exit_code = _own_state(job_state, own, seen, aliases.get(member.job_dir) or tail, live)
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


def run_state(counts: Mapping[str, int]) -> str:
    """One run's state from its benchmarks' (day_two.tally's kinds). A run whose benchmarks wait for
    room under the quota is PENDING: it has not ended (and `submit` must not queue it again from a
    workspace that lost it, submit/live.py)."""
    order = (("running", "RUNNING"), ("pending", "PENDING"), ("waiting", "PENDING"), ("unknown", "UNKNOWN"))
    for kind, state in order:
        if counts.get(kind):
            return state
    return "FAILED" if counts.get("failed") else "COMPLETED"


def run_states(records: Sequence[SubmissionRecord]) -> dict[str, dict[str, int]]:
    """gym_job_id -> its benchmarks' counts by kind: per host, one status round trip for all."""
    from gymbuild.executors.connection import Connection  # late: measured, off resolve/render (House rules)

    by_host: dict[str | None, list[SubmissionRecord]] = {}
    counts: dict[str, dict[str, int]] = {}
    foreign: dict[str, int] = {}
    for record in records:
        if record.executor in EXECUTORS:
            by_host.setdefault(record.hostname, []).append(record)
        else:  # NeMo Gym's newer executors (kubernetes, ...): listed, never asked
            counts[record.gym_job_id] = {"unknown": len(record.benchmarks)}
            foreign[record.executor] = foreign.get(record.executor, 0) + 1
    for name, n in foreign.items():
        runs, their = ("run was", "its") if n == 1 else ("runs were", "their")
        print(
            f"warning: {n} {runs} submitted with NeMo Gym's '{name}' executor, which gymbuild cannot ask; "
            f"{their} state is UNKNOWN",
            file=sys.stderr,
        )
    for host, group in by_host.items():
        conn = Connection(host)
        try:
            conn.open()
        except UserError as err:
            why = " ".join(str(err).split())[:200]
            print(f"warning: {host}: {why}; its runs' state is UNKNOWN", file=sys.stderr)
            for record in group:
                counts[record.gym_job_id] = {"unknown": len(record.benchmarks)}
            continue
        try:
            for name in dict.fromkeys(r.executor for r in group):
                executor = executor_for(name)
                mine = [r for r in group if r.executor == name]
                jobs = {j.job_dir: j.job_id for r in mine for j in r.benchmarks if j.job_id}
                for r in mine:
                    jobs |= shard_jobs(r, r.benchmarks)
                since = min(r.submitted_at for r in mine)
                found = executor.states(conn, jobs, since=since) if jobs else {}
                for record in mine:
                    rows = fold_shards(
                        record, record.benchmarks, status_rows(record.benchmarks, found), found, executor.LIVE
                    )
                    kinds = tally(rows, executor.LIVE)
                    counts[record.gym_job_id] = {k: v for k, v in kinds.__dict__.items() if v}
        finally:
            conn.close()
    return counts
