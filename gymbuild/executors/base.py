"""What a run needs from an executor, and the one place that picks one.

slurm.py and local.py are the two implementations: modules whose functions and constants satisfy the
`Executor` protocol, so a type checker holds each of them to it. Every caller that acts on jobs (the
queue, status, cancel, resubmit, results, the record) asks `executor_for` and then the executor,
never the executor's name: a third executor is a third module and one line here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gymbuild.errors import UserError

if TYPE_CHECKING:
    from gymbuild.config.model import Config
    from gymbuild.executors.connection import Connection, Result
    from gymbuild.plan import BenchPlan


@dataclass(frozen=True)
class Queued:
    """The executor's answer for one benchmark: a job id, or the error that kept it from one."""

    job_id: str | None
    error: str | None


@dataclass(frozen=True)
class JobState:
    """One job as the executor (Slurm, or without accounting the job's own files) last described it."""

    job_id: str
    state: str
    exit_code: str | None = None
    elapsed: str | None = None
    nodes: str | None = None
    note: str | None = None  # why the state is UNKNOWN: what squeue and sacct said


Answer = Callable[[], Queued]  # the answer to a queued job, read when asked (in the order sent)


class Executor(Protocol):
    """An executor as a run uses it. Commands go through the run's one Connection."""

    NAME: str  # what the config's compute.type and the record's `executor` field say
    JOB_LABEL: str  # what the submit report calls one of its jobs ("Slurm job 123")
    RETRYABLE: frozenset[str]  # the states resubmit queues again
    LIVE: frozenset[str]  # the states of a job that holds (or waits for) its resources
    CHECKS_MOUNTS: bool  # the sync checks every container mount's source exists on the cluster
    RUNS_HERE: bool  # jobs run from gymbuild's own working directory: a relative output path is from it
    SCHEDULED: bool  # a batch scheduler runs the jobs: they take directives and can resume as a chain

    def warnings(self, config: Config) -> tuple[str, ...]:
        """What the config asks that this executor does not do (said at render and submit)."""
        ...

    def metadata(self) -> dict[str, str]:
        """What a reader of the record needs, beyond the job ids, to find the jobs again."""
        ...

    def hold_queue(self, conn: Connection, run_dir: str) -> None:
        """Before jobs are sent, every pass: whatever makes this session the run dir's only queuer
        (Slurm: the queue lock, taken once and held by the session's shell until it ends)."""
        ...

    def send(self, conn: Connection, script: str, secrets: Any, attempt: str) -> Answer:
        """Queue `script` as attempt `attempt`, its secrets file (slurm.SecretsFile, or None) written
        first. Answers are read in the order their jobs were sent; an executor may pipeline several."""
        ...

    def forget_secrets(
        self, conn: Connection, gym_job_id: str, benches: Iterable[str] | None = None
    ) -> Result:
        """Remove the benchmarks' secrets files (`cancel`); with no `benches`, the submission's."""
        ...

    def recover_lost(
        self, conn: Connection, script: str, attempt: str, plan: BenchPlan, known: frozenset[str]
    ) -> Queued | None:
        """The job a killed run's attempt queued, or None once that attempt can never run: the caller
        then queues afresh. `known`: the benchmark's earlier job ids, which do not count."""
        ...

    def states(
        self, conn: Connection, jobs: Mapping[str, str], since: str | None = None
    ) -> dict[str, JobState]:
        """Bench dir -> state of its newest job, for many jobs in one round trip."""
        ...

    def cancel(self, conn: Connection, jobs: Mapping[str, str]) -> Result:
        """Stop every given job (bench dir -> job id) and whatever would follow it."""
        ...


def executor_for(which: Config | str) -> Executor:
    """The executor of a config (its compute.type) or of a record (its `executor` field)."""
    name = which if isinstance(which, str) else which.compute.type
    if name == "slurm":
        from gymbuild.executors import slurm

        return slurm
    if name == "local":
        from gymbuild.executors import local

        return local
    raise UserError(f"error: this record was written by the '{name}' executor, which gymbuild does not know")
