"""The config rules JSON Schema cannot say: those that cross fields, and the string syntaxes whose
errors deserve a better message than "does not match pattern".

They run on the default-filled tree after schema validation, and each one reads only values the
schema accepted (`Rules.ok`), so a wrong type is reported once, by the schema, and never makes a rule
misfire or crash. Every finding names the config path and the fix. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gymbuild.config import lax
from gymbuild.config.derived import job_groups, resumable_setting
from gymbuild.config.walltime import FORMS, is_walltime
from gymbuild.errors import Problem, dotted
from gymbuild.shell import is_shell_name

Path = tuple[Any, ...]

NAME = re.compile(r"^[A-Za-z0-9._-]+$")
ENV_FIX = (
    "write lit:<value> for a literal, host:VAR to read VAR from your shell, "
    "or runtime:VAR to expand it on the cluster"
)
VAR_FIX = "use letters, digits and _, not starting with a digit"
MODEL_TYPES = ("vllm", "vllm_pd", "command")
POLICY_KEYS = ("policy_base_url", "policy_model_name", "policy_api_key")
POOL_ATTRS = ("partition", "ntasks_per_node", "gpus_per_node")


def _overlaps(a: Path, b: Path) -> bool:
    """One path is the other or lies inside it."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _names(items: Iterable[object]) -> str:
    return ", ".join(f"`{i}`" for i in items) or "none"


@dataclass
class Rules:
    """The filled tree, the paths the schema refused, and what the rules found."""

    tree: dict[str, Any]
    bad: list[Path]
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def ok(self, *paths: Path) -> bool:
        """True when the schema accepted each of these values whole: nothing above or inside refused."""
        return all(not _overlaps(bad, path) for path in paths for bad in self.bad)

    def reachable(self, path: Path) -> bool:
        """True when nothing above `path` or at it was refused (a container may hold refused entries)."""
        return not any(path[: len(bad)] == bad for bad in self.bad)

    def error(self, path: Path, message: str, fix: str) -> None:
        self.problems.append(Problem(dotted(path), message, fix))

    def get(self, path: Path) -> Any:
        """The value at `path`, or None when it or anything on the way is missing or refused.

        Entries inside a container may still be refused: check those with `ok` before trusting them.
        """
        if not self.reachable(path):
            return None
        node: Any = self.tree
        for part in path:
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node

    def mapping(self, path: Path) -> dict[Any, Any]:
        """A mapping the rules may iterate, or {} when the schema refused it."""
        node = self.get(path)
        return node if isinstance(node, dict) else {}

    # --- what several rules share ------------------------------------------------------------------

    @property
    def compute(self) -> tuple[str, dict[str, Any]] | None:
        """(name, entry) of the one compute, when the schema accepted it."""
        entries = self.mapping(("compute",))
        if len(entries) != 1:
            return None
        ((name, entry),) = entries.items()
        # without a valid type no branch of the schema filled the entry's defaults: nothing to trust
        trusted = isinstance(self.get(("compute", name)), dict) and self.ok(("compute", name, "type"))
        return (name, entry) if trusted else None

    @property
    def pools(self) -> dict[str, dict[str, Any]] | None:
        """The compute's node pools by name, or None when they cannot be trusted."""
        if self.compute is None:
            return None
        name, _ = self.compute
        pools = self.get(("compute", name, "node_pools"))
        return pools if isinstance(pools, dict) else None

    def services(self) -> Iterator[tuple[Path, str, dict[str, Any]]]:
        """(path, type, tree) of each service the schema accepted the type of."""
        for name, svc in self.mapping(("services",)).items():
            path = ("services", name)
            if isinstance(svc, dict) and self.ok((*path, "type")) and svc.get("type") in _SERVICE_TYPES:
                yield path, svc["type"], svc

    def deployments(self) -> Iterator[tuple[Path, str, dict[str, Any]]]:
        """Every unit that is placed and started: the services and the prefill/decode tiers."""
        for path, kind, svc in self.services():
            yield path, kind, svc
            if kind == "vllm_pd":
                for tier in ("prefill", "decode"):
                    sub = self.get((*path, tier))
                    if isinstance(sub, dict):
                        yield (*path, tier), "vllm", sub

    def benchmarks(self) -> Iterator[tuple[Path, dict[str, Any]]]:
        for name, bench in self.mapping(("driver", "benchmarks")).items():
            if isinstance(bench, dict):
                yield ("driver", "benchmarks", name), bench


_SERVICE_TYPES = ("vllm", "vllm_pd", "ray", "command")

Rule = Callable[[Rules], None]
RULES: list[Rule] = []


def rule(func: Rule) -> Rule:
    RULES.append(func)
    return func


# --- placement --------------------------------------------------------------------------------------


def fill_placement(tree: dict[str, Any], checked: Rules) -> None:
    """`placement` defaults to the only compute: written into the tree so the resolved config says it."""
    if checked.compute is None:
        return
    name, _ = checked.compute
    for path, _kind, unit in checked.deployments():
        if "placement" in unit and unit["placement"] is None and checked.ok((*path, "placement")):
            unit["placement"] = name


@rule
def placement_and_pools(r: Rules) -> None:
    """Every service runs on the compute, on a pool that exists there."""
    if r.compute is None or r.pools is None:
        return
    cname, centry = r.compute
    pools = r.pools
    if pools:
        where = f"one of {_names(pools)}"
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
            for index, pool in enumerate(r.get((*path, "node_pools")) or []):
                check_pool((*path, "node_pools", index), pool)
            listed = r.get((*path, "node_pools")) or []
            for pool in r.mapping((*path, "resources")):
                if pool not in listed:
                    r.error(
                        (*path, "resources", pool),
                        f"resources are given for pool `{pool}`, which is not in this service's node_pools",
                        f"use one of {_names(listed)}, or add `{pool}` to node_pools",
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


@rule
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


@rule
def pd_services(r: Rules) -> None:
    """A vllm_pd service's tiers bind their own RPC ports, and its router sits beside the driver."""
    from gymbuild.config.derived import pd_tier_trees

    pool_names = list(r.pools or {})
    for path, kind, svc in r.services():
        if kind != "vllm_pd" or not all(isinstance(r.get((*path, t)), dict) for t in ("prefill", "decode")):
            continue
        for tier in ("prefill", "decode"):
            for key in ("server_per_node", "nixl_side_channel_port"):
                if key in svc[tier]:
                    r.error(
                        (*path, tier, key),
                        f"{key} is set on the {tier} tier",
                        f"set {dotted((*path, key))} on the vllm_pd service itself; it applies to both tiers",
                    )
        tiers = pd_tier_trees(svc)
        ports = [tiers[t].get("data_parallel_rpc_port") for t in ("prefill", "decode")]
        if ports[0] is not None and ports[0] == ports[1] and r.ok((*path, "prefill"), (*path, "decode")):
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


@rule
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
    seen: dict[str, tuple[str, Any]] = {}
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


@rule
def vllm_sizing(r: Rules) -> None:
    """Each vLLM server, judged on its own like NeMo Gym does: data-parallel instances spread evenly
    over the nodes it spans, and its GPU footprint fits the pools it runs on (its own pool when pinned).

    A Ray Serve gateway (use_ray_serve, or NeMo Gym's automatic choice) packs the instances anywhere
    in the pools, so then only the total counts.
    """
    from gymbuild.config.derived import effective_ray_serve, service_pools

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
        total = sum(p["nodes"] * p["gpus_per_node"] for p in spanned.values() if p.get("gpus_per_node"))
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


# --- the driver -------------------------------------------------------------------------------------


@rule
def policy_wiring(r: Rules) -> None:
    """policy_model names a model server, and gymbuild alone wires its URL, name and key."""
    policy = r.get(("driver", "policy_model"))
    if not isinstance(policy, str):
        return
    services = r.mapping(("services",))
    svc = services.get(policy)
    if svc is None:
        models = [n for n, s in services.items() if isinstance(s, dict) and s.get("type") in MODEL_TYPES]
        r.error(
            ("driver", "policy_model"),
            f"`{policy}` is not a service",
            f"name one of the model services: {_names(models)}",
        )
    elif not isinstance(svc, dict) or not r.ok(("services", policy, "type")):
        return
    elif svc.get("type") not in MODEL_TYPES:
        return  # NeMo Gym: a policy that serves no model (a Ray cluster) wires nothing into `run`
    elif svc.get("type") == "command" and svc.get("port") is None and r.ok(("services", policy, "port")):
        r.error(
            ("services", policy, "port"),
            f"`{policy}` is the policy but has no port for policy_base_url",
            f"set services.{policy}.port to the port its server listens on",
        )
    for path, bench in r.benchmarks():
        run = bench.get("run")
        if not isinstance(run, dict) or not r.ok((*path, "run")):
            continue
        for key in run:
            if isinstance(key, str) and key.lstrip("+") in POLICY_KEYS:
                r.error(
                    (*path, "run", key),
                    f"sets {key.lstrip('+')} while driver.policy_model (`{policy}`) already wires it",
                    "remove it from run, or set driver.policy_model: null and wire the policy yourself",
                )


@rule
def command_benchmarks(r: Rules) -> None:
    """A `command` replaces `gym eval run`, so run overrides and resuming have nothing to act on."""
    for path, bench in r.benchmarks():
        if not isinstance(bench.get("command"), str) or not r.ok((*path, "command")):
            continue
        if bench.get("run") and r.ok((*path, "run")):
            r.error(
                (*path, "run"),
                "a benchmark with `command` cannot also have `run` overrides",
                "remove run (pass its settings in the command), or remove command",
            )
        if bench.get("resumable") not in (False, None) and r.ok((*path, "resumable")):
            r.error(
                (*path, "resumable"),
                "a benchmark with `command` cannot be resumable",
                "remove resumable, or run the benchmark with `run` instead of command",
            )


def _per_job(r: Rules) -> int | str | None:
    """driver.benchmarks_per_job as the model reads it: 1 when unset, `all`, or an integer >= 1; integer
    text (`${oc.env:N}`) is the integer, as lax mode reads an int. None (reported) for anything else."""
    path = ("driver", "benchmarks_per_job")
    if not r.ok(path) or not isinstance(r.get(("driver",)), dict):
        return None
    value = r.get(path)
    if value is None:
        return 1
    if isinstance(value, str) and value != "all":
        ok, number = lax.to_int(value)
        if not ok or number < 1:
            r.error(
                path, f"`{value}` is neither a number of benchmarks nor `all`", "write an integer >= 1 or all"
            )
            return None
        value = r.tree["driver"]["benchmarks_per_job"] = number
    return value


@rule
def shared_jobs(r: Rules) -> None:
    """benchmarks_per_job packs benchmarks into jobs in config order; what a job has once (its resume
    chain, its concurrency) must fit every benchmark packed into it."""
    per_job = _per_job(r)
    concurrent = r.get(("driver", "concurrent_benchmarks"))
    size = per_job if isinstance(per_job, int) else None  # None: `all`, or a value already refused
    concurrent_ok = isinstance(concurrent, int) and r.ok(("driver", "concurrent_benchmarks"))
    if concurrent_ok and size is not None and concurrent > size:
        r.error(
            ("driver", "concurrent_benchmarks"),
            f"{concurrent} benchmarks at once, but a job holds {size} (driver.benchmarks_per_job)",
            f"set concurrent_benchmarks to at most {size}, or raise driver.benchmarks_per_job",
        )
    if per_job is None or size == 1:
        return
    benches = {path[-1]: bench for path, bench in r.benchmarks() if r.ok((*path, "resumable"))}
    for group in job_groups(benches, None if per_job == "all" else size):
        first = group[0]
        wanted = resumable_setting(benches[first].get("resumable"))
        for name in group[1:]:
            if resumable_setting(benches[name].get("resumable")) != wanted:
                r.error(
                    ("driver", "benchmarks", name, "resumable"),
                    f"`{name}` shares a job with `{first}` (driver.benchmarks_per_job: {per_job} packs "
                    "benchmarks in config order), and a job resumes as a whole, but their resumable "
                    "settings differ",
                    "give the benchmarks of one job the same resumable setting, put the resumable ones "
                    "next to each other, or lower driver.benchmarks_per_job",
                )


@rule
def benchmarks_present(r: Rules) -> None:
    if r.ok(("driver", "benchmarks")) and r.get(("driver", "benchmarks")) == {}:
        r.warnings.append("driver.benchmarks is empty: nothing will be submitted")


# --- names and strings ------------------------------------------------------------------------------


@rule
def names(r: Rules) -> None:
    """Service and benchmark names become file and job names: keep them to a safe alphabet."""
    groups = [(("services",), "service"), (("driver", "benchmarks"), "benchmark")]
    for base, what in groups:
        for name in r.mapping(base):
            if not (isinstance(name, str) and NAME.match(name)):
                r.error(
                    (*base, name),
                    f"{what} name `{name}` may only contain letters, digits, '.', '_' and '-'",
                    f"rename the {what} (it names log files and Slurm jobs)",
                )
    services = r.mapping(("services",))
    for path, kind, _svc in r.services():
        if kind == "vllm_pd":
            for tier in ("prefill", "decode"):
                derived = f"{path[-1]}-{tier}"
                if derived in services:
                    r.error(
                        ("services", derived),
                        f"`{derived}` is also the name of vllm_pd service `{path[-1]}`'s {tier} tier",
                        f"rename services.{derived}",
                    )


def _env_paths(r: Rules) -> Iterator[Path]:
    for path, _kind, _unit in r.deployments():
        yield (*path, "env")
    yield ("driver", "env")


@rule
def env_values(r: Rules) -> None:
    """Every env value says where it comes from; the names must be ones a shell can set."""
    for env in _env_paths(r):
        for key, value in r.mapping(env).items():
            path = (*env, key)
            if not (isinstance(key, str) and is_shell_name(key)):
                r.error(path, f"`{key}` is not a valid environment variable name", VAR_FIX)
            if not isinstance(value, str) or not r.ok(path):
                continue
            kind, sep, var = value.partition(":")
            if not sep or kind not in ("lit", "host", "runtime"):
                r.error(path, f"the value of {key} has no lit:, host: or runtime: prefix", ENV_FIX)
            elif kind != "lit" and not is_shell_name(var):
                r.error(
                    path,
                    f"{kind}:{var} does not name a valid environment variable",
                    f"write {kind}:VAR with VAR made of letters, digits and _, not starting with a digit",
                )


def _walltime(r: Rules, path: Path, *, unlimited: bool = False) -> None:
    value = r.get(path)
    if isinstance(value, str) and not is_walltime(value, unlimited=unlimited):
        extra = ", or UNLIMITED" if unlimited else ""
        r.error(
            path,
            f"`{value}` is not a Slurm time",
            f"use {FORMS}{extra} (e.g. 04:00:00 or 1-00:00:00)",
        )


@rule
def walltimes(r: Rules) -> None:
    for name in r.mapping(("compute",)):
        _walltime(r, ("compute", name, "walltime"), unlimited=True)
    for path, bench in r.benchmarks():
        if isinstance(bench.get("resumable"), dict):
            _walltime(r, (*path, "resumable", "max_walltime"))


def _mount_problem(mount: str) -> str | None:
    """What is wrong with one entry of `mounts`. An entry may hold several mounts separated by commas,
    as pyxis's --container-mounts does (NeMo Gym passes them so): each one is checked."""
    for one in mount.split(","):
        problem = _one_mount_problem(one)
        if problem:
            return problem if one == mount else f"has `{one}`, which {problem}"
    return None


def _one_mount_problem(mount: str) -> str | None:
    parts = mount.split(":")
    if len(parts) > 3 or any(not p for p in parts):
        return "is not src[:dst[:flags]]"
    if not parts[0].startswith("/"):
        return "has a relative source; it must be an absolute path on the cluster"
    if len(parts) > 1 and not parts[1].startswith("/"):
        return "has a relative destination; it must be an absolute path in the container"
    return None


@rule
def mounts(r: Rules) -> None:
    units: list[Path] = [path for path, _kind, _unit in r.deployments()]
    for base in [*units, ("driver",)]:
        items = r.get((*base, "mounts"))
        for index, mount in enumerate(items if isinstance(items, list) else []):
            problem = _mount_problem(mount) if isinstance(mount, str) else None
            if problem:
                r.error(
                    (*base, "mounts", index),
                    f"mount `{mount}` {problem}",
                    "write /absolute/src[:/absolute/dst[:flags]], e.g. /lustre/data:/data:ro",
                )


@rule
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


# --- otel ---------------------------------------------------------------------------------------------


@rule
def otel(r: Rules) -> None:
    """With the collector on (the default) it needs a destination, and Gym telemetry needs gym_install."""
    section = r.mapping(("otel",))
    token = section.get("token_env")
    if isinstance(token, str) and not is_shell_name(token):  # NeMo Gym checks it even with the collector off
        r.error(("otel", "token_env"), f"`{token}` is not a valid environment variable name", VAR_FIX)
    if section.get("enabled") is not True or not r.ok(("otel", "enabled")):
        return
    for key, example in (("endpoint", "https://otlp.example.com"), ("service_name", "my-eval")):
        if not section.get(key) and r.ok(("otel", key)):
            r.error(
                ("otel", key),
                f"the collector is enabled (the default) but otel.{key} is not set",
                f"set otel.{key} (e.g. {example}), or set otel.enabled: false",
            )
    if (
        section.get("gym_telemetry") is True
        and r.ok(("otel", "gym_telemetry"), ("driver", "gym_install"))
        and isinstance(r.get(("driver",)), dict)
        and r.get(("driver", "gym_install")) is None
    ):
        r.error(
            ("otel", "gym_telemetry"),
            "Gym telemetry is on but driver.gym_install is not set (the telemetry extra is installed there)",
            "set otel.gym_telemetry: false, or add driver.gym_install: {repo: <git url>, ref: <ref>}",
        )


def check(tree: dict[str, Any], bad: list[Path]) -> tuple[list[Problem], list[str]]:
    """Fill the defaults that depend on other fields, then run every rule; (problems, warnings)."""
    r = Rules(tree, bad)
    fill_placement(tree, r)
    for each in RULES:
        each(r)
    return r.problems, r.warnings
