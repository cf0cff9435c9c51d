"""The decisions behind one benchmark's job, made once, in plain data, before any text is written.

A `BenchPlan` says where every step runs, which ports it tries first, what environment it gets and
what the driver runs. Templates (gymbuild/render) only turn it into bash; they decide nothing. Keeping
the decisions here makes them testable without parsing shell. Each part has a canonical JSON text
(`canonical_json`), which the renderer keys the parts it renders once on: equal text, equal script.

Pure: no I/O, no clock, no environment. Secrets stay references (`EnvValue("host", VAR)`) until
render time, so a plan can be printed, hashed and stored without leaking anything.

Placement (seed 003, "Where services run"):
- a single-node allocation: everything shares node 0;
- a vLLM service without `node_pool` on several nodes: spans every node;
- any other unpinned service: one node, the driver's;
- a pinned service: its pool's nodes (pools take contiguous node ranges in declaration order);
- the driver: node 0, or the first node of the policy's pool when the policy is pinned.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any, ClassVar, Literal

from gymbuild.config.model import (
    Benchmark,
    CommandService,
    Config,
    EnvValue,
    RayService,
    Service,
    VllmPdService,
    VllmService,
)
from gymbuild.errors import UserError
from gymbuild.executors.base import executor_for

# --- canonical JSON: what the renderer keys the parts it renders once on ---------------------------


def _dataclass_layout(kind: type) -> tuple[tuple[str, str | None], ...]:
    """(`"key":` text, field name) per key of a dataclass's JSON object, in sorted key order; the
    field name is None for `__type__`, whose value is the class name."""
    keys: list[tuple[str, str | None]] = [(f.name, f.name) for f in fields(kind)]
    keys.append(("__type__", None))
    return tuple((json.dumps(key) + ":", name) for key, name in sorted(keys))


_LAYOUTS: dict[type, tuple[tuple[str, str | None], ...]] = {}
_encode_str = json.encoder.encode_basestring_ascii  # what json.dumps does with a str (C)


def _dataclass_json(value: Any) -> str:
    kind = type(value)
    layout = _LAYOUTS.get(kind)
    if layout is None:
        layout = _LAYOUTS[kind] = _dataclass_layout(kind)
    type_name = _encode_str(kind.__name__)
    items = [
        key + (type_name if name is None else canonical_json(getattr(value, name))) for key, name in layout
    ]
    return "{" + ",".join(items) + "}"


class _Canonical:
    """Base of the plan's dataclasses: each keeps its canonical JSON text once it is computed.

    A submission's plans share their config-level parts (service steps, pools, ...) as the same
    objects (`planner`), so such a part is encoded once however many benchmarks carry it: encoding
    every plan of a 1000-benchmark submission walked the same service steps 1000 times.
    Frozen, so the kept text cannot go stale; `replace()` makes a new object with nothing kept.
    """

    @property
    def canonical_json(self) -> str:
        # Kept in the instance's __dict__ by hand: functools.cached_property takes a lock per access
        # in Python 3.11, which cost more than it saved.
        kept = self.__dict__.get("_canonical_json")
        if kept is None:
            kept = self.__dict__["_canonical_json"] = _dataclass_json(self)
        return kept


def canonical_json(value: Any) -> str:
    """The text `json.dumps(form, sort_keys=True, separators=(",", ":"))` gives for the JSON form of a
    plan value: a dataclass as an object of its fields plus `"__type__": <class name>`, tuples and
    lists as arrays, mappings with str keys. Written directly, without building the form first (the
    generic walk was ~0.1 ms a benchmark). Types stay apart (1, 1.0, true and "1" render differently,
    so their texts must differ, or a part rendered once for one would be reused for another)."""
    encode = _BY_TYPE.get(type(value))
    if encode is not None:
        return encode(value)
    if isinstance(value, _Canonical):
        return value.canonical_json
    if is_dataclass(value) and not isinstance(value, type):
        return _dataclass_json(value)
    if isinstance(value, Mapping):
        keyed = {str(k): v for k, v in value.items()}
        return "{" + ",".join(f"{_encode_str(k)}:{canonical_json(keyed[k])}" for k in sorted(keyed)) + "}"
    if isinstance(value, tuple | list):
        return _array_json(value)
    if isinstance(value, str | int | float):  # a subclass (an enum member): json.dumps knows how
        return json.dumps(value)
    raise TypeError(f"a plan holds a {type(value).__name__}, which has no canonical JSON form")


def _array_json(value: tuple[Any, ...] | list[Any]) -> str:
    return "[" + ",".join(map(canonical_json, value)) + "]"


_BY_TYPE: dict[type, Callable[[Any], str]] = {  # the exact types a plan is made of, looked up first
    str: _encode_str,
    tuple: _array_json,
    int: int.__repr__,
    bool: lambda value: "true" if value else "false",
    type(None): lambda _: "null",
    float: json.dumps,  # NaN and Infinity as json.dumps writes them
    list: _array_json,
}


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
# What a launched step is to the job; an executor's `launch` reads it (slurm.j2 names the driver step).
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


@dataclass(frozen=True)
class ResumePlan(_Canonical):
    max_retries: int
    max_walltime_seconds: int | None
    script: str  # the job script the successor runs (absolute)


@dataclass(frozen=True)
class BenchPlan(_Canonical):
    bench: str
    bench_dir: str
    run_dir: str
    gym_job_id: str
    executor: Literal["slurm", "local"]  # picks the template of the executor's parts (render/)
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


# --- override flattening (Hydra grammar) ---------------------------------------------------------------

_HYDRA_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
# A dotted `run` key (`server.timeout: 5`) is a path, as NeMo Gym writes it (`+server.timeout=5`).
_HYDRA_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_][A-Za-z0-9_-]*)*")
# Characters Hydra reads bare as one primitive: a string made only of them parses exactly as the bare
# text NeMo Gym writes (`5` -> 5, `true` -> True, `1e-5` -> 1e-05, `007` -> '007', `a/b:c` -> 'a/b:c').
_HYDRA_BARE = re.compile(r"[A-Za-z0-9_./@%+:*?|-]+")


def hydra_value(value: Any, where: str = "") -> str:
    """A value as a `gym eval run` override, parsed by Hydra to what NeMo Gym 0.7.0's override gives.

    NeMo Gym writes `+key=<str(value)>`, so Hydra re-types a string: `limit: ${oc.env:LIMIT}` reaching
    the config as "5" arrives in gym as the int 5, and "true" as a bool. A string made of Hydra's bare
    characters is therefore written bare, and parses exactly like NeMo Gym's text. Any other string
    (spaces, commas, quotes, brackets, `${...}`, non-ASCII) is single-quoted with Hydra's escapes: NeMo
    Gym's bare text there either stops the job at start (`it's`, `a=b`, `#`), becomes a sweep (`a,b`)
    or parses as the same string, so the quoted form keeps the job running with what the user wrote.
    `None` is `null` (NeMo Gym writes `None`, which Hydra reads as the string 'None'; null is what the
    YAML means). `${...}` is left alone on purpose: a user who wrote `\\${x}` wants gym to see `${x}`.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        if _HYDRA_BARE.fullmatch(value):
            return value
        # Backslashes only need doubling where they precede a quote or end the string.
        escaped = re.sub(r"(\\+)(?='|\Z)", lambda m: m.group(1) * 2, value)
        return "'" + escaped.replace("'", "\\'") + "'"
    if isinstance(value, Mapping):
        items = []
        for key, item in value.items():
            if not isinstance(key, str) or not _HYDRA_KEY.fullmatch(key):
                raise UserError(f"{where}: key {key!r} cannot be written as a Hydra dict key")
            items.append(f"{key}:{hydra_value(item, f'{where}.{key}')}")
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(hydra_value(v, where) for v in value) + "]"
    raise UserError(f"{where}: {type(value).__name__} values cannot be passed to gym")


def flatten_overrides(tree: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """`{a: {b: 1}, c: [x, y], d.e: 2}` -> `+a.b=1`, `+c=[x,y]`, `+d.e=2`, as NeMo Gym flattens `run`.

    Nested keys are dotted and lists kept whole; an empty mapping gives no override at all (NeMo Gym
    writes nothing for it, and `+k={}` would add a key gym's config never had).
    """
    out: list[str] = []

    def walk(prefix: str, node: Mapping[str, Any], path: str) -> None:
        for key, value in node.items():
            if not isinstance(key, str) or not _HYDRA_PATH.fullmatch(key):
                raise UserError(
                    f"{path}: key {key!r} is not a Hydra key (letters, digits, _ and -, not first a digit; "
                    "dots separate nested keys)"
                )
            dotted = f"{prefix}{key}"
            if isinstance(value, Mapping):
                walk(f"{dotted}.", value, f"{path}.{key}")
            else:
                out.append(f"+{dotted}={hydra_value(value, f'{path}.{key}')}")

    walk("", tree, where)
    return tuple(out)


# --- small helpers ---------------------------------------------------------------------------------------

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DIRECTIVE_UNSAFE = re.compile(r'["\n\r\\]')
_WALLTIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def walltime_seconds(text: str) -> int:
    """Slurm time (`MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`) in seconds."""
    m = _WALLTIME.match(text.strip())
    if not m:
        raise UserError(f"walltime {text!r} is not a Slurm time (MM, MM:SS, HH:MM:SS, D-HH[:MM[:SS]])")
    days, a, b, c = m.groups()
    nums = [int(x) for x in (a, b, c) if x is not None]
    if days is not None:  # D-HH, D-HH:MM, D-HH:MM:SS
        h, mi, s = [*nums, 0, 0][:3]
        return int(days) * 86400 + h * 3600 + mi * 60 + s
    if len(nums) == 1:
        return nums[0] * 60
    if len(nums) == 2:
        return nums[0] * 60 + nums[1]
    return nums[0] * 3600 + nums[1] * 60 + nums[2]


def shell_name(name: str) -> str:
    """A config name as part of a shell variable name: upper case, other characters as `_`."""
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def _directive(key: str, value: Any, where: str) -> tuple[str, str | None]:
    """sbatch reads `#SBATCH` lines itself (double quotes group words); refuse what it cannot carry."""
    text = None if value is None or value is True else str(value)  # None: a bare flag
    for part in (key, text or ""):
        if _DIRECTIVE_UNSAFE.search(part):
            raise UserError(
                f"{where}: {part!r} cannot be written as an #SBATCH directive "
                "(no double quotes, backslashes or newlines)"
            )
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_-]*$", key):
        raise UserError(f"{where}: {key!r} is not an sbatch option name")
    return key, text


def _env(env: Mapping[str, EnvValue], where: str) -> tuple[EnvEntry, ...]:
    for key in env:
        if not _IDENT.match(key):
            raise UserError(f"{where}.env: {key!r} is not a shell variable name")
    return tuple(EnvEntry(k, v) for k, v in env.items())


def _mounts(mounts: Iterable[str], where: str) -> tuple[str, ...]:
    """`--container-mounts` is comma-separated: a comma inside one mount would split it."""
    out = tuple(mounts)
    for mount in out:
        if "," in mount or "\n" in mount:
            raise UserError(f"{where}.mounts: {mount!r} cannot contain a comma or a newline")
    return out


# --- placement ------------------------------------------------------------------------------------------


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


# --- services ------------------------------------------------------------------------------------------


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


def _health(service: Service, port: Port | None) -> Health | None:
    hc = service.health_check
    if hc is None:
        return None
    own = port is not None and (hc.port is None or hc.port == port.first)
    if not own and hc.port is None:
        raise UserError(f"services.{service.name}.health_check: no port to check (set health_check.port)")
    return Health(hc.path, max(hc.attempts, 1), None if own else hc.port)


_PORT = Ref("GYM_PORT")  # inside a step: the port this step settled


def _vllm_argv(svc: VllmService) -> tuple[Word, ...]:
    """`vllm serve` up to the service's extra_args, in NeMo Gym 0.7.0's order (its _vllm_base_flags):
    no `--host` (vLLM listens on every interface by default), `--pipeline-parallel-size` only above 1."""
    argv: list[Word] = [
        ("vllm",),
        ("serve",),
        (svc.model,),
        ("--port",),
        (_PORT,),
        ("--tensor-parallel-size",),
        (str(svc.tensor_parallel_size),),
    ]
    if svc.served_model_name:
        argv += [("--served-model-name",), (svc.served_model_name,)]
    if svc.pipeline_parallel_size > 1:
        argv += [("--pipeline-parallel-size",), (str(svc.pipeline_parallel_size),)]
    return tuple(argv)


def _kv_transfer(kv_transfer: Mapping[str, str] | None) -> list[Word]:
    if not kv_transfer:
        return []
    return [("--kv-transfer-config",), (json.dumps(dict(kv_transfer), separators=(",", ":")),)]


def _vllm_steps(
    config: Config,
    svc: VllmService,
    ports: _Ports,
    *,
    name: str,
    service: str,
    kv_transfer: Mapping[str, str] | None = None,
    pre_command: str | None = None,
    scrape: bool = True,
) -> ServiceStep:
    """One vLLM step. Its argv is NeMo Gym's, word for word: what precedes the user's extra_args in
    `argv`, what follows them in `argv_tail` (data parallel, trust-remote-code, the KV transfer)."""
    nodes = place(config, svc)
    port = ports(name, svc.port)
    argv = _vllm_argv(svc)
    tail: list[Word] = []
    aux: list[Port] = []
    mode: VllmMode = "single"
    dp_local = svc.number_of_instances
    trust: list[Word] = [("--trust-remote-code",)] if svc.trust_remote_code else []
    env = list(_env(svc.env, f"services.{service}"))
    shell_args = svc.extra_args
    if svc.ray_serve:
        # NeMo Gym's Ray Serve gateway (ours, with its command line): it starts the instances, each
        # a `vllm serve` over Ray, and routes requests across them; over several nodes it joins the
        # Ray cluster the step starts, as one instance over several nodes does.
        mode = "serve"
        gpus = [p.gpus_per_node for p in config.compute.node_pools.values() if p.gpus_per_node is not None]
        argv = (
            ("python3",),
            ("ray_serve_gateway.py",),
            ("--model",),
            (svc.model,),
            ("--port",),
            (_PORT,),
            ("--tensor-parallel-size",),
            (str(svc.tensor_parallel_size),),
            ("--pipeline-parallel-size",),
            (str(svc.pipeline_parallel_size),),
            ("--number-of-instances",),
            (str(svc.number_of_instances),),
        )
        if gpus:
            tail += [("--gpus-per-node",), (str(max(gpus)),)]
        tail += trust
        if svc.served_model_name:
            tail += [("--served-model-name",), (svc.served_model_name,)]
        if svc.extra_args:  # handed to the gateway as one word, which splits it for `vllm serve`
            tail += [("--extra-args",), (svc.extra_args,)]
        shell_args = ""
        if nodes.count > 1:
            aux.append(ports(f"{name}.ray", 6379))
            env.append(EnvEntry("GYM_STEP_HEAD_IP", Ref(f"GYM_NODE_IPS[{nodes.first}]")))
    elif nodes.count > 1 and svc.server_per_node:
        # A vllm_pd tier with server_per_node: an independent single-node server on every node.
        mode = "per_node"
        if svc.number_of_instances > 1:
            tail += [("--data-parallel-size",), (str(svc.number_of_instances),)]
        tail += [*trust, *_kv_transfer(kv_transfer)]
    elif nodes.count > 1:
        if svc.number_of_instances > 1:
            if svc.number_of_instances % nodes.count:
                raise UserError(
                    f"services.{service}: number_of_instances {svc.number_of_instances} is not a "
                    f"multiple of its {nodes.count} nodes"
                )
            # vLLM's multi-node data parallel: one `vllm serve` per node, the first serving the API,
            # the others headless from their start rank (added by the step on those nodes).
            mode, dp_local = "dp", svc.number_of_instances // nodes.count
            aux.append(ports(f"{name}.rpc", svc.data_parallel_rpc_port))
            tail += _kv_transfer(kv_transfer)
            tail += [
                ("--data-parallel-size",),
                (str(svc.number_of_instances),),
                ("--data-parallel-size-local",),
                (str(dp_local),),
                ("--data-parallel-address",),
                (Ref("GYM_STEP_HEAD_IP"),),
                ("--data-parallel-rpc-port",),
                (Ref("GYM_RPC_PORT"),),
                *trust,
            ]
            # NeMo Gym: the allocation's head IP for a service on every node, its pool's first
            # hostname for a pinned one.
            head = Ref(f"GYM_NODES[{nodes.first}]") if nodes.pool else Ref(f"GYM_NODE_IPS[{nodes.first}]")
            env.append(EnvEntry("GYM_STEP_HEAD_IP", head))
        else:
            # One instance over several nodes through vLLM's Ray executor (`ray symmetric-run`).
            mode = "ray"
            aux.append(ports(f"{name}.ray", 6379))
            tail += [*trust, *_kv_transfer(kv_transfer), ("--distributed-executor-backend",), ("ray",)]
            env.append(EnvEntry("GYM_STEP_HEAD_IP", Ref(f"GYM_NODE_IPS[{nodes.first}]")))
    else:
        if svc.number_of_instances > 1:
            tail += [("--data-parallel-size",), (str(svc.number_of_instances),)]
        tail += [*trust, *_kv_transfer(kv_transfer)]
    return ServiceStep(
        name=name,
        service=service,
        kind="vllm",
        container=svc.container,
        nodes=nodes,
        mounts=_mounts(svc.mounts, f"services.{service}"),
        env=tuple(env),
        pre_command=svc.pre_command if pre_command is None else pre_command,
        port=port,
        argv=argv,
        argv_tail=tuple(tail),
        shell_args=shell_args,
        drop_args=("--api-server-count",) if mode == "dp" else (),
        vllm_mode=mode,
        dp_local=dp_local,
        aux_ports=tuple(aux),
        health=_health(svc, port),
        metrics_job=f"{config.otel.component}/{name}" if scrape else None,
    )


def _nixl_pre_command(tier: VllmService) -> str:
    """NeMo Gym's exports before a tier's `vllm serve`: the side-channel host is the node's own
    name, known only on the node, so these are shell statements ahead of the user's pre_command."""
    nixl = (
        "export VLLM_NIXL_SIDE_CHANNEL_HOST=$(hostname)\n"
        f"export VLLM_NIXL_SIDE_CHANNEL_PORT={tier.nixl_side_channel_port}"
    )
    return f"{nixl}\n{tier.pre_command}" if tier.pre_command else nixl


def _vllm_pd_steps(config: Config, svc: VllmPdService, ports: _Ports) -> list[ServiceStep]:
    """Prefill and decode tiers on their pools, then NeMo Gym's vllm-router under the service's name,
    addressing each tier's first node (or, with server_per_node, every node of the tier)."""
    assert svc.prefill is not None and svc.decode is not None
    tiers = [
        _vllm_steps(
            config,
            tier,
            ports,
            name=tier.name,
            service=svc.name,
            kv_transfer=tier.kv_transfer_config,
            pre_command=_nixl_pre_command(tier),
        )
        for tier in (svc.prefill, svc.decode)
    ]
    port = ports(svc.name, svc.port)
    endpoints: list[Word] = []
    needs: list[Port] = []
    env = list(_env(svc.env, f"services.{svc.name}"))
    for flag, step in (("--prefill", tiers[0]), ("--decode", tiers[1])):
        assert step.port is not None
        count = step.nodes.count if step.vllm_mode == "per_node" else 1
        for i in range(count):
            need = step.port if count == 1 else ports(f"{step.port.key}.{i}", step.port.first)
            host = f"GYM_{shell_name(flag[2:])}_HOST_{i}"
            env.append(EnvEntry(host, node_host(config, Nodes(step.nodes.first + i, 1))))
            needs.append(need)
            endpoints += [(flag,), ("http://", Ref(host), ":", Ref(need.var))]
    argv: tuple[Word, ...] = (
        ("vllm-router",),
        ("--prefill-policy",),
        (svc.prefill_policy,),
        ("--decode-policy",),
        (svc.decode_policy,),
        ("--vllm-pd-disaggregation",),
        *endpoints,
        # All interfaces: the driver and the health probe reach it over localhost.
        ("--host",),
        ("0.0.0.0",),
        ("--port",),
        (_PORT,),
        ("--intra-node-data-parallel-size",),
        (str(svc.intra_node_data_parallel_size),),
        ("--request-timeout-secs",),
        (str(svc.request_timeout_secs),),
        ("--log-level",),
        (svc.log_level,),
    )
    router = ServiceStep(
        name=svc.name,
        service=svc.name,
        kind="router",
        container=svc.container,
        nodes=place(config, svc),
        mounts=_mounts(svc.mounts, f"services.{svc.name}"),
        env=tuple(env),
        pre_command=svc.pre_command,
        port=port,
        argv=argv,
        needs=tuple(needs),
        health=_health(svc, port),
        metrics_job=f"{config.otel.component}/{svc.name}",  # NeMo Gym scrapes every model service
    )
    return [*tiers, router]


# `ray start` refuses these on a worker; they reach workers through the service's shared extra_args.
_RAY_HEAD_ONLY_FLAGS = ("--port", "--redis-shard-ports", "--include-dashboard")


def _ray_resources(resources: Mapping[str, float] | None) -> list[Word]:
    """`--resources=<json>` as NeMo Gym writes it: sorted keys, a whole number as an int."""
    if not resources:
        return []
    whole = {k: int(v) if float(v).is_integer() else v for k, v in resources.items()}
    return [(f"--resources={json.dumps(whole, sort_keys=True)}",)]


def ray_address_var(service: str) -> str:
    """The variable with a Ray service's head `ip:port` (NeMo Gym's GYM_RAY_ADDRESS_<SERVICE>)."""
    return f"GYM_RAY_ADDRESS_{shell_name(service)}"


def ray_workers_var(service: str, pool: str) -> str:
    """The variable with a Ray service's worker hosts in one pool (NeMo Gym's name)."""
    return f"GYM_RAY_{shell_name(service)}_{shell_name(pool)}_WORKERS"


def _ray_steps(config: Config, svc: RayService, ports: _Ports) -> list[ServiceStep]:
    """NeMo Gym's Ray cluster: the head on the driver's node, then one worker step per spanned pool
    on that pool's other nodes. Without node_pools, a single-node cluster: the head alone."""
    where = f"services.{svc.name}"
    driver = driver_nodes(config)
    port = ports(svc.name, svc.port)
    address = ray_address_var(svc.name)
    multi = config.compute.total_nodes > 1
    ranges = {rng.name: rng for rng in pool_ranges(config)}
    head_pool = next(
        (name for name, rng in ranges.items() if rng.first <= driver.first < rng.first + rng.count), None
    )

    def resources(pool: str | None) -> list[Word]:
        return _ray_resources(svc.resources.get(pool) if pool is not None else None)

    common: list[Word] = []
    if svc.num_cpus is not None:
        common += [("--num-cpus",), (str(svc.num_cpus),)]
    if svc.num_gpus is not None:
        common += [("--num-gpus",), (str(svc.num_gpus),)]
    # The head binds the address workers and the driver dial: its node's IP (a single node finds
    # its own, in the step).
    head_env = (EnvEntry("GYM_STEP_HEAD_IP", Ref(f"GYM_NODE_IPS[{driver.first}]")),) if multi else ()
    head_argv: tuple[Word, ...] = (
        ("ray",),
        ("start",),
        ("--block",),
        ("--head",),
        ("--port",),
        (_PORT,),
        ("--node-ip-address",),
        (Ref("GYM_STEP_HEAD_IP"),),
        *common,
        *resources(head_pool if head_pool in svc.node_pools else None),
    )
    env = _env(svc.env, where)
    steps = [
        ServiceStep(
            name=svc.name,
            service=svc.name,
            kind="ray_head",
            container=svc.container,
            nodes=Nodes(driver.first, 1, None),
            mounts=_mounts(svc.mounts, where),
            env=(*env, *head_env),
            pre_command=svc.pre_command,
            port=port,
            argv=head_argv,
            shell_args=svc.extra_args,
            health=_health(svc, port),
            address_var=address,
        )
    ]
    # A worker only joins a running head, and the head may still be installing.
    wait = f'until ray status --address "${address}" >/dev/null 2>&1; do sleep 5; done'
    pre = f"{svc.pre_command.rstrip()}\n{wait}".lstrip()
    for pool in svc.node_pools:
        rng = ranges[pool]
        first, count = rng.first, rng.count
        if first == driver.first:
            first, count = first + 1, count - 1
        if count <= 0:
            continue
        steps.append(
            ServiceStep(
                name=f"{svc.name}_{pool}_workers",
                service=svc.name,
                kind="ray_worker",
                container=svc.container,
                nodes=Nodes(first, count, pool if (first, count) == (rng.first, rng.count) else None),
                mounts=_mounts(svc.mounts, where),
                env=env,
                pre_command=pre,
                port=None,
                argv=(
                    ("ray",),
                    ("start",),
                    ("--block",),
                    ("--address",),
                    (Ref(address),),
                    *common,
                    *resources(pool),
                ),
                shell_args=svc.extra_args,
                drop_args=_RAY_HEAD_ONLY_FLAGS,
                exported_vars=(ray_workers_var(svc.name, pool),),
            )
        )
    return steps


def _command_step(config: Config, svc: CommandService, ports: _Ports) -> ServiceStep:
    first = svc.port if svc.port is not None else (svc.health_check.port if svc.health_check else None)
    port = ports(svc.name, first) if first is not None else None
    where = f"services.{svc.name}"
    return ServiceStep(
        name=svc.name,
        service=svc.name,
        kind="command",
        container=svc.container,
        nodes=place(config, svc),
        mounts=_mounts(svc.mounts, where),
        env=_env(svc.env, where),
        pre_command=svc.pre_command,
        port=port,
        argv=(),
        shell_command=svc.command,
        health=_health(svc, port),
    )


def _service_steps(config: Config, ports: _Ports) -> list[ServiceStep]:
    """Every service's steps, in NeMo Gym's order: the config's services, Ray clusters last."""
    steps: list[ServiceStep] = []
    ordered = sorted(config.services.values(), key=lambda svc: isinstance(svc, RayService))
    for svc in ordered:
        if isinstance(svc, VllmPdService):
            steps += _vllm_pd_steps(config, svc, ports)
        elif isinstance(svc, VllmService):
            steps.append(_vllm_steps(config, svc, ports, name=svc.name, service=svc.name))
        elif isinstance(svc, RayService):
            steps += _ray_steps(config, svc, ports)
        elif isinstance(svc, CommandService):
            steps.append(_command_step(config, svc, ports))
        else:  # pragma: no cover - the schema admits no other type
            raise TypeError(f"unknown service type {svc.type!r}")
    return steps


# --- driver ------------------------------------------------------------------------------------------


def _policy(config: Config) -> tuple[str, int] | None:
    """(served model name, first-choice port) of the policy service, if one is set.

    A policy that serves no model (a Ray cluster) wires nothing into the benchmarks, as in NeMo Gym."""
    policy = config.policy
    if policy is None or isinstance(policy, RayService):
        return None
    if not isinstance(policy, VllmService | VllmPdService):
        raise UserError(f"driver.policy_model: {policy.name!r} is not a vllm or vllm_pd service")
    return policy.model_name, policy.port


def _otel_env(config: Config, gym_job_id: str) -> list[EnvEntry]:
    """NeMo Gym's driver_telemetry_env, with gym telemetry on: applied before driver.env so the
    user's values win. The endpoints are composed by the job (the collector's ports are settled at
    run time): traces and metrics over OTLP/HTTP, logs over gRPC (nemo-lens's log exporter is gRPC
    whatever the protocol says)."""
    otel = config.otel
    if not (otel.enabled and otel.gym_telemetry):
        return []
    return [
        EnvEntry("NEMO_GYM_OTEL_ENABLED", "1"),
        EnvEntry("NEMO_GYM_OTEL_RUN_ID", gym_job_id),
        EnvEntry("NEMO_GYM_OTEL_SPAN_GROUPS", otel.gym_span_groups),
        EnvEntry("NEMO_GYM_OTEL_LOGS_ENABLED", "1" if otel.gym_logs else "0"),
        EnvEntry("OTEL_EXPORTER_OTLP_ENDPOINT", Ref("GYM_OTEL_ENDPOINT")),
        EnvEntry("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        EnvEntry("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", Ref("GYM_OTEL_LOGS_ENDPOINT")),
    ]


def _driver(config: Config, shared: _Shared, bench: Benchmark, *, bench_dir: str) -> DriverStep:
    drv = config.driver
    where = f"driver.benchmarks.{bench.name}"
    policy, policy_port = shared.policy, shared.policy_port
    base_url: Word = ()
    base_url_batch: Word = ()
    if policy is not None and policy_port is not None:
        # Read by the driver's own shell (GYM_POLICY_PORT is in its environment) ...
        base_url = (f"http://{drv.policy_host}:", Ref("GYM_POLICY_PORT"), "/v1")
        # ... and by the batch shell, for a command benchmark's NEMO_GYM_POLICY_BASE_URL.
        base_url_batch: Word = (f"http://{drv.policy_host}:", Ref(policy_port.var), "/v1")
    env = shared.driver_env
    run: tuple[Word, ...] = ()
    if bench.command:
        own = [EnvEntry("NEMO_GYM_BENCH_DIR", bench_dir)]
        if policy is not None:
            own += [
                EnvEntry("NEMO_GYM_POLICY_BASE_URL", base_url_batch),
                EnvEntry("NEMO_GYM_POLICY_MODEL_NAME", policy[0]),
                EnvEntry("NEMO_GYM_POLICY_API_KEY", "dummy"),
            ]
        env = (*env, *own)
    else:
        words: list[Word] = [
            ("gym",),
            ("eval",),
            ("run",),
            (f"+output_jsonl_fpath={hydra_value(bench_dir + '/artifacts/rollouts.jsonl')}",),
        ]
        if drv.policy_model and drv.policy_model_type:  # also for a Ray policy, as NeMo Gym writes it
            words += [("--model-type",), (drv.policy_model_type,)]
        # NeMo Gym's order and defaults: observability_enabled first (the user's value wins, in its
        # place), the run keys, the policy, then the defaults a user did not set: the capture dir
        # (only while observability is on, by Python truth as NeMo Gym tests it), require_complete,
        # and resume_from_cache for a resumable benchmark. Each key is written once: Hydra refuses a
        # second `+key=` and the job would stop at start.
        run_keys = dict(bench.run)
        observe = run_keys.pop("observability_enabled", True)
        shown = "True" if observe is True else hydra_value(observe, f"{where}.run.observability_enabled")
        words.append((f"+observability_enabled={shown}",))
        words += [(o,) for o in flatten_overrides(run_keys, f"{where}.run")]
        if policy is not None:
            words += [
                ("+policy_base_url=", *base_url),
                (f"+policy_model_name={hydra_value(policy[0])}",),
                ("+policy_api_key=dummy",),
            ]
        if observe and "model_call_capture_dir" not in bench.run:
            words.append((f"+model_call_capture_dir={hydra_value(bench_dir + '/model-calls')}",))
        if "require_complete" not in bench.run:
            words.append(("+require_complete=True",))
        if bench.resumable and "resume_from_cache" not in bench.run:
            words.append(("+resume_from_cache=True",))
        run = tuple(words)
    return DriverStep(
        container=drv.container,
        nodes=shared.driver_nodes,
        mounts=(f"{bench_dir}:{bench_dir}", *shared.driver_mounts),
        env=env,
        install=shared.install,
        prepare=flatten_overrides(bench.prepare, f"{where}.prepare"),
        run=run,
        command=bench.command,
        policy_port=policy_port,
    )


# --- the whole plan ------------------------------------------------------------------------------------


def _config_directives(
    config: Config,
) -> tuple[tuple[tuple[str, str | None], ...], tuple[tuple[str, str | None], ...]]:
    """The `#SBATCH` directives every benchmark shares: those between its job-name and its chdir, and
    those after its chdir (the order sbatch sees them in is the order written)."""
    compute = config.compute
    where = f"compute.{compute.name}"
    before = []
    if compute.account:
        before.append(_directive("account", compute.account, f"{where}.account"))
    if compute.walltime:
        before.append(_directive("time", compute.walltime, f"{where}.walltime"))
    after = [("output", "logs/slurm-%j.log")]
    pools = list(compute.node_pools.values())
    if pools:
        first = pools[0]
        after.append(_directive("partition", first.partition, f"{where}.node_pools.{first.name}.partition"))
        after.append(("nodes", str(compute.total_nodes)))
        after.append(("ntasks-per-node", str(first.ntasks_per_node)))
        if first.gpus_per_node is not None:
            after.append(("gpus-per-node", str(first.gpus_per_node)))
    extra: dict[str, Any] = dict(compute.extra_args)
    for pool in pools:
        extra.update(pool.extra_args)
    # sbatch's flags take no value (`--hold=true` is refused): `true` writes the bare flag, `false`
    # writes nothing, so a pool can switch off what the cluster's extra_args switched on.
    after += [_directive(k, v, f"{where}.extra_args.{k}") for k, v in extra.items() if v is not False]
    return tuple(before), tuple(after)


def _collector_ports(config: Config, ports: _Ports) -> tuple[Port, Port, Port] | None:
    """The collector's grpc, http and health ports (settled first, before any service's), when it is on."""
    otel = config.otel
    if not otel.enabled:
        return None
    if not otel.endpoint or not otel.service_name:
        raise UserError("otel: the collector is enabled, so otel.endpoint and otel.service_name are required")
    if not _IDENT.match(otel.token_env):
        raise UserError(f"otel.token_env: {otel.token_env!r} is not a shell variable name")
    return ports("otel-grpc", 4317), ports("otel-http", 4318), ports("otel-health", 13133)


def _collector(
    config: Config, shared: _Shared, *, bench: str, bench_dir: str, gym_job_id: str
) -> CollectorPlan | None:
    if shared.collector_ports is None:
        return None
    otel = config.otel
    grpc, http, health = shared.collector_ports
    return CollectorPlan(
        binary=otel.binary,
        container=otel.container,
        token_env=otel.token_env,
        endpoint=otel.endpoint,
        service_name=otel.service_name,
        component=otel.component,
        grpc=grpc,
        http=http,
        health=health,
        attempts=max(otel.health_check_timeout_seconds // 5, 1),
        scrape_interval_seconds=otel.scrape_interval_seconds,
        gpu_metrics_port=otel.gpu_metrics_port,
        node_metrics_port=otel.node_metrics_port,
        model=shared.policy[0] if shared.policy else "",
        cluster=config.compute.name,
        benchmark=bench,
        gym_job_id=gym_job_id,
        bench_dir=bench_dir,
        env=(
            # NeMo Gym's `env OTEL_TOKEN=${OTEL_TOKEN} SLURM_JOB_ID=${SLURM_JOB_ID}`; the token is the
            # one the header read and unset, so no other step inherits it.
            EnvEntry(otel.token_env, Ref("__gym_otel_token")),
            EnvEntry("SLURM_JOB_ID", Ref("GYM_JOB_ID")),
            *(EnvEntry(port.var, Ref(port.var)) for port in (grpc, http, health)),
        ),
        gym_telemetry=otel.gym_telemetry,
    )


def _secret_names(steps: Iterable[ServiceStep], driver: DriverStep) -> tuple[str, ...]:
    names: dict[str, None] = {}
    for env in [*(s.env for s in steps), driver.env]:
        for entry in env:
            if isinstance(entry.value, EnvValue) and entry.value.kind == "host":
                names[entry.value.value] = None
    return tuple(names)


@dataclass(frozen=True)
class _Shared:
    """The parts of a plan that come from the config (and the submission) alone, not the benchmark.

    `planner` plans them once and every benchmark's plan holds the same objects: planning them again
    per benchmark was a third of planning, and shared objects keep their canonical JSON
    (`_Canonical`), so rendering 1000 plans encodes the service steps once.
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


def _shared(config: Config, gym_job_id: str) -> _Shared:
    """Plan what every benchmark of `config` shares. Raises UserError for what the config cannot express."""
    ports = _Ports()
    collector_ports = _collector_ports(config, ports)
    services = tuple(replace(s, host=node_host(config, s.nodes)) for s in _service_steps(config, ports))
    policy = _policy(config)
    policy_port = None
    if policy is not None:
        policy_port = next(s.port for s in services if s.name == config.driver.policy_model)
    drv = config.driver
    env = _otel_env(config, gym_job_id) + list(_env(drv.env, "driver"))
    if policy_port is not None:
        env.append(EnvEntry("GYM_POLICY_PORT", Ref(policy_port.var)))
    install = None
    if drv.gym_install:
        extras = ("telemetry",) if config.otel.enabled and config.otel.gym_telemetry else ()
        install = GymInstallPlan(drv.gym_install.repo, drv.gym_install.ref, extras)
    multi = config.compute.total_nodes > 1
    vllm = any(s.kind == "vllm" for s in services)
    before, after = _config_directives(config)
    walltime = config.compute.walltime
    return _Shared(
        collector_ports=collector_ports,
        services=services,
        policy=policy,
        policy_port=policy_port,
        driver_nodes=driver_nodes(config),
        driver_env=tuple(env),
        driver_mounts=_mounts(drv.mounts, "driver"),
        install=install,
        directives_before_chdir=before,
        directives_after_chdir=after,
        walltime_seconds=walltime_seconds(walltime) if walltime else None,
        pools=pool_ranges(config),
        # NeMo Gym 0.7.0 exports the pools' hosts whenever it places services: several nodes, or a
        # service pinned to a pool on one node (user code may read them).
        pool_vars_needed=multi or any(s.nodes.pool for s in services if not s.kind.startswith("ray_")),
        node_ips_needed=multi and (vllm or any(s.nodes.count > 1 or s.kind == "ray_head" for s in services)),
        head_ip_needed=multi and vllm,
        reserved_ports=tuple(sorted(set(ports.firsts))),
    )


def _check_run_dir(run_dir: str) -> None:
    if "\n" in run_dir or "," in run_dir or ":" in run_dir:
        raise UserError(
            f"job.output_path: the run directory {run_dir!r} cannot contain ',', ':' or a newline"
        )


def plan_benchmark(config: Config, bench: str, *, run_dir: str, gym_job_id: str) -> BenchPlan:
    """Every decision for one benchmark's job. Raises UserError for what the config cannot express."""
    return planner(config, run_dir=run_dir, gym_job_id=gym_job_id)(bench)


def _plan(config: Config, shared: _Shared, bench: str, *, run_dir: str, gym_job_id: str) -> BenchPlan:
    """One benchmark's plan around the parts it shares with the submission's other benchmarks."""
    benchmark = config.driver.benchmarks[bench]
    bench_dir = f"{run_dir.rstrip('/')}/{bench}"
    collector = _collector(config, shared, bench=bench, bench_dir=bench_dir, gym_job_id=gym_job_id)
    driver = _driver(config, shared, benchmark, bench_dir=bench_dir)
    scheduled = executor_for(config).SCHEDULED
    resume = None
    if benchmark.resumable and scheduled:  # a resume chain needs sbatch and sacct
        limit = benchmark.resumable.max_walltime
        resume = ResumePlan(
            max_retries=benchmark.resumable.max_retries,
            max_walltime_seconds=walltime_seconds(limit) if limit else None,
            script=f"{bench_dir}/job.sh",
        )
    directives: tuple[tuple[str, str | None], ...] = ()
    if scheduled:
        directives = (
            _directive("job-name", f"gym-{bench}", "driver.benchmarks"),
            *shared.directives_before_chdir,
            _directive("chdir", bench_dir, "job.output_path"),
            *shared.directives_after_chdir,
        )
    return BenchPlan(
        bench=bench,
        bench_dir=bench_dir,
        run_dir=run_dir,
        gym_job_id=gym_job_id,
        executor=config.compute.type,
        directives=directives,
        walltime_seconds=shared.walltime_seconds,
        total_nodes=config.compute.total_nodes,
        pools=shared.pools,
        pool_vars_needed=shared.pool_vars_needed,
        node_ips_needed=shared.node_ips_needed,
        head_ip_needed=shared.head_ip_needed,
        collector=collector,
        services=shared.services,
        driver=driver,
        resume=resume,
        secrets=_secret_names(shared.services, driver),
        reserved_ports=shared.reserved_ports,
    )


def planner(config: Config, *, run_dir: str, gym_job_id: str) -> Callable[[str], BenchPlan]:
    """Plan the shared parts now, each benchmark when asked: a re-submit that queues ten of a thousand
    benchmarks plans ten. Raises UserError for what the config cannot express."""
    _check_run_dir(run_dir)
    shared = _shared(config, gym_job_id)

    def plan(bench: str) -> BenchPlan:
        if bench not in config.driver.benchmarks:
            known = ", ".join(config.driver.benchmarks)
            raise UserError(f"unknown benchmark {bench!r}; the config has: {known}")
        return _plan(config, shared, bench, run_dir=run_dir, gym_job_id=gym_job_id)

    return plan


def plan_submission(config: Config, *, run_dir: str, gym_job_id: str) -> dict[str, BenchPlan]:
    """One plan per benchmark, in the config's order; the parts they share are planned once."""
    plan = planner(config, run_dir=run_dir, gym_job_id=gym_job_id)
    return {name: plan(name) for name in config.driver.benchmarks}
