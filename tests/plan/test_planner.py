"""The plan: placement (each row of seed 003's table), override flattening, env references, canonical JSON.

Configs are built from small trees through the real validator, so every test reads the same typed
`Config` the tool does; Hydra's own override parser checks that flattened values keep their types.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import fields, is_dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hypothesis import given, settings
from hypothesis import strategies as st

from gymbuild.config import load_config
from gymbuild.config.build import build_config
from gymbuild.config.model import Config, EnvValue
from gymbuild.config.validate import validate
from gymbuild.errors import UserError
from gymbuild.executors.base import planning_traits
from gymbuild.plan import (
    BenchPlan,
    Nodes,
    Ref,
    flatten_overrides,
    hydra_value,
    plan_benchmark,
    plan_submission,
    walltime_seconds,
)

RUN_DIR = "/runs/gym-job-20260101T000000Z-abcdef"
JOB_ID = "gym-job-20260101T000000Z-abcdef"


def tree(**pools: int) -> dict[str, Any]:
    """A one-policy config; `pools` names node pools and their node counts (declaration order)."""
    return {
        "services": {"policy": {"type": "vllm", "container": "vllm/vllm-openai:v0.10.1", "model": "m/q"}},
        "compute": {
            "c": {
                "type": "slurm",
                "account": "acct",
                "node_pools": {name: {"partition": "gpu", "nodes": n} for name, n in pools.items()},
            }
        },
        "driver": {"policy_model": "policy", "benchmarks": {"b": {"run": {"x": 1}}}},
        "job": {"output_path": "/runs"},
        "otel": {"enabled": False},
    }


def config(t: dict[str, Any]) -> Config:
    checked = validate(copy.deepcopy(t))
    assert not checked.problems, [p.render() for p in checked.problems]
    return build_config(checked.tree)


def plan(t: dict[str, Any], bench: str = "b") -> BenchPlan:
    return plan_benchmark(config(t), planning_traits(config(t)), bench, run_dir=RUN_DIR, gym_job_id=JOB_ID)


def steps(p: BenchPlan) -> dict[str, Nodes]:
    return {s.name: s.nodes for s in p.services}


# --- placement: the seed's table, row by row -----------------------------------------------------------


def test_single_node_everything_shares_node_0() -> None:
    t = tree(gpu=1)
    t["services"]["judge"] = {"type": "command", "container": "c", "command": "serve", "port": 9000}
    p = plan(t)
    assert not p.multi_node
    assert {n.first for n in steps(p).values()} == {0}
    assert {n.count for n in steps(p).values()} == {1}
    assert p.driver.nodes == Nodes(0, 1)
    assert not p.head_ip_needed and not p.pool_vars_needed


def test_multi_node_vllm_without_pool_spans_every_node() -> None:
    t = tree(a=2, b=1)
    p = plan(t)
    (policy,) = p.services
    assert policy.nodes == Nodes(0, 3)
    assert policy.vllm_mode == "ray"  # one instance over several nodes
    assert p.head_ip_needed
    t["services"]["policy"]["number_of_instances"] = 6
    policy = plan(t).services[0]
    assert (policy.vllm_mode, policy.dp_local) == ("dp", 2)
    assert ("--data-parallel-size",) in policy.argv_tail and ("6",) in policy.argv_tail


def test_multi_node_other_unpinned_service_runs_beside_the_driver() -> None:
    t = tree(a=1, b=2)
    t["services"]["judge"] = {"type": "command", "container": "c", "command": "serve", "port": 9000}
    assert steps(plan(t))["judge"] == Nodes(0, 1)
    t["services"]["policy"]["node_pool"] = "b"  # the driver follows a pinned policy...
    p = plan(t)
    assert p.driver.nodes == Nodes(1, 1)
    assert steps(p)["judge"] == Nodes(1, 1)  # ... and so does every unpinned non-vLLM service


def test_pinned_services_use_their_pools_contiguous_ranges() -> None:
    t = tree(first=2, second=3)
    t["services"]["policy"]["node_pool"] = "second"
    t["services"]["judge"] = {
        "type": "vllm",
        "container": "c",
        "model": "j",
        "port": 8001,
        "node_pool": "first",
    }
    p = plan(t)
    assert [(r.name, r.first, r.count) for r in p.pools] == [("first", 0, 2), ("second", 2, 3)]
    assert steps(p) == {"policy": Nodes(2, 3, "second"), "judge": Nodes(0, 2, "first")}
    assert p.driver.nodes == Nodes(2, 1)
    assert p.pool_vars_needed


def test_vllm_pd_tiers_on_their_pools_and_the_router_under_the_service_name() -> None:
    t = tree(prefill=1, decode=1)
    t["services"]["policy"] = {
        "type": "vllm_pd",
        "container": "img",
        "model": "m",
        "port": 8100,
        "prefill": {"node_pool": "prefill"},
        "decode": {"node_pool": "decode"},
    }
    p = plan(t)
    assert [(s.name, s.kind, s.nodes.first, s.port.first) for s in p.services] == [
        ("policy-prefill", "vllm", 0, 8101),
        ("policy-decode", "vllm", 1, 8102),
        ("policy", "router", 0, 8100),
    ]
    router = p.services[2]
    assert router.argv[0] == ("vllm-router",)
    assert [n.key for n in router.needs] == ["policy-prefill", "policy-decode"]
    assert p.driver.policy_port == router.port


def test_ray_head_and_one_worker_step_per_pool_after_the_other_services() -> None:
    t = tree(head=1, workers=2)
    t["services"] = {
        "sandbox": {"type": "ray", "container": "ray", "node_pools": ["head", "workers"]},
        **t["services"],
    }
    p = plan(t)
    ray = [(s.name, s.kind, s.nodes) for s in p.services]
    assert ray == [  # NeMo Gym's order and step names
        ("policy", "vllm", Nodes(0, 3)),
        ("sandbox", "ray_head", Nodes(0, 1)),
        ("sandbox_workers_workers", "ray_worker", Nodes(1, 2, "workers")),
    ]
    assert p.head_ip_needed and p.node_ips_needed


def test_head_ip_is_exported_as_nemo_gym_does_only_beside_a_multi_node_vllm() -> None:
    t = tree(head=1, workers=2)
    t["services"]["policy"]["node_pool"] = "head"
    t["services"]["sandbox"] = {"type": "ray", "container": "ray", "node_pools": ["head", "workers"]}
    assert plan(t).head_ip_needed  # a vLLM service in a multi-node job, pinned or not
    del t["services"]["policy"]
    del t["driver"]["policy_model"]
    p = plan(t)
    assert not p.head_ip_needed and p.node_ips_needed  # the Ray head still needs its node's address


# --- overrides -----------------------------------------------------------------------------------------

json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="$"), max_size=20)
)
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=3), max_leaves=8)


def _hydra(override: str) -> Any:
    return OverridesParser.create().parse_override(override).value()


def _nemo_gym_reading(value: str) -> Any:
    """What Hydra makes of NeMo Gym 0.7.0's bare `+k=<value>`, or the string itself where that bare
    text stops the job at start, is a sweep, or is altered (trimmed, unquoted, un-escaped, read as a list
    or dict): there ours keeps what the user wrote (docs/compatibility.md, "The real driver")."""
    if value != value.strip() or value[:1] in "[{" or any(c in value for c in "\\'\""):
        return value
    try:
        override = OverridesParser.create().parse_override(f"+k={value}")
    except Exception:
        return value
    return value if override.is_sweep_override() else override.value()


@settings(max_examples=300, deadline=None)
@given(json_value)
def test_flattened_values_parse_back_in_hydra_as_nemo_gym_overrides_do(value: Any) -> None:
    """Non-strings keep their value and type; a string (also in a list) reads as NeMo Gym's does."""

    def expected(v: Any) -> Any:
        if isinstance(v, str):
            return _nemo_gym_reading(v)
        return [expected(x) for x in v] if isinstance(v, list) else v

    (override,) = flatten_overrides({"k": value}, "run")
    parsed, want = _hydra(override), expected(value)
    assert (type(parsed), repr(parsed)) == (type(want), repr(want))  # repr: nan is nan


@pytest.mark.parametrize(
    ("text", "reaches_gym"),
    [("5", 5), ("-3", -3), ("1e-5", 1e-05), ("true", True), ("null", None), ("007", "007"), ("a,b", "a,b")],
)
def test_a_string_is_retyped_by_hydra_as_nemo_gym_bare_override_is(text: str, reaches_gym: Any) -> None:
    """`limit: ${oc.env:LIMIT}` reaches the config as the string "5"; NeMo Gym writes `+limit=5`, which
    gym reads as the int 5, so ours must too. A string Hydra would refuse or sweep stays a string."""
    (override,) = flatten_overrides({"limit": text}, "run")
    parsed = _hydra(override)
    assert parsed == reaches_gym and type(parsed) is type(reaches_gym)


def test_flattening_nests_keys_accepts_dotted_ones_and_drops_empty_mappings() -> None:
    run = {"a": {"b": 1, "c": {"d": "x y"}}, "l": [1, "two", None], "e": {}, "f.g": {"h": 2}, "s": "123"}
    assert flatten_overrides(run, "run") == (
        "+a.b=1",
        "+a.c.d='x y'",
        "+l=[1,two,null]",
        "+f.g.h=2",
        "+s=123",
    )
    assert hydra_value("it's") == "'it\\'s'"
    assert hydra_value("http://localhost:8001/v1") == "http://localhost:8001/v1"
    for bad in ("bad key", "a..b", ".a", "1a"):
        with pytest.raises(UserError, match="not a Hydra key"):
            flatten_overrides({bad: 1}, "driver.benchmarks.b.run")


def test_driver_override_order_matches_0_7_0() -> None:
    t = tree(gpu=1)
    t["driver"]["benchmarks"]["b"] = {"run": {"z": 1, "a": {"b": [1, 2]}}, "resumable": True}
    words = ["".join(p if isinstance(p, str) else "${" + p.name + "}" for p in w) for w in plan(t).driver.run]
    assert words == [
        "gym",
        "eval",
        "run",
        f"+output_jsonl_fpath={RUN_DIR}/b/artifacts/rollouts.jsonl",
        "--model-type",
        "openai_model",
        "+observability_enabled=True",
        "+z=1",
        "+a.b=[1,2]",
        "+policy_base_url=http://localhost:${GYM_POLICY_PORT}/v1",
        "+policy_model_name=m/q",
        "+policy_api_key=dummy",
        f"+model_call_capture_dir={RUN_DIR}/b/model-calls",
        "+require_complete=True",
        "+resume_from_cache=True",
        "++head_server.port=${GYM_HEAD_PORT}",
    ]


def test_model_call_capture_dir_is_left_to_a_benchmark_that_sets_it_and_empty_type_drops_flag() -> None:
    t = tree(gpu=1)
    t["driver"]["policy_model_type"] = ""
    t["driver"]["benchmarks"]["b"]["run"] = {"model_call_capture_dir": "/elsewhere"}
    words = [w[0] for w in plan(t).driver.run if isinstance(w[0], str)]
    assert "--model-type" not in words
    assert words.count("+model_call_capture_dir=/elsewhere") == 1
    assert not any(w.startswith("+model_call_capture_dir=/runs") for w in words)


def driver_words(t: dict[str, Any]) -> list[str]:
    return ["".join(p if isinstance(p, str) else "${" + p.name + "}" for p in w) for w in plan(t).driver.run]


def test_user_set_defaults_are_written_once_with_the_user_value_in_nemo_gym_place() -> None:
    """Hydra refuses a second `+key=`: a user's observability_enabled, require_complete and
    resume_from_cache replace the defaults (observability_enabled keeps its first place)."""
    t = tree(gpu=1)
    run = {"limit": 5, "observability_enabled": False, "require_complete": False, "resume_from_cache": False}
    t["driver"]["benchmarks"]["b"] = {"run": run, "resumable": True}
    words = driver_words(t)
    for key in ("observability_enabled", "require_complete", "resume_from_cache"):
        assert [w for w in words if w.startswith(f"+{key}=")] == [f"+{key}=false"]
    assert words[6:8] == ["+observability_enabled=false", "+limit=5"]
    # Observability off: no capture directory is made up for the benchmark.
    assert not any(w.startswith("+model_call_capture_dir=") for w in words)


def test_observability_on_by_the_user_still_gets_the_default_capture_dir() -> None:
    t = tree(gpu=1)
    t["driver"]["benchmarks"]["b"]["run"] = {"observability_enabled": True}
    words = driver_words(t)
    assert words.count("+observability_enabled=True") == 1
    assert f"+model_call_capture_dir={RUN_DIR}/b/model-calls" in words


def test_command_benchmark_gets_its_environment() -> None:
    t = tree(gpu=1)
    t["driver"]["benchmarks"]["b"] = {"command": "python run.py"}
    d = plan(t).driver
    assert d.run == () and d.command == "python run.py"
    env = {e.name: e.value for e in d.env}
    assert env["NEMO_GYM_BENCH_DIR"] == f"{RUN_DIR}/b"
    assert env["NEMO_GYM_POLICY_MODEL_NAME"] == "m/q"
    assert env["NEMO_GYM_POLICY_BASE_URL"] == ("http://localhost:", Ref("GYM_PORT_POLICY"), "/v1")


# --- secrets, canonical JSON, misc ------------------------------------------------------------------


def test_secrets_stay_references_in_the_plan() -> None:
    t = tree(gpu=1)
    t["services"]["policy"]["env"] = {"HF_TOKEN": "host:HF_TOKEN", "A": "lit:x", "B": "runtime:HOME"}
    p = plan(t)
    env = {e.name: e.value for e in p.services[0].env}
    assert env["HF_TOKEN"] == EnvValue("host", "HF_TOKEN")
    assert env["B"] == EnvValue("runtime", "HOME")
    assert p.secrets == ("HF_TOKEN",)


def test_canonical_json_is_stable_and_follows_the_plan() -> None:
    t = tree(gpu=1)
    a, b = plan(t), plan(t)
    assert a == b and hash(a) == hash(b) and a.canonical_json == b.canonical_json
    t["driver"]["benchmarks"]["b"]["run"]["x"] = 2
    assert plan(t).canonical_json != a.canonical_json


ROOT = Path(__file__).resolve().parents[2]
RICH_EXAMPLES = [
    "collector",
    "vllm-pd",
    "ray",
    "resumable",
    "command-service",
    "command-benchmark",
    "secrets",
]
FAKE_ENV = {"OTEL_TOKEN": "t", "HF_TOKEN": "h", "WANDB_API_KEY": "w"}


def example_plans(name: str) -> dict[str, BenchPlan]:
    resolved = load_config(ROOT / "examples" / f"{name}.yaml", environ=FAKE_ENV)
    return plan_submission(
        resolved.config, planning_traits(resolved.config), run_dir=RUN_DIR, gym_job_id=JOB_ID
    )


def leaves(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """(path, value) of every scalar in a plan, and of every tuple (to drop its last element)."""
    if is_dataclass(value):
        for f in fields(value):
            yield from leaves(getattr(value, f.name), (*path, f.name))
    elif isinstance(value, tuple):
        if value:
            yield path, value
        for i, item in enumerate(value):
            yield from leaves(item, (*path, i))
    else:
        yield path, value


def changed(value: Any, path: tuple[str | int, ...], new: Any) -> Any:
    """`value` with the item at `path` replaced by `new`: new objects along the path, the rest kept."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, tuple):
        assert isinstance(head, int)
        return (*value[:head], changed(value[head], rest, new), *value[head + 1 :])
    assert isinstance(head, str)
    return replace(value, **{head: changed(getattr(value, head), rest, new)})


def other(value: Any) -> Any:
    if isinstance(value, tuple):
        return value[:-1]
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if value is None:
        return "x"
    return f"{value}~"


@pytest.mark.parametrize("example", RICH_EXAMPLES)
def test_every_part_of_a_plan_reaches_its_canonical_json(example: str) -> None:
    """Whatever a template reads is in the plan; a change anywhere in it (a value, a dropped word, a
    step, an env entry) must change its canonical JSON, or the renderer would reuse a part rendered
    once for another (render.once keys on it) and write a wrong script. The changed plans keep their
    untouched parts as the same objects, as shared plans do."""
    for p in example_plans(example).values():
        before = p.canonical_json
        seen = 0
        for path, value in leaves(p):
            assert changed(p, path, other(value)).canonical_json != before, (
                f"{example}: {path} is not in the canonical JSON"
            )
            seen += 1
        assert seen > 50


def test_canonical_json_keeps_types_apart() -> None:
    """1, 1.0, true and "1" render differently (`{{ x }}` gives 1, 1.0, True, 1), so their texts differ."""
    p = plan(tree(gpu=1))
    step = p.services[0]
    assert step.health is not None
    texts = {
        replace(p, services=(replace(step, health=replace(step.health, attempts=value)),)).canonical_json
        for value in (1, 1.0, True, "1")
    }
    assert len(texts) == 4


@pytest.mark.parametrize("example", RICH_EXAMPLES)
def test_planning_a_submission_equals_planning_each_benchmark(example: str) -> None:
    """plan_submission plans the config-level parts once and shares them; each plan must be the one
    plan_benchmark makes on its own, with the same canonical JSON."""
    resolved = load_config(ROOT / "examples" / f"{example}.yaml", environ=FAKE_ENV)
    plans = plan_submission(
        resolved.config, planning_traits(resolved.config), run_dir=RUN_DIR, gym_job_id=JOB_ID
    )
    for bench, p in plans.items():
        alone = plan_benchmark(
            resolved.config, planning_traits(resolved.config), bench, run_dir=RUN_DIR, gym_job_id=JOB_ID
        )
        assert p == alone and p.canonical_json == alone.canonical_json
    assert len({p.canonical_json for p in plans.values()}) == len(plans)


def test_plan_submission_keeps_config_order() -> None:
    t = tree(gpu=1)
    t["driver"]["benchmarks"] = {"zeta": {}, "alpha": {}, "mid": {}}
    plans = plan_submission(config(t), planning_traits(config(t)), run_dir=RUN_DIR, gym_job_id=JOB_ID)
    assert list(plans) == ["zeta", "alpha", "mid"]
    assert plans["alpha"].bench_dir == f"{RUN_DIR}/alpha"


def test_directives() -> None:
    t = tree(a=1, b=2)
    t["compute"]["c"]["walltime"] = "1-02:03:04"
    t["compute"]["c"]["extra_args"] = {"qos": "high", "comment": "two words"}
    p = plan(t)
    assert p.directives == (
        ("job-name", "gym-b"),
        ("account", "acct"),
        ("time", "1-02:03:04"),
        ("chdir", f"{RUN_DIR}/b"),
        ("output", "logs/slurm-%j.log"),
        ("qos", "high"),
        ("comment", "two words"),
        ("partition", "gpu"),
        ("nodes", "3"),
        ("ntasks-per-node", "1"),
    )
    t["compute"]["c"]["extra_args"] = {"comment": 'a "quoted" word'}
    problems = validate(copy.deepcopy(t)).problems  # refused with the config path, before planning
    assert [p.path for p in problems] == ["compute.c.extra_args.comment"]
    assert "#SBATCH" in problems[0].message


def test_a_key_of_both_compute_and_pool_extra_args_is_written_twice() -> None:
    """As NeMo Gym writes it: sbatch decides, and it adds up some options (`--mail-type=END` then
    `=FAIL` is END,FAIL on the real cluster, tests/parity/test_slurm_sample.py). A pool's `false`
    switches the compute's off."""
    t = tree(a=1)
    t["compute"]["c"]["extra_args"] = {"mail-type": "END", "qos": "high"}
    t["compute"]["c"]["node_pools"]["a"]["extra_args"] = {"mail-type": "FAIL", "qos": False}
    written = [d for d in plan(t).directives if d[0] in ("mail-type", "qos")]
    assert written == [("mail-type", "END"), ("mail-type", "FAIL")]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 1800),
        ("30:15", 1815),
        ("01:02:03", 3723),
        ("2-03", 183600),
        ("1-00:30", 88200),
        ("1-0:0:5", 86405),
    ],
)
def test_walltime_seconds(text: str, seconds: int) -> None:
    assert walltime_seconds(text) == seconds


@pytest.mark.parametrize("text", ["UNLIMITED", "infinite", "Infinite"])
def test_an_unlimited_walltime_is_passed_to_sbatch_and_sets_no_limit(text: str) -> None:
    t = tree()
    t["compute"]["c"]["walltime"] = text
    p = plan(t)
    assert ("time", text) in p.directives
    assert p.walltime_seconds is None
    t["driver"]["benchmarks"]["b"]["resumable"] = {"max_retries": 1, "max_walltime": text}
    assert [q.path for q in validate(t).problems] == ["driver.benchmarks.b.resumable.max_walltime"]


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="0123456789:-", min_size=1, max_size=11))
def test_a_walltime_the_rules_accept_is_one_the_planner_reads(text: str) -> None:
    """One Slurm time grammar: the config either refuses a walltime with its path, or plans it (into
    `--time` and the seconds the local executor enforces); never a late error from the planner."""
    t = tree()
    t["compute"]["c"]["walltime"] = text
    t["driver"]["benchmarks"]["b"]["resumable"] = {"max_retries": 1, "max_walltime": text}
    checked = validate(copy.deepcopy(t))
    if checked.problems:
        paths = {p.path for p in checked.problems}
        assert paths >= {"compute.c.walltime", "driver.benchmarks.b.resumable.max_walltime"}
        with pytest.raises(UserError, match="is not a Slurm time"):
            walltime_seconds(text)
        return
    p = plan_benchmark(
        build_config(checked.tree),
        planning_traits(build_config(checked.tree)),
        "b",
        run_dir=RUN_DIR,
        gym_job_id=JOB_ID,
    )
    assert ("time", text) in p.directives
    assert p.walltime_seconds == walltime_seconds(text) >= 0
    assert p.resume is not None and p.resume.max_walltime_seconds == p.walltime_seconds
