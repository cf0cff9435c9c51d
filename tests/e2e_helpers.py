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

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest
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


def local_command_config(command: str = "true", output_path: str = "runs") -> dict[str, Any]:
    """A config of one `command` benchmark (`demo`) under the local executor: what a sweep over
    checkpoint scripts evaluates."""
    return {
        "services": {},
        "compute": {"here": {"type": "local"}},
        "driver": {"benchmarks": {"demo": {"command": command}}},
        "job": {"output_path": output_path},
        "otel": {"enabled": False},
    }


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
    (XDG_CACHE_HOME) and the workspaces too (XDG_STATE_HOME), so tests never read or write each
    other's records."""
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(home / "xdg-cache")
    env["XDG_STATE_HOME"] = str(home / "xdg-state")
    env.update(extra)
    return env


def gymbuild_argv(*args: str) -> list[str]:
    """The argv of the installed console script, as a user would type it."""
    exe = shutil.which("gymbuild")
    assert exe, "the gymbuild console script is not on PATH (pip install -e '.[test]')"
    return [exe, *args]


# Run by the interpreter that runs the tests before the command it wraps replaces it (os.execv: the
# same pid, so the test signals the command itself, and only once it is the command).
_AT_DEFAULTS = (
    "import os, signal, sys\n"
    "for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):\n"
    "    signal.signal(sig, signal.SIG_DFL)\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)


def with_default_signals(argv: Sequence[str]) -> list[str]:
    """`argv` started with SIGHUP, SIGINT and SIGTERM at their defaults, as from a terminal, for a
    test that signals it.

    An ignored signal stays ignored across fork and exec, and a test run started under nohup (SIGHUP
    ignored) or by a non-interactive shell's `cmd &` (SIGINT ignored) hands that to every process it
    starts; gymbuild leaves an ignored signal ignored (so `nohup gymbuild submit` survives a hangup),
    and a test of what it does on SIGHUP would see it go on and exit 0. Reset in the child, not in
    this process, which keeps ignoring what its runner told it to."""
    return [sys.executable, "-I", "-c", _AT_DEFAULTS, *argv]


def gymbuild(*args: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 300) -> Run:
    """Run `gymbuild ARGS...` in `cwd` and wait for it (its workspace follows the config, under
    XDG_STATE_HOME: `workspaces(home)` with `user_env(home)`)."""
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


def workspaces(home: Path) -> Path:
    """Where `user_env(home)`'s gymbuild keeps its workspaces (one `<config stem>-<key>/` per config)."""
    return home / "xdg-state" / "gymbuild" / "workspaces"


def workspaces_home() -> Path:
    """The workspaces of gymbuild run with this process's environment (conftest gives each test its
    own XDG_STATE_HOME)."""
    return Path(os.environ["XDG_STATE_HOME"]) / "gymbuild" / "workspaces"


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
    """Every job Slurm's accounting knows by `job_name` whose working directory is `workdir_prefix`
    or under it: the jobs really queued for one run, whatever gymbuild's record says. A job queued a
    moment ago may take a second to show (see `wait_for_sacct_jobs`)."""
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-a", "-S", "now-1days", "--name", job_name, "-o", "JobID,WorkDir"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    top = str(workdir_prefix).rstrip("/")
    found = (line.split("|", 1) for line in out.splitlines() if "|" in line)
    return [jid for jid, wd in found if wd == top or wd.startswith(top + "/")]


def wait_for_sacct_jobs(
    job_name: str, workdir_prefix: Path | str, count: int, timeout: float = 20
) -> list[str]:
    """`sacct_jobs`, polled until it lists at least `count` jobs (accounting lags sbatch a little)."""
    deadline = time.monotonic() + timeout
    while True:
        found = sacct_jobs(job_name, workdir_prefix)
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def wait_for_file(path: Path, timeout: float = 120) -> None:
    """Wait (bounded) until `path` exists: a job or a step has got as far as writing it."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"{path} did not appear within {timeout}s")
        time.sleep(0.2)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The complete JSON lines of a file (the fake gym's rollouts, fake-pyxis records)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def pyxis_steps(bench_dir: Path, job_id: str) -> dict[str, list[dict[str, Any]]]:
    """step id -> the fake-pyxis records of each containerised step of a job (one per node)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((bench_dir / ".fake-pyxis").glob(f"{job_id}.*.json")):
        found[path.name.split(".")[1]] = read_jsonl(path)
    return found


def local_index_file(home: Path, gym_job_id: str) -> Path:
    """Where `user_env(home)`'s gymbuild keeps a submission in this machine's local index."""
    return home / "xdg-cache" / "nemo-gym" / "jobs" / f"{gym_job_id}.json"


class SbatchWrapper(NamedTuple):
    """A directory to put first on PATH: its `sbatch` logs each call, then runs the real one."""

    bin_dir: Path
    calls_file: Path

    def calls(self) -> int:
        """How many times sbatch was called through the wrapper so far."""
        return len(self.calls_file.read_text().splitlines()) if self.calls_file.exists() else 0

    def path(self) -> str:
        """A PATH value with the wrapper first (for `user_env(home, PATH=wrapper.path())`)."""
        return f"{self.bin_dir}:{os.environ['PATH']}"


def sbatch_wrapper(directory: Path, *, sleep: float = 0, slurm_conf: Path | None = None) -> SbatchWrapper:
    """An `sbatch` wrapper for submissions on this machine (no hostname): counts calls, can make each
    call take `sleep` seconds first, and can point sbatch at another slurm.conf (a dead controller)."""
    real = shutil.which("sbatch")
    assert real, "sbatch is not installed"
    bin_dir = directory / "sbatch-wrapper"
    bin_dir.mkdir(parents=True, exist_ok=True)
    calls = directory / "sbatch-calls.log"
    conf = f"export SLURM_CONF={shlex.quote(str(slurm_conf))}\n" if slurm_conf else ""
    script = bin_dir / "sbatch"
    script.write_text(
        "#!/bin/bash\n"
        f'printf "%s\\n" "$*" >>{shlex.quote(str(calls))}\n'
        f"sleep {sleep}\n"
        f'{conf}exec {shlex.quote(real)} "$@"\n'
    )
    script.chmod(0o755)
    return SbatchWrapper(bin_dir, calls)


def set_submit_limit(account: str, limit: int | None) -> None:
    """Allow root at most `limit` submitted jobs under `account` (None: no limit), and wait until
    slurmctld enforces it: slurmdbd pushes a change a moment after sacctmgr makes it, and sbatch is
    judged by slurmctld's copy. Creates the account and root's association first (idempotent).
    Use an account of the test's own: a limit on `gym` would refuse other tests' jobs."""

    def sacctmgr(*args: str) -> None:
        subprocess.run(["sacctmgr", "-i", *args], capture_output=True, text=True, timeout=30, check=False)

    value = -1 if limit is None else limit
    sacctmgr("add", "account", account, "cluster=gymtest")
    sacctmgr("add", "user", "root", f"account={account}", "cluster=gymtest")
    sacctmgr("modify", "user", "root", "where", f"account={account}", "set", f"maxsubmitjobs={value}")
    # As scontrol shows root's association: "MaxSubmitJobs=2(0)" (limit, jobs now), or unset.
    want = "MaxSubmitJobs= " if limit is None else f"MaxSubmitJobs={limit}("
    deadline = time.monotonic() + 30
    shown = ""
    while time.monotonic() < deadline:
        shown = subprocess.run(
            ["scontrol", "show", "assoc_mgr", "users=root", f"accounts={account}", "flags=assoc"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        if want in shown.split("UserName=root", 1)[-1]:
            return
        time.sleep(0.5)
    raise AssertionError(f"slurmctld did not take MaxSubmitJobs={limit} for {account} within 30 s:\n{shown}")


def kill_local_jobs(output_path: Path) -> None:
    """SIGKILL what is left of every local job recorded under `output_path` (a failed test must leave
    no process behind), but only a process group whose leader still runs a script of that run: a
    local job id is a pid, pids are reused (pid_max is 32768 on these machines), and by the time a
    test cleans up, an ended job's id may name another test's job."""
    for manifest in output_path.glob("gym-job-*/gym-job.json"):
        record = json.loads(manifest.read_text())
        for job in record["benchmarks"]:
            for job_id in filter(None, [job.get("job_id"), *job.get("previous_job_ids", [])]):
                try:
                    leader = Path(f"/proc/{int(job_id)}/cmdline").read_bytes().replace(b"\0", b" ")
                except (OSError, ValueError):
                    continue
                if record["run_dir"].encode() in leader:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(int(job_id), signal.SIGKILL)


def shellcheck() -> str:
    """The shellcheck program; a test that needs it is skipped with the fix where it is missing, and
    fails where GYMBUILD_REQUIRE_SHELLCHECK=1 (CI installs it: a missing one must not pass quietly)."""
    found = shutil.which("shellcheck")
    if found is None:
        problem = "shellcheck is not installed (apt-get install -y shellcheck)"
        if os.environ.get("GYMBUILD_REQUIRE_SHELLCHECK") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    return found
