"""What a run needs from an executor, and the one place that picks one (`EXECUTORS`).

An executor is a folder, executors/<name>/: its module (`__init__.py`: functions and constants that
satisfy the `Executor` protocol, so a type checker holds each one to it) and its template
(`templates/parts.sh.j2`: the macros a job script calls for what is the executor's own). Both are found from
the name registered here: `executor_for` imports the module, and the plan names the template through
`planning_traits` (ExecutorTraits.name). Every caller that acts on jobs (the queue, status, cancel,
resubmit, results, the record) asks `executor_for` and then the executor, never the executor's name;
the planner is handed what it needs as data. A third executor is a third folder and one line here
(README: "Adding an executor").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gymbuild.errors import UserError
from gymbuild.plan.model import ExecutorTraits

if TYPE_CHECKING:
    from gymbuild.config.model import Config
    from gymbuild.executors.chain import Chain
    from gymbuild.executors.connection import Connection, Result
    from gymbuild.executors.secrets import SecretsFile
    from gymbuild.executors.slurm.limits import Limits
    from gymbuild.plan import BenchPlan, ExecutorTraits
    from gymbuild.state.rollouts import Progress

# The registry: a config's compute.type (and a record's `executor`) -> the executor's module, whose
# folder also holds its template. Imported when asked: status on Slurm loads no local executor code.
EXECUTORS = {
    "slurm": "gymbuild.executors.slurm",
    "local": "gymbuild.executors.local",
}


@dataclass(frozen=True)
class Queued:
    """The executor's answer for one benchmark: a job id, or the error that kept it from one.
    `waits`: the error names a limit of the user's quota: the job waits for room, it did not fail."""

    job_id: str | None
    error: str | None
    waits: bool = False


@dataclass(frozen=True)
class JobState:
    """One job as the executor (Slurm, or without accounting the job's own files) last described it."""

    job_id: str
    state: str
    exit_code: str | None = None
    elapsed: str | None = None
    nodes: str | None = None
    note: str | None = None  # why the state is UNKNOWN: what squeue and sacct said
    progress: Progress | None = None  # its rollouts so far, from gym's files (state/rollouts.py)
    chain: Chain | None = None  # a resume chain's attempts, when the job is one (executors/chain.py)


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

    def ask_limits(
        self, conn: Connection, directives: Mapping[str, str | None]
    ) -> Callable[[], Limits | None]:
        """Ask what limits how many jobs the user may queue, for a job with these directives (its
        account, its QOS), in one round trip sent now; the answer is read when called (None: this
        executor has no such limits). Sent early, it overlaps the copy of the run directory."""
        ...

    def send(self, conn: Connection, script: str, secrets: SecretsFile | None, attempt: str) -> Answer:
        """Queue `script` as attempt `attempt`, its secrets file (or None: the job needs none) written
        first. Answers are read in the order their jobs were sent; an executor may pipeline several."""
        ...

    def forget_secrets(self, conn: Connection, gym_job_id: str, names: Iterable[str]) -> Result:
        """Remove the named secrets files of a submission (`cancel`), and its directory once empty."""
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

    def own_number(self, conn: Connection, job_dir: str, job_id: str) -> str | None:
        """The id a job's own files (its logs) are named after when it is not `job_id` (a Slurm array
        task's job.sh knows itself by a number of its own), or None: they are named after `job_id`."""
        ...


def cannot_ask(executor: str, metadata: Mapping[str, str], gym_job_id: str = "") -> str | None:
    """One line saying gymbuild cannot ask a record's executor about its jobs (NeMo Gym's newer
    executors, e.g. kubernetes), or None when it can. The record itself still loads and lists."""
    if executor in EXECUTORS:
        return None
    where = ", ".join(f"{k} {v}" for k, v in sorted(metadata.items()))
    run = f"{gym_job_id} was" if gym_job_id else "it was"
    return (
        f"error: {run} submitted with NeMo Gym's '{executor}' executor{f' ({where})' if where else ''}, "
        "which gymbuild cannot ask about its jobs: use NeMo Gym's own commands for it"
    )


def executor_for(which: Config | str) -> Executor:
    """The executor of a config (its compute.type) or of a record (its `executor` field)."""
    name = which if isinstance(which, str) else which.compute.type
    module = EXECUTORS.get(name)
    if module is None:
        raise UserError(cannot_ask(name, {}) or "")

    executor: Executor = import_module(module)
    return executor


def executor_templates(name: str) -> Path:
    """The folder of a registered executor's templates: executors/<name>/templates."""
    return Path(__file__).parent / name / "templates"


def planning_traits(which: Config | str) -> ExecutorTraits:
    """What the planner needs of a config's executor, as data (the plan imports no executor)."""
    executor = executor_for(which)
    return ExecutorTraits(name=executor.NAME, scheduled=executor.SCHEDULED)
