"""gymbuild's one switch (`driver.resumable`) and the submission budget (`driver.budget`), as the
config reads them: the switch is the default each benchmark's own `resumable:` overrides."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gymbuild.config.build import build_config
from gymbuild.config.model import Budget, Config, Resumable
from gymbuild.config.validate import validate

BASE: dict[str, Any] = {
    "services": {"policy": {"type": "vllm", "container": "vllm/vllm-openai:v0.10.1", "model": "m"}},
    "compute": {"cluster": {"type": "slurm", "account": "gym"}},
    "driver": {
        "policy_model": "policy",
        "benchmarks": {
            "plain": {},
            "opted_out": {"resumable": False},
            "own": {"resumable": {"max_retries": 7}},
            "script": {"command": "python run.py"},
        },
    },
    "job": {"output_path": "/runs"},
    "otel": {"enabled": False},
}


def load(**driver: Any) -> Config:
    tree = copy.deepcopy(BASE)
    tree["driver"].update(driver)
    checked = validate(tree)
    assert not checked.problems, [p.render() for p in checked.problems]
    return build_config(checked.tree)


def resumables(config: Config) -> dict[str, Resumable | None]:
    return {name: b.resumable for name, b in config.driver.benchmarks.items()}


def test_unset_each_benchmark_keeps_its_own_as_in_nemo_gym() -> None:
    assert resumables(load()) == {
        "plain": None,
        "opted_out": None,
        "own": Resumable(7, None),
        "script": None,
    }


@pytest.mark.parametrize(
    ("switch", "default"),
    [(True, Resumable(3, None)), ({"max_retries": 1, "max_walltime": "12:00:00"}, Resumable(1, "12:00:00"))],
)
def test_the_switch_is_every_gym_benchmarks_default(switch: Any, default: Resumable) -> None:
    """A benchmark's own setting wins, `false` too; a `command` benchmark is never made resumable."""
    assert resumables(load(resumable=switch)) == {
        "plain": default,
        "opted_out": None,
        "own": Resumable(7, None),
        "script": None,
    }


def test_the_switch_off_changes_nothing() -> None:
    assert resumables(load(resumable=False)) == resumables(load())


def test_the_budget_is_read_with_either_cap() -> None:
    assert load().driver.budget is None
    assert load(budget={"attempts": 20}).driver.budget == Budget(20, None)
    assert load(budget={"gpu_hours": 12}).driver.budget == Budget(None, 12.0)


def test_a_budget_without_a_resumable_benchmark_is_said_to_limit_nothing() -> None:
    tree = copy.deepcopy(BASE)
    tree["driver"]["budget"] = {"attempts": 3}
    tree["driver"]["benchmarks"].pop("own")
    nothing = "driver.budget: no benchmark is resumable, so the budget limits nothing"
    assert validate(tree).warnings == [nothing]
    tree["driver"]["resumable"] = True
    assert validate(tree).warnings == []
