"""The typed, immutable config the rest of gymbuild reads.

Built only from a tree that schemas/submit-config.schema.json has validated and filled with defaults,
so every field here is read with `[]`: a missing key is a bug in the schema, never a guess made here.
The values that depend on other fields cannot be written in JSON Schema and are settled here, as
NeMo Gym 0.7.0's models settle them: a vLLM server's (and a vllm_pd router's) health check on its
own port; what a vllm_pd tier inherits (container, model, served name, ports port+1 and port+2,
decode's RPC port after prefill's, its NIXL port, KV role and server_per_node); and whether a vLLM
service runs behind a Ray Serve gateway (`ray_serve`, NeMo Gym's effective_ray_serve).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

EnvKind = Literal["lit", "host", "runtime"]
ENV_PREFIXES: tuple[EnvKind, ...] = ("lit", "host", "runtime")


def freeze(value: Any) -> Any:
    """Deep read-only copy of a JSON-like value: dicts become mapping proxies, lists tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The plain JSON-like value back (for YAML/JSON output and templates)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
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


def _env(tree: Mapping[str, str]) -> Env:
    return MappingProxyType({k: EnvValue.parse(v) for k, v in tree.items()})


@dataclass(frozen=True)
class NodePool:
    name: str
    partition: str
    nodes: int
    ntasks_per_node: int
    gpus_per_node: int | None
    extra_args: Mapping[str, str]


@dataclass(frozen=True)
class Compute:
    name: str
    type: str  # a name in executors/base.py's EXECUTORS (the schema's enum of compute.type)
    account: str | None
    hostname: str | None
    walltime: str | None
    extra_args: Mapping[str, str]
    node_pools: Mapping[str, NodePool]

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
    # more GPUs than a node has. Settled once here (it depends on the pools) so every reader agrees.
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
class Benchmark:
    name: str
    prepare: Mapping[str, Any]
    run: Mapping[str, Any]
    command: str | None
    resumable: Resumable | None


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
    tree: Mapping[str, Any]
    secrets: Mapping[str, str]
    warnings: tuple[str, ...] = ()


# --- building from a validated, default-filled tree ------------------------------------------------


def _health_check(tree: Mapping[str, Any] | None, default_port: int | None) -> HealthCheck | None:
    if tree is None:
        return None
    port = tree["port"] if tree["port"] is not None else default_port
    return HealthCheck(path=tree["path"], port=port, timeout_seconds=tree["timeout_seconds"])


def _common(name: str, tree: Mapping[str, Any], health: HealthCheck | None) -> dict[str, Any]:
    return {
        "name": name,
        "type": tree["type"],
        "container": tree["container"],
        "placement": tree["placement"],
        "node_pool": tree["node_pool"],
        "health_check": health,
        "env": _env(tree["env"]),
        "mounts": tuple(tree["mounts"]),
        "pre_command": tree["pre_command"],
    }


_VLLM_FIELDS = (
    "model",
    "port",
    "served_model_name",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "trust_remote_code",
    "number_of_instances",
    "extra_args",
    "data_parallel_rpc_port",
    "use_ray_serve",
)
_DEFAULT_HEALTH = {"path": "/health", "port": None, "timeout_seconds": 60}


def _vllm(name: str, tree: Mapping[str, Any], pools: Mapping[str, NodePool], **tier: Any) -> VllmService:
    """A vLLM service or tier; `tier` carries what a vllm_pd service hands its tiers."""
    health = tree["health_check"]
    if health is None:  # NeMo Gym: a vLLM server always has /health on its own port
        health = _DEFAULT_HEALTH
    fields = {k: tree[k] for k in _VLLM_FIELDS}
    nodes, gpus = service_pools(pools, tree["node_pool"])
    if tier.get("server_per_node"):
        nodes = 1  # each node serves on its own: sized as a single-node deployment
    ray_serve = effective_ray_serve(
        fields["use_ray_serve"],
        fields["tensor_parallel_size"] * fields["pipeline_parallel_size"],
        fields["number_of_instances"],
        nodes,
        gpus,
    )
    return VllmService(
        **_common(name, tree, _health_check(health, tree["port"])),
        **fields,
        ray_serve=ray_serve,
        **tier,
    )


def service_pools(pools: Mapping[str, Any], node_pool: str | None) -> tuple[int, list[int]]:
    """(nodes, gpus_per_node of each pool) a service spans: its own pool, else the whole allocation.

    Works on typed NodePools and on validated trees alike (the rules size services before typing).
    """

    def attr(pool: Any, key: str) -> Any:
        return pool[key] if isinstance(pool, Mapping) else getattr(pool, key)

    spanned = [pools[node_pool]] if node_pool is not None and node_pool in pools else list(pools.values())
    nodes = sum(attr(p, "nodes") for p in spanned) or sum(attr(p, "nodes") for p in pools.values()) or 1
    gpus = [attr(p, "gpus_per_node") for p in spanned if attr(p, "gpus_per_node") is not None]
    return nodes, gpus


def effective_ray_serve(use_ray_serve: bool, tp_pp: int, instances: int, nodes: int, gpus: list[int]) -> bool:
    """Whether a Ray Serve gateway runs the instances instead of vLLM's own data parallelism.

    NeMo Gym's rule: asked for, or a multi-node service with several instances that each need more
    GPUs than the largest node of its pools has.
    """
    if use_ray_serve:
        return True
    if not gpus:
        return False
    return nodes > 1 and instances > 1 and tp_pp > max(gpus)


def pd_tier_trees(tree: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The prefill and decode trees of a vllm_pd service with NeMo Gym's inherited defaults filled:
    container, model and served name from the service, ports port+1 and port+2, and decode's
    data_parallel_rpc_port prefill's plus 1. The rules check these, the model builds from them."""
    tiers = {}
    for offset, tier in enumerate(("prefill", "decode"), start=1):
        sub = dict(tree[tier])
        for inherited in ("container", "model", "served_model_name"):
            if inherited not in sub:  # written, even as null, the tier's own value wins
                sub[inherited] = tree.get(inherited)
        if "port" not in sub and isinstance(tree.get("port"), int):
            sub["port"] = tree["port"] + offset
        sub["type"] = "vllm"
        tiers[tier] = sub
    prefill_rpc = tiers["prefill"].setdefault("data_parallel_rpc_port", 13345)
    if isinstance(prefill_rpc, int):
        tiers["decode"].setdefault("data_parallel_rpc_port", prefill_rpc + 1)
    return tiers


def _vllm_pd(name: str, tree: Mapping[str, Any], pools: Mapping[str, NodePool]) -> VllmPdService:
    """The service and its tiers, which get what NeMo Gym's VllmPDTierConfig adds."""
    tiers = {}
    for offset, (tier, sub) in enumerate(pd_tier_trees(tree).items()):
        role = ("kv_producer", "kv_consumer")[offset]
        tiers[tier] = _vllm(
            f"{name}-{tier}",
            sub,
            pools,
            server_per_node=tree["server_per_node"],
            nixl_side_channel_port=tree["nixl_side_channel_port"] + offset,
            kv_transfer_config=MappingProxyType(
                {
                    "kv_connector": tree["kv_connector"],
                    "kv_role": role,
                    "kv_load_failure_policy": tree["kv_load_failure_policy"],
                }
            ),
        )
    health = tree["health_check"]
    if health is None:  # NeMo Gym: the router is checked on /health of its port too
        health = _DEFAULT_HEALTH
    return VllmPdService(
        **_common(name, tree, _health_check(health, tree["port"])),
        model=tree["model"],
        port=tree["port"],
        served_model_name=tree["served_model_name"],
        prefill=tiers["prefill"],
        decode=tiers["decode"],
        **{k: tree[k] for k in _PD_FIELDS},
    )


_PD_FIELDS = (
    "server_per_node",
    "nixl_side_channel_port",
    "prefill_policy",
    "decode_policy",
    "intra_node_data_parallel_size",
    "request_timeout_secs",
    "log_level",
    "kv_connector",
    "kv_load_failure_policy",
)


def _ray(name: str, tree: Mapping[str, Any], _pools: Mapping[str, NodePool]) -> RayService:
    return RayService(
        **_common(name, tree, _health_check(tree["health_check"], tree["port"])),
        node_pools=tuple(tree["node_pools"]),
        port=tree["port"],
        resources=freeze(tree["resources"]),
        num_cpus=tree["num_cpus"],
        num_gpus=tree["num_gpus"],
        extra_args=tree["extra_args"],
    )


def _command(name: str, tree: Mapping[str, Any], _pools: Mapping[str, NodePool]) -> CommandService:
    return CommandService(
        **_common(name, tree, _health_check(tree["health_check"], tree["port"])),
        command=tree["command"],
        port=tree["port"],
    )


_SERVICE_BUILDERS: dict[str, Callable[[str, Mapping[str, Any], Mapping[str, NodePool]], Service]] = {
    "vllm": _vllm,
    "vllm_pd": _vllm_pd,
    "ray": _ray,
    "command": _command,
}


def job_groups(
    names: Iterable[str], per_job: int | None, key: Callable[[str], Any] = lambda _name: None
) -> list[tuple[str, ...]]:
    """Benchmarks packed into jobs in the given (config) order: up to `per_job` each (None: no limit),
    and a new job wherever `key` changes, since what `key` tells apart (a resume chain) is the job's.

    The config's rules refuse a config whose groups would be split by `key`, so a first submit makes
    exactly the jobs the config says; a re-submit of a few benchmarks packs those anew and never fails.
    """
    out: list[list[str]] = []
    last: Any = object()
    for name in names:
        kind = key(name)
        if not out or kind != last or (per_job is not None and len(out[-1]) >= per_job):
            out.append([])
        out[-1].append(name)
        last = kind
    return [tuple(group) for group in out]


def resumable_setting(value: Any) -> Any:
    """A benchmark's `resumable` as one comparable value: true is NeMo Gym's defaults."""
    if value is True:
        return {"max_retries": 3, "max_walltime": None}
    return value or None


def _benchmark(name: str, tree: Mapping[str, Any]) -> Benchmark:
    resumable = resumable_setting(tree["resumable"])
    return Benchmark(
        name=name,
        prepare=freeze(tree["prepare"]),
        run=freeze(tree["run"]),
        command=tree["command"],
        resumable=Resumable(resumable["max_retries"], resumable["max_walltime"]) if resumable else None,
    )


def build_config(tree: Mapping[str, Any]) -> Config:
    """The typed Config of a tree that already passed schema validation and the cross-field rules."""
    (compute_name, compute), *_ = tree["compute"].items()
    pools = {
        pname: NodePool(
            name=pname,
            partition=p["partition"],
            nodes=p["nodes"],
            ntasks_per_node=p["ntasks_per_node"],
            gpus_per_node=p["gpus_per_node"],
            extra_args=freeze(p["extra_args"]),
        )
        for pname, p in compute["node_pools"].items()
    }
    services = {
        name: _SERVICE_BUILDERS[svc["type"]](name, svc, pools) for name, svc in tree["services"].items()
    }
    drv = tree["driver"]
    gym_install = drv["gym_install"]
    otel = tree["otel"]
    return Config(
        services=MappingProxyType(services),
        compute=Compute(
            name=compute_name,
            type=compute["type"],
            account=compute.get("account"),
            hostname=compute["hostname"],
            walltime=compute["walltime"],
            extra_args=freeze(compute["extra_args"]),
            node_pools=MappingProxyType(pools),
        ),
        driver=Driver(
            container=drv["container"],
            gym_install=GymInstall(gym_install["repo"], gym_install["ref"]) if gym_install else None,
            policy_model=drv["policy_model"],
            policy_host=drv["policy_host"],
            policy_model_type=drv["policy_model_type"],
            benchmarks=MappingProxyType({name: _benchmark(name, b) for name, b in drv["benchmarks"].items()}),
            env=_env(drv["env"]),
            mounts=tuple(drv["mounts"]),
            benchmarks_per_job=None
            if drv.get("benchmarks_per_job") == "all"
            else drv.get("benchmarks_per_job", 1),
            concurrent_benchmarks=drv.get("concurrent_benchmarks", 1),
        ),
        job=Job(output_path=tree["job"]["output_path"]),
        otel=Otel(**{k: freeze(v) for k, v in otel.items()}),
    )
