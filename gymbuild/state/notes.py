"""The notes gymbuild keeps beside the local index.

A record (NeMo Gym's `gym-job.json`) does not carry the config it came from, its policy model or a
sweep's combination; `note_run` keeps them under the user's state directory (the index directory is
NeMo Gym's, which reads every `*.json` in it as a record). `gymbuild runs` lists them with each run's
state (day_two/runs.py); a submit asks whether the index knows a live submission of the same config
that its workspace has lost (submit/live.py), so it never queues that one twice.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from gymbuild.resources import user_state_home
from gymbuild.state.ids import id_path, is_gym_job_id
from gymbuild.state.workspace import atomic_write


def notes_dir() -> Path:
    return user_state_home() / "gymbuild" / "runs"


def note_run(config: Path, policy_model: str | None, sweep: Sequence[str], gym_job_id: str) -> None:
    """What `runs` shows of a submission beyond its record; best-effort, as the index entry is."""
    note = {"config": str(config.resolve()), "policy_model": policy_model, "sweep": " ".join(sweep) or None}
    try:
        atomic_write(id_path(notes_dir(), gym_job_id), json.dumps(note) + "\n", durable=False)
    except OSError as err:
        print(f"warning: could not note {gym_job_id} for `gymbuild runs`: {err}", file=sys.stderr)


def note(gym_job_id: str) -> dict[str, object]:
    """The note of a submission; {} when there is none (NeMo Gym's own) or it cannot be read."""
    try:
        found = json.loads(id_path(notes_dir(), gym_job_id).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


@functools.lru_cache(maxsize=4)
def noted(directory: Path, changed: int) -> tuple[tuple[str, tuple[object, object]], ...]:
    """Every note's (gym_job_id, (config, sweep)), read once a process: a sweep's first submit asks
    for each of its combinations, and a notes directory holds every submission ever made. `changed`:
    the directory's mtime, which a note written or removed (a rename into it, an unlink) moves."""
    try:
        names = sorted(p.stem for p in directory.glob("*.json") if is_gym_job_id(p.stem))
    except OSError:
        return ()
    notes = ((n, note(n)) for n in names)
    return tuple((n, (note.get("config"), note.get("sweep"))) for n, note in notes)
