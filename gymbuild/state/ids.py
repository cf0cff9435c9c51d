"""A submission's id, checked once, before any path is built from it.

A `gym_job_id` names a run directory, a local index entry, a note, a results cache file and a secrets
directory. It arrives from places gymbuild does not control: a `gym-job.json` in a run directory under
a shared output path, the local index, `run=` on the command line. One id holding `../` or `/` once
made `cancel` remove a directory outside `~/.gymbuild-secrets`. So every reader goes
through `gym_job_id` (or `is_gym_job_id`), and every path made of an id through `id_path`: an id that
is not `gym-job-<YYYYMMDDTHHMMSSZ>-<6 hex>` (NeMo Gym 0.7.0's `new_gym_job_id`, and gymbuild's) never
reaches a path. The format has no `/`, `.` or shell metacharacter, so a path made of it stays in its
directory by construction; `id_path` checks that too.

A leaf module: the command line (`argv`), the record (`records`), the readers and the secrets removal
(`executors/secrets.py`, so the script-code digest reads it too) import it; it imports only the errors.
"""

from __future__ import annotations

import re
from pathlib import Path

from gymbuild.errors import UserError

GYM_JOB_ID_FORMAT = "gym-job-<YYYYMMDDTHHMMSSZ>-<6 hex>"
# ASCII classes and a full match: `\d` would take other scripts' digits, and `$` a trailing newline.
_GYM_JOB_ID = re.compile(r"gym-job-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}", re.ASCII).fullmatch

_SHOWN_MAX = 80


class BadIdError(UserError):
    """A value used as a submission id (or a name in one's paths) that is not one: refused whole."""


def shown(value: object) -> str:
    """A value echoed in an error, quoted: control characters escaped (repr), cut to one short line."""
    text = repr(value)
    return text if len(text) <= _SHOWN_MAX else text[: _SHOWN_MAX - 3] + "..."


def is_gym_job_id(value: object) -> bool:
    return isinstance(value, str) and _GYM_JOB_ID(value) is not None


def gym_job_id(value: object, where: str) -> str:
    """`value` when it is a gym_job_id, else one line naming where it came from: `where` is "run=" or
    "FILE: " (the message reads `error: run='../x' is not ...`)."""
    if is_gym_job_id(value):
        assert isinstance(value, str)
        return value
    raise BadIdError(
        f"error: {where}{shown(value)} is not a gym_job_id ({GYM_JOB_ID_FORMAT}): refused, nothing "
        "read or removed; fix: name a submission `gymbuild runs` lists"
    )


def run_argument_problem(value: str) -> str | None:
    """Why `run=value` names no submission, or None: `all`, or gym_job_ids separated by commas (an
    empty value is the config's own). Checked as the command line is read, for every verb, so no
    verb meets an id that is a path."""
    if value == "all":
        return None
    for piece in value.split(","):
        if piece and not is_gym_job_id(piece):
            try:
                gym_job_id(piece, "run=")
            except BadIdError as err:
                return err.message
    return None


# A Slurm job id as squeue and sacct print one: a job's number, or one array task's `<id>_<index>`
# (not a pending range such as `12_[3-7%2]`, not a step `12.batch`): what a record holds for a Slurm
# job, and what status reads back from the two tools.
_SLURM_JOB_ID = re.compile(r"[0-9]+(?:_[0-9]+)?", re.ASCII).fullmatch


def is_slurm_job_id(value: object) -> bool:
    return isinstance(value, str) and _SLURM_JOB_ID(value) is not None


def is_plain_name(name: object) -> bool:
    """A single path component that names something inside its directory: a benchmark's directory or
    secrets file. No `/`, not `.` or `..`, no control character (NUL, newline)."""
    return (
        isinstance(name, str)
        and name not in {"", ".", ".."}
        and "/" not in name
        and name.isprintable()
        and len(name.encode()) <= 255
    )


def id_path(directory: Path, gym_job_id_: str, suffix: str = ".json") -> Path:
    """`directory/<gym_job_id><suffix>`: the one way a file named after a submission is made."""
    checked = gym_job_id(gym_job_id_, f"a file in {directory}: ")
    path = directory / f"{checked}{suffix}"
    if path.parent != directory or path.name != f"{checked}{suffix}":  # the format rules it out
        raise BadIdError(f"error: {shown(str(path))} is not inside {directory}")
    return path
