"""The record a submission leaves behind: what was submitted, as opposed to the config (what to submit).

A record outlives the gymbuild (or NeMo Gym) that wrote it, and is read by people, collection scripts
and later commands (`status`, `resubmit`, `runs`) that never see the original config. Three rules
follow, and each is tested:

- Executor-agnostic. This module imports nothing from `gymbuild.executors` (nor config, render or
  tasks), so a reader can load a record without pulling SSH, Slurm and templates into its import path.
  No field is named after one executor's vocabulary; `executor` says how to read the
  executor-shaped parts (`job_id`, `executor_metadata`).
- One direction of compatibility. `SubmissionRecord.load` accepts every record at or below
  `SCHEMA_VERSION` and refuses only a newer one, so an upgrade never orphans records already on disk.
  That is sound only because, within one schema version, a field may only be added with a default
  (as `previous_job_ids` was) or removed, never given a new meaning; that needs a version bump and a
  migration.
- One spelling. `dumps` is the only serialisation, so the local index, the manifest in the run
  directory and `json=1` output are byte-identical and can be compared with `cmp`.

The shape of a record is published in `schemas/gym-job.v1.schema.json`; `load` checks the same shape
with a fast table of predicates and asks the schema only to word the error (tests prove they agree).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, NotRequired, TypedDict, TypeGuard

from gymbuild.errors import UserError
from gymbuild.resources import load_schema, user_cache_home
from gymbuild.state.ids import GYM_JOB_ID_FORMAT, BadIdError, id_path, is_gym_job_id, is_plain_name, shown
from gymbuild.state.workspace import atomic_write

if TYPE_CHECKING:  # jsonschema is imported only to explain a bad record
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

MANIFEST_NAME = "gym-job.json"
RESOLVED_CONFIG_NAME = "resolved-config.yaml"
SCHEMA_VERSION = 1
SCHEMA_NAME = f"gym-job.v{SCHEMA_VERSION}.schema.json"


_MAX_REPORTED_PROBLEMS = 5


class RecordError(UserError):
    """A payload that is not a job record this gymbuild can read.

    The only exception `SubmissionRecord.load` raises, so a reader (or `runs`, skipping one bad file
    among many) needs exactly one `except` and never mistakes a damaged file for a bug in gymbuild.
    """


@dataclass(frozen=True)
class BenchmarkJob:
    """One benchmark's submission.

    `job_id` is None exactly when the executor failed to queue this benchmark (for the Slurm executor,
    a failed sbatch), and `error` then says why. Under the Slurm executor `job_id` is a Slurm job id;
    another executor's ids need not be numeric, which is why it is a string.

    `previous_job_ids` keeps the ids of earlier runs of this benchmark when it was re-queued, oldest
    first, so logs and accounting of a failed attempt stay findable after `resubmit`. It was added
    within schema 1 with a default, so records without it (NeMo Gym's, older gymbuild's) read as ().
    """

    benchmark: str
    job_dir: str
    job_id: str | None = None
    error: str | None = None
    previous_job_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # A list from JSON would make the entry unhashable and compare unequal to its own reload.
        object.__setattr__(self, "previous_job_ids", tuple(self.previous_job_ids))

    def requeued(self, job_id: str | None, error: str | None = None) -> BenchmarkJob:
        """This benchmark queued again: the new outcome, with the id it replaces kept in the history.

        A failed queue attempt (job_id None) had no id, so there is nothing to remember from it.
        """
        history = self.previous_job_ids if self.job_id is None else (*self.previous_job_ids, self.job_id)
        return replace(self, job_id=job_id, error=error, previous_job_ids=history)


@dataclass(frozen=True)
class SubmissionRecord:
    """Everything needed to find a submitted run again.

    `executor` is the field a reader branches on before interpreting `job_id` or `executor_metadata`;
    it is a plain string rather than an enum of today's executors so that adding one does not change
    the schema. `hostname` None means the submission ran on the machine with the scheduler's client
    (no SSH hop), not that the host is unknown. `gym_commit` is None when the commit cannot be
    determined; a `-dirty` suffix means the commit alone does not reproduce the submitting code.

    `executor_metadata` is copied on construction so the caller's dict cannot change the record; it
    is excluded from the hash because a dict cannot be hashed. Treat it as read-only.
    """

    gym_job_id: str
    gym_version: str
    submitted_at: str
    run_dir: str
    cluster: str
    executor: str
    submitted_by: str
    benchmarks: tuple[BenchmarkJob, ...]
    gym_commit: str | None = None
    hostname: str | None = None
    executor_metadata: Mapping[str, str] = field(default_factory=dict, hash=False)
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        object.__setattr__(self, "benchmarks", tuple(self.benchmarks))
        object.__setattr__(self, "executor_metadata", dict(self.executor_metadata))

    @property
    def failed(self) -> tuple[BenchmarkJob, ...]:
        """The benchmarks the executor could not queue: what the next submit retries, and exit 1."""
        return tuple(job for job in self.benchmarks if job.job_id is None)

    def with_jobs(self, *jobs: BenchmarkJob) -> SubmissionRecord:
        """A copy in which each given entry replaces the one with the same benchmark name.

        Re-queueing touches a few benchmarks of a submission; keeping the others' entries and their
        order untouched is what lets the rewritten record still describe the whole run. A name the
        record does not have yet is appended.
        """
        updates = {job.benchmark: job for job in jobs}
        kept = [updates.pop(job.benchmark, job) for job in self.benchmarks]
        return replace(self, benchmarks=(*kept, *updates.values()))

    def dumps(self) -> str:
        """The manifest's bytes; one spelling, so every copy of a record is byte-identical.

        Sorted keys and ASCII-only escapes make the text independent of field order and of the locale
        of whatever terminal or file it ends up in.
        """
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def load(cls, payload: object) -> SubmissionRecord:
        """Parse a record, refusing only one written by a newer gymbuild or NeMo Gym.

        Older records stay readable: fields added since take their defaults. A newer record may carry
        fields whose meaning this version does not know, so it is the one case refused, with a message
        that says which side to upgrade. Unknown keys are ignored, because within one schema version a
        writer may add fields. Every malformed payload raises `RecordError`, never a bare KeyError or
        TypeError, so callers handle one error.
        """
        if not isinstance(payload, dict):
            raise RecordError(f"a job record is a JSON object, not {_json_type(payload)}")
        if "schema_version" not in payload:
            raise RecordError(
                "the job record has no schema_version, so it cannot be read safely "
                "(it is not a gym-job.json written by gymbuild or NeMo Gym)"
            )
        version = payload["schema_version"]
        # bool is an int subclass, and 1.0 parses from JSON as a float: neither is a version number.
        if type(version) is not int:
            raise RecordError(
                f"the job record's schema_version is {json.dumps(version)[:40]}, not an integer; "
                "it cannot be read safely"
            )
        if version > SCHEMA_VERSION:
            raise RecordError(
                f"the job record was written by a newer gymbuild/Gym (schema {version}); "
                f"this one reads up to {SCHEMA_VERSION}: upgrade gymbuild to read it"
            )
        if not _is_record(payload):
            raise RecordError(_describe_problems(_validator().iter_errors(payload)))
        _check_places(payload)
        # Only the fields this version knows are read; the rest (a newer writer's) are ignored.
        return cls(
            gym_job_id=payload["gym_job_id"],
            gym_version=payload["gym_version"],
            submitted_at=payload["submitted_at"],
            run_dir=payload["run_dir"],
            cluster=payload["cluster"],
            executor=payload["executor"],
            submitted_by=payload["submitted_by"],
            benchmarks=tuple(
                BenchmarkJob(
                    benchmark=b["benchmark"],
                    job_dir=b["job_dir"],
                    job_id=b.get("job_id"),
                    error=b.get("error"),
                    previous_job_ids=tuple(b.get("previous_job_ids", ())),
                )
                for b in payload["benchmarks"]
            ),
            gym_commit=payload.get("gym_commit"),
            hostname=payload.get("hostname"),
            executor_metadata=payload.get("executor_metadata", {}),
            schema_version=payload["schema_version"],
        )

    def write_local_index(self) -> Path | None:
        """Record the submission on this machine, or say on stderr why not and carry on.

        Best-effort by design: it runs after the jobs are queued, so raising here would report a
        failure for work that is really running. The durable copy is the manifest in the run
        directory. Written through a temporary file and a rename so `runs` never reads half a record.
        """
        target: Path | str = f"{self.gym_job_id}.json"
        try:
            target = id_path(local_index_dir(), self.gym_job_id)
            atomic_write(target, self.dumps())
        except (OSError, RuntimeError, BadIdError) as exc:
            reason = " ".join(str(exc).split())
            print(f"warning: could not write the local index entry {target}: {reason}", file=sys.stderr)
            return None
        return target


def local_index_dir() -> Path:
    """Where this machine remembers its own submissions: `$XDG_CACHE_HOME/nemo-gym/jobs`, shared with
    NeMo Gym so one `runs` lists both.

    """
    return user_cache_home() / "nemo-gym" / "jobs"


def iter_local_index(directory: Path | None = None) -> Iterator[SubmissionRecord]:
    """This machine's submissions, newest first; a file that cannot be read is skipped with a warning.

    One damaged or newer-schema file must not hide every other run from `runs`. Ordered by file name,
    which starts with the submission time, so listing the newest few parses only those.
    """
    directory = local_index_dir() if directory is None else directory
    try:
        paths = sorted(directory.glob("*.json"), key=lambda p: p.name, reverse=True)
    except OSError as exc:
        print(f"warning: could not list the local index {directory}: {exc}", file=sys.stderr)
        return
    for path in paths:
        try:
            yield parse_record(path.read_text(encoding="utf-8"), str(path), named=path.name[: -len(".json")])
        except RecordError as exc:
            print(f"warning: skipping {' '.join(str(exc).split()).removeprefix('error: ')}", file=sys.stderr)
        except OSError as exc:
            print(f"warning: skipping {path}: {' '.join(str(exc).split())}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------------
# helpers


def all_runs() -> list[SubmissionRecord]:
    """Every submission of the local index, newest first."""
    return sorted(iter_local_index(), key=lambda r: (r.submitted_at, r.gym_job_id), reverse=True)


def parse_record(text: str, where: str, *, named: str | None = None) -> SubmissionRecord:
    """The record in `text` (a file's contents), read from `where` (a path, named in every error),
    every reader's one way in.

    `named`: the name the record is found by (its run directory's name, its index entry's stem), which
    must be its own gym_job_id: a record that says it is another submission (or one whose id is a
    path) is refused, so a `gym-job.json` planted in a shared output path cannot steer a later
    `cancel` or `prune` to another submission's, or any, files. One line, naming the file.
    """
    try:
        record = SubmissionRecord.load(json.loads(text))
    except ValueError as err:  # JSON's own errors; RecordError is a UserError, not a ValueError
        raise RecordError(f"error: {where}: not a JSON record: {' '.join(str(err).split())}") from None
    except RecordError as err:
        raise RecordError(f"error: {where}: {' '.join(str(err).split())}") from None
    if named is not None and record.gym_job_id != named:
        raise RecordError(
            f"error: {where}: the record is {record.gym_job_id}, not {shown(named)}: "
            "refused (a record sits in the directory, or index entry, named after its own id)"
        )
    return record


# A scheduler's job id: Slurm's (`123`, an array's `123_4`), a local pid, NeMo Gym kubernetes' names.
_is_job_id = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+:@-]{0,127}", re.ASCII).fullmatch


def _check_places(payload: _RecordJson) -> None:
    """The id and the paths a record hands to `cancel`, `logs` and `status`, which build paths and
    shell words from them: the id in its format, the run directory named after it, each benchmark's
    directory a plain name inside the run directory (NeMo Gym's records and gymbuild's all are)."""
    gym_job_id = payload["gym_job_id"]
    if not is_gym_job_id(gym_job_id):
        raise RecordError(f"gym_job_id: {shown(gym_job_id)} is not a gym_job_id ({GYM_JOB_ID_FORMAT})")
    run_dir = PurePosixPath(payload["run_dir"])
    if not run_dir.is_absolute() or run_dir.name != gym_job_id or ".." in run_dir.parts:
        raise RecordError(
            f"run_dir: {shown(payload['run_dir'])} is not an absolute directory named {gym_job_id}"
        )
    for i, job in enumerate(payload["benchmarks"]):
        job_dir = PurePosixPath(job["job_dir"])
        if not is_plain_name(job["benchmark"]):
            raise RecordError(f"benchmarks[{i}].benchmark: {shown(job['benchmark'])} is not a plain name")
        if job_dir.parent != run_dir or not is_plain_name(job_dir.name):
            raise RecordError(
                f"benchmarks[{i}].job_dir: {shown(job['job_dir'])} is not a directory in {run_dir}"
            )
        # Job ids reach scancel and kill as words: one that reads as an option (`--user=alice`
        # cancels every job of that user) or holds a separator is no scheduler's id.
        for job_id in (job.get("job_id"), *job.get("previous_job_ids", ())):
            if job_id is not None and not _is_job_id(job_id):
                raise RecordError(f"benchmarks[{i}]: {shown(job_id)} is not a job id")


# The shape `load` checks, field by field: (required, predicate). The schema is the published
# definition; this is the same definition in a form that costs microseconds instead of the ~1.5 ms a
# jsonschema pass takes per record, which `runs` would pay once per submission ever made. The schema
# is consulted only to word the error once a record fails. Tests prove the two accept the same
# payloads, and that both list exactly the dataclass fields.


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _is_optional_str(value: object) -> bool:
    return value is None or isinstance(value, str)


def _is_str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_str_map(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(item, str) for item in value.values())


def _is_benchmark_list(value: object) -> bool:
    return isinstance(value, list) and all(_fits(item, _BENCHMARK_SHAPE) for item in value)


_Shape = Mapping[str, tuple[bool, Callable[[object], bool]]]


class _BenchmarkJson(TypedDict):
    """A benchmark's entry as `_BENCHMARK_SHAPE` accepts it (keys a newer writer added aside)."""

    benchmark: str
    job_dir: str
    job_id: NotRequired[str | None]
    error: NotRequired[str | None]
    previous_job_ids: NotRequired[list[str]]


class _RecordJson(TypedDict):
    """A record as `_RECORD_SHAPE` accepts it (keys a newer writer added aside)."""

    schema_version: int
    gym_job_id: str
    gym_version: str
    submitted_at: str
    run_dir: str
    cluster: str
    executor: str
    submitted_by: str
    benchmarks: list[_BenchmarkJson]
    gym_commit: NotRequired[str | None]
    hostname: NotRequired[str | None]
    executor_metadata: NotRequired[dict[str, str]]


_BENCHMARK_SHAPE: _Shape = {
    "benchmark": (True, _is_str),
    "job_dir": (True, _is_str),
    "job_id": (False, _is_optional_str),
    "error": (False, _is_optional_str),
    "previous_job_ids": (False, _is_str_list),
}

_RECORD_SHAPE: _Shape = {
    "schema_version": (True, lambda value: type(value) is int and value <= SCHEMA_VERSION),
    "gym_job_id": (True, _is_str),
    "gym_version": (True, _is_str),
    "submitted_at": (True, _is_str),
    "run_dir": (True, _is_str),
    "cluster": (True, _is_str),
    "executor": (True, _is_str),
    "submitted_by": (True, _is_str),
    "benchmarks": (True, _is_benchmark_list),
    "gym_commit": (False, _is_optional_str),
    "hostname": (False, _is_optional_str),
    "executor_metadata": (False, _is_str_map),
}


def _fits(payload: object, shape: _Shape) -> bool:
    if not isinstance(payload, dict):
        return False
    return all(
        check(payload[name]) if name in payload else not required for name, (required, check) in shape.items()
    )


@cache
def _validator() -> Validator:
    # Imported here: jsonschema costs ~0.1 s at import, and is needed only to explain a bad record.
    from jsonschema import Draft202012Validator

    return Draft202012Validator(load_schema(SCHEMA_NAME))


def _is_record(payload: object) -> TypeGuard[_RecordJson]:
    """Whether `payload` has the record's shape (the two TypedDicts above spell what that means)."""
    return _fits(payload, _RECORD_SHAPE)


def _describe_problems(problems: Iterable[ValidationError]) -> str:
    """One line naming where each problem is, with the missing fields of an object listed together."""
    missing: dict[str, list[str]] = {}
    others: list[str] = []
    for problem in problems:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in problem.absolute_path)
        where = where.lstrip(".") or "(top level)"
        if problem.validator == "required":
            names = missing.setdefault(where, [])
            # jsonschema's stubs allow Unset for both, which a reported `required` error never has.
            required, instance = problem.validator_value, problem.instance
            if isinstance(required, list) and isinstance(instance, Mapping):
                names.extend(n for n in required if n not in instance and n not in names)
        else:
            message = problem.message if len(problem.message) <= 160 else problem.message[:157] + "..."
            others.append(f"{where}: {message}")
    lines = [f"{where}: missing {', '.join(names)}" for where, names in missing.items()] + others
    if len(lines) > _MAX_REPORTED_PROBLEMS:
        lines[_MAX_REPORTED_PROBLEMS:] = [f"... and {len(lines) - _MAX_REPORTED_PROBLEMS} more"]
    return "not a valid job record: " + "; ".join(lines)


def _json_type(value: object) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
