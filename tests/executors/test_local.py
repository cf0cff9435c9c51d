"""The local executor, end to end: real `gymbuild` commands in subprocesses, real process groups.

Each test writes a config with `compute.<name>.type: local`, submits it, and watches the job the way
a user does (`gymbuild status json=1`, the run directory). The outcomes are those of a Slurm job
(tests/render/test_rendered.py runs the same shared bash under a stand-in srun): a failing driver fails the
job with its exit status; a service that never becomes healthy, or dies while the driver runs, fails
it with exit 1 and says so in the job's log; `cancel` stops the whole process group.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_helpers import kill_local_jobs, wait_for_file
from jsonschema import Draft202012Validator

from gymbuild.resources import load_schema
from gymbuild.state.records import SubmissionRecord

ECHO = 'python3 -m gymbuild.demo.echo_server --port "$GYM_PORT"'


def echo_service(command: str = ECHO, timeout_seconds: int = 60, path: str = "/health") -> dict[str, Any]:
    return {
        "type": "command",
        "container": "python:3.12",
        "command": command,
        "port": 18760,
        "health_check": {"path": path, "timeout_seconds": timeout_seconds},
    }


def local_config(benchmarks: dict[str, Any], **sections: Any) -> dict[str, Any]:
    """A local config with one `echo` service (unless `services=`); the run dirs under ./runs."""
    return {
        "services": sections.get("services", {"echo": echo_service()}),
        "compute": {"here": {"type": "local", **sections.get("compute", {})}},
        "driver": {"env": {"ECHO_PORT": "runtime:GYM_PORT_ECHO"}, "benchmarks": benchmarks},
        "job": {"output_path": "runs"},
        "otel": {"enabled": False},
    }


class User:
    """A shell in `home`: its own working directory (workspace, ./runs) and local index."""

    def __init__(self, home: Path, config: dict[str, Any]) -> None:
        self.home = home
        self.config = home / "submit.yaml"
        self.config.write_text(yaml.safe_dump(config, sort_keys=False))
        self.env = {**os.environ, "XDG_CACHE_HOME": str(home / "cache")}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        exe = shutil.which("gymbuild")
        assert exe, "the gymbuild console script is not on PATH (pip install -e '.[test]')"
        return subprocess.run(
            [exe, *args, f"config={self.config}"],
            cwd=self.home,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    def submit(self) -> subprocess.CompletedProcess[str]:
        done = self.run("submit")
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    def status(self) -> dict[str, dict[str, Any]]:
        done = self.run("status", "json=1")
        assert done.returncode == 0, done.stdout + done.stderr
        return {row["benchmark"]: row for row in json.loads(done.stdout)["benchmarks"]}

    def wait(self, timeout: float = 90) -> dict[str, dict[str, Any]]:
        """Poll `status` until no job runs (the bound only keeps a broken job from hanging the suite)."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.status()
            if all(r["state"] != "RUNNING" for r in rows.values()) or time.monotonic() > deadline:
                return rows
            time.sleep(1)

    def wait_for(self, bench: str, timeout: float = 90) -> dict[str, Any]:
        """Poll `status` until `bench`'s job no longer runs."""
        deadline = time.monotonic() + timeout
        while (row := self.status()[bench])["state"] == "RUNNING" and time.monotonic() < deadline:
            time.sleep(1)
        return row

    @property
    def record(self) -> dict[str, Any]:
        (run_dir,) = (self.home / "runs").glob("gym-job-*")
        return json.loads((run_dir / "gym-job.json").read_text())

    def bench_dir(self, bench: str) -> Path:
        return Path(next(j["job_dir"] for j in self.record["benchmarks"] if j["benchmark"] == bench))

    def job_id(self, bench: str) -> str:
        return next(j["job_id"] for j in self.record["benchmarks"] if j["benchmark"] == bench)

    def log(self, bench: str, name: str) -> str:
        return (self.bench_dir(bench) / "logs" / f"{name}-{self.job_id(bench)}.log").read_text()


def group_members(pgid: int) -> list[str]:
    """`pid command` of every live process in process group `pgid` (from /proc, Linux)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(f"{stat.parent.name} {text.split(' (', 1)[1].split(')', 1)[0]}")
    return found


@pytest.fixture
def user(tmp_path: Path) -> Any:
    users: list[User] = []

    def make(config: dict[str, Any]) -> User:
        users.append(User(tmp_path, config))
        return users[-1]

    yield make
    kill_local_jobs(tmp_path / "runs")  # a failed test must leave no job behind


pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads process groups from /proc")


def test_a_job_runs_detached_and_status_reports_it_after_it_is_gone(user: Any) -> None:
    u = user(local_config({"ok": {"command": "echo driver-ran; sleep 2"}}))
    start = time.monotonic()
    done = u.submit()
    assert time.monotonic() - start < 60  # the submit did not wait for the job (it sleeps after health)
    job_id = u.job_id("ok")
    assert f"submitted ok -> local job {job_id}" in done.stdout
    assert (
        "warning: compute.here is local: containers (services.echo.container, driver.container) are not "
        "used; the commands run on this machine" in done.stderr
    )
    rows = u.wait()
    assert rows["ok"]["state"] == "COMPLETED" and rows["ok"]["exit_code"] == "0:0"
    bench = u.bench_dir("ok")
    assert bench.parent.parent == u.home / "runs"  # a relative output_path is under the working dir
    assert (bench / f".gym_exit-{job_id}").read_text() == "0\n"
    assert "driver-ran" in u.log("ok", "driver")
    assert "gym: service echo is healthy" in u.log("ok", "local")
    assert '"GET /health HTTP/1.1" 200' in u.log("ok", "echo")
    assert group_members(int(job_id)) == []  # the service was stopped with the job


def test_a_failing_driver_fails_the_job_with_its_exit_status(user: Any) -> None:
    u = user(local_config({"bad": {"command": "echo about to fail >&2; exit 3"}}))
    u.submit()
    rows = u.wait()
    assert rows["bad"]["state"] == "FAILED" and rows["bad"]["exit_code"] == "3:0"
    assert "about to fail" in u.log("bad", "driver")
    assert (u.bench_dir("bad") / f".gym_exit-{u.job_id('bad')}").read_text() == "3\n"


def test_a_command_benchmark_stops_at_its_first_failing_line(user: Any) -> None:
    """As in NeMo Gym, whose driver runs the command in its own `set -euo pipefail` shell."""
    u = user(local_config({"strict": {"command": 'false | cat\ntouch "$NEMO_GYM_BENCH_DIR/went-on"'}}))
    u.submit()
    rows = u.wait()
    assert rows["strict"]["state"] == "FAILED" and rows["strict"]["exit_code"] == "1:0"
    assert not (u.bench_dir("strict") / "went-on").exists()


def test_a_service_that_never_becomes_healthy_fails_the_job_before_the_driver(user: Any) -> None:
    services = {"echo": echo_service(timeout_seconds=10, path="/no-such-page")}
    u = user(local_config({"b": {"command": "touch driver-ran"}}, services=services))
    u.submit()
    rows = u.wait()
    assert rows["b"]["state"] == "FAILED" and rows["b"]["exit_code"] == "1:0"
    assert "gym: service echo was not ready within 10 s (2 attempts of 5 s)" in u.log("b", "local")
    assert not (u.bench_dir("b") / "driver-ran").exists()
    assert group_members(int(u.job_id("b"))) == []


def test_a_service_that_dies_while_the_driver_runs_stops_the_driver_and_fails_the_job(user: Any) -> None:
    # The service dies once the driver has started (it waits for the driver's mark), so the monitor
    # loop, not the health check, is what notices.
    dies = f'{ECHO} & until [ -e "$GYM_BENCH_DIR/driver-started" ]; do sleep 0.2; done; kill $!; exit 7'
    u = user(
        local_config(
            {"b": {"command": 'touch "$NEMO_GYM_BENCH_DIR/driver-started"; sleep 300; touch finished'}},
            services={"echo": echo_service(dies)},
        )
    )
    u.submit()
    rows = u.wait()
    assert rows["b"]["state"] == "FAILED" and rows["b"]["exit_code"] == "1:0"
    assert "gym: service step echo exited while the driver was running; stopping the driver" in u.log(
        "b", "local"
    )
    assert not (u.bench_dir("b") / "finished").exists()
    assert group_members(int(u.job_id("b"))) == []


def test_cancel_stops_the_whole_process_group(user: Any) -> None:
    # The service starts a child of its own, and the driver a pipeline: every one must go.
    services = {"echo": echo_service(f"sleep 1000 & {ECHO}")}
    u = user(
        local_config(
            {"long": {"command": 'touch "$NEMO_GYM_BENCH_DIR/driver-started"; sleep 1000 | cat'}},
            services=services,
        )
    )
    u.submit()
    job_id = int(u.job_id("long"))
    wait_for_file(u.bench_dir("long") / "driver-started", 60)
    members = group_members(job_id)
    assert any("sleep" in m for m in members) and any("python3" in m for m in members), members
    assert u.status()["long"]["state"] == "RUNNING"

    done = u.run("cancel")
    assert done.returncode == 0, done.stderr
    assert f"cancelled 1 job(s) of {u.record['gym_job_id']}: {job_id}" in done.stdout
    rows = u.wait()
    assert rows["long"]["state"] == "CANCELLED"
    assert rows["long"]["exit_code"] == "143:0"
    assert group_members(job_id) == []
    again = u.run("cancel")
    assert "nothing to cancel" in again.stdout


def test_a_running_job_holds_no_queue_lock_of_the_submit_that_started_it(user: Any) -> None:
    """The job outlives the submit: if it inherited the session's queue lock, every later submit of
    the run dir would wait for the job to end."""
    u = user(local_config({"long": {"command": 'touch "$NEMO_GYM_BENCH_DIR/driver-started"; sleep 1000'}}))
    u.submit()
    wait_for_file(u.bench_dir("long") / "driver-started", 60)
    lock = u.bench_dir("long").parent / ".gym_queue.lock"
    assert lock.exists()
    assert subprocess.run(["flock", "-n", str(lock), "true"], check=False).returncode == 0
    held = [
        fd
        for pid in group_members(int(u.job_id("long")))
        for fd in Path(f"/proc/{pid.split()[0]}/fd").glob("*")
        if fd.exists() and fd.resolve() == lock.resolve()
    ]
    assert held == []
    assert u.run("cancel").returncode == 0


def test_walltime_stops_the_job_as_timeout(user: Any) -> None:
    u = user(local_config({"slow": {"command": "sleep 1000"}}, compute={"walltime": "00:00:08"}))
    u.submit()
    rows = u.wait()
    assert rows["slow"]["state"] == "TIMEOUT"
    assert "gym: the job reached its walltime (8 s); stopping it" in u.log("slow", "local")
    assert group_members(int(u.job_id("slow"))) == []


def test_a_job_that_ends_while_status_looks_still_reads_timeout(tmp_path: Path, monkeypatch: Any) -> None:
    """The walltime strikes while `status` looks at the job: the timer marks it, TERM ends it, and
    its trap writes 143. A `ps` wrapper makes exactly that happen at the moment status asks whether
    the process still runs (a race CI hit once: the job read FAILED). Status must say TIMEOUT."""
    from gymbuild.executors import local
    from gymbuild.executors.connection import Connection

    finished = subprocess.Popen(["true"])  # a finished process: its pid runs no job.sh
    finished.wait()
    job_id = str(finished.pid)
    bench = tmp_path / "runs" / "slow"
    bench.mkdir(parents=True)
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    ps = wrappers / "ps"
    ps.write_text(
        "#!/bin/bash\n"
        f": > {bench}/.gym_timeout-{job_id}\n"
        f"printf '143\\n' > {bench}/.gym_exit-{job_id}\n"
        f'exec {shutil.which("ps")} "$@"\n'
    )
    ps.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrappers}:{os.environ['PATH']}")
    with Connection(None) as conn:
        state = local.states(conn, {str(bench): job_id})[str(bench)]
    assert (state.state, state.exit_code) == ("TIMEOUT", "143:0")


def test_a_running_job_reads_running_whatever_width_the_shell_says(tmp_path: Path, monkeypatch: Any) -> None:
    """A shell that exports COLUMNS=80 (pytest-xdist's workers do; many terminals do) made `ps`
    cut the job's command line, so a running job in a deep run directory read FAILED."""
    from gymbuild.executors import local
    from gymbuild.executors.connection import Connection

    bench = tmp_path / ("deep-" * 20) / "runs" / "gym-job-20260101T000000Z-abcdef" / "long"
    bench.mkdir(parents=True)
    (bench / "job.sh").write_text('until [ -e "$(dirname "$0")/stop" ]; do sleep 0.05; done\n')
    job = subprocess.Popen(["bash", str(bench / "job.sh")], start_new_session=True)
    monkeypatch.setenv("COLUMNS", "80")
    try:
        with Connection(None) as conn:
            state = local.states(conn, {str(bench): str(job.pid)})[str(bench)]
        assert state.state == "RUNNING", state
    finally:
        (bench / "stop").touch()
        job.wait(timeout=30)


def test_the_record_loads_validates_and_is_listed(user: Any) -> None:
    u = user(local_config({"a": {"command": "true"}, "b": {"command": "true"}}))
    u.submit()
    u.wait()
    record = u.record
    Draft202012Validator(load_schema("gym-job.v1.schema.json")).validate(record)
    loaded = SubmissionRecord.load(record)
    assert loaded.executor == "local" and loaded.cluster == "here" and loaded.hostname is None
    assert set(loaded.executor_metadata) == {"hostname"}
    ids = [j.job_id for j in loaded.benchmarks]
    assert all(i and i.isdigit() for i in ids) and len(set(ids)) == 2
    index = u.home / "cache" / "nemo-gym" / "jobs" / f"{loaded.gym_job_id}.json"
    assert SubmissionRecord.load(json.loads(index.read_text())) == loaded

    runs = u.run("runs")
    assert runs.returncode == 0, runs.stderr
    assert loaded.gym_job_id in runs.stdout and "local" in runs.stdout
    by_id = u.run("status", f"run={loaded.gym_job_id}")
    assert by_id.returncode == 0 and by_id.stdout.count("COMPLETED") == 2, by_id.stdout + by_id.stderr


@pytest.mark.cluster
def test_a_slurm_job_records_its_exit_status_in_the_same_file(user: Any, cluster: Any) -> None:
    """The exit file is written by the shared part of every job: Slurm's status falls back on it when
    the cluster keeps no accounting, as the local executor's status always does."""
    output = cluster.run_dir("exit-file")
    config = {
        "services": {"policy": {"type": "vllm", "container": "vllm/vllm-openai:v0.10.1", "model": "m"}},
        "compute": {
            "cluster": {
                "type": "slurm",
                "account": "gym",
                "hostname": "gym-login",
                "walltime": "00:10:00",
                "node_pools": {"gpu": {"partition": "gpu", "nodes": 1}},
            }
        },
        "driver": {
            "policy_model": "policy",
            "benchmarks": {
                "bad": {"run": {"config_paths": ["benchmarks/gpqa/config.yaml"], "fake_exit_code": 3}}
            },
        },
        "job": {"output_path": str(output)},
        "otel": {"enabled": False},
    }
    u = user(config)
    u.submit()
    (run_dir,) = output.glob("gym-job-*")
    record = json.loads((run_dir / "gym-job.json").read_text())
    job_id = record["benchmarks"][0]["job_id"]
    result = cluster.wait_for_job(job_id, timeout=180)
    assert (result.state, result.exit_code) == ("FAILED", 3)
    assert (run_dir / "bad" / f".gym_exit-{job_id}").read_text() == "3\n"


def test_a_secret_reaches_the_step_that_asked_from_a_file_that_goes_with_the_job(user: Any) -> None:
    """Issue 19 on this machine too: the host: value is written to ~/.gymbuild-secrets/<id>/<bench>
    (0600), not to job.sh nor the job's environment; the driver that asked for it gets it; the file
    goes when its job ends, and `cancel` removes the rest."""
    secret = f"local-secret-{os.getpid()}-{time.time_ns()}"
    got = 'printenv LOCAL_SECRET >"$NEMO_GYM_BENCH_DIR/got"'
    config = local_config({"done": {"command": got}, "long": {"command": f"{got}; sleep 1000"}})
    config["driver"]["env"]["LOCAL_SECRET"] = "host:LOCAL_SECRET"
    u = user(config)
    u.env["LOCAL_SECRET"] = secret  # the submitting shell's: its job must not inherit it
    u.submit()
    files = Path.home() / ".gymbuild-secrets" / u.record["gym_job_id"]
    long_id = int(u.job_id("long"))
    wait_for_file(u.bench_dir("long") / "got", 60)
    assert stat_mode(files) == 0o700 and stat_mode(files / "long") == 0o600
    assert secret.encode() not in Path(f"/proc/{long_id}/environ").read_bytes()  # the batch shell's
    assert u.wait_for("done")["state"] == "COMPLETED"
    assert not (files / "done").exists() and (files / "long").exists()  # its end removed its own
    for bench in ("done", "long"):
        assert (u.bench_dir(bench) / "got").read_text() == f"{secret}\n"
        assert secret not in (u.bench_dir(bench) / "job.sh").read_text()
    assert u.run("cancel").returncode == 0
    assert not files.exists()


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777
