"""Bad input against the real cluster, concurrent submits, and records that stay loadable.

- A sample of the invalid-config corpus (tests/invalid/) through `gymbuild submit` aimed at the
  cluster: exit 1, one message naming the file, nothing in the output directory, no job queued.
- Two submits on one workspace at once: one waits and then fails naming the holder, or both finish;
  either way each benchmark is queued once. Many submits of one config in the same second from
  separate workspaces get distinct run directories.
- Every record format this project ever wrote loads (tests/data/: a record from a real submit of
  today's code, schema 1, and NeMo Gym 0.7.0's own).
"""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from e2e_helpers import (
    gymbuild,
    job_ids,
    manifest,
    run_dirs,
    sacct_jobs,
    slurm_config,
    user_env,
    write_config,
)
from reliability_helpers import cancel, jobs_queued, start_gymbuild

from gymbuild.state.records import SubmissionRecord
from tests.config.test_invalid import CASES

DATA = Path(__file__).resolve().parents[1] / "data"

# One case per family: syntax, types, unknown keys, cross-field rules, overrides, interpolation,
# env prefixes, names, walltime, pools, mounts, secrets.
SUBMIT_SAMPLE = [
    "bad-yaml",
    "wrong-type-port",
    "unknown-service-key",
    "policy-conflict",
    "override-unknown-key",
    "bad-interpolation",
    "env-bare-value",
    "service-name",
    "walltime-syntax",
    "pools-disagree-partition",
    "mount-relative",
    "host-var-unset",
]


def _aimed_at(case, output: Path, tmp_path: Path) -> Path:
    """The case's config pointed at the cluster and at `output`, kept broken the same way."""
    text = case.config.read_text() if case.config.is_file() else ""
    try:
        tree = yaml.safe_load(text)
    except yaml.YAMLError:
        return case.config  # unparsable: it never gets as far as the cluster anyway
    if isinstance(tree, dict) and isinstance(tree.get("job"), dict):
        tree["job"]["output_path"] = str(output)
    if isinstance(tree, dict) and isinstance(tree.get("compute"), dict):
        for compute in tree["compute"].values():
            if isinstance(compute, dict):
                compute["hostname"] = "gym-login"
    path = tmp_path / case.config.name
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return path


@pytest.mark.cluster
@pytest.mark.parametrize("name", SUBMIT_SAMPLE)
def test_invalid_config_submits_nothing(cluster, tmp_path, name) -> None:
    case = next(c for c in CASES if c.name == name)
    output = cluster.run_dir(f"invalid-{name}")
    config = _aimed_at(case, output, tmp_path)
    env = user_env(tmp_path, **case.env)
    for var in ("HF_TOKEN", "WANDB_API_KEY", "OTEL_TOKEN"):
        if var not in case.env:
            env.pop(var, None)
    result = gymbuild("submit", f"config={config}", *case.overrides, cwd=tmp_path, env=env)
    assert result.rc == 1, result
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert str(config) in result.stderr
    assert list(output.iterdir()) == []
    for bench in ("gpqa", "ifeval", "smoke", "arena-hard"):
        assert sacct_jobs(f"gym-{bench}", output) == []


def test_invalid_corpus_covers_every_family() -> None:
    families = {
        "syntax": ["bad-yaml", "top-level-list"],
        "types": ["wrong-type-port", "wrong-type-benchmarks"],
        "unknown keys": ["unknown-top-level-key", "unknown-service-key"],
        "cross-field": ["policy-conflict", "gpu-footprint-total"],
        "overrides": ["override-unknown-key", "override-scratch"],
        "interpolation": ["bad-interpolation", "oc-env-unset"],
        "env prefixes": ["env-bare-value", "env-bad-var", "host-var-unset"],
        "names": ["service-name", "benchmark-name"],
        "walltime": ["walltime-syntax", "walltime-unquoted"],
        "pools": ["node-pool-unknown", "pools-disagree-gpus"],
        "mounts": ["mount-relative", "mount-shape"],
        "file": ["missing-file", "directory", "empty-file"],
    }
    names = {c.name for c in CASES}
    missing = {f: [n for n in ns if n not in names] for f, ns in families.items()}
    assert {f: m for f, m in missing.items() if m} == {}


@pytest.mark.cluster
def test_two_submits_on_one_workspace_at_once(cluster, tmp_path) -> None:
    output = cluster.run_dir("concurrent")
    run = {"config_paths": ["benchmarks/gpqa/config.yaml"], "fake_num_calls": 1}
    config = write_config(tmp_path, slurm_config(output, {f"b{i}": {"run": run} for i in range(3)}))
    env = user_env(tmp_path)
    ids: dict = {}
    try:
        procs = [start_gymbuild(["submit", f"config={config}"], cwd=tmp_path, env=env) for _ in range(2)]
        results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
        for rc, _out, err in results:
            assert "Traceback" not in err
            assert rc == 0 or (rc == 1 and "is in use by pid" in err), err
        assert any(rc == 0 for rc, _, _ in results)
        assert len(run_dirs(output)) == 1
        ids = job_ids(manifest(output))
        assert all(ids.values())
        for bench, job_id in ids.items():
            assert jobs_queued(f"gym-{bench}", output, job_id) == [job_id]
        after = gymbuild("submit", f"config={config}", cwd=tmp_path, env=env)
        assert after.rc == 0 and "nothing to submit" in after.stdout
    finally:
        cancel(list(ids.values()))


@pytest.mark.cluster
def test_same_config_same_second_from_separate_workspaces_gets_distinct_run_dirs(cluster, tmp_path) -> None:
    output = cluster.run_dir("same-second")
    config = write_config(tmp_path, slurm_config(output, {"gpqa": {"run": {"fake_num_calls": 1}}}))
    count = 6
    ids: list = []
    try:
        with ThreadPoolExecutor(max_workers=count) as pool:
            runs = list(
                pool.map(
                    lambda i: gymbuild(
                        "submit", f"config={config}", f"workspace={tmp_path}/ws{i}", cwd=tmp_path,
                        env=user_env(tmp_path / f"u{i}"),
                    ),
                    range(count),
                )
            )  # fmt: skip
        assert all(r.rc == 0 for r in runs), runs
        dirs = run_dirs(output)
        assert len(dirs) == count
        ids = [json.loads((d / "gym-job.json").read_text())["benchmarks"][0]["job_id"] for d in dirs]
        assert len(set(ids)) == count
    finally:
        cancel(ids)


@pytest.mark.parametrize("fixture", sorted(p.name for p in DATA.glob("*gym-job*.json")))
def test_every_record_format_ever_written_loads(fixture: str) -> None:
    payload = json.loads((DATA / fixture).read_text())
    record = SubmissionRecord.load(payload)
    assert record.gym_job_id == payload["gym_job_id"]
    assert [j.benchmark for j in record.benchmarks] == [b["benchmark"] for b in payload["benchmarks"]]


def test_a_gymbuild_written_record_is_kept_as_a_fixture() -> None:
    written = json.loads((DATA / "gymbuild-0-schema-1-gym-job.json").read_text())
    assert written["schema_version"] == 1 and written["executor"] == "slurm"
    assert all(j["job_id"] for j in written["benchmarks"])


def refresh_fixture(run_dir: Path) -> None:
    """How tests/data/gymbuild-0-schema-1-gym-job.json was made: a real submit's manifest, copied."""
    shutil.copy(run_dir / "gym-job.json", DATA / "gymbuild-0-schema-1-gym-job.json")
