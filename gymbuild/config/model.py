"""The typed, immutable config the rest of gymbuild reads.

Built (build.py) only from a tree that schemas/submit-config.schema.json has validated and filled
with defaults, so every field is read there with `[]`: a missing key is a bug in the schema, never a
guess. The values that depend on other fields cannot be written in JSON Schema and are settled
there, as NeMo Gym 0.7.0's models settle them: a vLLM server's (and a vllm_pd router's) health check
on its own port; what a vllm_pd tier inherits (container, model, served name, ports port+1 and
port+2, decode's RPC port after prefill's, its NIXL port, KV role and server_per_node); and whether
a vLLM service runs behind a Ray Serve gateway (`ray_serve`, NeMo Gym's effective_ray_serve).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, TypeAlias, overload

from gymbuild.config.tree import JsonValue, JsonView

EnvKind = Literal["lit", "host", "runtime"]
ENV_PREFIXES: tuple[EnvKind, ...] = ("lit", "host", "runtime")
# An `extra_args` value: `#SBATCH --k=v`, or for true the bare flag, for false nothing.
SbatchValue: TypeAlias = str | int | float | bool


@overload
def freeze(value: Mapping[str, str]) -> Mapping[str, str]: ...
@overload
def freeze(value: Mapping[str, JsonView]) -> Mapping[str, JsonView]: ...
@overload
def freeze(value: JsonView) -> JsonView: ...
def freeze(value: JsonView) -> JsonView:
    """Deep read-only copy of a JSON-like value: dicts become mapping proxies, lists tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: JsonView) -> JsonValue:
    """The plain JSON-like value back (for YAML/JSON output and templates)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class EnvValue:
    """One `env` entry. `host:` values stay references here; their secrets live in `Resolved.secrets`."""

    kind: EnvKind
    value: str

    @classmethod
    def parse(cls, text: str) -> EnvValue:
        kind, _, rest = text.partition(":")
        if kind not in ENV_PREFIXES:
            raise ValueError(f"env value {text!r} has no lit:/host:/runtime: prefix")
        return cls(kind, rest)

    def __str__(self) -> str:
        return f"{self.kind}:{self.value}"


Env = Mapping[str, EnvValue]


@dataclass(frozen=True)
class NodePool:
    name: str
    partition: str
    nodes: int
    ntasks_per_node: int
    gpus_per_node: int | None
    extra_args: Mapping[str, SbatchValue]


@dataclass(frozen=True)
class Arrays:
    """`compute.<name>.array` (a gymbuild extension): queue a submission's jobs as Slurm job arrays.
    `parallel`: the `%N` throttle, how many of an array's tasks run at once (None: no throttle)."""

    parallel: int | None = None


@dataclass(frozen=True)
class Compute:
    name: str
    type: str  # a name in executors/base.py's EXECUTORS (the schema's enum of compute.type)
    account: str | None
    hostname: str | None
    walltime: str | None
    extra_args: Mapping[str, SbatchValue]
    node_pools: Mapping[str, NodePool]
    array: Arrays | None = None  # None: one job per sbatch, as NeMo Gym queues

    @property
    def total_nodes(self) -> int:
        return sum(p.nodes for p in self.node_pools.values()) or 1


@dataclass(frozen=True)
class HealthCheck:
    path: str
    port: int | None
    timeout_seconds: int

    @property
    def attempts(self) -> int:
        """Polls at 5 s intervals; the schema keeps timeout_seconds >= 5 so this is never zero."""
        return self.timeout_seconds // 5


@dataclass(frozen=True)
class Service:
    """Fields every service type has."""

    name: str
    type: str
    container: str
    placement: str
    node_pool: str | None
    health_check: HealthCheck | None
    env: Env
    mounts: tuple[str, ...]
    pre_command: str


@dataclass(frozen=True)
class VllmService(Service):
    model: str = ""
    port: int = 8000
    served_model_name: str | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    trust_remote_code: bool = False
    number_of_instances: int = 1
    extra_args: str = ""
    data_parallel_rpc_port: int = 13345
    use_ray_serve: bool = False
    # NeMo Gym's effective_ray_serve: use_ray_serve, or a multi-node service whose instances each need
    # more GPUs than a node has. Settled once, by build.py (it depends on the pools), so every reader
    # agrees.
    ray_serve: bool = False
    # Set on the tiers of a vllm_pd service only (from the service): NeMo Gym's VllmPDTierConfig.
    server_per_node: bool = False
    nixl_side_channel_port: int | None = None
    kv_transfer_config: Mapping[str, str] | None = None

    @property
    def model_name(self) -> str:
        """The name clients ask for: the served name when set, else the model path."""
        return self.served_model_name or self.model


@dataclass(frozen=True)
class VllmPdService(Service):
    model: str = ""
    port: int = 8000
    served_model_name: str | None = None
    prefill: VllmService | None = None
    decode: VllmService | None = None
    server_per_node: bool = False
    nixl_side_channel_port: int = 5600
    prefill_policy: str = "cache_aware"
    decode_policy: str = "cache_aware"
    intra_node_data_parallel_size: int = 1
    request_timeout_secs: int = 86400
    log_level: str = "error"
    kv_connector: str = "NixlConnector"
    kv_load_failure_policy: str = "fail"

    @property
    def model_name(self) -> str:
        return self.served_model_name or self.model


@dataclass(frozen=True)
class RayService(Service):
    node_pools: tuple[str, ...] = ()
    port: int = 6379
    resources: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    num_cpus: int | None = None
    num_gpus: int | None = None
    extra_args: str = ""


@dataclass(frozen=True)
class CommandService(Service):
    """Any server command (SGLang, TGI, a judge), placed and monitored like vLLM."""

    command: str = ""
    port: int | None = None


ModelService = VllmService | VllmPdService


@dataclass(frozen=True)
class Resumable:
    max_retries: int
    max_walltime: str | None


@dataclass(frozen=True)
class Budget:
    """What a submission's resume chains may spend together (gymbuild's `driver.budget`); None: no cap."""

    attempts: int | None
    gpu_hours: float | None


@dataclass(frozen=True)
class Benchmark:
    name: str
    prepare: Mapping[str, JsonView]
    run: Mapping[str, JsonView]
    command: str | None
    resumable: Resumable | None
    # gymbuild's `shards: K` (unset: 1): the benchmark's rows split across K jobs, merged by the last
    shards: int = 1


@dataclass(frozen=True)
class GymInstall:
    repo: str
    ref: str


@dataclass(frozen=True)
class Driver:
    container: str
    gym_install: GymInstall | None
    policy_model: str | None
    policy_host: str
    policy_model_type: str
    benchmarks: Mapping[str, Benchmark]
    env: Env
    mounts: tuple[str, ...]
    # gymbuild's shared allocations: how many benchmarks one job holds (None: all of them) and how
    # many of a job's benchmarks run at once. Unset in a NeMo Gym config, which means 1 and 1: the
    # schema gives them no default so a resolved NeMo Gym config stays exactly NeMo Gym's.
    benchmarks_per_job: int | None = 1
    concurrent_benchmarks: int = 1
    budget: Budget | None = None  # gymbuild's driver.budget (its driver.resumable is in each benchmark)

    @property
    def shares_jobs(self) -> bool:
        """Whether a job may hold more than one benchmark."""
        return self.benchmarks_per_job != 1


@dataclass(frozen=True)
class Job:
    output_path: str


@dataclass(frozen=True)
class Otel:
    enabled: bool
    binary: str
    container: str | None
    endpoint: str | None
    service_name: str | None
    token_env: str
    component: str
    gym_telemetry: bool
    gym_span_groups: str  # NeMo Gym's text: a preset or comma-separated group names
    gym_logs: bool
    gpu_metrics_port: int | None  # None: not scraped
    node_metrics_port: int | None
    scrape_interval_seconds: int
    health_check_timeout_seconds: int


@dataclass(frozen=True)
class Config:
    services: Mapping[str, Service]
    compute: Compute
    driver: Driver
    job: Job
    otel: Otel

    @property
    def policy(self) -> Service | None:
        name = self.driver.policy_model
        return self.services[name] if name else None


@dataclass(frozen=True)
class Resolved:
    """A loaded config: the typed view, the plain tree it came from, and the `host:` secrets apart.

    `tree` is what `doit resolve` prints and `resolved-config.yaml` holds: `host:VAR` stays a
    reference there. `secrets` maps VAR -> value and is read only where a job script is written.
    """

    source: str
    config: Config
    tree: Mapping[str, JsonView]
    secrets: Mapping[str, str]
    warnings: tuple[str, ...] = ()
