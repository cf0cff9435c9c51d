"""`gymbuild status`: what became of a submission's jobs, as a table or JSON. The states come from
executors/states.py, one squeue and one sacct per call whatever the number of benchmarks."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gymbuild.day_two import watch
from gymbuild.day_two.find import find_checked
from gymbuild.errors import UserError
from gymbuild.executors.base import executor_for
from gymbuild.executors.states import (
    COMPLETED,
    UNKNOWN,
    WAITING,
    WAITING_FOR_ROOM,
    BenchStatus,
    Tally,
    states_of,
    tally,
    waits_for_room,
)
from gymbuild.request.verb_args import OfSubmission, StatusArgs
from gymbuild.state.rollouts import Rates

if TYPE_CHECKING:
    from gymbuild.executors.connection import Connection
    from gymbuild.state.records import SubmissionRecord
    from gymbuild.state.rollouts import Rates
    from gymbuild.submit.session import Session


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
    chained = any(row.chain for row in rows)  # a resume chain's attempt, beside its state
    if chained:
        table[0] = (*table[0][:3], "ATTEMPT", *table[0][3:])
    for row in rows:
        cells: tuple[str | None, ...] = (row.job_id, row.state, row.exit_code, row.elapsed, row.nodes)
        if shared:
            cells = (row.job_id, row.state, row.exit_code, row.job_state, row.elapsed, row.nodes)
        if chained:
            cells = (*cells[:2], str(row.chain.attempt) if row.chain else None, *cells[2:])
        if counted:
            cells = (*cells[:-1], _rollouts_cell(row, rates), cells[-1])
        table.append((row.benchmark, *(c or "-" for c in cells)))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]) - 1)]
    lines = ["  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]) for r in table]
    sharded = [r for r in rows if r.shards]
    if sharded:  # each shard's job, state and rows: what resubmit queues again is named here
        lines += ["", "shards (job state rollouts):"]
        lines += [
            f"  {r.benchmark}: " + ", ".join(_shard_cell(k, s) for k, s in enumerate(r.shards))
            for r in sharded
        ]
    chains = [r for r in rows if r.chain and (len(r.chain.steps) > 1 or r.chain.end)]
    if chains:  # every attempt so far and why each ended, and why the chain stopped
        lines += ["", "resume chains (job state -> what the chain did next):"]
        lines += [f"  {r.benchmark}: {r.chain.line()}" for r in chains if r.chain]
    waiting = [r for r in rows if not r.job_id and waits_for_room(r.error)]
    for title, notes in (
        ("not queued (`gymbuild submit` queues these again)", [r for r in rows if r.error and not r.job_id]),
        ("state unknown", [r for r in rows if r.error and r.job_id]),
    ):
        notes = [r for r in notes if r not in waiting]
        if notes:
            lines += ["", f"{title}:", *(f"  {r.benchmark}: {r.error}" for r in notes)]
    if waiting:
        lines += ["", "waiting for room (`gymbuild submit watch=1` queues them as room frees):"]
        by_reason: dict[str, list[str]] = {}
        for row in waiting:
            by_reason.setdefault((row.error or "").removeprefix(WAITING_FOR_ROOM), []).append(row.benchmark)
        lines += [f"  {', '.join(names)}: {reason}" for reason, names in by_reason.items()]
    if summary is not None:
        lines += ["", summary.line() + (f" (watched: {looks} looks)" if looks else "")]
    return head + "\n" + "\n".join(line.rstrip() for line in lines) + "\n"


def _shard_cell(k: int, shard: BenchStatus) -> str:
    rows = f" {shard.progress.text()}" if shard.progress else ""
    return f"{k}: {shard.job_id or '-'} {shard.state}{rows}"


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
    payload: dict[str, object] = {
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


def _row_json(row: BenchStatus) -> dict[str, object]:
    """A row as JSON: a shared job's state and the rollout counts only where there are some."""
    doc = {
        k: v for k, v in row.__dict__.items() if k not in ("job_state", "progress", "chain", "shards") or v
    }
    if row.shards:  # a sharded benchmark: each shard's job id and state (and rows)
        doc["shards"] = [_row_json(shard) for shard in row.shards]
    if row.progress is not None:
        doc["progress"] = dataclasses.asdict(row.progress)
    if row.chain is not None:  # attempt, attempts, chain_end, chain_live
        doc.pop("chain")
        doc.update(row.chain.as_json())
    return doc


def statuses(conn: Connection, record: SubmissionRecord) -> list[BenchStatus]:
    """Every benchmark of the record with its newest job's state (states.py: one round trip, and
    one more for the members of shared jobs)."""
    (rows,) = states_of(conn, [record])
    return rows


def look(s: Session, record: SubmissionRecord, only: Sequence[str]) -> list[BenchStatus]:
    """One look at the submission's jobs (one squeue and one sacct, whatever their number), of the
    benchmarks `only` names (none: every one)."""
    rows = statuses(s.connection(), record)
    return [r for r in rows if r.benchmark in only] if only else rows


def current_statuses(s: Session, args: OfSubmission) -> tuple[SubmissionRecord, list[BenchStatus]]:
    record = find_checked(s, args)
    return record, look(s, record, args.only)


# A large status takes a second or two: say so on a terminal, from this many jobs.
PROGRESS_FROM = 100


def print_status(s: Session, args: StatusArgs) -> None:
    """The table (json=1: one document) with its summary line; watch=1 looks again until every job
    has ended and fails (exit 1) unless every benchmark completed."""
    record = find_checked(s, args)
    live = executor_for(record.executor).LIVE
    looks = None
    if args.watch:
        rates = Rates()  # each benchmark's rollouts per second since the first look: its time left

        def draw(rows: list[BenchStatus], summary: Tally) -> str:
            seen = [(r.benchmark, r.job_id, r.progress) for r in rows]
            return format_statuses(record, rows, summary, rates=rates.seen(seen, time.monotonic()))

        rows, summary, looks = watch.watch(
            lambda: look(s, record, args.only),
            live,
            as_json=args.json,
            draw=draw,
            what=record.gym_job_id,
        )
    else:
        if len(record.benchmarks) >= PROGRESS_FROM:
            s.progress.show(f"asking about the {len(record.benchmarks)} jobs of {record.gym_job_id} ...")
        rows = look(s, record, args.only)
        s.progress.done(keep=False)
        summary = tally(rows, live)
    render = statuses_json if args.json else format_statuses
    sys.stdout.write(render(record, rows, summary, looks))
    if args.watch and summary.failed + summary.unknown + summary.waiting:
        raise UserError(watch.not_completed(record, rows, live))
