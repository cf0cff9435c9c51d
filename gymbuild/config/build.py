"""Building the typed Config from a validated, default-filled tree.

Apart from model.py so the readers of the config (planner, renderer, executors) import only the types
they read; this is the one place that turns a tree into them, settling on the way what NeMo Gym's
models settle (a vLLM server's health check on its own port, what a vllm_pd tier inherits, whether a
Ray Serve gateway runs the instances) with derived.py's definitions, which the rules judge by too.

Every field is read with the type the schema gives it (`_get`, `_opt`, ...): a value of another type
is a schema bug, raised as a TypeError naming the key, never a wrong value passed on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TypedDict, TypeVar, Unpack

from gymbuild.config.derived import effective_ray_serve, pd_tier_trees, resumable_setting, service_pools
from gymbuild.config.model import (
    Arrays,
    Benchmark,
    Budget,
    CommandService,
    Compute,
    Config,
    Driver,
    Env,
    EnvValue,
    GymInstall,
    HealthCheck,
    Job,
    NodePool,
    Otel,
    RayService,
    Resumable,
    SbatchValue,
    Service,
    VllmPdService,
    VllmService,
    freeze,
)
from gymbuild.config.tree import JsonObject, JsonValue

Tree = Mapping[str, JsonValue]
_Scalar = TypeVar("_Scalar", str, int, bool)


def _schema_bug(key: str, value: JsonValue) -> TypeError:
    return TypeError(f"{key}: {value!r} is not of the type the schema gives it")


def _get(tree: Tree, key: str, kind: type[_Scalar]) -> _Scalar:
    value = tree[key]
    if not isinstance(value, kind):
        raise _schema_bug(key, value)
    return value


def _opt(tree: Tree, key: str, kind: type[_Scalar]) -> _Scalar | None:
    return None if tree[key] is None else _get(tree, key, kind)


def _sub(tree: Tree, key: str) -> JsonObject:
    value = tree[key]
    if not isinstance(value, dict):
        raise _schema_bug(key, value)
    return value


def _opt_sub(tree: Tree, key: str) -> JsonObject | None:
    return None if tree[key] is None else _sub(tree, key)


def _strs(tree: Tree, key: str) -> tuple[str, ...]:
    value = tree[key]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _schema_bug(key, value)
    return tuple(item for item in value if isinstance(item, str))


def _sbatch_args(tree: Tree) -> Mapping[str, SbatchValue]:
    args = _sub(tree, "extra_args")
    out: dict[str, SbatchValue] = {}
    for key, value in args.items():
        if value is None or not isinstance(value, str | int | float | bool):
            raise _schema_bug(f"extra_args.{key}", value)
        out[key] = value
    return MappingProxyType(out)


def _resources(tree: Tree) -> Mapping[str, Mapping[str, float]]:
    """A Ray service's resources: pool -> resource -> amount."""
    out: dict[str, Mapping[str, float]] = {}
    for pool, amounts in _sub(tree, "resources").items():
        if not isinstance(amounts, dict):
            raise _schema_bug(f"resources.{pool}", amounts)
        numbers: dict[str, float] = {}
        for name, amount in amounts.items():
            if isinstance(amount, bool) or not isinstance(amount, int | float):
                raise _schema_bug(f"resources.{pool}.{name}", amount)
            numbers[name] = amount
        out[pool] = MappingProxyType(numbers)
    return MappingProxyType(out)


def _env(tree: Tree) -> Env:
    env = _sub(tree, "env")
    out = {}
    for key, value in env.items():
        if not isinstance(value, str):
            raise _schema_bug(f"env.{key}", value)
        out[key] = EnvValue.parse(value)
    return MappingProxyType(out)


def _health_check(tree: Tree | None, default_port: int | None) -> HealthCheck | None:
    if tree is None:
        return None
    port = _opt(tree, "port", int)
    return HealthCheck(
        path=_get(tree, "path", str),
        port=default_port if port is None else port,
        timeout_seconds=_get(tree, "timeout_seconds", int),
    )


class _Common(TypedDict):
    """The fields every service type has (model.Service), read from its tree."""

    name: str
    type: str
    container: str
    placement: str
    node_pool: str | None
    health_check: HealthCheck | None
    env: Env
    mounts: tuple[str, ...]
    pre_command: str


def _common(name: str, tree: Tree, health: HealthCheck | None) -> _Common:
    return {
        "name": name,
        "type": _get(tree, "type", str),
        "container": _get(tree, "container", str),
        "placement": _get(tree, "placement", str),
        "node_pool": _opt(tree, "node_pool", str),
        "health_check": health,
        "env": _env(tree),
        "mounts": _strs(tree, "mounts"),
        "pre_command": _get(tree, "pre_command", str),
    }


class _Tier(TypedDict, total=False):
    """What a vllm_pd service hands its tiers (NeMo Gym's VllmPDTierConfig)."""

    server_per_node: bool
    nixl_side_channel_port: int | None
    kv_transfer_config: Mapping[str, str] | None


_DEFAULT_HEALTH: JsonObject = {"path": "/health", "port": None, "timeout_seconds": 60}


def _vllm(name: str, tree: Tree, pools: Mapping[str, NodePool], **tier: Unpack[_Tier]) -> VllmService:
    """A vLLM service or tier; `tier` carries what a vllm_pd service hands its tiers."""
    health = _opt_sub(tree, "health_check")
    if health is None:  # NeMo Gym: a vLLM server always has /health on its own port
        health = _DEFAULT_HEALTH
    port = _get(tree, "port", int)
    tp, pp = _get(tree, "tensor_parallel_size", int), _get(tree, "pipeline_parallel_size", int)
    instances, use_ray_serve = _get(tree, "number_of_instances", int), _get(tree, "use_ray_serve", bool)
    nodes, gpus = service_pools(pools, _opt(tree, "node_pool", str))
    if tier.get("server_per_node"):
        nodes = 1  # each node serves on its own: sized as a single-node deployment
    return VllmService(
        **_common(name, tree, _health_check(health, port)),
        model=_get(tree, "model", str),
        port=port,
        served_model_name=_opt(tree, "served_model_name", str),
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        trust_remote_code=_get(tree, "trust_remote_code", bool),
        number_of_instances=instances,
        extra_args=_get(tree, "extra_args", str),
        data_parallel_rpc_port=_get(tree, "data_parallel_rpc_port", int),
        use_ray_serve=use_ray_serve,
        ray_serve=effective_ray_serve(use_ray_serve, tp * pp, instances, nodes, gpus),
        **tier,
    )


def _vllm_pd(name: str, tree: Tree, pools: Mapping[str, NodePool]) -> VllmPdService:
    """The service and its tiers, which get what NeMo Gym's VllmPDTierConfig adds."""
    server_per_node = _get(tree, "server_per_node", bool)
    nixl_port = _get(tree, "nixl_side_channel_port", int)
    kv_connector = _get(tree, "kv_connector", str)
    kv_load_failure_policy = _get(tree, "kv_load_failure_policy", str)
    tiers = {}
    for offset, (tier, sub) in enumerate(pd_tier_trees(tree).items()):
        role = ("kv_producer", "kv_consumer")[offset]
        tiers[tier] = _vllm(
            f"{name}-{tier}",
            sub,
            pools,
            server_per_node=server_per_node,
            nixl_side_channel_port=nixl_port + offset,
            kv_transfer_config=MappingProxyType(
                {
                    "kv_connector": kv_connector,
                    "kv_role": role,
                    "kv_load_failure_policy": kv_load_failure_policy,
                }
            ),
        )
    health = _opt_sub(tree, "health_check")
    if health is None:  # NeMo Gym: the router is checked on /health of its port too
        health = _DEFAULT_HEALTH
    port = _get(tree, "port", int)
    return VllmPdService(
        **_common(name, tree, _health_check(health, port)),
        model=_get(tree, "model", str),
        port=port,
        served_model_name=_opt(tree, "served_model_name", str),
        prefill=tiers["prefill"],
        decode=tiers["decode"],
        server_per_node=server_per_node,
        nixl_side_channel_port=nixl_port,
        prefill_policy=_get(tree, "prefill_policy", str),
        decode_policy=_get(tree, "decode_policy", str),
        intra_node_data_parallel_size=_get(tree, "intra_node_data_parallel_size", int),
        request_timeout_secs=_get(tree, "request_timeout_secs", int),
        log_level=_get(tree, "log_level", str),
        kv_connector=kv_connector,
        kv_load_failure_policy=kv_load_failure_policy,
    )


def _ray(name: str, tree: Tree, _pools: Mapping[str, NodePool]) -> RayService:
    port = _get(tree, "port", int)
    return RayService(
        **_common(name, tree, _health_check(_opt_sub(tree, "health_check"), port)),
        node_pools=_strs(tree, "node_pools"),
        port=port,
        resources=_resources(tree),
        num_cpus=_opt(tree, "num_cpus", int),
        num_gpus=_opt(tree, "num_gpus", int),
        extra_args=_get(tree, "extra_args", str),
    )


def _command(name: str, tree: Tree, _pools: Mapping[str, NodePool]) -> CommandService:
    port = _opt(tree, "port", int)
    return CommandService(
        **_common(name, tree, _health_check(_opt_sub(tree, "health_check"), port)),
        command=_get(tree, "command", str),
        port=port,
    )


_SERVICE_BUILDERS: dict[str, Callable[[str, Tree, Mapping[str, NodePool]], Service]] = {
    "vllm": _vllm,
    "vllm_pd": _vllm_pd,
    "ray": _ray,
    "command": _command,
}


def _resumable(setting: JsonObject | None) -> Resumable | None:
    if setting is None:
        return None
    return Resumable(_get(setting, "max_retries", int), _opt(setting, "max_walltime", str))


def _budget(drv: Tree) -> Budget | None:
    """driver.budget; gpu_hours may be written as an integer."""
    if drv.get("budget") is None:
        return None
    tree = _sub(drv, "budget")
    hours = tree.get("gpu_hours")
    if hours is not None and (isinstance(hours, bool) or not isinstance(hours, int | float)):
        raise _schema_bug("gpu_hours", hours)
    attempts = _opt(tree, "attempts", int) if "attempts" in tree else None
    return Budget(attempts, None if hours is None else float(hours))


def _benchmark(name: str, tree: Tree) -> Benchmark:
    return Benchmark(
        name=name,
        prepare=freeze(_sub(tree, "prepare")),
        run=freeze(_sub(tree, "run")),
        command=_opt(tree, "command", str),
        resumable=_resumable(resumable_setting(tree["resumable"])),
        shards=_get(tree, "shards", int) if tree.get("shards") is not None else 1,
    )


def _pool(name: str, tree: Tree) -> NodePool:
    return NodePool(
        name=name,
        partition=_get(tree, "partition", str),
        nodes=_get(tree, "nodes", int),
        ntasks_per_node=_get(tree, "ntasks_per_node", int),
        gpus_per_node=_opt(tree, "gpus_per_node", int),
        extra_args=_sbatch_args(tree),
    )


def _otel(tree: Tree) -> Otel:
    return Otel(
        enabled=_get(tree, "enabled", bool),
        binary=_get(tree, "binary", str),
        container=_opt(tree, "container", str),
        endpoint=_opt(tree, "endpoint", str),
        service_name=_opt(tree, "service_name", str),
        token_env=_get(tree, "token_env", str),
        component=_get(tree, "component", str),
        gym_telemetry=_get(tree, "gym_telemetry", bool),
        gym_span_groups=_get(tree, "gym_span_groups", str),
        gym_logs=_get(tree, "gym_logs", bool),
        gpu_metrics_port=_opt(tree, "gpu_metrics_port", int),
        node_metrics_port=_opt(tree, "node_metrics_port", int),
        scrape_interval_seconds=_get(tree, "scrape_interval_seconds", int),
        health_check_timeout_seconds=_get(tree, "health_check_timeout_seconds", int),
    )


def _entries(tree: Tree, key: str) -> dict[str, JsonObject]:
    """The named entries of a mapping of mappings (services, pools, benchmarks)."""
    out = {}
    for name, entry in _sub(tree, key).items():
        if not isinstance(entry, dict):
            raise _schema_bug(f"{key}.{name}", entry)
        out[name] = entry
    return out


def _per_job(drv: Tree) -> int | None:
    """driver.benchmarks_per_job: None for `all` (the rules made integer text an integer)."""
    if "benchmarks_per_job" not in drv:
        return 1
    value = drv["benchmarks_per_job"]
    if value == "all":
        return None
    if value is None or isinstance(value, int):
        return value
    raise _schema_bug("benchmarks_per_job", value)


def _array(compute: Tree) -> Arrays | None:
    """compute.<name>.array: `true` or `{parallel: N}` queues job arrays; unset or `false`, none."""
    value = compute.get("array")
    if value is None or value is False:
        return None
    if value is True:
        return Arrays()
    parallel = value.get("parallel") if isinstance(value, dict) else None
    if isinstance(value, dict) and (parallel is None or isinstance(parallel, int)):
        return Arrays(parallel=parallel)
    raise _schema_bug("array", value)


def build_config(tree: Tree) -> Config:
    """The typed Config of a tree that already passed schema validation and the cross-field rules."""
    (compute_name, compute), *_ = _entries(tree, "compute").items()
    pools = {pname: _pool(pname, p) for pname, p in _entries(compute, "node_pools").items()}
    services = {
        name: _SERVICE_BUILDERS[_get(svc, "type", str)](name, svc, pools)
        for name, svc in _entries(tree, "services").items()
    }
    drv = _sub(tree, "driver")
    gym_install = _opt_sub(drv, "gym_install")
    benchmarks = {name: _benchmark(name, b) for name, b in _entries(drv, "benchmarks").items()}
    return Config(
        services=MappingProxyType(services),
        compute=Compute(
            name=compute_name,
            type=_get(compute, "type", str),
            account=_opt(compute, "account", str) if "account" in compute else None,
            hostname=_opt(compute, "hostname", str),
            walltime=_opt(compute, "walltime", str),
            extra_args=_sbatch_args(compute),
            node_pools=MappingProxyType(pools),
            array=_array(compute),
        ),
        driver=Driver(
            container=_get(drv, "container", str),
            gym_install=GymInstall(_get(gym_install, "repo", str), _get(gym_install, "ref", str))
            if gym_install
            else None,
            policy_model=_opt(drv, "policy_model", str),
            policy_host=_get(drv, "policy_host", str),
            policy_model_type=_get(drv, "policy_model_type", str),
            benchmarks=MappingProxyType(benchmarks),
            env=_env(drv),
            mounts=_strs(drv, "mounts"),
            benchmarks_per_job=_per_job(drv),
            concurrent_benchmarks=_get(drv, "concurrent_benchmarks", int)
            if "concurrent_benchmarks" in drv
            else 1,
            budget=_budget(drv),
        ),
        job=Job(output_path=_get(_sub(tree, "job"), "output_path", str)),
        otel=_otel(_sub(tree, "otel")),
    )
