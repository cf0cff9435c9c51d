"""The driver step: `gym eval prepare`, then `gym eval run` or a benchmark's own command, and its env."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from gymbuild.config.model import Benchmark, Config, RayService, VllmPdService, VllmService
from gymbuild.errors import UserError
from gymbuild.plan.model import DriverStep, EnvEntry, Ref, Word
from gymbuild.plan.overrides import flatten_overrides, hydra_value

# NeMo Gym 0.7.0's head server port (nemo_gym/global_config.py DEFAULT_HEAD_SERVER_PORT): the first
# choice of the port the driver settles at run time when the benchmark's `run` names none.
DEFAULT_HEAD_SERVER_PORT = 11000

if TYPE_CHECKING:
    from gymbuild.plan.model import SharedParts


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


def _driver(
    config: Config,
    shared: SharedParts,
    bench: Benchmark,
    *,
    bench_dir: str,
    shard: tuple[int, int] | None = None,
) -> DriverStep:
    """The driver step of `bench`'s job, or of its shard `shard` = (k, K) (bench_dir is then the shard's)."""
    drv = config.driver
    where = f"driver.benchmarks.{bench.name}"
    policy, policy_port = shared.policy, shared.policy_port
    base_url: Word = ()
    base_url_batch: Word = ()
    if policy is not None and policy_port is not None:
        # Read by the driver's own shell (GYM_POLICY_PORT is in its environment) ...
        base_url = (f"http://{drv.policy_host}:", Ref("GYM_POLICY_PORT"), "/v1")
        # ... and by the batch shell, for a command benchmark's NEMO_GYM_POLICY_BASE_URL.
        base_url_batch = (f"http://{drv.policy_host}:", Ref(policy_port.var), "/v1")
    env = shared.driver_env
    run: tuple[Word, ...] = ()
    resume_from = None
    head_port = None
    if bench.command:
        own = [EnvEntry("NEMO_GYM_BENCH_DIR", _in_bench(bench_dir, "")[0])]
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
            _in_bench(bench_dir, "/artifacts/rollouts.jsonl", "+output_jsonl_fpath="),
        ]
        if drv.policy_model and drv.policy_model_type:  # also for a Ray policy, as NeMo Gym writes it
            words += [("--model-type",), (drv.policy_model_type,)]
        # NeMo Gym's order and defaults: observability_enabled first (the user's value wins, in its
        # place), the run keys, the policy, then the defaults a user did not set: the capture dir
        # (only while observability is on, by Python truth as NeMo Gym tests it), require_complete,
        # and resume_from_cache for a resumable benchmark. Each key is written once: Hydra refuses a
        # second `+key=` and the job would stop at start.
        run_keys: dict[str, object] = dict(bench.run)
        head_port = _take_head_port(run_keys, f"{where}.run")
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
            words.append(_in_bench(bench_dir, "/model-calls", "+model_call_capture_dir="))
        if "require_complete" not in bench.run:
            words.append(("+require_complete=True",))
        if shard is not None:
            # The shard driver materializes, slices and resumes by itself (gymbuild_shard.py)
            words.append(("+rollout_collection_driver=gymbuild_shard:collect",))
            index, count = shard
            env = (*env, EnvEntry("GYM_SHARD_INDEX", str(index)), EnvEntry("GYM_SHARD_COUNT", str(count)))
        elif bench.resumable and "resume_from_cache" not in bench.run:
            words.append(("+resume_from_cache=True",))
        elif "resume_from_cache" not in bench.run:
            # Not gym's default for a job that is not resumable, so its first job runs gym's own
            # command line; a resubmitted one, in the same directory, continues (driver.sh.j2).
            artifacts = f"{bench_dir}/artifacts"
            resume_from = (f"{artifacts}/rollouts.jsonl", f"{artifacts}/rollouts_materialized_inputs.jsonl")
        # After NeMo Gym's own words: the head server's port, settled by the driver on its node
        # (driver.sh.j2). `++` sets it whether or not gym's own config files name one.
        words.append(("++head_server.port=", Ref("GYM_HEAD_PORT")))
        run = tuple(words)
    return DriverStep(
        container=drv.container,
        nodes=shared.driver_nodes,
        # NeMo Gym's order: the bench dir last, so a mount of a directory above it cannot hide it
        mounts=(*shared.driver_mounts, f"{bench_dir}:{bench_dir}"),
        env=env,
        install=shared.install,
        prepare=flatten_overrides(bench.prepare, f"{where}.prepare"),
        run=run,
        command=bench.command,
        policy_port=policy_port,
        resume_from=resume_from,
        shard=shard,
        head_port=head_port,
    )


def _take_head_port(run_keys: dict[str, object], where: str) -> int:
    """The first-choice port of gym's head server, taken out of `run_keys` (`head_server.port`, dotted
    or nested), else NeMo Gym's default. The driver settles the port actually used at run time, so
    two jobs on one node (shards, array tasks, sweep cells) never both bind the same fixed one."""
    value: object = DEFAULT_HEAD_SERVER_PORT
    key = f"{where}.head_server.port"
    if "head_server.port" in run_keys:
        value = run_keys.pop("head_server.port")
    head = run_keys.get("head_server")
    if isinstance(head, Mapping) and "port" in head:
        rest = {k: v for k, v in head.items() if k != "port"}
        value = head["port"]
        if rest:
            run_keys["head_server"] = rest
        else:
            del run_keys["head_server"]
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise UserError(f"{key}: {value!r} is not a port number (1-65535); write a number, or drop the key")
    return value


def _in_bench(bench_dir: str, rel: str, key: str = "") -> Word:
    """`key` and a path in the bench dir as one word. A relative job.output_path is the submitting
    shell's, which only the job knows: the path is then the job's $GYM_BENCH_DIR (absolute there), so
    the driver, wherever it runs from, writes into the job's directory."""
    if bench_dir.startswith("/"):
        return (f"{key}{hydra_value(bench_dir + rel)}" if key else bench_dir + rel,)
    return (key, Ref("GYM_BENCH_DIR"), rel) if key else (Ref("GYM_BENCH_DIR"), rel)
