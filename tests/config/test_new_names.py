"""An add-override (`+`, `++`) naming an entry a user-keyed mapping does not have (a benchmark, a
service, a compute entry, a node pool) gives one error that names it and the names the config has,
or a whole new entry; never a silent half one (gymbuild/config/new_names.py).

The search: any such override path, alone or with siblings that complete the entry, through the real
loader (Hydra composition included)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gymbuild.config import load_config
from gymbuild.errors import ConfigError

BASE = """
services:
  policy: {type: vllm, container: vllm/vllm-openai:v0.10.1, model: m/q}
compute:
  cluster:
    type: slurm
    account: gym
    node_pools: {gpu: {partition: gpu, gpus_per_node: 1}}
driver:
  policy_model: policy
  benchmarks:
    gpqa: {run: {config_paths: benchmarks/gpqa/config.yaml}}
    aime25: {run: {config_paths: benchmarks/aime25/config.yaml}}
job: {output_path: /var/tmp/gymbuild-runs}
otel: {enabled: false}
"""
# Where a name is the user's, the names the config has there, and fields an override may set.
MAPPINGS = {
    "driver.benchmarks": (
        ["gpqa", "aime25"],
        ["run.limit=5", "prepare.split=test", "run.num_repeats=2", "resumable=true"],
    ),
    "services": (["policy"], ["port=9000", "model=other/m", "container=img"]),
    "compute": (["cluster"], ["account=other", "walltime=01:00:00"]),
    "compute.cluster.node_pools": (["gpu"], ["nodes=2", "gpus_per_node=1"]),
}
# What makes a new entry whole, per mapping (the loader must then accept it, or refuse it for what it is).
WHOLE = {
    "driver.benchmarks": ["run.config_paths=benchmarks/x/config.yaml", "command='echo hi'"],
    "services": [],  # a whole service is a whole definition: left to the corpus and validation
    "compute": [],
    "compute.cluster.node_pools": ["partition=gpu"],
}


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("new-names") / "submit.yaml"
    path.write_text(BASE)
    return path


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    mapping=st.sampled_from(sorted(MAPPINGS)),
    name=st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True),
    op=st.sampled_from(["+", "++"]),
    data=st.data(),
)
def test_a_new_name_is_one_error_or_a_whole_entry(
    config_file: Path, mapping: str, name: str, op: str, data: st.DataObject
) -> None:
    had, fields = MAPPINGS[mapping]
    if name in had:
        return
    chosen = data.draw(
        st.lists(st.sampled_from(fields + WHOLE[mapping]), min_size=1, max_size=3, unique=True)
    )
    overrides = [f"{op}{mapping}.{name}.{field}" for field in chosen]
    whole = any(f in WHOLE[mapping] for f in chosen)
    try:
        resolved = load_config(config_file, overrides, environ={})
    except ConfigError as err:
        ours = [p for p in err.problems if "which the config does not have" in p.message]
        if not whole:
            assert len(err.problems) == 1 and ours, err.problems  # the one message, nothing else
            (problem,) = ours
            assert problem.path == f"{mapping}.{name}"
            assert problem.message.startswith(f"override {overrides[0]!r} adds ")
            assert "it has: " in problem.message and all(h in problem.message for h in had)
            assert f"++{mapping}." in problem.fix and "to add " in problem.fix
        else:
            assert not ours, err.problems  # a whole entry is refused, if at all, for what it holds
        return
    assert whole, f"{overrides} made a half entry the loader accepted"
    if mapping == "driver.benchmarks":
        bench = resolved.config.driver.benchmarks[name]
        assert bench.command or "config_paths" in bench.run


def test_the_names_the_config_has_come_closest_first(config_file: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(config_file, ["+driver.benchmarks.aime2.run.limit=5"], environ={})
    (problem,) = caught.value.problems
    assert "(benchmarks it has: aime25, gpqa)" in problem.message
    assert "write `++driver.benchmarks.aime25.run.limit=5`" in problem.fix


def test_an_existing_entry_is_changed_with_either_add_operator(config_file: Path) -> None:
    for op in ("+", "++"):
        resolved = load_config(config_file, [f"{op}driver.benchmarks.gpqa.run.limit=5"], environ={})
        assert resolved.config.driver.benchmarks["gpqa"].run["limit"] == 5


def test_a_whole_new_benchmark_on_the_command_line_is_run(config_file: Path) -> None:
    overrides = [
        "+driver.benchmarks.extra.run.config_paths=benchmarks/x/config.yaml",
        "+driver.benchmarks.extra.run.limit=3",
    ]
    resolved = load_config(config_file, overrides, environ={})
    assert resolved.config.driver.benchmarks["extra"].run == {
        "config_paths": "benchmarks/x/config.yaml",
        "limit": 3,
    }


def test_a_new_compute_entry_is_judged_before_the_pools_inside_it(config_file: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(config_file, ["+compute.clustr.node_pools.gpu.nodes=2"], environ={})
    (problem,) = caught.value.problems
    assert problem.path == "compute.clustr"
    assert "adds compute entry 'clustr'" in problem.message


def test_every_new_pool_of_an_existing_compute_entry_is_judged(config_file: Path) -> None:
    overrides = ["+compute.cluster.node_pools.gpuu.nodes=2", "+compute.cluster.node_pools.cpu.nodes=1"]
    with pytest.raises(ConfigError) as caught:
        load_config(config_file, overrides, environ={})
    assert [p.path for p in caught.value.problems] == [
        "compute.cluster.node_pools.gpuu",
        "compute.cluster.node_pools.cpu",
    ]


def test_an_override_that_replaces_a_new_entry_whole_is_not_told_to_replace_an_existing_one(
    config_file: Path,
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(config_file, ["+driver.benchmarks.gqpa={}"], environ={})
    (problem,) = caught.value.problems
    assert "set its keys with `++driver.benchmarks.gpqa.KEY=...`" in problem.fix
    assert "++driver.benchmarks.gpqa={}" not in problem.fix
