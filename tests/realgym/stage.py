"""Lay out what the real `gym eval run` needs to run offline on the test cluster.

NeMo Gym starts one server per config block (the policy's openai_model, the agent, the verifier and
the environment server), each from `<uv_venv_dir>/<kind>/<name>/.venv`; with
`+skip_venv_if_present=true` a venv that is already there is used as is, so links to the one venv of
nemo-gym 0.7.0 stand in for the per-server venvs gym would otherwise build with `uv` (from the
network). The benchmark is a copy of `root/`, found through NEMO_GYM_EXTRA_ROOTS; its data is written
by its own prepare.py, through the real `gym eval prepare`, before anything is submitted.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE / "root"
CONFIGS = HERE / "configs"
BENCHMARK = "realgym_echo"
CONFIG_PATH = f"benchmarks/{BENCHMARK}/config.yaml"
DATA = Path("benchmarks") / BENCHMARK / "data" / f"{BENCHMARK}_benchmark.jsonl"

# The servers realgym_echo's config composes, as `<kind>/<name>` under uv_venv_dir.
SERVERS = (
    "responses_api_models/openai_model",
    "responses_api_agents/simple_agent",
    "resources_servers/string_match",
    "environment_servers/legacy_agent",
)


# The benchmarks of configs/*.yaml, each with a head-server port of its own (gym's head server binds a
# fixed port, 11000 by default, and two jobs on one node must not both want it).
HEAD_PORT_BENCHMARKS = ("PLAIN", "USER_SET", "RESUMABLE", "PD")
# Real-gym jobs of different test files can share a node (two run at a time, by license:
# tests/cluster/up), so the ports are unique across the suite: a range of 100 per xdist worker, and
# in it a new slice for each submit the worker makes.
_SUBMITS = itertools.count()


def head_ports() -> dict[str, str]:
    """REALGYM_HEAD_PORT_<BENCHMARK> for one submit: ports no other live real-gym job of the suite uses."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    base = 11000 + 100 * worker + len(HEAD_PORT_BENCHMARKS) * (next(_SUBMITS) % 25)
    return {f"REALGYM_HEAD_PORT_{name}": str(base + i) for i, name in enumerate(HEAD_PORT_BENCHMARKS)}


@dataclass(frozen=True)
class Stage:
    """Where the stage is: the benchmark root, the venv links, and the gym to put first on PATH."""

    root: Path
    venvs: Path
    gym_bin: Path

    def environ(self, output: Path, **extra: str) -> dict[str, str]:
        """The REALGYM_* variables tests/realgym/configs/*.yaml read through `${oc.env:...}`."""
        return {
            "REALGYM_ROOT": str(self.root),
            "REALGYM_VENVS": str(self.venvs),
            "REALGYM_GYM_BIN": str(self.gym_bin),
            "REALGYM_OUTPUT": str(output),
            **head_ports(),
            **extra,
        }


def make_stage(directory: Path, nemo_gym_venv: Path) -> Stage:
    """Copy the benchmark root and link every server's venv to the nemo-gym venv, under `directory`
    (a directory every node of the cluster sees)."""
    root = directory / "root"
    shutil.copytree(ROOT, root, ignore=shutil.ignore_patterns("__pycache__", "data", "outputs"))
    venvs = directory / "venvs"
    for server in SERVERS:
        (venvs / server).mkdir(parents=True)
        (venvs / server / ".venv").symlink_to(nemo_gym_venv, target_is_directory=True)
    return Stage(root, venvs, nemo_gym_venv / "bin")


def prepare(stage: Stage, timeout: float = 180) -> subprocess.CompletedProcess:
    """`gym eval prepare` for realgym_echo, as a user runs it: from the root, where the benchmark's
    relative prepare_script and jsonl_fpath are (NeMo Gym resolves both against the working directory)."""
    env = {**os.environ, "NEMO_GYM_EXTRA_ROOTS": str(stage.root), "RAY_USAGE_STATS_ENABLED": "0"}
    env["PATH"] = f"{stage.gym_bin}:{env.get('PATH', '')}"
    return subprocess.run(
        [str(stage.gym_bin / "gym"), "eval", "prepare", f"+config_paths=[{CONFIG_PATH}]"],
        cwd=stage.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def prepared_stage(base: Path, nemo_gym_venv: Path) -> Stage:
    """A stage under `base` whose benchmark data the real `gym eval prepare` wrote (or the test fails)."""
    stage = make_stage(base, nemo_gym_venv)
    prepared = prepare(stage)
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    return stage


def submit_realgym(
    base: Path, nemo_gym_venv: Path, home: Path, limit: str, *args: str
) -> tuple[Path, dict[str, str], str]:
    """`gymbuild submit` of configs/vllm.yaml (with `args`) from `home`, on a prepared stage under
    `base`, its runs under `base/runs`: (output path, the submitting shell's environment, config=)."""
    from e2e_helpers import gymbuild, user_env

    stage = prepared_stage(base, nemo_gym_venv)
    output = base / "runs"
    env = user_env(home, **stage.environ(output, REALGYM_LIMIT=limit))
    config = f"config={CONFIGS / 'vllm.yaml'}"
    done = gymbuild("submit", config, *args, cwd=home, env=env)
    assert done.rc == 0, done.stdout + done.stderr
    return output, env, config
