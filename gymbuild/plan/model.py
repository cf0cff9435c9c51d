"""The plan's data: the words that reach bash and the dataclasses of one benchmark's job.

Secrets stay references (`EnvValue("host", VAR)`) until render time, so a plan can be printed, hashed
and stored without leaking anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from gymbuild.config.model import EnvValue
from gymbuild.plan.canonical import _Canonical

# --- words: what reaches bash ------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref(_Canonical):
    """A shell variable the shell that evaluates the word expands (rendered `"${name}"`).

    Only gymbuild's own variables and `runtime:VAR` values become Refs; user text never does, so the
    batch shell expands nothing a user wrote except what they marked `runtime:`.
    """

    name: str


Part = str | Ref
Word = tuple[Part, ...]
"""One shell word made of literal pieces (quoted) and variable references (double-quoted), adjacent."""

EnvSource = EnvValue | Ref | str | Word
"""An environment value: a config value (lit/host/runtime), a gymbuild variable, a literal or a word."""


@dataclass(frozen=True)
class EnvEntry(_Canonical):
    name: str
    value: EnvSource


# --- the plan ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolRange(_Canonical):
    """A node pool's slice of the allocation: nodes `first` .. `first + count - 1`."""

    name: str
    first: int
    count: int
    var: str  # GYM_POOL_<POOL>_NODES, the comma-separated hostnames exported by the job


@dataclass(frozen=True)
class Nodes(_Canonical):
    """Where a step runs. `pool` is set when the step runs on all nodes of a pool."""

    first: int
    count: int
    pool: str | None = None


@dataclass(frozen=True)
class Port(_Canonical):
    """A port settled at run time on the step's node: `first` is tried first, then the next free ones.

    The step writes the port it took to `.gym_ports/<key>-<job id>` in the bench dir; whoever needs it
    (health check, driver, router, Ray workers) reads it there, into the batch-shell variable `var`.
    """

    key: str
    first: int
    var: str


@dataclass(frozen=True)
class Health(_Canonical):
    path: str
    attempts: int
    fixed_port: int | None  # a health port other than the step's own (not settled at run time)


StepKind = Literal["vllm", "router", "ray_head", "ray_worker", "command"]
VllmMode = Literal["single", "dp", "ray", "per_node", "serve"]
# What a launched step is to the job; an executor's `launch` reads it (Slurm's names the driver step).
Role = Literal["service", "collector", "driver"]


@dataclass(frozen=True)
class ServiceStep(_Canonical):
    """One background step: a service, a vllm_pd tier or router, a Ray head or worker pool."""

    role: ClassVar[Role] = "service"
    name: str  # log and port-file name
    service: str  # the config service it belongs to
    kind: StepKind
    container: str
    nodes: Nodes
    mounts: tuple[str, ...]
    env: tuple[EnvEntry, ...]
    pre_command: str  # shell text run before the server (`bash -c '<pre>; exec <cmd>'`)
    port: Port | None
    argv: tuple[Word, ...]  # the server command up to the user's extra_args (empty for `command`)
    shell_args: str = ""  # user shell text appended verbatim to argv (vllm/ray extra_args)
    argv_tail: tuple[Word, ...] = ()  # what follows the extra_args (NeMo Gym's order)
    shell_command: str = ""  # a `command` service's own shell command
    vllm_mode: VllmMode = "single"
    dp_local: int = 1  # data-parallel ranks per node (vllm_mode "dp")
    aux_ports: tuple[Port, ...] = ()  # further ports the head task settles (DP RPC, Ray GCS)
    needs: tuple[Port, ...] = ()  # ports of other steps this one waits for (router, Ray workers)
    drop_args: tuple[str, ...] = ()  # flags (and their values) removed from this step's extra_args
    address_var: str | None = None  # a Ray head's GYM_RAY_ADDRESS_<SERVICE>, exported once it is known
    # The batch shell settles the port (the step runs on its node) and exports address_var before any
    # step starts, so every step sees it, as in NeMo Gym (elsewhere the head's own step settles it).
    batch_port: bool = False
    exported_vars: tuple[str, ...] = ()  # NeMo Gym's exports of this step's own nodes (hostnames)
    health: Health | None = None
    metrics_job: str | None = None  # the collector's scrape job name, when scraped
    host: Part = "localhost"  # the address of its first node, as the batch shell sees it


@dataclass(frozen=True)
class CollectorPlan(_Canonical):
    role: ClassVar[Role] = "collector"
    binary: str
    container: str | None
    token_env: str
    endpoint: str
    service_name: str
    component: str
    grpc: Port
    http: Port
    health: Port
    attempts: int
    scrape_interval_seconds: int
    gpu_metrics_port: int | None  # None: not scraped
    node_metrics_port: int | None
    model: str
    cluster: str  # the compute's name, as NeMo Gym's `cluster` attribute
    benchmark: str
    gym_job_id: str
    bench_dir: str
    env: tuple[EnvEntry, ...]  # the collector's environment: the ingest token, its ports, the job id
    gym_telemetry: bool  # the driver sends Gym's own telemetry to it (and needs its endpoints)


@dataclass(frozen=True)
class GymInstallPlan(_Canonical):
    repo: str
    ref: str
    extras: tuple[str, ...]


@dataclass(frozen=True)
class DriverStep(_Canonical):
    role: ClassVar[Role] = "driver"
    container: str
    nodes: Nodes
    mounts: tuple[str, ...]
    env: tuple[EnvEntry, ...]
    install: GymInstallPlan | None
    prepare: tuple[str, ...]  # `gym eval prepare` arguments
    run: tuple[Word, ...]  # `gym eval run` and its arguments; empty when `command` is set
    command: str | None  # the benchmark's own script
    policy_port: Port | None
    # (rollouts, materialized inputs): when both are there at start, an earlier job of this bench dir
    # wrote them (resubmit), and `gym eval run` continues from them (+resume_from_cache=True)
    resume_from: tuple[str, str] | None = None
    # (k, K): this job runs shard k of the benchmark's K (`shards: K`) through gymbuild's shard driver
    # (render/templates/gymbuild_shard.py), in the bench dir <benchmark>/shards/<k>
    shard: tuple[int, int] | None = None
    # First choice of gym's head server port (`head_server.port`): the driver settles the port on its
    # node at run time into GYM_HEAD_PORT; None for a benchmark's own command (gymbuild runs no gym)
    head_port: int | None = None


@dataclass(frozen=True)
class ResumePlan(_Canonical):
    max_retries: int
    max_walltime_seconds: int | None
    script: str  # the job script the successor runs (absolute)
    # The chain's progress, relative to the job's own dir (where its prologue runs): each benchmark's
    # rollouts (a row each) and materialized inputs (the rows it set out to score).
    rollouts: tuple[str, ...] = ("artifacts/rollouts.jsonl",)
    expected: tuple[str, ...] = ("artifacts/rollouts_materialized_inputs.jsonl",)
    # driver.budget, for all chains of the submission: the ledger every prologue appends to, relative
    # to the job's dir (in the run dir), and its caps (None: no cap).
    ledger: str = "../.gym_budget"
    budget_attempts: int | None = None
    budget_gpu_hours: float | None = None
    gpus: int = 0  # GPUs a job of this chain holds: its GPU-hours when sacct cannot say


@dataclass(frozen=True)
class ExecutorTraits:
    """What planning needs to know of the executor that will run the jobs, handed in by the caller
    (executors/base.py: planning_traits), so the plan imports no executor."""

    name: str  # the registry's name: picks the executor's template (executors/<name>/templates/)
    scheduled: bool  # a batch scheduler runs the jobs: they take directives and can resume as a chain


@dataclass(frozen=True)
class SharedParts:
    """The parts of a plan that come from the config (and the submission) alone, not the benchmark.

    `planner` plans them once and every benchmark's plan holds the same objects: they would come out
    equal for every benchmark anyway, and shared objects keep their canonical JSON (`_Canonical`), so
    rendering 1000 plans encodes the service steps once (docs/performance.md, "Why the code is shaped so").
    """

    collector_ports: tuple[Port, Port, Port] | None  # grpc, http, health; None: no collector
    services: tuple[ServiceStep, ...]
    policy: tuple[str, int] | None  # (served model name, first-choice port)
    policy_port: Port | None
    driver_nodes: Nodes
    driver_env: tuple[EnvEntry, ...]  # every benchmark's; a command benchmark's own entries follow
    driver_mounts: tuple[str, ...]  # after the bench dir's own mount
    install: GymInstallPlan | None
    directives_before_chdir: tuple[tuple[str, str | None], ...]  # after job-name
    directives_after_chdir: tuple[tuple[str, str | None], ...]
    walltime_seconds: int | None
    pools: tuple[PoolRange, ...]
    pool_vars_needed: bool
    node_ips_needed: bool
    head_ip_needed: bool
    reserved_ports: tuple[int, ...]


@dataclass(frozen=True)
class BenchPlan(_Canonical):
    bench: str
    bench_dir: str
    run_dir: str
    gym_job_id: str
    executor: str  # ExecutorTraits.name: picks the template of the executor's parts (render/)
    directives: tuple[tuple[str, str | None], ...]  # (key, value) -> `#SBATCH --key=value`
    walltime_seconds: int | None  # the local executor enforces it itself (Slurm has --time)
    total_nodes: int
    pools: tuple[PoolRange, ...]
    pool_vars_needed: bool  # export GYM_POOL_<POOL>_NODES
    node_ips_needed: bool  # GYM_NODE_IPS: every node's address (data-parallel and Ray heads)
    head_ip_needed: bool  # export HEAD_NODE_IP / RAY_HEAD_NODE_IP (NeMo Gym: a multi-node vLLM job)
    collector: CollectorPlan | None
    services: tuple[ServiceStep, ...]
    driver: DriverStep
    resume: ResumePlan | None
    secrets: tuple[str, ...]  # names of the host: variables the job uses (values come at render)
    reserved_ports: tuple[int, ...]  # first choices of every port: a scan never takes another's

    @property
    def multi_node(self) -> bool:
        return self.total_nodes > 1
