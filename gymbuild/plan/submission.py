"""The whole plan: what a submission's benchmarks share, planned once, and each benchmark's plan."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Protocol

from gymbuild.config.model import Config, EnvValue
from gymbuild.config.walltime import job_walltime_seconds, walltime_seconds
from gymbuild.errors import UserError
from gymbuild.plan.checks import _env, _mounts
from gymbuild.plan.collector import _collector, _collector_ports
from gymbuild.plan.directives import _config_directives, _directive
from gymbuild.plan.driver import _driver, _otel_env, _policy
from gymbuild.plan.model import (
    BenchPlan,
    DriverStep,
    EnvEntry,
    ExecutorTraits,
    GymInstallPlan,
    Ref,
    ResumePlan,
    ServiceStep,
    SharedParts,
)
from gymbuild.plan.placement import _Ports, driver_nodes, node_host, pool_ranges
from gymbuild.plan.services import _service_steps


def _secret_names(steps: Iterable[ServiceStep], driver: DriverStep) -> tuple[str, ...]:
    names: dict[str, None] = {}
    for env in [*(s.env for s in steps), driver.env]:
        for entry in env:
            if isinstance(entry.value, EnvValue) and entry.value.kind == "host":
                names[entry.value.value] = None
    return tuple(names)


def _shared(config: Config, gym_job_id: str) -> SharedParts:
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
    return SharedParts(
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
        walltime_seconds=job_walltime_seconds(walltime) if walltime else None,
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


def plan_benchmark(
    config: Config, executor: ExecutorTraits, bench: str, *, run_dir: str, gym_job_id: str
) -> BenchPlan:
    """Every decision for one benchmark's job. Raises UserError for what the config cannot express."""
    return planner(config, executor, run_dir=run_dir, gym_job_id=gym_job_id)(bench)


def _plan(
    config: Config,
    executor: ExecutorTraits,
    shared: SharedParts,
    bench: str,
    *,
    run_dir: str,
    gym_job_id: str,
    shard: int | None = None,
) -> BenchPlan:
    """One benchmark's plan around the parts it shares with the submission's other benchmarks; with
    `shard` (k), the job of its shard k, in its own directory under the benchmark's."""
    benchmark = config.driver.benchmarks[bench]
    bench_dir = f"{run_dir.rstrip('/')}/{bench}"
    where = None
    if shard is not None:
        where = (shard, benchmark.shards)
        bench, bench_dir = shard_name(bench, shard), f"{bench_dir}/{shard_rel_dir(shard)}"
    collector = _collector(config, shared, bench=bench, bench_dir=bench_dir, gym_job_id=gym_job_id)
    driver = _driver(config, shared, benchmark, bench_dir=bench_dir, shard=where)
    scheduled = executor.scheduled
    resume = None
    if benchmark.resumable and scheduled:  # a resume chain needs sbatch and sacct
        limit = benchmark.resumable.max_walltime
        budget = config.driver.budget
        resume = ResumePlan(
            max_retries=benchmark.resumable.max_retries,
            max_walltime_seconds=walltime_seconds(limit) if limit else None,
            script=f"{bench_dir}/job.sh",
            budget_attempts=budget.attempts if budget else None,
            budget_gpu_hours=budget.gpu_hours if budget else None,
            gpus=sum((p.gpus_per_node or 0) * p.nodes for p in config.compute.node_pools.values()),
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
        executor=executor.name,
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


class Planner(Protocol):
    """Plans a benchmark's job, or (`shard`: k) the job of its shard k."""

    def __call__(self, bench: str, shard: int | None = None) -> BenchPlan: ...


def shard_name(bench: str, shard: int) -> str:
    """A shard's job's name: its benchmark's and its number, joined by a `+` no benchmark name has."""
    return f"{bench}+shard{shard}"


SHARD_MARK = "+shard"


def shard_of(name: str) -> tuple[str, int] | None:
    """(benchmark, k) of a shard's job name (`shard_name`), None for any other name: what queue,
    record and status key a shard's own outcome by."""
    bench, mark, number = name.rpartition(SHARD_MARK)
    return (bench, int(number)) if mark and bench and number.isdigit() else None


def shard_units(bench: str, count: int) -> tuple[str, ...]:
    """What a benchmark queues as jobs: itself, or (`shards: K`, K > 1) its K shards' names in order."""
    return tuple(shard_name(bench, k) for k in range(count)) if count > 1 else (bench,)


def shard_rel_dir(shard: int) -> str:
    """Where shard k's job runs, relative to its benchmark's directory."""
    return f"shards/{shard}"


def planner(config: Config, executor: ExecutorTraits, *, run_dir: str, gym_job_id: str) -> Planner:
    """Plan the shared parts now, each benchmark when asked: a re-submit that queues ten of a thousand
    benchmarks plans ten. `executor`: what the plan needs of the executor (passed in: the plan imports
    none). Raises UserError for what the config cannot express."""
    _check_run_dir(run_dir)
    shared = _shared(config, gym_job_id)

    def plan(bench: str, shard: int | None = None) -> BenchPlan:
        if bench not in config.driver.benchmarks:
            known = ", ".join(config.driver.benchmarks)
            raise UserError(f"unknown benchmark {bench!r}; the config has: {known}")
        if shard is not None and not 0 <= shard < config.driver.benchmarks[bench].shards:
            raise UserError(f"driver.benchmarks.{bench}.shards: it has no shard {shard}")
        return _plan(config, executor, shared, bench, run_dir=run_dir, gym_job_id=gym_job_id, shard=shard)

    return plan


def plan_submission(
    config: Config, executor: ExecutorTraits, *, run_dir: str, gym_job_id: str
) -> dict[str, BenchPlan]:
    """One plan per benchmark, in the config's order; the parts they share are planned once."""
    plan = planner(config, executor, run_dir=run_dir, gym_job_id=gym_job_id)
    return {name: plan(name) for name in config.driver.benchmarks}


def plan_shards(plan: Planner, config: Config, bench: str) -> tuple[BenchPlan, ...]:
    """The jobs of `bench`'s shards, in order: none for a benchmark that is not sharded."""
    count = config.driver.benchmarks[bench].shards
    return tuple(plan(bench, k) for k in range(count)) if count > 1 else ()
