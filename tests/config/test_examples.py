"""Every example resolves, and what `resolve` prints is a config that resolves to itself.

The examples are what users copy, so each must load with only the environment its header comment
documents; the round trip is what makes resolved-config.yaml (and `resolve json=1`) reusable input.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from gymbuild.config import load_config
from gymbuild.config.output import dump_tree

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [*sorted((ROOT / "examples").glob("*.yaml")), ROOT / "examples" / "composed" / "submit.yaml"]
REQUIRED = {
    "minimal",
    "node-pools",
    "command-benchmark",
    "resumable",
    "vllm-pd",
    "ray",
    "collector",
    "secrets",
    "command-service",
}


# NeMo Gym sizes each vLLM service against its pools on its own: it knows nothing of the GPUs a
# `command` service uses, so the judge beside the policy leaves the policy's check 2 GPUs "idle".
EXPECTED_WARNINGS = {"command-service": ("services.policy needs 2 GPUs", "leaving 2 idle")}


def documented_env(path: Path) -> dict[str, str]:
    """The variables the header comment tells the user to export, each with a stand-in value."""
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.startswith("#") and "export " in line:
            rest = line.split("export ", 1)[1]
            env.update(dict.fromkeys(re.findall(r"\b([A-Z_][A-Z0-9_]*)=", rest), "stand-in"))
    return env


def test_the_required_examples_exist() -> None:
    assert {p.stem for p in EXAMPLES} >= REQUIRED
    assert (ROOT / "examples" / "composed" / "compute").is_dir()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT / "examples")))
def test_example_resolves_with_the_documented_environment(path: Path) -> None:
    resolved = load_config(path, environ=documented_env(path))
    expected = EXPECTED_WARNINGS.get(path.stem)
    if expected is None:
        assert resolved.warnings == ()
    else:
        (warning,) = resolved.warnings
        assert all(part in warning for part in expected)
    # host: values stay references in the tree; the header documents every one of them.
    text = dump_tree(resolved.tree)
    for var in re.findall(r"host:([A-Za-z_][A-Za-z0-9_]*)", text):
        assert var in documented_env(path)
        assert "stand-in" not in text


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT / "examples")))
@pytest.mark.parametrize("as_json", [False, True], ids=["yaml", "json"])
def test_resolved_output_resolves_to_itself(path: Path, as_json: bool, tmp_path: Path) -> None:
    env = documented_env(path)
    first = dump_tree(load_config(path, environ=env).tree, as_json=as_json)
    again = tmp_path / "resolved.yaml"
    again.write_text(first)
    second = load_config(again, environ=env)
    assert dump_tree(second.tree, as_json=as_json) == first
    if as_json:
        assert json.loads(first) == yaml.safe_load(dump_tree(second.tree))


def test_composed_config_picks_another_group_option() -> None:
    resolved = load_config(ROOT / "examples" / "composed" / "submit.yaml", ["compute=local"], environ={})
    assert resolved.config.compute.type == "local"
    assert resolved.config.services["policy"].placement == "workstation"
    assert resolved.config.services["policy"].container == "vllm/vllm-openai:v0.10.1"
    assert "_img" not in resolved.tree


def test_escaped_interpolation_survives_the_round_trip() -> None:
    resolved = load_config(ROOT / "examples" / "command-benchmark.yaml", environ={})
    command = resolved.config.driver.benchmarks["smoke"].command
    assert command is not None and "${NEMO_GYM_POLICY_BASE_URL}" in command


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-m", "gymbuild.cli.main", "resolve", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_round_trip_through_the_command_line(tmp_path: Path) -> None:
    """The real `resolve`, YAML and json=1, fed its own output: byte-identical the second time."""
    source = ROOT / "examples" / "command-benchmark.yaml"
    firsts = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = {
            fmt: pool.submit(_cli, [f"config={source}", *extra], tmp_path)
            for fmt, extra in (("yaml", []), ("json", ["json=1"]))
        }
        for fmt, run in runs.items():
            result = run.result()
            assert result.returncode == 0, result.stderr
            assert "Traceback" not in result.stderr
            firsts[fmt] = result.stdout
            (tmp_path / f"{fmt}.yaml").write_text(result.stdout)
        seconds = {
            fmt: pool.submit(_cli, [f"config={tmp_path / f'{fmt}.yaml'}", *extra], tmp_path)
            for fmt, extra in (("yaml", []), ("json", ["json=1"]))
        }
        for fmt, run in seconds.items():
            result = run.result()
            assert result.returncode == 0, result.stderr
            assert result.stdout == firsts[fmt]
    assert json.loads(firsts["json"]) == yaml.safe_load(firsts["yaml"])
