"""Acceptance parity with NeMo Gym 0.7.0: the corpus through both tools, verdict against verdict.

NeMo Gym's verdict comes from its own CLI function (`gym eval submit -c F --dry-run`, all configs in
one process: oracle_verdicts.py): Hydra composition, OmegaConf interpolation, SubmitConfig, then the
executor's checks and the rendering of each batch script. gymbuild's comes from its loader, as
`gymbuild resolve` uses it. The verdicts agree, or differences.yaml says why they differ.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from gymbuild.config import load_config
from gymbuild.errors import ConfigError
from tests.oracle.nemo_gym import NemoGym
from tests.parity.cases import ENV, accepted, accepted_by_both, cases, differences, refused
from tests.parity.conftest import corpus_environ

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "compatibility.md"

# The checks of api.py that are not validators of their own: the parts of SubmitConfig's
# _resolve_and_validate_placements and _validate_pd_services, what the executor checks before it
# renders a script (dry_run.*), and pydantic's lax reading of scalars (lax.*). Each one, like each
# validator, needs a config NeMo Gym accepts and one it refuses.
CHECKS = {
    "SubmitConfig._resolve_and_validate_placements": (
        "SubmitConfig.multiple_compute",
        "SubmitConfig.pd_tier_names",
        "SubmitConfig.placement",
        "SubmitConfig.ray_node_pools",
        "SubmitConfig.node_pool",
        "SubmitConfig.pd_tier_pool",
        "SubmitConfig.server_per_node",
        "SubmitConfig.dp_divisible",
        "SubmitConfig.gpu_footprint",
        "SubmitConfig.policy_model",
        "SubmitConfig.policy_conflict",
    ),
    "SubmitConfig._validate_pd_services": ("SubmitConfig._validate_pd_services",),
    "executor": (
        "dry_run.benchmark_name",
        "dry_run.otel_destination",
        "dry_run.gym_telemetry",
        "dry_run.otel_token",
        "dry_run.pool_directives",
        "dry_run.pool_extra_args",
        "dry_run.env_key",
        "dry_run.max_walltime",
    ),
    "lax": ("lax.int", "lax.bool", "lax.float", "lax.str"),
}
# Validators that only fill in defaults: no config makes them refuse.
FILL_ONLY = {
    "VllmServiceConfig._default_health_check": "sets the health check's port to the service's",
    "VllmPDServiceConfig._build_tiers": "builds the tiers from already validated fields",
}
# Models no user writes: abstract bases (their fields are checked through the subclasses) and the
# tier config NeMo Gym builds from a vllm_pd service.
NOT_WRITTEN = {
    "_StrictModel",
    "BaseComputeConfig",
    "BaseServiceConfig",
    "BaseModelServiceConfig",
    "VllmPDTierConfig",
}


@pytest.fixture(scope="module")
def nemo_verdicts(nemo_corpus_verdicts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """NeMo Gym's answer per config name."""
    return nemo_corpus_verdicts


def nemo_accepts(answer: dict[str, Any]) -> bool:
    return answer["resolve"]["ok"] and answer["dry_run"]["ok"]


@cache
def _gymbuild(path: Path) -> ConfigError | None:
    try:
        load_config(path, environ=ENV)
    except ConfigError as err:
        return err
    return None


@pytest.fixture(scope="module")
def gymbuild_verdicts(in_corpus_env: None) -> dict[str, ConfigError | None]:
    """gymbuild's refusal per config name (None: accepted), loaded in-process as `resolve` does."""
    return {c.name: _gymbuild(c.path) for c in cases()}


def test_the_corpus_is_large_and_well_formed() -> None:
    names = [c.name for c in cases()]
    assert len(names) == len(set(names)), "a name is in both accept/ and refuse/"
    assert len(accepted()) >= 50 and len(refused()) >= 30 and len(names) >= 80
    for case in cases():
        assert case.about and case.covers, f"{case.path.name} lacks its description or `# covers:`"


def test_nemo_gym_gives_each_config_the_verdict_of_its_directory(nemo_verdicts: dict[str, Any]) -> None:
    wrong = {
        c.name: nemo_verdicts[c.name]
        for c in cases()
        if nemo_accepts(nemo_verdicts[c.name]) != c.nemo_gym_accepts
    }
    assert wrong == {}


def test_verdicts_agree_or_the_difference_is_listed(
    nemo_verdicts: dict[str, Any], gymbuild_verdicts: dict[str, ConfigError | None]
) -> None:
    found = {}
    for case in cases():
        nemo = nemo_accepts(nemo_verdicts[case.name])
        ours = gymbuild_verdicts[case.name] is None
        if nemo != ours:
            found[case.name] = ("accept" if nemo else "refuse", "accept" if ours else "refuse")
    listed = {
        name: (entry["nemo_gym"], entry["gymbuild"]) for name, entry in differences()["acceptance"].items()
    }
    assert found == listed
    assert all(
        entry["reason"] and entry["kind"] in ("extension", "cannot-run")
        for entry in differences()["acceptance"].values()
    )
    # gymbuild accepts more only where it extends NeMo Gym's format
    for name, entry in differences()["acceptance"].items():
        assert (entry["kind"] == "extension") == (entry["gymbuild"] == "accept"), name


def test_every_model_and_validator_is_covered_both_ways(nemo_fields: dict[str, Any]) -> None:
    models = nemo_fields["models"]
    written = [m for m in models if m not in NOT_WRITTEN]
    covered_accept = {tag for c in accepted() for tag in c.covers}
    covered_refuse = {tag for c in refused() for tag in c.covers}
    assert sorted(m for m in written if m not in covered_accept) == []

    validators = []
    for name, model in models.items():
        own = set(model["model_validators"]) | {v for f in model["fields"].values() for v in f["validators"]}
        inherited = {
            v
            for base in model["bases"]
            for v in set(models[base]["model_validators"])
            | {x for f in models[base]["fields"].values() for x in f["validators"]}
        }
        validators += [f"{name}.{v}" for v in sorted(own - inherited)]
    # the big model validator is covered through the checks it makes
    parts = [v for v in validators if v not in CHECKS] + [c for group in CHECKS.values() for c in group]
    assert "SubmitConfig._resolve_and_validate_placements" in validators
    assert sorted(p for p in parts if p not in covered_accept) == []
    assert sorted(p for p in parts if p not in covered_refuse and p not in FILL_ONLY) == []
    known = set(parts) | set(models) | set(FILL_ONLY)
    assert sorted((covered_accept | covered_refuse) - known) == [], "a `# covers:` tag names nothing"


def test_gymbuild_refusals_name_the_file_the_config_path_and_a_fix(
    gymbuild_verdicts: dict[str, ConfigError | None],
) -> None:
    for case in cases():
        error = gymbuild_verdicts[case.name]
        if error is None:
            continue
        assert str(case.path) in str(error) or case.path.name in str(error)
        for problem in error.problems:
            assert problem.message and problem.fix, (case.name, problem)
        if case.where is not None:
            assert case.where in [p.path for p in error.problems], (case.name, error.problems)
    for case in refused():
        if case.name not in differences()["acceptance"]:
            assert case.where, f"{case.path.name} has no `# path:` line"


# A refusal from each stage NeMo Gym refuses at, and one of each kind of difference.
CLI_SAMPLE = ("port-text", "pd-tier-no-pool", "otel-token-unset", "account-missing-value", "oc-env-unset")
# Refused only where jobs are queued (an unset secret: resolve warns, README "Secrets"): run as submit.
QUEUING_ONLY = ("otel-token-unset",)


def test_refusals_on_the_command_line_are_one_clear_message() -> None:
    def run(name: str) -> tuple[str, subprocess.CompletedProcess[str]]:
        (case,) = [c for c in cases() if c.name == name]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "gymbuild.cli.main",
                "submit" if name in QUEUING_ONLY else "resolve",
                f"config={case.path}",
            ],
            capture_output=True,
            text=True,
            env=corpus_environ(),
            cwd=ROOT,
            timeout=120,
        )
        return name, done

    with ThreadPoolExecutor(len(CLI_SAMPLE)) as pool:
        results = list(pool.map(run, CLI_SAMPLE))
    for name, done in results:
        (case,) = [c for c in cases() if c.name == name]
        assert done.returncode == 1, (name, done.stderr)
        assert done.stdout == "" and "Traceback" not in done.stderr, name
        assert case.path.name in done.stderr and "fix:" in done.stderr, name


def test_the_real_gym_cli_agrees_with_the_oracle_process(
    nemo_gym: NemoGym, nemo_verdicts: dict[str, Any]
) -> None:
    """oracle_verdicts.py calls the CLI's function in one process; `gym` itself gives the same answers."""
    sample = ["vllm-pd", "pools-extra-args-conflict"]

    def run(name: str) -> subprocess.CompletedProcess[str]:
        (case,) = [c for c in cases() if c.name == name]
        return subprocess.run(
            [str(nemo_gym.gym), "eval", "submit", "-c", str(case.path), "--dry-run"],
            capture_output=True,
            text=True,
            env=corpus_environ(),
            timeout=120,
        )

    with ThreadPoolExecutor(len(sample)) as pool:
        done = dict(zip(sample, pool.map(run, sample), strict=True))
    for name, result in done.items():
        assert (result.returncode == 0) == nemo_accepts(nemo_verdicts[name]), (name, result.stderr[-2000:])
    assert "#SBATCH" in done["vllm-pd"].stdout


def _section(heading: str) -> str:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_docs_list_every_difference() -> None:
    section = _section("Fields and acceptance")
    missing = [name for name in differences()["acceptance"] if f"`{name}`" not in section]
    assert missing == []


def test_accepted_configs_use_only_mounts_that_exist_here() -> None:
    """The behaviour suites render and run every accepted config: mount sources must exist."""
    import yaml

    for case in accepted():
        if case.name in differences()["acceptance"]:
            continue
        tree = yaml.safe_load(case.path.read_text(encoding="utf-8"))
        units = [*(tree.get("services") or {}).values(), tree.get("driver") or {}]
        units += [u.get(t) or {} for u in list(units) for t in ("prefill", "decode") if isinstance(u, dict)]
        for unit in units:
            for mount in unit.get("mounts") or []:
                assert os.path.exists(mount.split(":")[0]), (case.name, mount)


# Configs both tools accept whose job gymbuild's plan would still refuse to build, with the reason.
# Empty: every one renders. The test below fails when a config is refused or a listed one renders.
NOT_YET_RENDERED: dict[str, str] = {}


def test_configs_both_tools_accept_also_plan_and_render(in_corpus_env: None) -> None:
    """What resolve accepts, render and submit must build: a NeMo Gym config may not fail later."""
    from gymbuild.errors import UserError
    from gymbuild.executors.base import planning_traits
    from gymbuild.plan import plan_submission
    from gymbuild.render import render_job

    failed = {}
    for case in accepted_by_both():
        resolved = load_config(case.path, environ=ENV)
        try:
            for plan in plan_submission(
                resolved.config,
                planning_traits(resolved.config),
                run_dir="/var/tmp/gym-parity",
                gym_job_id="gym-parity",
            ).values():
                render_job(plan, resolved.secrets)
        except UserError as err:
            failed[case.name] = str(err)
    assert sorted(failed) == sorted(NOT_YET_RENDERED), failed
