"""Placement (seed 003, "Where services run") and the ports steps try.

- a single-node allocation: everything shares node 0;
- a vLLM service without `node_pool` on several nodes: spans every node;
- any other unpinned service: one node, the driver's;
- a pinned service: its pool's nodes (pools take contiguous node ranges in declaration order);
- the driver: node 0, or the first node of the policy's pool when the policy is pinned.
"""

from __future__ import annotations

from gymbuild.config.model import Config, Service, VllmService
from gymbuild.errors import UserError
from gymbuild.plan.checks import shell_name
from gymbuild.plan.model import Nodes, Part, PoolRange, Port, Ref


def pool_ranges(config: Config) -> tuple[PoolRange, ...]:
    """Pools take contiguous node ranges in declaration order."""
    out, first = [], 0
    for pool in config.compute.node_pools.values():
        out.append(PoolRange(pool.name, first, pool.nodes, f"GYM_POOL_{shell_name(pool.name)}_NODES"))
        first += pool.nodes
    return tuple(out)


def _pool_nodes(config: Config, pool: str) -> Nodes:
    for rng in pool_ranges(config):
        if rng.name == pool:
            return Nodes(rng.first, rng.count, pool)
    raise UserError(f"node pool {pool!r} is not defined in compute.{config.compute.name}.node_pools")


def driver_nodes(config: Config) -> Nodes:
    """Node 0, or the first node of the policy's pool when the policy is pinned."""
    policy = config.policy
    if config.compute.total_nodes > 1 and policy is not None and policy.node_pool:
        return Nodes(_pool_nodes(config, policy.node_pool).first, 1)
    return Nodes(0, 1)


def node_host(config: Config, nodes: Nodes) -> Part:
    """How the batch shell (and other steps) address a step's first node."""
    return "localhost" if config.compute.total_nodes == 1 else Ref(f"GYM_NODES[{nodes.first}]")


def place(config: Config, service: Service) -> Nodes:
    """The nodes a service (or a vllm_pd tier) runs on; the seed's placement table, row by row."""
    total = config.compute.total_nodes
    if total == 1:
        return Nodes(0, 1, service.node_pool)
    if service.node_pool:
        return _pool_nodes(config, service.node_pool)
    if isinstance(service, VllmService):
        return Nodes(0, total)
    return driver_nodes(config)


class _Ports:
    """Names the batch-shell variable of each settled port, unique even when names sanitize alike."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.firsts: list[int] = []

    def __call__(self, key: str, first: int) -> Port:
        base = f"GYM_PORT_{shell_name(key)}"
        var, n = base, 2
        while var in self.used:
            var, n = f"{base}_{n}", n + 1
        self.used.add(var)
        self.firsts.append(first)
        return Port(key, first, var)
