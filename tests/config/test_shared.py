"""driver.benchmarks_per_job and driver.concurrent_benchmarks: what the config says, and how the
benchmarks are packed into jobs (the refusals are in tests/invalid/shared-*.yaml)."""

from __future__ import annotations

from typing import Any

import pytest

from gymbuild.config.build import build_config
from gymbuild.config.derived import job_groups
from gymbuild.config.validate import validate


def tree(**driver: Any) -> dict[str, Any]:
    return {
        "services": {"policy": {"type": "vllm", "container": "vllm/vllm-openai:v0.10.1", "model": "m"}},
        "compute": {"cluster": {"type": "slurm", "account": "gym"}},
        "driver": {"benchmarks": {"a": {}, "b": {}, "c": {}}, **driver},
        "job": {"output_path": "/var/tmp/gymbuild-runs"},
        "otel": {"enabled": False},
    }


def checked(**driver: Any) -> Any:
    result = validate(tree(**driver))
    assert result.problems == [], [p.render() for p in result.problems]
    return result


def test_a_nemo_gym_config_resolves_without_the_extensions_and_means_one_job_per_benchmark() -> None:
    result = checked()
    assert "benchmarks_per_job" not in result.tree["driver"]
    assert "concurrent_benchmarks" not in result.tree["driver"]
    driver = build_config(result.tree).driver
    assert (driver.benchmarks_per_job, driver.concurrent_benchmarks, driver.shares_jobs) == (1, 1, False)


@pytest.mark.parametrize(("written", "read"), [(8, 8), ("8", 8), ("all", None), (1, 1)])
def test_benchmarks_per_job_takes_a_count_its_text_or_all(written: Any, read: int | None) -> None:
    result = checked(benchmarks_per_job=written)
    driver = build_config(result.tree).driver
    assert driver.benchmarks_per_job == read
    assert driver.shares_jobs is (read != 1)


def test_concurrent_benchmarks_up_to_a_jobs_size_is_accepted() -> None:
    assert (
        build_config(checked(benchmarks_per_job=2, concurrent_benchmarks=2).tree).driver.concurrent_benchmarks
        == 2
    )
    assert (
        build_config(
            checked(benchmarks_per_job="all", concurrent_benchmarks=5).tree
        ).driver.concurrent_benchmarks
        == 5
    )


def test_benchmarks_with_the_same_resumable_setting_share_a_job() -> None:
    result = checked(
        benchmarks_per_job=2,
        benchmarks={"a": {"resumable": True}, "b": {"resumable": {"max_retries": 3}}, "c": {}},
    )
    assert list(build_config(result.tree).driver.benchmarks) == ["a", "b", "c"]


def test_jobs_are_packed_in_order_up_to_their_size_and_split_where_the_key_changes() -> None:
    names = ["a", "b", "c", "d", "e"]
    assert job_groups(names, 2) == [("a", "b"), ("c", "d"), ("e",)]
    assert job_groups(names, None) == [tuple(names)]
    assert job_groups(names, 1) == [(n,) for n in names]
    resumable = {"c", "d"}
    assert job_groups(names, None, lambda n: n in resumable) == [("a", "b"), ("c", "d"), ("e",)]
