"""validate(): the defaults the schema fills, the problems it reports, and the rules on the filled tree.

These run on plain dicts (no files, no Hydra) so each one states the config it is about.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gymbuild.config import load_config
from gymbuild.config.build import build_config
from gymbuild.config.validate import _validator, validate
from gymbuild.errors import ConfigError, Problem
from gymbuild.resources import load_schema

ROOT = Path(__file__).resolve().parents[2]


def base(**services: Any) -> dict[str, Any]:
    """A valid config: one vLLM policy (or the given services), one benchmark, the collector off."""
    return {
        "services": services
        or {"policy": {"type": "vllm", "container": "vllm/vllm-openai:v0.10.1", "model": "Qwen/Qwen3-8B"}},
        "compute": {"cluster": {"type": "slurm", "account": "gym"}},
        "driver": {"benchmarks": {"gpqa": {}}},
        "job": {"output_path": "/var/tmp/gymbuild-runs"},
        "otel": {"enabled": False},
    }


def filled(tree: dict[str, Any]) -> dict[str, Any]:
    result = validate(tree)
    assert result.problems == [], [p.render() for p in result.problems]
    return result.tree


def problems(tree: dict[str, Any]) -> list[Problem]:
    return validate(tree).problems


def paths(tree: dict[str, Any]) -> list[str]:
    return [p.path for p in problems(tree)]


# --- the schema itself ------------------------------------------------------------------------------


def test_schema_is_valid_2020_12() -> None:
    schema = load_schema("submit-config.schema.json")
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_a_filled_tree_is_valid_under_the_plain_schema() -> None:
    """Every default the filler writes is itself valid: the schema never contradicts its defaults."""
    schema = load_schema("submit-config.schema.json")
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        tree = load_config(path, environ={"OTEL_TOKEN": "t", "HF_TOKEN": "h", "WANDB_API_KEY": "w"}).tree
        plain = json.loads(json.dumps(tree, default=dict))
        assert list(jsonschema.Draft202012Validator(schema).iter_errors(plain)) == []


def test_every_field_has_a_description() -> None:
    schema = load_schema("submit-config.schema.json")
    missing = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for name, sub in node.get("properties", {}).items():
                if isinstance(sub, dict) and "description" not in sub and "$ref" not in sub:
                    missing.append(f"{where}.{name}")
            for key, sub in node.items():
                if key != "if":  # the conditions that pick a branch are not fields
                    walk(sub, f"{where}.{key}")

    walk(schema, "")
    assert missing == []


def test_the_validator_is_compiled_once() -> None:
    assert _validator() is _validator()


# --- defaults ---------------------------------------------------------------------------------------


def test_input_is_not_mutated() -> None:
    tree = base()
    before = copy.deepcopy(tree)
    validate(tree)
    assert tree == before


def test_vllm_defaults_and_health_check_on_its_port() -> None:
    tree = filled(base())
    svc = tree["services"]["policy"]
    assert svc["port"] == 8000
    assert svc["tensor_parallel_size"] == svc["pipeline_parallel_size"] == svc["number_of_instances"] == 1
    assert svc["data_parallel_rpc_port"] == 13345
    assert svc["extra_args"] == "" and svc["trust_remote_code"] is False
    assert svc["placement"] == "cluster"
    assert svc["env"] == {} and svc["mounts"] == [] and svc["pre_command"] == ""
    check = build_config(tree).services["policy"].health_check
    assert check is not None and (check.path, check.port, check.timeout_seconds) == ("/health", 8000, 60)


def test_health_check_follows_a_custom_port() -> None:
    tree = base()
    tree["services"]["policy"]["port"] = 9000
    tree["services"]["policy"]["health_check"] = {"timeout_seconds": 600}
    check = build_config(filled(tree)).services["policy"].health_check
    assert check is not None and (check.path, check.port, check.timeout_seconds) == ("/health", 9000, 600)


def test_only_the_selected_type_gets_its_defaults() -> None:
    tree = base(judge={"type": "command", "container": "c", "command": "serve"})
    svc = filled(tree)["services"]["judge"]
    assert svc["port"] is None and svc["health_check"] is None
    assert "tensor_parallel_size" not in svc


def test_ray_defaults() -> None:
    tree = base(ray={"type": "ray", "container": "r", "node_pools": ["gpu"]})
    tree["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "gpu"}}
    svc = filled(tree)["services"]["ray"]
    assert (svc["port"], svc["resources"], svc["num_cpus"], svc["num_gpus"]) == (6379, {}, None, None)
    assert svc["health_check"] is None


def test_vllm_pd_defaults_and_inheritance() -> None:
    tree = base(
        policy={
            "type": "vllm_pd",
            "container": "vllm/vllm-openai:v0.10.1",
            "model": "Qwen/Qwen3-8B",
            "prefill": {"node_pool": "a"},
            "decode": {"node_pool": "b", "tensor_parallel_size": 2},
        }
    )
    tree["compute"]["cluster"]["node_pools"] = {"a": {"partition": "gpu"}, "b": {"partition": "gpu"}}
    done = filled(tree)
    svc = done["services"]["policy"]
    assert (svc["prefill_policy"], svc["decode_policy"]) == ("cache_aware", "cache_aware")
    assert (svc["kv_connector"], svc["kv_load_failure_policy"]) == ("NixlConnector", "fail")
    assert (svc["request_timeout_secs"], svc["log_level"]) == (86400, "error")
    assert (svc["server_per_node"], svc["intra_node_data_parallel_size"]) == (False, 1)
    assert svc["nixl_side_channel_port"] == 5600
    assert svc["prefill"]["placement"] == svc["decode"]["placement"] == "cluster"
    config = build_config(done).services["policy"]
    assert config.prefill.port == 8001 and config.decode.port == 8002
    assert config.decode.model == "Qwen/Qwen3-8B" and config.decode.container == "vllm/vllm-openai:v0.10.1"
    assert config.decode.tensor_parallel_size == 2
    # NeMo Gym: decode's RPC port follows prefill's, each tier its own NIXL port and KV role, and the
    # router is health-checked on its own port.
    assert (config.prefill.data_parallel_rpc_port, config.decode.data_parallel_rpc_port) == (13345, 13346)
    assert (config.prefill.nixl_side_channel_port, config.decode.nixl_side_channel_port) == (5600, 5601)
    assert config.decode.kv_transfer_config is not None
    assert config.decode.kv_transfer_config["kv_role"] == "kv_consumer"
    assert config.health_check is not None and config.health_check.port == 8000


def test_otel_is_enabled_by_default() -> None:
    tree = base()
    del tree["otel"]
    otel = validate(tree).tree["otel"]
    assert otel["enabled"] is True
    assert otel["component"] == "gym-vllm"
    assert otel["gym_span_groups"] == "default,verify"
    assert otel["gym_logs"] is True and otel["gym_telemetry"] is True
    assert (otel["token_env"], otel["binary"]) == ("OTEL_TOKEN", "otelcol-contrib")
    assert (otel["gpu_metrics_port"], otel["node_metrics_port"]) == (9400, 9100)
    assert (otel["scrape_interval_seconds"], otel["health_check_timeout_seconds"]) == (15, 300)


@pytest.mark.parametrize("value", [True, {}, {"max_walltime": "1-00:00:00"}])
def test_resumable_true_means_three_retries(value: Any) -> None:
    tree = base()
    tree["driver"]["benchmarks"]["gpqa"]["resumable"] = value
    resumable = build_config(filled(tree)).driver.benchmarks["gpqa"].resumable
    assert resumable is not None and resumable.max_retries == 3


def test_driver_compute_and_pool_defaults() -> None:
    tree = base()
    tree["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "gpu"}}
    done = filled(tree)
    driver = done["driver"]
    assert (driver["container"], driver["policy_host"], driver["policy_model_type"]) == (
        "python:3.12",
        "localhost",
        "openai_model",
    )
    assert driver["gym_install"] is None and driver["policy_model"] is None
    bench = done["driver"]["benchmarks"]["gpqa"]
    assert bench == {"prepare": {}, "run": {}, "command": None, "resumable": False}
    compute = done["compute"]["cluster"]
    assert (compute["hostname"], compute["walltime"], compute["extra_args"]) == (None, None, {})
    pool = compute["node_pools"]["gpu"]
    assert (pool["nodes"], pool["ntasks_per_node"]) == (1, 1)
    assert (pool["gpus_per_node"], pool["extra_args"]) == (None, {})


def test_local_compute_needs_no_account() -> None:
    tree = base()
    tree["compute"] = {"here": {"type": "local"}}
    config = build_config(filled(tree))
    assert (config.compute.type, config.compute.account, config.compute.hostname) == ("local", None, None)


# --- problems -----------------------------------------------------------------------------------------


def test_every_problem_is_reported_in_one_run(tmp_path: Path) -> None:
    config = tmp_path / "submit.yaml"
    config.write_text(
        """
services:
  policy: {type: vllm, container: c, modle: m, port: x, env: {A: bare}}
compute:
  cluster: {type: slurm, walltime: 4h}
driver:
  policy_model: nope
  benchmarks:
    bad name: {command: x, resumable: true}
job: {}
otel: {enabled: false}
"""
    )
    with pytest.raises(ConfigError) as caught:
        load_config(config, environ={})
    found = {p.path for p in caught.value.problems}
    assert found >= {
        "services.policy.modle",
        "services.policy.model",
        "services.policy.port",
        "services.policy.env.A",
        "compute.cluster.account",
        "compute.cluster.walltime",
        "driver.policy_model",
        "driver.benchmarks.bad name",
        "driver.benchmarks.bad name.resumable",
        "job.output_path",
    }
    assert [p.path for p in caught.value.problems] == sorted(p.path for p in caught.value.problems)
    assert "10 problems" in str(caught.value) or len(caught.value.problems) >= 10


def test_an_unknown_type_is_one_problem_not_a_list_of_unknown_keys() -> None:
    tree = base(judge={"type": "sglang", "container": "c", "command": "x", "port": 1})
    assert paths(tree) == ["services.judge.type"]


def test_a_field_of_another_type_is_an_unknown_key_with_the_valid_ones_listed() -> None:
    tree = base(judge={"type": "command", "container": "c", "command": "x", "tensor_parallel_size": 2})
    (problem,) = problems(tree)
    assert problem.path == "services.judge.tensor_parallel_size"
    assert "command, container, env, health_check" in problem.fix


def test_a_type_error_inside_a_branch_makes_no_unknown_key_noise() -> None:
    tree = base()
    tree["services"]["policy"]["tensor_parallel_size"] = "two"
    tree["services"]["policy"]["mounts"] = "not-a-list"
    assert paths(tree) == ["services.policy.mounts", "services.policy.tensor_parallel_size"]


def test_rules_skip_values_the_schema_refused() -> None:
    tree = base()
    pool = {"partition": "gpu", "nodes": "two", "gpus_per_node": 8}
    tree["compute"]["cluster"]["node_pools"] = {"gpu": pool}
    tree["services"]["policy"]["number_of_instances"] = 3
    assert paths(tree) == ["compute.cluster.node_pools.gpu.nodes"]


def test_problems_are_unique() -> None:
    tree = base()
    tree["services"]["policy"]["env"] = {"A": "x", "B": "y"}
    found = problems(tree)
    assert len(found) == len(set(found)) == 2


def test_idle_gpus_are_a_warning_not_an_error() -> None:
    tree = base()
    tree["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "gpu", "gpus_per_node": 8}}
    result = validate(tree)
    assert result.problems == []
    assert any("services.policy needs 1 GPUs" in w and "leaving 7 idle" in w for w in result.warnings)


def test_each_vllm_service_is_sized_on_its_own() -> None:
    """NeMo Gym checks each service against its pools, not the sum of all services against the job."""
    tree = base()
    tree["services"]["policy"]["tensor_parallel_size"] = 8
    tree["services"]["judge"] = {"type": "vllm", "container": "c", "model": "j", "tensor_parallel_size": 8}
    tree["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "gpu", "gpus_per_node": 8}}
    result = validate(tree)
    assert (result.problems, result.warnings) == ([], [])


def test_data_parallel_multiple_of_nodes_is_fine() -> None:
    tree = base()
    tree["services"]["policy"]["number_of_instances"] = 4
    tree["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "gpu", "nodes": 2}}
    assert problems(tree) == []


@pytest.mark.parametrize("walltime", ["30", "30:00", "04:00:00", "1-0", "1-12:00", "2-00:00:00"])
def test_every_slurm_walltime_form_is_accepted(walltime: str) -> None:
    tree = base()
    tree["compute"]["cluster"]["walltime"] = walltime
    assert problems(tree) == []


@pytest.mark.parametrize("walltime", ["4h", "1:2:3:4", "1-2-3", "-1", "", "01:00:00 "])
def test_malformed_walltimes_are_refused(walltime: str) -> None:
    tree = base()
    tree["compute"]["cluster"]["walltime"] = walltime
    assert paths(tree) == ["compute.cluster.walltime"]


@pytest.mark.parametrize("mount", ["/data", "/data:/mnt", "/data:/mnt:ro"])
def test_mount_shapes_accepted(mount: str) -> None:
    tree = base()
    tree["driver"]["mounts"] = [mount]
    assert problems(tree) == []


@pytest.mark.parametrize("value", ["lit:", "lit:a:b", "host:HF_TOKEN", "runtime:SLURM_JOB_ID"])
def test_env_prefixes_accepted(value: str) -> None:
    tree = base()
    tree["driver"]["env"] = {"X": value}
    assert problems(tree) == []


def test_otel_needs_endpoint_service_name_and_gym_install() -> None:
    tree = base()
    tree["otel"] = {}
    assert paths(tree) == ["otel.endpoint", "otel.gym_telemetry", "otel.service_name"]
    tree["otel"] = {"endpoint": "https://otlp.example.com", "service_name": "eval", "gym_telemetry": False}
    assert problems(tree) == []


def test_a_pinned_policy_counts_against_its_pool() -> None:
    tree = base()
    tree["services"]["policy"].update(node_pool="b", tensor_parallel_size=8)
    tree["compute"]["cluster"]["node_pools"] = {
        "a": {"partition": "gpu", "gpus_per_node": 8},
        "b": {"partition": "gpu", "gpus_per_node": 8},
    }
    result = validate(tree)
    # pool b is used whole; pool a's GPUs are not this service's to waste
    assert (result.problems, result.warnings) == ([], [])
