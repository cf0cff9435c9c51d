"""The driver's command line against NeMo Gym 0.7.0's own: `gym eval run` and `gym eval prepare` get
the same overrides, in the same order, parsed by Hydra to the same values and types.

One config with many benchmarks goes through NeMo Gym's dry run (one process of the oracle's
interpreter) and through gymbuild's plan for the same run directory; each benchmark's GYM_CMD array and
prepare line are read back as the driver's shell would read them, then parsed with Hydra.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import policy_service, slurm_config, write_config
from hydra.core.override_parser.overrides_parser import OverridesParser

from gymbuild.config import load_config
from gymbuild.executors.base import planning_traits
from gymbuild.plan import Ref, plan_submission
from tests.realgym.stage import CONFIGS, Stage

POLICY_PORT = 8000  # the vllm service's default port: NeMo Gym writes it into policy_base_url

BENCHMARKS: dict[str, dict[str, Any]] = {
    # `limit` from the environment: a string in the resolved config, an int for gym.
    "plain": {"run": {"config_paths": ["benchmarks/x/config.yaml"], "limit": "${oc.env:GYM_LIMIT}"}},
    # The user's values replace the defaults; each key once (Hydra refuses a second `+key=`).
    "user_set": {"run": {"observability_enabled": False, "require_complete": False, "num_repeats": 2}},
    "observed": {"run": {"observability_enabled": True, "model_call_capture_dir": "/elsewhere"}},
    "resumable": {"run": {"limit": 3}, "resumable": True},
    "resume_off": {"run": {"resume_from_cache": False}, "resumable": {"max_retries": 1}},
    # Dotted keys are paths, nested mappings are flattened, empty ones give nothing.
    "nested": {"run": {"a.b": 1, "c": {"d": {}, "e": "x y", "f": {"g": "007"}}, "h": {}}},
    "typed": {
        "run": {
            "s_int": "12",
            "s_float": "1e-5",
            "s_bool": "true",
            "url": "http://h:1/v1",
            "path": "/data/x.jsonl",
            "words": "a b",
            "items": [1, "2", "x", 0.5, True],
            "neg": -3,
            "ratio": 0.25,
        },
        "prepare": {"split": "benchmark", "num": "3", "deep": {"k": "v"}},
    },
    # NeMo Gym writes None as `None`, which Hydra reads as the string 'None'; ours is null.
    "null": {"run": {"n": None}},
}

# Benchmarks of configs whose policy is no model (a Ray cluster: only `--model-type` is written) or
# that compose no policy model config (policy_model_type "": no `--model-type`).
OTHER_POLICIES: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "ray_policy": (
        {"sandbox": {"type": "ray", "container": "ray", "node_pools": ["gpu"]}},
        {"policy_model": "sandbox"},
        {"run": {"x": 1}},
    ),
    "no_model_type": ({"policy": policy_service()}, {"policy_model_type": ""}, {"run": {"x": 1}}),
}

# Where the two tools knowingly part (docs/compatibility.md, "The real driver").
KNOWN = {("null", "n"): (None, "None")}


_ORACLE = r"""
import argparse, contextlib, io, json, sys
from nemo_gym.cli.main import _eval_submit
outs = []
for path in sys.argv[1:]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _eval_submit(argparse.Namespace(config=path, resolve_only=False, dry_run=True, json=False), [])
    outs.append(out.getvalue())
print(json.dumps(outs))
"""


def _nemo_gym_scripts(text: str) -> tuple[str, dict[str, str]]:
    """The remote run dir and each benchmark's sbatch script from a dry run's output."""
    run_dir = re.search(r"\[dry-run\] remote run dir: (\S+)", text).group(1)
    parts = re.split(r"\[dry-run\] sbatch script for benchmark: (\S+)\n", text)
    return run_dir, {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def _nemo_gym_words(script: str) -> tuple[list[str], list[str]]:
    """`gym eval run` and `gym eval prepare` words as the driver's shell hands them to gym."""
    array = re.search(r"^GYM_CMD=\(\n(.*?)\n\)$", script, re.S | re.M).group(1)
    run = shlex.split(array)
    prepare = re.search(r"^\s*(gym eval prepare .*)$", script, re.M)
    # The prepare line sits inside a single-quoted `bash -c` block, where `'\''` is one quote.
    prep = shlex.split(prepare.group(1).replace("'\\''", "'")) if prepare else []
    return run, prep


def _our_words(words: tuple[Any, ...]) -> list[str]:
    # GYM_HEAD_PORT: the driver settles it at run time from NeMo Gym's default (docs/compatibility.md)
    port = {"GYM_POLICY_PORT": str(POLICY_PORT), "GYM_HEAD_PORT": "11000"}
    return ["".join(p if isinstance(p, str) else port[p.name] for p in w) for w in words]


def _parsed(words: list[str]) -> list[tuple[str, str, str]]:
    """Each override as (key, type, repr) after Hydra; other words as themselves."""
    parser = OverridesParser.create()
    out = []
    for word in words:
        if word.startswith("+"):
            value = parser.parse_override(word).value()
            out.append((word.split("=", 1)[0], type(value).__name__, repr(value)))
        else:
            out.append((word, "", ""))
    return out


@pytest.fixture(scope="module")
def both(nemo_gym: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every benchmark's sbatch script from NeMo Gym's dry run and its plan from gymbuild."""
    tmp = tmp_path_factory.mktemp("driver-parity")
    model = {"policy": policy_service()}
    configs = [slurm_config("/var/tmp/runs", BENCHMARKS, services=model, hostname=None)]
    for bench, (services, driver, benchmark) in OTHER_POLICIES.items():
        cfg = slurm_config("/var/tmp/runs", {bench: benchmark}, services=services, hostname=None)
        cfg["driver"].update(driver)
        configs.append(cfg)
    paths = [write_config(tmp, cfg, f"c{i}.yaml") for i, cfg in enumerate(configs)]
    env = {"GYM_LIMIT": "5"}
    done = nemo_gym.run_python(_ORACLE, *map(str, paths), env={**_base_env(), **env})
    assert done.returncode == 0, done.stderr
    scripts: dict[str, str] = {}
    plans: dict[str, Any] = {}
    for path, text in zip(paths, json.loads(done.stdout), strict=True):
        run_dir, theirs = _nemo_gym_scripts(text)
        with pytest.MonkeyPatch.context() as mp:  # OmegaConf's oc.env reads the process environment
            mp.setenv("GYM_LIMIT", env["GYM_LIMIT"])
            config = load_config(path, environ=env).config
        scripts |= theirs
        plans |= plan_submission(
            config, planning_traits(config), run_dir=run_dir, gym_job_id=Path(run_dir).name
        )
    return {"scripts": scripts, "plans": plans}


def _base_env() -> dict[str, str]:
    return {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}


@pytest.mark.parametrize("bench", [*BENCHMARKS, *OTHER_POLICIES])
def test_gym_eval_run_gets_the_overrides_nemo_gym_gives_it(both: dict[str, Any], bench: str) -> None:
    theirs_run, theirs_prepare = _nemo_gym_words(both["scripts"][bench])
    driver = both["plans"][bench].driver
    ours = _parsed(_our_words(driver.run))
    # Our one addition, last: the head server's port, settled at run time from NeMo Gym's default.
    assert ours[-1] == ("++head_server.port", "int", "11000")
    ours = ours[:-1]
    theirs = _parsed(theirs_run)
    for (b, key), (our_value, their_value) in KNOWN.items():
        if b == bench:
            at = next(i for i, w in enumerate(theirs) if w[0] == f"+{key}")
            assert theirs[at][2] == repr(their_value), "NeMo Gym changed: update KNOWN and the docs"
            theirs[at] = (f"+{key}", type(our_value).__name__, repr(our_value))
    assert ours == theirs
    assert _parsed(["gym", "eval", "prepare", *driver.prepare]) == _parsed(theirs_prepare) or (
        not driver.prepare and not theirs_prepare
    )


def test_no_override_is_written_twice(both: dict[str, Any]) -> None:
    for bench, plan in both["plans"].items():
        keys = [w.split("=", 1)[0] for w in _our_words(plan.driver.run) if w.startswith("+")]
        assert len(keys) == len(set(keys)), (bench, keys)


def test_policy_port_is_the_one_nemo_gym_writes(both: dict[str, Any]) -> None:
    """The comparison above stands the job's settled port in for GYM_POLICY_PORT: check it is that one."""
    plan = both["plans"]["plain"]
    assert any(isinstance(p, Ref) and p.name == "GYM_POLICY_PORT" for w in plan.driver.run for p in w)
    assert json.dumps(POLICY_PORT) in both["scripts"]["plain"]


_RESOLVE = r"""
import argparse, contextlib, io, sys
from nemo_gym.cli.main import _eval_submit
for path in sys.argv[1:]:
    with contextlib.redirect_stdout(io.StringIO()):
        _eval_submit(argparse.Namespace(config=path, resolve_only=True, dry_run=False, json=False), [])
"""


def test_the_real_driver_configs_are_configs_nemo_gym_accepts(nemo_gym: Any, tmp_path: Path) -> None:
    """tests/realgym/configs drive the real-driver e2e: they must stay NeMo Gym 0.7.0 submit configs."""
    env = {**_base_env(), **Stage(tmp_path, tmp_path, tmp_path).environ(tmp_path, REALGYM_LIMIT="4")}
    configs = sorted(CONFIGS.glob("*.yaml"))
    done = nemo_gym.run_python(_RESOLVE, *map(str, configs), env=env)
    assert len(configs) == 2 and done.returncode == 0, done.stderr
