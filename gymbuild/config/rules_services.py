"""The rules about the services and the compute they run on: placement, node pools, each service
type's shape, and whether its GPUs fit.

One group because they all read the same two things together, a service and the pools of the one
compute (sizing a vLLM server is NeMo Gym's own arithmetic, from derived.py, so the rules and the
built config agree on it).
"""

from __future__ import annotations

from collections.abc import Iterator

from gymbuild.config.derived import effective_ray_serve, pd_tier_trees, pool_gpus, pool_nodes, service_pools
from gymbuild.config.rules_tree import Path, Rules, quoted
from gymbuild.config.tree import JsonObject, JsonValue
from gymbuild.errors import dotted

POOL_ATTRS = ("partition", "ntasks_per_node", "gpus_per_node")


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def fill_placement(tree: JsonObject, checked: Rules) -> None:
    """`placement` defaults to the only compute: written into the tree so the resolved config says it."""
    if checked.compute is None:
        return
    name, _ = checked.compute
    for path, _kind, unit in checked.deployments():
        if "placement" in unit and unit["placement"] is None and checked.ok((*path, "placement")):
            unit["placement"] = name


def placement_and_pools(r: Rules) -> None:
    """Every service runs on the compute, on a pool that exists there."""
    if r.compute is None or r.pools is None:
        return
    cname, centry = r.compute
    pools = r.pools
    if pools:
        where = f"one of {quoted(pools)}"
    elif centry.get("type") == "local":
        where = "none: a local compute has no node pools; remove node_pool"
    else:
        where = f"none yet: define it under compute.{cname}.node_pools"

    def check_pool(path: Path, pool: object) -> None:
        if isinstance(pool, str) and pool not in pools:
            r.error(path, f"node pool `{pool}` does not exist in compute `{cname}`", f"pools: {where}")

    for path, kind, _unit in r.deployments():
        placement = r.get((*path, "placement"))
        if isinstance(placement, str) and placement != cname:
            r.error(
                (*path, "placement"),
                f"`{placement}` is not a compute of this config",
                f"set placement: {cname} (the only compute), or leave it out",
            )
        check_pool((*path, "node_pool"), r.get((*path, "node_pool")))
        if kind == "ray":
            spans = r.get((*path, "node_pools"))
            listed = spans if isinstance(spans, list) else []  # None: unset or refused by the schema
            for index, pool in enumerate(listed):
                check_pool((*path, "node_pools", index), pool)
            for pool in r.mapping((*path, "resources")):
                if pool not in listed:
                    r.error(
                        (*path, "resources", pool),
                        f"resources are given for pool `{pool}`, which is not in this service's node_pools",
                        f"use one of {quoted(listed)}, or add `{pool}` to node_pools",
                    )
    for path, kind, _svc in r.services():
        if kind != "vllm_pd":
            continue
        for tier in ("prefill", "decode"):
            pinned = r.get((*path, tier, "node_pool"))
            if isinstance(r.get((*path, tier)), dict) and pinned is None and r.ok((*path, tier, "node_pool")):
                r.error(
                    (*path, tier, "node_pool"),
                    f"the {tier} tier has no node_pool",
                    f"pin each tier to its own pool of compute `{cname}` ({where})",
                )


def ray_shape(r: Rules) -> None:
    """A Ray cluster spans whole pools (`node_pools`); it is never pinned to one."""
    for path, kind, svc in r.services():
        pool = svc.get("node_pool")
        if kind == "ray" and pool is not None and r.ok((*path, "node_pool")):
            r.error(
                (*path, "node_pool"),
                "a ray service spans `node_pools`, not a single `node_pool`",
                f"write node_pools: [{pool}] instead",
            )


def pd_services(r: Rules) -> None:
    """A vllm_pd service's tiers bind their own RPC ports, and its router sits beside the driver."""
    pool_names = list(r.pools or {})
    for path, kind, svc in r.services():
        if kind != "vllm_pd" or not all(isinstance(r.get((*path, t)), dict) for t in ("prefill", "decode")):
            continue
        for tier in ("prefill", "decode"):
            for key in ("server_per_node", "nixl_side_channel_port"):
                own = svc[tier]
                if isinstance(own, dict) and key in own:
                    r.error(
                        (*path, tier, key),
                        f"{key} is set on the {tier} tier",
                        f"set {dotted((*path, key))} on the vllm_pd service itself; it applies to both tiers",
                    )
        tiers = pd_tier_trees(svc)
        ports = [tiers[t].get("data_parallel_rpc_port") for t in ("prefill", "decode")]
        if isinstance(ports[0], int) and ports[0] == ports[1] and r.ok((*path, "prefill"), (*path, "decode")):
            r.error(
                (*path, "decode", "data_parallel_rpc_port"),
                f"the prefill and decode tiers share data_parallel_rpc_port {ports[0]}; each tier binds it "
                "on its own hosts",
                f"give the decode tier another port (by default it takes prefill's plus 1: {ports[0] + 1})",
            )
        pinned = r.get((*path, "node_pool"))
        if isinstance(pinned, str) and pool_names and pinned in pool_names and pinned != pool_names[0]:
            r.error(
                (*path, "node_pool"),
                f"the router is pinned to pool `{pinned}`, but the driver reaches it over localhost from the "
                f"first node (pool `{pool_names[0]}`)",
                f"pin it to `{pool_names[0]}` or leave node_pool unset",
            )


def pools_agree(r: Rules) -> None:
    """All pools are one allocation with one set of #SBATCH directives: they must agree on the
    directives every pool sets, and their extra_args may add to each other but not contradict."""
    if r.compute is None or not r.pools:
        return
    cname, _ = r.compute
    base = ("compute", cname, "node_pools")
    pools = [(n, p) for n, p in r.pools.items() if isinstance(p, dict) and r.reachable((*base, n))]
    if len(pools) < 2:
        return
    first, reference = pools[0]
    for other, pool in pools[1:]:
        for attr in POOL_ATTRS:
            if not r.ok((*base, first, attr), (*base, other, attr)):
                continue
            if pool.get(attr) != reference.get(attr):
                r.error(
                    (*base, other, attr),
                    f"pools `{first}` and `{other}` disagree on {attr} "
                    f"({reference.get(attr)!r} vs {pool.get(attr)!r}); all pools form one Slurm allocation "
                    "with one set of directives",
                    f"give every pool the same {attr}",
                )
    seen: dict[str, tuple[str, JsonValue]] = {}
    for name, pool in pools:
        args = pool.get("extra_args")
        if not isinstance(args, dict) or not r.ok((*base, name, "extra_args")):
            continue
        for key, value in args.items():
            owner, earlier = seen.setdefault(key, (name, value))
            if earlier != value:
                r.error(
                    (*base, name, "extra_args", key),
                    f"pool `{name}` sets extra_args.{key} to {value!r} but pool `{owner}` sets it to "
                    f"{earlier!r}; #SBATCH directives apply to the whole allocation",
                    f"give {key} the same value in every pool that sets it, or set it in one pool only",
                )


def _sizes(r: Rules, path: Path) -> tuple[int, int] | None:
    """(tensor x pipeline parallel, instances) of a vLLM unit, or None when the schema refused one."""
    keys = ("tensor_parallel_size", "pipeline_parallel_size", "number_of_instances")
    tp, pp, n = (_int(r.get((*path, k))) for k in keys)
    if tp is None or pp is None or n is None:
        return None
    return tp * pp, n


def _vllm_units(r: Rules) -> Iterator[tuple[Path, bool]]:
    """(path, server_per_node) of every vLLM server: the vllm services and the vllm_pd tiers."""
    for path, kind, _unit in r.deployments():
        if kind != "vllm":
            continue
        per_node = False
        if path[-1] in ("prefill", "decode") and len(path) == 3:
            per_node = r.get((*path[:-1], "server_per_node")) is True
        yield path, per_node


def vllm_sizing(r: Rules) -> None:
    """Each vLLM server, judged on its own like NeMo Gym does: data-parallel instances spread evenly
    over the nodes it spans, and its GPU footprint fits the pools it runs on (its own pool when pinned).

    A Ray Serve gateway (use_ray_serve, or NeMo Gym's automatic choice) packs the instances anywhere
    in the pools, so then only the total counts.
    """
    pools = r.pools
    if r.compute is None or pools is None or not r.ok(("compute", r.compute[0], "node_pools")):
        return
    cname = r.compute[0]
    for path, per_node in _vllm_units(r):
        sizes = _sizes(r, path)
        pinned = r.get((*path, "node_pool"))
        if sizes is None or not r.ok((*path, "node_pool")):
            continue
        tp_pp, count = sizes
        pool = pinned if isinstance(pinned, str) and pinned in pools else None
        if pinned is not None and pool is None:
            continue  # reported by placement_and_pools
        nodes, gpus = service_pools(pools, pool)
        spanned = {pool: pools[pool]} if pool is not None else pools
        if per_node:
            if count != 1:
                r.error(
                    (*path, "number_of_instances"),
                    f"the tier runs one server per node (server_per_node), so each node is one instance; "
                    f"number_of_instances must be 1, not {count}",
                    "remove number_of_instances, or set server_per_node: false on the service",
                )
            nodes = 1
        use = r.get((*path, "use_ray_serve")) is True
        ray_serve = effective_ray_serve(use, tp_pp, count, nodes, gpus)
        if nodes > 1 and count > 1 and count % nodes and not ray_serve:
            r.error(
                (*path, "number_of_instances"),
                f"{count} data-parallel instances cannot be spread evenly over the {nodes} nodes "
                "this service spans",
                f"use a multiple of {nodes}, pin the service to a one-node pool, or set use_ray_serve: true",
            )
            continue
        if not gpus:
            continue
        total = sum(pool_nodes(p) * (pool_gpus(p) or 0) for p in spanned.values())
        if nodes > 1 and ray_serve:
            need, have, scope = tp_pp * count, total, f"the {total} GPUs of its nodes (Ray Serve gateway)"
        elif nodes > 1 and count > 1:
            need, have = tp_pp * (count // nodes), max(gpus)
            scope = f"one node's {have} GPUs ({count // nodes} instance(s) per node)"
        elif nodes > 1:
            need, have, scope = tp_pp, total, f"the {total} GPUs of its {nodes} nodes"
        else:
            need, have, scope = tp_pp * count, max(gpus), f"the node's {max(gpus)} GPUs"
        label = dotted(path)
        if need > have:
            r.error(
                (*path, "tensor_parallel_size"),
                f"{label} needs {need} GPUs (tensor x pipeline parallel x instances), more than {scope} "
                f"on compute `{cname}`",
                "lower number_of_instances, tensor_parallel_size or pipeline_parallel_size, or give its "
                "pool more nodes or gpus_per_node",
            )
        elif need < have:
            r.warnings.append(
                f"{label} needs {need} GPUs but has {scope}, leaving {have - need} idle; raise "
                "number_of_instances or tensor_parallel_size, or lower gpus_per_node"
            )


def command_health_port(r: Rules) -> None:
    """A command service's health check needs a port: its own or the service's."""
    for path, kind, svc in r.services():
        check = svc.get("health_check")
        if kind != "command" or not isinstance(check, dict):
            continue
        unset = check.get("port") is None and svc.get("port") is None
        if unset and r.ok((*path, "health_check"), (*path, "port")):
            r.error(
                (*path, "health_check", "port"),
                "the health check has no port: neither health_check.port nor the service's port is set",
                f"set {dotted((*path, 'port'))} (or health_check.port)",
            )
