"""Building the typed Config from a validated, default-filled tree.

Apart from model.py so the readers of the config (planner, renderer, executors) import only the types
they read; this is the one place that turns a tree into them, settling on the way what NeMo Gym's
models settle (a vLLM server's health check on its own port, what a vllm_pd tier inherits, whether a
Ray Serve gateway runs the instances) with derived.py's definitions, which the rules judge by too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from gymbuild.config.derived import effective_ray_serve, pd_tier_trees, resumable_setting, service_pools
from gymbuild.config.model import (
    Benchmark,
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
    Service,
    VllmPdService,
    VllmService,
    freeze,
)
from gymbuild.config.tree import JsonObject


def _env(tree: Mapping[str, str]) -> Env:
    return MappingProxyType({k: EnvValue.parse(v) for k, v in tree.items()})


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


def _resumable(setting: JsonObject | None) -> Resumable | None:
    if setting is None:
        return None
    retries, walltime = setting["max_retries"], setting["max_walltime"]
    if not isinstance(retries, int) or not isinstance(walltime, str | None):
        raise TypeError(f"resumable is not what the schema allows: {setting!r}")
    return Resumable(retries, walltime)


def _benchmark(name: str, tree: Mapping[str, Any]) -> Benchmark:
    return Benchmark(
        name=name,
        prepare=freeze(tree["prepare"]),
        run=freeze(tree["run"]),
        command=tree["command"],
        resumable=_resumable(resumable_setting(tree["resumable"])),
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
