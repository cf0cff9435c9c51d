"""Every service's background steps: vLLM (and its modes), vllm_pd tiers and router, Ray, commands."""

from __future__ import annotations

import json
from collections.abc import Mapping

from gymbuild.config.model import CommandService, Config, RayService, Service, VllmPdService, VllmService
from gymbuild.errors import UserError
from gymbuild.plan.checks import _env, _mounts, shell_name
from gymbuild.plan.model import EnvEntry, Health, Nodes, Port, Ref, ServiceStep, VllmMode, Word
from gymbuild.plan.placement import _Ports, driver_nodes, node_host, place, pool_ranges


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
            batch_port=driver.first == 0,
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
