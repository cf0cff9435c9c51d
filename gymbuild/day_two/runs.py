"""`gymbuild runs`: this machine's submissions as a listing, each with the state its jobs ended in.

The local index holds NeMo Gym's records (`gym-job.json` copies), which say what was queued, not what
became of it: counting sbatch answers called a run whose benchmark FAILED "2 queued, 0 failed". So the
listing asks the scheduler, once per host for every run listed (one squeue and one sacct, as `status`
does for one run), and shows per run its state: RUNNING or PENDING while a job is live, COMPLETED when
every benchmark completed, else FAILED (or UNKNOWN when a look could not tell).

What a record does not carry (the config it came from, its policy model, the sweep combination) is
noted beside the index when gymbuild records a run (`state/notes.note_run`), under the user's state directory:
the index directory itself is NeMo Gym's, which reads every `*.json` in it as a record.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TypedDict

from gymbuild.executors.states import run_state, waits_for_room
from gymbuild.executors.states import run_states as _states
from gymbuild.request.verb_args import RunsArgs
from gymbuild.state.ids import id_path
from gymbuild.state.notes import note as _note
from gymbuild.state.notes import notes_dir
from gymbuild.state.records import SubmissionRecord, all_runs, local_index_dir


def _older_than(record: SubmissionRecord, cutoff: datetime) -> bool:
    try:
        when = datetime.fromisoformat(record.submitted_at.replace("Z", "+00:00"))
    except ValueError:
        return False
    return when < cutoff


def prune(days: float) -> tuple[list[str], str]:
    """Remove gymbuild's own local index entries (and their notes) of submissions older than `days`
    days: the index only grows otherwise. Run directories and jobs are left alone, and so is every
    entry gymbuild did not write: the index directory is NeMo Gym's too.

    gymbuild's receipt for an entry is its note (`note_run`, written with every entry gymbuild
    writes, under gymbuild's own state directory): an entry without one is NeMo Gym's (or another
    tool's) and stays, however old. Only files named after a checked id are touched (`ids.id_path`).
    """
    cutoff = datetime.now(UTC) - timedelta(days=min(days, 1e6))  # prune= read it (arguments.py)
    old = [r for r in all_runs() if _older_than(r, cutoff)]
    gone = [r.gym_job_id for r in old if id_path(notes_dir(), r.gym_job_id).is_file()]
    for gym_job_id in gone:
        id_path(local_index_dir(), gym_job_id).unlink(missing_ok=True)
        id_path(notes_dir(), gym_job_id).unlink(missing_ok=True)
    kept = len(old) - len(gone)
    lines = [
        f"pruned {len(gone)} gymbuild submission(s) older than {days:g} days from {local_index_dir()} "
        f"(and their notes in {notes_dir()}; run dirs and jobs kept)",
        *(f"  removed {id_path(local_index_dir(), i)}" for i in gone),
    ]
    if kept:
        entries = "entry" if kept == 1 else "entries"
        lines.append(f"kept {kept} older {entries} gymbuild did not write (NeMo Gym's own)")
    return gone, "\n".join(lines)


class RunRow(TypedDict):
    """One run as `runs` lists it (and prints it with --json)."""

    gym_job_id: str
    submitted_at: str
    state: str
    benchmarks: dict[str, int]
    not_queued: int
    executor: str
    cluster: str
    hostname: str | None
    config: str | None
    policy_model: str | None
    sweep: str | None
    run_dir: str


def _noted(note: Mapping[str, object], key: str) -> str | None:
    """A text a note keeps (gymbuild writes them); None when absent or not text."""
    value = note.get(key)
    return value if isinstance(value, str) else None


def listing(args: RunsArgs) -> list[RunRow]:
    """The runs to list, newest first, filtered by config=, state= and limit=, with their states."""

    wanted_state, limit = args.state, args.limit  # read and checked by their arguments (arguments.py)
    records = all_runs()
    notes = {r.gym_job_id: _note(r.gym_job_id) for r in records}
    if args.config is not None:
        config = str(args.config.resolve())
        records = [r for r in records if notes[r.gym_job_id].get("config") == config]
    if wanted_state is None and limit is not None:
        records = records[:limit]
    counts = _states(records) if records else {}
    rows: list[RunRow] = []
    for r in records:
        note = notes[r.gym_job_id]
        rows.append(
            {
                "gym_job_id": r.gym_job_id,
                "submitted_at": r.submitted_at,
                "state": run_state(counts.get(r.gym_job_id, {})),
                "benchmarks": counts.get(r.gym_job_id, {}),
                "not_queued": sum(not waits_for_room(b.error) for b in r.failed),  # waiting: counted apart
                "executor": r.executor,
                "cluster": r.cluster,
                "hostname": r.hostname,
                "config": _noted(note, "config"),
                "policy_model": _noted(note, "policy_model"),
                "sweep": _noted(note, "sweep"),
                "run_dir": r.run_dir,
            }
        )
    if wanted_state is not None:
        rows = [row for row in rows if row["state"] == wanted_state][:limit]
    return rows


def _counts_text(counts: Mapping[str, int], not_queued: int) -> str:
    label = {"waiting": "waiting for room"}  # status's words (Tally.line)
    parts = [f"{n} {label.get(kind, kind)}" for kind, n in counts.items()]
    if not_queued:
        parts.append(f"{not_queued} not queued")
    return ", ".join(parts) or "-"


def format_listing(rows: Sequence[RunRow]) -> str:
    """A table with a header, one line per run, newest first."""
    if not rows:
        return f"no submissions in {local_index_dir()}\n"
    header = (
        "GYM_JOB_ID",
        "SUBMITTED",
        "WHERE",
        "STATE",
        "BENCHMARKS",
        "POLICY MODEL",
        "CONFIG",
        "SWEEP",
        "RUN DIR",
    )
    table = [header]
    for row in rows:
        where = f"{row['executor']}:{row['cluster']}" + (f"@{row['hostname']}" if row["hostname"] else "")
        cells = (
            row["gym_job_id"],
            row["submitted_at"],
            where,
            row["state"],
            _counts_text(row["benchmarks"], row["not_queued"]),
            row["policy_model"] or "-",
            row["config"] or "-",
            row["sweep"] or "-",
            row["run_dir"],
        )
        table.append(cells)
    widths = [max(len(r[i]) for r in table) for i in range(len(header) - 1)]
    lines = ["  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]) for r in table]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def print_runs(args: RunsArgs) -> None:
    if args.prune is not None:
        ids, text = prune(args.prune)
        sys.stdout.write(json.dumps({"pruned": ids}, indent=2) + "\n" if args.json else text + "\n")
        return
    rows = listing(args)
    sys.stdout.write(json.dumps(rows, indent=2) + "\n" if args.json else format_listing(rows))
