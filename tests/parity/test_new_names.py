"""Why an override adding half a benchmark is refused (gymbuild/config/new_names.py): NeMo Gym 0.7.0
accepts `+driver.benchmarks.<typo>.run.limit=5` and builds benchmark `<typo>` with no
`run.config_paths`, whose job would run `gym eval run` with no benchmark. The oracle's own
`gym eval submit --resolve-only --json`, asked here, shows the half benchmark it would queue;
gymbuild refuses the same command line with one message (docs/compatibility.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gymbuild.config import load_config
from gymbuild.errors import ConfigError

pytestmark = pytest.mark.oracle

CONFIG = {
    "services": {"policy": {"type": "vllm", "container": "vllm/vllm-openai:v0.10.1", "model": "m/q"}},
    "compute": {"cluster": {"type": "slurm", "account": "gym", "node_pools": {"gpu": {"partition": "gpu"}}}},
    "driver": {"policy_model": "policy", "benchmarks": {"gpqa": {"run": {"config_paths": "b/gpqa.yaml"}}}},
    "job": {"output_path": "/var/tmp/gymbuild-runs"},
    "otel": {"enabled": False},
}
TYPO = "+driver.benchmarks.gqpa.run.limit=5"


def test_nemo_gym_builds_the_half_benchmark_gymbuild_refuses(nemo_gym: Any, tmp_path: Path) -> None:
    path = tmp_path / "submit.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    argv = [str(nemo_gym.gym), "eval", "submit", "-c", str(path), "--resolve-only", "--json", TYPO]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    theirs = json.loads(done.stdout[done.stdout.index("{") :])["driver"]["benchmarks"]
    half = theirs["gqpa"]  # accepted, with the policy wired in, and nothing gym could run
    assert half["run"]["limit"] == 5 and "config_paths" not in half["run"] and not half.get("command")
    with pytest.raises(ConfigError) as caught:
        load_config(path, [TYPO], environ={})
    (problem,) = caught.value.problems
    assert problem.path == "driver.benchmarks.gqpa" and "(benchmarks it has: gpqa)" in problem.message
