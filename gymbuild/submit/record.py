"""Record: the submission record (gym-job.json) built from the workspace's outcome files, written to
the local index, the run directory, and a copy in the workspace.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from gymbuild import __version__
from gymbuild.errors import UserError
from gymbuild.executors.base import executor_for
from gymbuild.plan import shard_of
from gymbuild.state.notes import note_run
from gymbuild.state.provenance import gym_commit
from gymbuild.state.records import MANIFEST_NAME, BenchmarkJob, SubmissionRecord
from gymbuild.state.workspace import atomic_write, digest
from gymbuild.submit.shards import metadata as shard_metadata
from gymbuild.submit.stage import resolved_names

if TYPE_CHECKING:
    from gymbuild.executors.connection import Connection
    from gymbuild.state.workspace import Submission, Workspace
    from gymbuild.submit.settled import Settled

ORDER_STAMP = "benchmark-order"
RECORD_STAMP = "record"


def manifest_copy(workspace: Workspace) -> Path:
    """The workspace's copy of the run directory's gym-job.json, written once the manifest is
    (Workspace.start removes it with the rest of a submission)."""
    return workspace.dir / "gym-job.json"


def benchmark_order(workspace: Workspace) -> list[str]:
    """The config's benchmark order as of the last queueing, kept in the workspace so that status
    can list a record in config order without loading the config."""
    return json.loads(workspace.stamp(ORDER_STAMP) or "[]")


def keep_benchmark_order(run: Settled) -> None:
    names = list(run.config.driver.benchmarks)
    kept = benchmark_order(run.workspace)
    order = [*names, *(b for b in kept if b not in names)]
    if order != kept:
        run.workspace.set_stamp(ORDER_STAMP, json.dumps(order))


def _note(run: Settled, gym_job_id: str) -> None:
    """What `gymbuild runs` shows beside the record: the config, its policy model, the sweep's values."""
    config = run.config
    service = config.services.get(config.driver.policy_model) if config.driver.policy_model else None
    model = getattr(service, "model", None) if service is not None else None
    note_run(run.config_file, str(model) if model else None, run.sweep_values, gym_job_id)


def build_record(sub: Submission, workspace: Workspace, *, commit: bool = True) -> SubmissionRecord:
    """The submission record from the workspace. `commit=False` leaves gym_commit None for a record
    that is only read here (status, the plain submit report): finding the commit runs git three
    times in a checkout, a tenth of a no-op submit."""
    kept = benchmark_order(workspace)
    metadata = _metadata(workspace, executor_for(sub.executor).metadata())
    outcomes = workspace.outcomes()
    metadata |= shard_metadata(outcomes)  # one entry per benchmark: its shards' ids beside it
    outcomes = {b: o for b, o in outcomes.items() if shard_of(b) is None}
    order = [b for b in kept if b in outcomes]
    order += [b for b in outcomes if b not in order]
    return SubmissionRecord(
        gym_job_id=sub.gym_job_id,
        gym_version=__version__,
        gym_commit=gym_commit() if commit else None,
        submitted_at=sub.submitted_at,
        run_dir=sub.run_dir,
        cluster=sub.cluster,
        executor=sub.executor,
        hostname=sub.hostname,
        submitted_by=sub.submitted_by,
        executor_metadata=metadata,
        benchmarks=tuple(
            BenchmarkJob(
                benchmark=b,
                job_dir=f"{sub.run_dir}/{b}",
                job_id=outcomes[b].job_id,
                error=outcomes[b].error,
                previous_job_ids=outcomes[b].previous_job_ids,
            )
            for b in order
        ),
    )


def _metadata(workspace: Workspace, metadata: dict[str, str]) -> dict[str, str]:
    """The executor's metadata, and the resolved configs when a later submit of a changed config
    staged more than the first (stage.resolved_target): `resolved_configs`, their names in the run
    directory, oldest first, comma-separated (the schema's metadata values are strings)."""
    names = sorted(set(resolved_names(workspace).values()), key=_resolved_order)
    return {**metadata, "resolved_configs": ",".join(names)} if len(names) > 1 else metadata


def _resolved_order(name: str) -> int:
    number = name.removeprefix("resolved-config.").removesuffix(".yaml")
    return int(number) if number.isdigit() else 1


def _record_digest(sub: Submission, workspace: Workspace) -> str:
    """What the record says of each benchmark (not the outcome files whole: serialising 1000 of
    them again was a tenth of a no-op submit)."""
    outcomes = workspace.outcomes().values()
    said = [(o.benchmark, o.job_id, o.error, o.previous_job_ids) for o in outcomes]
    return digest(sub.gym_job_id, said)  # a new resolved config comes only with a queue: its outcomes


def recorded(sub: Submission, workspace: Workspace) -> bool:
    """The run directory's manifest (and its local copy) says what the outcomes say."""
    return workspace.stamp(RECORD_STAMP) == _record_digest(sub, workspace)


def record(run: Settled, conn: Connection) -> None:
    """Local index first (it cannot fail the submit), then the manifest in the run directory, then its
    copy in the workspace (record's doit target)."""
    sub, workspace = run.submission, run.workspace
    record = build_record(sub, workspace)
    record.write_local_index()
    _note(run, record.gym_job_id)
    text = record.dumps()
    result = conn.write_file(f"{sub.run_dir}/{MANIFEST_NAME}", text.encode())
    if not result.ok:
        queued = " ".join(f"{j.benchmark}={j.job_id}" for j in record.benchmarks if j.job_id)
        raise UserError(
            f"error: the jobs are queued but {sub.run_dir}/{MANIFEST_NAME} could not be written on "
            f"{conn.target}: {result.stderr.strip()}\n"
            f"    queued: {queued or 'none'}\n"
            "    fix: note these job ids; run `gymbuild submit` again to rewrite the record"
        )
    atomic_write(manifest_copy(workspace), text)
    workspace.set_stamp(RECORD_STAMP, _record_digest(sub, workspace))
