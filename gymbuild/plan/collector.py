"""The OpenTelemetry collector step of a job, when `otel` is enabled."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gymbuild.config.model import Config
from gymbuild.errors import UserError
from gymbuild.plan.model import CollectorPlan, EnvEntry, Port, Ref
from gymbuild.plan.placement import _Ports
from gymbuild.shell import is_shell_name

if TYPE_CHECKING:
    from gymbuild.plan.model import SharedParts


def _collector_ports(config: Config, ports: _Ports) -> tuple[Port, Port, Port] | None:
    """The collector's grpc, http and health ports (settled first, before any service's), when it is on."""
    otel = config.otel
    if not otel.enabled:
        return None
    if not otel.endpoint or not otel.service_name:
        raise UserError("otel: the collector is enabled, so otel.endpoint and otel.service_name are required")
    if not is_shell_name(otel.token_env):
        raise UserError(f"otel.token_env: {otel.token_env!r} is not a shell variable name")
    return ports("otel-grpc", 4317), ports("otel-http", 4318), ports("otel-health", 13133)


def _collector(
    config: Config, shared: SharedParts, *, bench: str, bench_dir: str, gym_job_id: str
) -> CollectorPlan | None:
    if shared.collector_ports is None:
        return None
    otel = config.otel
    assert otel.endpoint and otel.service_name  # _collector_ports refuses a collector without them
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
