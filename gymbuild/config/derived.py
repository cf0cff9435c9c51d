"""The values NeMo Gym derives from other fields, each defined once because two sides read it.

The rules judge a config on the validated tree before it is typed, and build.py types it after (the
planner packs jobs with `job_groups` too): written twice, the two could drift, and a config the
rules passed would be built otherwise. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Literal, TypeAlias

from gymbuild.config.model import NodePool
from gymbuild.config.tree import JsonObject, JsonValue

# A node pool as the rules read it (a validated tree) or as the planner does (typed).
Pool: TypeAlias = NodePool | JsonValue


def _pool_field(pool: Pool, key: Literal["nodes", "gpus_per_node"]) -> JsonValue:
    if isinstance(pool, NodePool):
        return pool.nodes if key == "nodes" else pool.gpus_per_node
    if not isinstance(pool, dict):
        raise TypeError(f"a node pool is a mapping, not {pool!r}")  # the schema refuses it first
    return pool[key]


def pool_nodes(pool: Pool) -> int:
    """A pool's `nodes` (an integer wherever the schema accepted the pool)."""
    nodes = _pool_field(pool, "nodes")
    if not isinstance(nodes, int):
        raise TypeError(f"a node pool's nodes is an integer, not {nodes!r}")
    return nodes


def pool_gpus(pool: Pool) -> int | None:
    """A pool's `gpus_per_node`, None when unset."""
    gpus = _pool_field(pool, "gpus_per_node")
    if gpus is not None and not isinstance(gpus, int):
        raise TypeError(f"a node pool's gpus_per_node is an integer, not {gpus!r}")
    return gpus


def service_pools(pools: Mapping[str, Pool], node_pool: str | None) -> tuple[int, list[int]]:
    """(nodes, gpus_per_node of each pool) a service spans: its own pool, else the whole allocation.

    Works on typed NodePools and on validated trees alike (the rules size services before typing).
    """
    spanned = [pools[node_pool]] if node_pool is not None and node_pool in pools else list(pools.values())
    nodes = sum(pool_nodes(p) for p in spanned) or sum(pool_nodes(p) for p in pools.values()) or 1
    gpus = [g for g in map(pool_gpus, spanned) if g is not None]
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


def pd_tier_trees(tree: Mapping[str, JsonValue]) -> dict[str, JsonObject]:
    """The prefill and decode trees of a vllm_pd service with NeMo Gym's inherited defaults filled:
    container, model and served name from the service, ports port+1 and port+2, and decode's
    data_parallel_rpc_port prefill's plus 1. The rules check these, the model builds from them."""
    tiers = {}
    for offset, tier in enumerate(("prefill", "decode"), start=1):
        own = tree[tier]
        if not isinstance(own, dict):
            raise TypeError(f"a vllm_pd tier is a mapping, not {own!r}")  # the schema refuses it first
        sub = dict(own)
        for inherited in ("container", "model", "served_model_name"):
            if inherited not in sub:  # written, even as null, the tier's own value wins
                sub[inherited] = tree.get(inherited)
        port = tree.get("port")
        if "port" not in sub and isinstance(port, int):
            sub["port"] = port + offset
        sub["type"] = "vllm"
        tiers[tier] = sub
    prefill_rpc = tiers["prefill"].setdefault("data_parallel_rpc_port", 13345)
    if isinstance(prefill_rpc, int):
        tiers["decode"].setdefault("data_parallel_rpc_port", prefill_rpc + 1)
    return tiers


def job_groups(
    names: Iterable[str], per_job: int | None, key: Callable[[str], object] = lambda _name: None
) -> list[tuple[str, ...]]:
    """Benchmarks packed into jobs in the given (config) order: up to `per_job` each (None: no limit),
    and a new job wherever `key` changes, since what `key` tells apart (a resume chain) is the job's.

    The config's rules refuse a config whose groups would be split by `key`, so a first submit makes
    exactly the jobs the config says; a re-submit of a few benchmarks packs those anew and never fails.
    """
    out: list[list[str]] = []
    last: object = object()
    for name in names:
        kind = key(name)
        if not out or kind != last or (per_job is not None and len(out[-1]) >= per_job):
            out.append([])
        out[-1].append(name)
        last = kind
    return [tuple(group) for group in out]


def resumable_setting(value: JsonValue) -> JsonObject | None:
    """A benchmark's `resumable` as one comparable value: true is NeMo Gym's defaults."""
    if value is True:
        return {"max_retries": 3, "max_walltime": None}
    if not value:
        return None
    if not isinstance(value, dict):
        raise TypeError(f"resumable is true, false or a mapping, not {value!r}")  # the schema says so first
    return value
