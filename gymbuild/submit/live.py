"""The guard against queueing one evaluation twice from two workspaces: a live submission of the same
config (by its real path, and a sweep's combination by its values) that the local index lists and
this workspace does not know (Session.submission asks it before a submit mints a new id)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gymbuild.errors import UserError
from gymbuild.executors.states import run_state, run_states
from gymbuild.state.ids import id_path
from gymbuild.state.notes import noted, notes_dir
from gymbuild.state.records import local_index_dir, parse_record

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
    mine = [n for n, where in noted(notes_dir(), changed) if where == (real, values) and n not in known]
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
