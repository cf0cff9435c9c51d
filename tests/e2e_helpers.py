"""Shared helpers for end-to-end tests: the user's side of gymbuild, against the real test cluster.

An e2e test does what a user does: writes a config file, runs the `gymbuild` console script in a
subprocess (a fresh process per command, as from a shell), and looks at what landed on the cluster.
These helpers keep that short. They are imported by several test modules: keep the names and
signatures stable, and add rather than change.

    cfg = slurm_config(cluster.run_dir("mine"), {"gpqa": {"run": {"+fake_num_calls": 2}}})
    path = write_config(tmp_path, cfg)
    run = gymbuild("submit", f"config={path}", cwd=tmp_path, env=user_env(tmp_path))
    assert run.rc == 0, run.stderr
    job_id = manifest(cfg)["benchmarks"][0]["job_id"]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import yaml

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
SCHEMA = REPO / "schemas" / "gym-job.v1.schema.json"
POLICY_IMAGE = "vllm/vllm-openai:v0.10.1"
DRIVER_IMAGE = "python:3.12"


class Run(NamedTuple):
    """One `gymbuild` command as a shell would see it; unpacks as (rc, stdout, stderr)."""

    rc: int
    stdout: str
    stderr: str


def write_config(directory: Path, data: Mapping[str, Any], name: str = "submit.yaml") -> Path:
    """Write `data` as the YAML config file `directory/name` and return its path."""
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(json.loads(json.dumps(data)), sort_keys=False))
    return path


def policy_service(**fields: Any) -> dict[str, Any]:
    """A vLLM policy service (the fake vllm on the cluster); `fields` add or replace keys."""
    return {"type": "vllm", "container": POLICY_IMAGE, "model": "Qwen/Qwen3-8B", **fields}


def slurm_config(
    output_path: Path | str,
    benchmarks: Mapping[str, Any],
    *,
    services: Mapping[str, Any] | None = None,
    pools: Mapping[str, Any] | None = None,
    hostname: str | None = "gym-login",
    account: str = "gym",
    walltime: str = "00:10:00",
    extra_args: Mapping[str, Any] | None = None,
    driver: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A config for the test cluster: one `policy` service (unless `services`), compute `cluster`,
    the collector off. `hostname=None` submits on this machine (it is the login node too).
    `pools=None` gives one pool `gpu` of one node; pass `{}` for none."""
    compute: dict[str, Any] = {"type": "slurm", "account": account, "walltime": walltime}
    if hostname:
        compute["hostname"] = hostname
    if extra_args:
        compute["extra_args"] = dict(extra_args)
    if pools is None:
        pools = {"gpu": {"partition": "gpu", "nodes": 1}}
    if pools:
        compute["node_pools"] = dict(pools)
    return {
        "services": dict(services) if services is not None else {"policy": policy_service()},
        "compute": {"cluster": compute},
        "driver": {"policy_model": "policy", **(driver or {}), "benchmarks": dict(benchmarks)},
        "job": {"output_path": str(output_path)},
        "otel": {"enabled": False},
    }


def user_env(home: Path, **extra: str) -> dict[str, str]:
    """The submitting shell's environment: this process's, with the local index under `home`
    (XDG_CACHE_HOME) so tests never read or write each other's records."""
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(home / "xdg-cache")
    env.update(extra)
    return env


def gymbuild_argv(*args: str) -> list[str]:
    """The argv of the installed console script, as a user would type it."""
    exe = shutil.which("gymbuild")
    assert exe, "the gymbuild console script is not on PATH (pip install -e '.[test]')"
    return [exe, *args]


def gymbuild(*args: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 300) -> Run:
    """Run `gymbuild ARGS...` in `cwd` (where its `.gymbuild/` workspace lives) and wait for it."""
    done = subprocess.run(
        gymbuild_argv(*args),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def run_dirs(output_path: Path | str) -> list[Path]:
    """The submissions' run directories (`gym-job-*`) under a config's job.output_path, oldest first."""
    return sorted(Path(output_path).glob("gym-job-*"))


def run_dir(config: Mapping[str, Any] | Path | str) -> Path:
    """The one run directory under a config's job.output_path (a config dict or the path itself)."""
    output = config["job"]["output_path"] if isinstance(config, Mapping) else config
    found = run_dirs(output)
    assert len(found) == 1, f"expected one run directory under {output}, found {found}"
    return found[0]


def manifest(config: Mapping[str, Any] | Path | str) -> dict[str, Any]:
    """The parsed gym-job.json of the one submission under a config's job.output_path."""
    return json.loads((run_dir(config) / "gym-job.json").read_text())


def job_ids(record: Mapping[str, Any]) -> dict[str, str | None]:
    """benchmark -> job id (None when it was not queued) of a parsed gym-job.json."""
    return {b["benchmark"]: b["job_id"] for b in record["benchmarks"]}


def wait_for_jobs(cluster: Any, ids: Sequence[str], timeout: float = 180) -> dict[str, Any]:
    """Wait until every job has ended; job id -> the cluster fixture's JobResult."""
    deadline = time.monotonic() + timeout
    return {i: cluster.wait_for_job(i, timeout=max(deadline - time.monotonic(), 1)) for i in ids}


def sacct_jobs(job_name: str, workdir_prefix: Path | str) -> list[str]:
    """Every job Slurm's accounting knows by `job_name` whose working directory is under
    `workdir_prefix`: the jobs really queued for one run, whatever gymbuild's record says."""
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-a", "-S", "now-1days", "--name", job_name, "-o", "JobID,WorkDir"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    prefix = str(workdir_prefix).rstrip("/") + "/"
    return [jid for jid, _, wd in (line.partition("|") for line in out.splitlines()) if wd.startswith(prefix)]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The complete JSON lines of a file (the fake gym's rollouts, fake-pyxis records)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def pyxis_steps(bench_dir: Path, job_id: str) -> dict[str, list[dict[str, Any]]]:
    """step id -> the fake-pyxis records of each containerised step of a job (one per node)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((bench_dir / ".fake-pyxis").glob(f"{job_id}.*.json")):
        found[path.name.split(".")[1]] = read_jsonl(path)
    return found
