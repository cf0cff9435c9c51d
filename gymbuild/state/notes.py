"""The notes gymbuild keeps beside the local index, and a recorded run's state as its scheduler tells it.

A record (NeMo Gym's `gym-job.json`) does not carry the config it came from, its policy model or a
sweep's combination; `note_run` keeps them under the user's state directory (the index directory is
NeMo Gym's, which reads every `*.json` in it as a record). `gymbuild runs` lists them with each run's
state; a submit asks `live_submissions` whether the index knows a live submission of the same config
that its workspace has lost (session.Session.submission), so it never queues that one twice.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gymbuild.errors import UserError
from gymbuild.state.ids import id_path, is_gym_job_id
from gymbuild.state.records import SubmissionRecord, local_index_dir, parse_record


def notes_dir() -> Path:
    from gymbuild.resources import user_state_home

    return user_state_home() / "gymbuild" / "runs"


def note_run(config: Path, policy_model: str | None, sweep: Sequence[str], gym_job_id: str) -> None:
    """What `runs` shows of a submission beyond its record; best-effort, as the index entry is."""
    from gymbuild.state.workspace import atomic_write

    note = {"config": str(config.resolve()), "policy_model": policy_model, "sweep": " ".join(sweep) or None}
    try:
        atomic_write(id_path(notes_dir(), gym_job_id), json.dumps(note) + "\n", durable=False)
    except OSError as err:
        print(f"warning: could not note {gym_job_id} for `gymbuild runs`: {err}", file=sys.stderr)


def note(gym_job_id: str) -> dict[str, Any]:
    """The note of a submission; {} when there is none (NeMo Gym's own) or it cannot be read."""
    try:
        found = json.loads(id_path(notes_dir(), gym_job_id).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


LIVE_STATES = ("RUNNING", "PENDING")  # a submission whose jobs have not all ended


def live_submissions(config: Path, sweep: Sequence[str], known: set[str]) -> list[tuple[str, str]]:
    """(gym_job_id, state) of each submission of `config` (by its real path, as note_run keeps it;
    for a sweep's combination, of the same swept values) that the local index lists, `known` does
    not, and whose jobs still run or wait: the scheduler is asked only when there is such a one.

    A submission whose state cannot be told (UNKNOWN: its host did not answer, or NeMo Gym's own
    executor) does not count: the guard is for a live one, and an old one must not block a submit."""
    real, values = str(config.resolve()), " ".join(sweep) or None
    try:
        changed = notes_dir().stat().st_mtime_ns  # a note added or removed: read them again
    except OSError:
        return []
    mine = [n for n, where in _noted(notes_dir(), changed) if where == (real, values) and n not in known]
    if not mine:
        return []
    index = local_index_dir()
    records = []
    for gym_job_id in mine:
        try:
            path = id_path(index, gym_job_id)
            records.append(parse_record(path.read_text(), str(path), named=gym_job_id))
        except (OSError, ValueError, UserError):
            continue  # pruned from the index, or damaged: nothing to guard
    counts = run_states(records) if records else {}
    states = [(r.gym_job_id, run_state(counts.get(r.gym_job_id, {"unknown": 1}))) for r in records]
    return [(gym_job_id, state) for gym_job_id, state in states if state in LIVE_STATES]


@functools.lru_cache(maxsize=4)
def _noted(directory: Path, changed: int) -> tuple[tuple[str, tuple[Any, Any]], ...]:
    """Every note's (gym_job_id, (config, sweep)), read once a process: a sweep's first submit asks
    for each of its combinations, and a notes directory holds every submission ever made. `changed`:
    the directory's mtime, which a note written or removed (a rename into it, an unlink) moves."""
    try:
        names = sorted(p.stem for p in directory.glob("*.json") if is_gym_job_id(p.stem))
    except OSError:
        return ()
    notes = ((n, note(n)) for n in names)
    return tuple((n, (note.get("config"), note.get("sweep"))) for n, note in notes)


def run_state(counts: Mapping[str, int]) -> str:
    """One run's state from its benchmarks' (day_two.tally's kinds)."""
    for kind, state in (("running", "RUNNING"), ("pending", "PENDING"), ("unknown", "UNKNOWN")):
        if counts.get(kind):
            return state
    return "FAILED" if counts.get("failed") else "COMPLETED"


def run_states(records: Sequence[SubmissionRecord]) -> dict[str, dict[str, int]]:
    """gym_job_id -> its benchmarks' counts by kind: per host, one status round trip for all."""
    from gymbuild.day_two import states
    from gymbuild.executors.base import EXECUTORS, executor_for
    from gymbuild.executors.connection import Connection

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
                since = min(r.submitted_at for r in mine)
                found = executor.states(conn, jobs, since=since) if jobs else {}
                for record in mine:
                    rows = states.status_rows(record.benchmarks, found)
                    tally = states.tally(rows, executor.LIVE)
                    counts[record.gym_job_id] = {k: v for k, v in tally.__dict__.items() if v}
        finally:
            conn.close()
    return counts
