"""Find a submission again: from the workspace (the config's current one, without loading the config:
status of a thousand jobs must not compose and validate a thousand benchmarks), from the local index
(`run=<id>`), or from the manifest in the run directory."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from gymbuild.errors import UserError
from gymbuild.executors.base import cannot_ask
from gymbuild.request.verb_args import OfSubmission
from gymbuild.shell import quote
from gymbuild.state import ids
from gymbuild.state.records import MANIFEST_NAME, SubmissionRecord, local_index_dir, parse_record
from gymbuild.submit.record import build_record

if TYPE_CHECKING:
    from gymbuild.executors.connection import Connection
    from gymbuild.submit.session import Session


def record_from_index(gym_job_id: str) -> SubmissionRecord | None:
    """The local index's entry for `gym_job_id` (checked first: it becomes a file name), or None."""
    path = ids.id_path(local_index_dir(), gym_job_id)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise UserError(f"error: {path}: cannot read the record: {err}") from None
    return parse_record(text, str(path), named=gym_job_id)


def record_from_run_dir(conn: Connection, run_dir: str) -> SubmissionRecord:
    """The manifest in `run_dir` (`<output_path>/<gym_job_id>`), which must be that submission's."""
    where = f"{run_dir}/{MANIFEST_NAME}"
    result = conn.run(f"cat {quote(where)}")
    if not result.ok:
        raise UserError(
            f"error: no record at {conn.target}:{where}: {result.stderr.strip()}\n"
            "    fix: check run=<gym_job_id> against `gymbuild runs`"
        )
    return parse_record(result.stdout, where, named=PurePosixPath(run_dir).name)


def find_record(s: Session, run: str | None, *, connect: bool = True) -> SubmissionRecord:
    """`run` (the verb's run=<id>): the local index, else the run directory; otherwise (None or "")
    the config's submission. The session's connection goes to the host the record names, opened now
    unless not `connect` (`results` of finished benchmarks reads its cache and opens nothing)."""
    if run:
        run = ids.gym_job_id(run, "run=")
        record = record_from_index(run)
        if record is not None:
            _askable(record)
            if connect:
                s.connection(record.hostname, use_config=False)
            return record
        if s.error is not None:
            raise UserError(
                f"error: {run} is not in this machine's local index, and without a config "
                f"gymbuild cannot tell where its run directory is\n{s.error}"
            )
        run_dir = str(Path(s.output_path) / run)
        return _askable(record_from_run_dir(s.connection(), run_dir))
    current = s.workspace.submission()
    if current is None or not s.workspace.has_outcomes():
        raise no_submission(s)
    # What was submitted, where it went, even if the config has been edited since (a new
    # output_path or host): status, logs and cancel must still reach the jobs that are queued.
    s.adopt_submission(current)
    if connect:
        s.connection(current.hostname, use_config=False)
    return build_record(current, s.workspace, commit=False)


def _askable(record: SubmissionRecord) -> SubmissionRecord:
    """The record, unless its executor is one gymbuild cannot ask (then one line saying so)."""
    why = cannot_ask(record.executor, record.executor_metadata, record.gym_job_id)
    if why:
        raise UserError(why)
    return record


def no_submission(s: Session) -> UserError:
    """Why the config has no submission to act on, and what to type instead: the file may not
    exist, or what was submitted from it is a sweep (multirun=1), or it was never submitted."""
    config = s.workspace.config_path  # the config this run's workspace is keyed by: config=
    if not config.is_file():
        return UserError(
            f"error: {config}: no such file\n"
            "    fix: name the config you submitted with config=FILE, or a submission with "
            "run=<gym_job_id> (`gymbuild runs` lists them)"
        )
    if (s.workspace.config_dir / "sweeps").is_dir():
        return UserError(
            f"error: {config} has no single submission, but it has a sweep\n"
            "    fix: add multirun=1 (its latest sweep) or sweep=<id>, as in "
            f"gymbuild results config={config} multirun=1"
        )
    return UserError(
        f"error: {config} has not been submitted yet\n"
        f"    fix: gymbuild submit config={config}, or name a submission with run=<gym_job_id> "
        "(`gymbuild runs` lists them)"
    )


def find_checked(s: Session, args: OfSubmission) -> SubmissionRecord:
    """The submission args.run names (or the config's), with only= checked against it (not the
    config: with run= there may be none)."""
    record = find_record(s, args.run)
    names = [job.benchmark for job in record.benchmarks]
    unknown = [b for b in args.only if b not in names]
    if unknown:
        raise UserError(
            f"error: only= names benchmark(s) {record.gym_job_id} does not have: {', '.join(unknown)}\n"
            f"    fix: pick from {', '.join(names)}"
        )
    return record
