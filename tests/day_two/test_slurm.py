"""Day two on the real test cluster: `status`, `logs`, `cancel`, `resubmit` and `runs` (issue 8).

Two submissions, each made once per module by a fixture, carry the tests:

- `mixed`: five benchmarks queued from THIS machine (compute hostname unset, so the run's one
  connection is a local `bash -s`: this machine is also a login node), one of each fate: `ok`
  completes, `fail` ends with the driver's exit code 3, `slow` outlives its one-minute walltime,
  `cancelme` is cancelled, and `refused` is over the quota. The limit is real: the jobs run
  under an account of their own (`gym-daytwo`); four benchmarks are submitted with `only=`, then the
  association is allowed one submitted job (`slow` and `cancelme` hold two for minutes: no room; a
  limit of 0 would be one no job ever fits, which submit refuses outright) and a plain `submit`
  reads that limit and leaves the fifth waiting for room (issue 43: not failed, no sbatch Slurm
  would refuse). The limit sits on that account alone, so other tests' jobs are never refused, and
  it is lifted again at once.
- `remote`: two long benchmarks queued over SSH (`gym-login`), for `run=<id>` look-ups from another
  directory, the manifest fallback, logs and cancel.

Every gymbuild call is a subprocess of the real `gymbuild` command (tests/e2e_helpers.py) with
XDG_CACHE_HOME in a directory of this module, so the local index holds exactly these submissions and
`runs` can be checked exactly.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from e2e_helpers import (
    Run,
    gymbuild,
    gymbuild_argv,
    sbatch_wrapper,
    set_submit_limit,
    slurm_config,
    user_env,
    wait_for_file,
    workspaces,
    write_config,
)

from gymbuild.state.workspace import Workspace

if TYPE_CHECKING:
    from tests.conftest import Cluster

pytestmark = pytest.mark.cluster

LIMITED_ACCOUNT = "gym-daytwo"
FINAL = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"}


# --- helpers: the gymbuild command, configs, and counting wrappers --------------------------------


@dataclass(frozen=True)
class Gym:
    """How this module runs gymbuild (e2e_helpers' runner): one home, so one local index for all."""

    home: Path

    @property
    def index(self) -> Path:
        return self.home / "xdg-cache" / "nemo-gym" / "jobs"

    def env(self, path_prefix: Path | None = None) -> dict[str, str]:
        extra = {"PATH": f"{path_prefix}:{os.environ['PATH']}"} if path_prefix is not None else {}
        return user_env(self.home, **extra)

    def run(self, *args: str, cwd: Path, path_prefix: Path | None = None) -> Run:
        return gymbuild(*args, cwd=cwd, env=self.env(path_prefix), timeout=120)

    def ok(self, *args: str, cwd: Path, path_prefix: Path | None = None) -> str:
        """stdout of a call that must succeed (the failure shows both streams)."""
        result = self.run(*args, cwd=cwd, path_prefix=path_prefix)
        assert result.rc == 0, f"gymbuild {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
        return result.stdout

    def status(self, *args: str, cwd: Path, path_prefix: Path | None = None) -> dict[str, dict[str, Any]]:
        """`status json=1`: benchmark -> its row."""
        payload = json.loads(self.ok("status", "json=1", *args, cwd=cwd, path_prefix=path_prefix))
        return {row["benchmark"]: row for row in payload["benchmarks"]}

    def wait_for(self, want: Any, *args: str, cwd: Path, timeout: float = 240) -> dict[str, dict[str, Any]]:
        """Poll `status` until want(rows) holds; fails the test with the last rows on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.status(*args, cwd=cwd)
            if want(rows):
                return rows
            if time.monotonic() > deadline:
                pytest.fail(f"status did not reach the wanted states in {timeout}s: {rows}")
            time.sleep(2)


def config_file(
    path: Path,
    *,
    output_path: Path,
    benchmarks: dict[str, dict[str, Any]],
    resumable: dict[str, Any] | None = None,
    **compute: Any,
) -> Path:
    """e2e_helpers' test-cluster config with these benchmarks (name -> its `run` overrides); those
    named in `resumable` get that `resumable:` value."""
    benches = {
        name: {"run": run, **({"resumable": resumable[name]} if name in (resumable or {}) else {})}
        for name, run in benchmarks.items()
    }
    return write_config(path.parent, slurm_config(output_path, benches, **compute), path.name)


def counting_wrappers(directory: Path, counter: Path) -> Path:
    """`squeue` and `sacct` that append their name to `counter`, then exec the real program."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("squeue", "sacct"):
        real = shutil.which(name)
        assert real, f"{name} is not installed"
        wrapper = directory / name
        wrapper.write_text(f'#!/bin/bash\necho {name} >>"{counter}"\nexec {real} "$@"\n')
        wrapper.chmod(0o755)
    return directory


def calls(counter: Path) -> list[str]:
    return counter.read_text().split() if counter.exists() else []


def live_jobs_under(run_dir: Path) -> list[str]:
    """This user's queued or running jobs working under run_dir: whatever gymbuild's record says,
    these are the jobs of one submission (a resumable job's successor included)."""
    # Not COMPLETING: a cancelled job shows so for a moment while its steps end.
    states = "PENDING,RUNNING,CONFIGURING,SUSPENDED,REQUEUED,RESIZING"
    out = subprocess.run(
        ["squeue", "-h", "--me", "-t", states, "-o", "%i %Z"], capture_output=True, text=True, check=True
    )
    top = str(run_dir).rstrip("/") + "/"
    return [
        job for job, _, wd in (line.partition(" ") for line in out.stdout.splitlines()) if wd.startswith(top)
    ]


def scancel_under(run_dir: Path) -> None:
    """Teardown: cancel what this module queued under run_dir and left live (never anyone else's)."""
    ids = live_jobs_under(run_dir)
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, check=False)


# --- the mixed submission: one benchmark of each fate ---------------------------------------------


@dataclass
class Submitted:
    config: Path
    workdir: Path
    gym_job_id: str
    run_dir: Path
    first_ids: dict[str, str]  # benchmark -> the job id the submit gave it
    submit_output: str
    running_seen: dict[str, Any]  # the cancelme row while it ran


@pytest.fixture(scope="module")
def gym(tmp_path_factory: pytest.TempPathFactory) -> Gym:
    return Gym(tmp_path_factory.mktemp("home"))


@pytest.fixture(scope="module")
def mixed(cluster: Cluster, gym: Gym, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Submitted]:
    set_submit_limit(LIMITED_ACCOUNT, None)
    workdir = tmp_path_factory.mktemp("mixed")
    output_path = cluster.run_dir("day-two")
    config = config_file(
        workdir / "mixed.yaml",
        output_path=output_path,
        benchmarks={
            "ok": {},
            "fail": {"fake_exit_code": 3},
            # 300 s, not 90: slurmctld checks time limits every 30 s or so, and the job must not
            # finish before its limit is enforced.
            "slow": {"fake_sleep_seconds": 300},
            "cancelme": {"fake_sleep_seconds": 300},
            "refused": {},
        },
        hostname=None,
        account=LIMITED_ACCOUNT,
        walltime="1",
    )
    try:
        gym.ok("submit", f"config={config}", "only=ok,fail,slow,cancelme", cwd=workdir)
        set_submit_limit(LIMITED_ACCOUNT, 1)  # full: slow and cancelme are queued for minutes
        try:
            result = gym.run("submit", f"config={config}", cwd=workdir)
        finally:
            set_submit_limit(LIMITED_ACCOUNT, None)
        # The benchmark over the limit has no job id: it waits for room, which is no failure (exit 0).
        assert result.rc == 0, result.stdout + result.stderr
        record = json.loads(gym.ok("status", "json=1", f"config={config}", cwd=workdir))
        ids = {b["benchmark"]: b["job_id"] for b in record["benchmarks"]}
        running = gym.wait_for(
            lambda rows: rows["cancelme"]["state"] == "RUNNING", f"config={config}", cwd=workdir
        )
        gym.ok("cancel", f"config={config}", "only=cancelme", cwd=workdir)
        for bench in ("ok", "fail", "slow", "cancelme"):
            cluster.wait_for_job(ids[bench], timeout=240)
        yield Submitted(
            config=config,
            workdir=workdir,
            gym_job_id=record["gym_job_id"],
            run_dir=Path(record["run_dir"]),
            first_ids=ids,
            submit_output=result.stdout + result.stderr,
            running_seen=running["cancelme"],
        )
    finally:
        scancel_under(output_path)


def test_submit_says_the_benchmark_over_the_limit_waits_and_queues_the_rest(mixed: Submitted) -> None:
    assert mixed.first_ids["refused"] is None
    assert all(mixed.first_ids[b] for b in ("ok", "fail", "slow", "cancelme"))
    assert (
        f"waiting 1 (refused): MaxSubmitJobs=1 of association {LIMITED_ACCOUNT}/root" in mixed.submit_output
    )
    assert "failed refused" not in mixed.submit_output


def test_status_shows_every_state_with_one_squeue_and_one_sacct(
    mixed: Submitted, gym: Gym, tmp_path: Path
) -> None:
    """The cost is counted honestly: the submission's compute has no hostname, so the run's one
    connection is a local `bash -s` that inherits gymbuild's PATH, and `squeue`/`sacct` wrappers first
    on that PATH log each invocation before exec'ing the real program. The status script is the same
    text over SSH. Jobs do not inherit the wrappers: only the status calls run with them."""
    counter = tmp_path / "calls"
    wrappers = counting_wrappers(tmp_path / "bin", counter)
    # While it ran, status showed the job RUNNING on a node, before `cancel` ended it.
    assert mixed.running_seen["nodes"] in ("node1", "node2")

    rows = gym.status(f"config={mixed.config}", cwd=mixed.workdir, path_prefix=wrappers)
    assert sorted(calls(counter)) == ["sacct", "squeue"]

    assert {b: r["state"] for b, r in rows.items()} == {
        "ok": "COMPLETED",
        "fail": "FAILED",
        "slow": "TIMEOUT",
        "cancelme": "CANCELLED",
        "refused": "WAITING",
    }
    assert rows["ok"]["exit_code"] == "0:0"
    assert rows["fail"]["exit_code"] == "3:0"
    for bench in ("ok", "fail", "slow", "cancelme"):
        assert rows[bench]["job_id"] == mixed.first_ids[bench]
        assert rows[bench]["nodes"] in ("node1", "node2")
        assert rows[bench]["elapsed"]
    assert rows["refused"]["job_id"] is None
    assert "MaxSubmitJobs=1" in rows["refused"]["error"]

    counter.unlink()
    table = gym.ok("status", f"config={mixed.config}", cwd=mixed.workdir, path_prefix=wrappers)
    assert sorted(calls(counter)) == ["sacct", "squeue"]
    lines = table.splitlines()
    assert lines[0].startswith(mixed.gym_job_id) and str(mixed.run_dir) in lines[0]
    header = lines[1]
    assert header.split() == ["BENCHMARK", "JOB", "STATE", "EXIT", "ELAPSED", "ROLLOUTS", "NODES"]
    by_bench = {line.split()[0]: line.split() for line in lines[2:7]}
    assert by_bench["fail"][1:4] == [mixed.first_ids["fail"], "FAILED", "3:0"]
    assert by_bench["slow"][2] == "TIMEOUT"
    assert by_bench["refused"][1:] == ["-", "WAITING", "-", "-", "-", "-"]
    # the fake gym wrote its 3 rollouts (it writes no materialized inputs: nothing to count them against)
    rollouts = {
        line.split()[0]: line[header.index("ROLLOUTS") : header.index("NODES")].strip() for line in lines[2:7]
    }
    assert rollouts["ok"] == "3", table
    # sbatch's reason is under the table, where its length cannot widen the STATE column.
    assert lines[7:9] == ["", "waiting for room (`gymbuild submit watch=1` queues them as room frees):"]
    assert lines[9].startswith(f"  refused: MaxSubmitJobs=1 of association {LIMITED_ACCOUNT}/root")
    # Last, the summary: only `ok` has a result; three ended without one, one waits for room.
    assert lines[10:] == ["", "5 benchmarks: 0 pending, 0 running, 1 completed, 3 failed, 1 waiting for room"]


def test_status_without_accounting_reads_the_jobs_exit_files(
    mixed: Submitted, gym: Gym, tmp_path: Path
) -> None:
    """A cluster without accounting: an `sacct` first on PATH that says so and exits 1, as sacct does
    there. squeue no longer lists these finished jobs, so only the `.gym_exit-<id>` files the jobs
    wrote can tell how they ended."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sacct").write_text("#!/bin/bash\necho 'Slurm accounting storage is disabled' >&2\nexit 1\n")
    (fake / "sacct").chmod(0o755)
    for bench in ("ok", "fail"):
        assert (mixed.run_dir / bench / f".gym_exit-{mixed.first_ids[bench]}").is_file()

    rows = gym.status(f"config={mixed.config}", cwd=mixed.workdir, path_prefix=fake)
    assert (rows["ok"]["state"], rows["ok"]["exit_code"]) == ("COMPLETED", "0:0")
    assert (rows["fail"]["state"], rows["fail"]["exit_code"]) == ("FAILED", "3:0")
    assert rows["refused"]["state"] == "WAITING"


def test_logs_print_the_newest_driver_and_service_logs(mixed: Submitted, gym: Gym) -> None:
    job_id = mixed.first_ids["ok"]
    out = gym.ok("logs", f"config={mixed.config}", "only=ok", cwd=mixed.workdir)
    assert f"logs/driver-{job_id}.log" in out and f"logs/policy-{job_id}.log" in out
    assert "[fake-gym@" in out and "done:" in out  # the driver's log
    assert "[fake-vllm@" in out  # the policy service's log

    unnamed = gym.run("logs", f"config={mixed.config}", cwd=mixed.workdir)
    assert unnamed.rc == 1 and "only=<bench>" in unnamed.stdout + unnamed.stderr
    assert "Traceback" not in unnamed.stdout + unnamed.stderr


def test_resubmit_requeues_exactly_the_failed_and_timed_out_then_cancel_ends_the_reruns(
    mixed: Submitted, gym: Gym, cluster: Cluster
) -> None:
    cfg = f"config={mixed.config}"
    result = gym.run("resubmit", cfg, cwd=mixed.workdir)
    out = result.stdout + result.stderr
    assert result.rc == 0, out
    assert "submitted fail -> Slurm job" in out and "submitted slow -> Slurm job" in out
    for untouched in ("ok", "cancelme", "refused"):
        assert f"submitted {untouched}" not in out

    rows = gym.status(cfg, cwd=mixed.workdir)
    new = {b: rows[b]["job_id"] for b in ("fail", "slow")}
    for bench in ("fail", "slow"):
        assert new[bench] and new[bench] != mixed.first_ids[bench]
    for bench in ("ok", "cancelme"):
        assert rows[bench]["job_id"] == mixed.first_ids[bench]
    assert (rows["ok"]["state"], rows["cancelme"]["state"], rows["refused"]["state"]) == (
        "COMPLETED",
        "CANCELLED",
        "WAITING",
    )

    # The record keeps the earlier ids; the local index and the manifest are the same bytes.
    index = gym.index / f"{mixed.gym_job_id}.json"
    manifest = mixed.run_dir / "gym-job.json"
    assert index.read_bytes() == manifest.read_bytes()
    record = {b["benchmark"]: b for b in json.loads(manifest.read_text())["benchmarks"]}
    for bench in ("fail", "slow"):
        assert record[bench]["previous_job_ids"] == [mixed.first_ids[bench]]
        assert record[bench]["job_id"] == new[bench]
    for bench in ("ok", "cancelme", "refused"):
        assert record[bench]["previous_job_ids"] == []

    # The rerun writes beside the first run, in the same run directory.
    cluster.wait_for_job(new["fail"])
    for bench in ("fail", "slow"):
        wait_for_file(mixed.run_dir / bench / "logs" / f"driver-{new[bench]}.log")
        assert (mixed.run_dir / bench / "logs" / f"driver-{mixed.first_ids[bench]}.log").is_file()
    assert (mixed.run_dir / "fail" / f".gym_exit-{mixed.first_ids['fail']}").is_file()

    # CANCELLED is re-queued only when named.
    again = gym.run("resubmit", cfg, "only=cancelme", cwd=mixed.workdir)
    assert again.rc == 0, again.stdout + again.stderr
    assert "submitted cancelme -> Slurm job" in again.stdout
    rerun = gym.status(cfg, cwd=mixed.workdir)["cancelme"]["job_id"]
    assert rerun != mixed.first_ids["cancelme"]

    cancelled = gym.ok("cancel", cfg, cwd=mixed.workdir)
    assert new["slow"] in cancelled and rerun in cancelled
    every = [*filter(None, mixed.first_ids.values()), *new.values(), rerun]
    for job in every:
        assert cluster.wait_for_job(job).state in FINAL
    assert live_jobs_under(mixed.run_dir) == []
    assert cluster.sacct(new["slow"]).state == "CANCELLED"
    assert "nothing to cancel" in gym.ok("cancel", cfg, cwd=mixed.workdir)


# --- the remote submission: found again from elsewhere, followed, cancelled ---------------------


@dataclass
class Remote:
    config: Path
    workdir: Path
    gym_job_id: str
    run_dir: Path
    ids: dict[str, str]


@pytest.fixture(scope="module")
def remote(cluster: Cluster, gym: Gym, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    workdir = tmp_path_factory.mktemp("remote")
    output_path = cluster.run_dir("day-two-remote")
    config = config_file(
        workdir / "remote.yaml",
        output_path=output_path,
        benchmarks={"a": {"fake_sleep_seconds": 600}, "b": {"fake_sleep_seconds": 600}},
        resumable={"b": True},  # its successor waits in the queue: cancel must end it too
        account=cluster.account,
        hostname=cluster.ssh_alias,
        walltime="15",
    )
    try:
        gym.ok("submit", f"config={config}", cwd=workdir)
        rows = gym.wait_for(
            lambda rows: all(r["state"] == "RUNNING" for r in rows.values()), f"config={config}", cwd=workdir
        )
        ids = {b: r["job_id"] for b, r in rows.items()}
        record = json.loads(gym.ok("status", "json=1", f"config={config}", cwd=workdir))
        yield Remote(config, workdir, record["gym_job_id"], Path(record["run_dir"]), ids)
    finally:
        scancel_under(output_path)


def test_status_by_run_id_from_another_directory_via_the_local_index(
    remote: Remote, gym: Gym, tmp_path: Path
) -> None:
    rows = gym.status(f"run={remote.gym_job_id}", cwd=tmp_path)
    assert {b: (r["job_id"], r["state"]) for b, r in rows.items()} == {
        b: (remote.ids[b], "RUNNING") for b in ("a", "b")
    }
    table = gym.ok("status", f"run={remote.gym_job_id}", cwd=tmp_path)
    assert table.startswith(f"{remote.gym_job_id}  slurm on cluster")
    assert list(tmp_path.iterdir()) == []  # no workspace, no doit database left behind here


def test_status_by_run_id_falls_back_to_the_manifest_in_the_run_dir(
    remote: Remote, gym: Gym, tmp_path: Path
) -> None:
    index = gym.index / f"{remote.gym_job_id}.json"
    aside = index.with_name("aside.json.bak")
    index.rename(aside)
    try:
        lost = gym.run("status", f"run={remote.gym_job_id}", cwd=tmp_path)
        assert lost.rc == 1
        assert "not in this machine's local index" in lost.stdout + lost.stderr
        assert "Traceback" not in lost.stdout + lost.stderr
        rows = gym.status(f"run={remote.gym_job_id}", f"config={remote.config}", cwd=tmp_path)
        assert {b: r["job_id"] for b, r in rows.items()} == remote.ids
        assert {r["state"] for r in rows.values()} == {"RUNNING"}
    finally:
        aside.rename(index)


def test_status_reads_the_workspace_even_after_the_config_is_broken(remote: Remote, gym: Gym) -> None:
    """status needs only what the workspace holds (it never loads the config: composing and
    validating a thousand benchmarks costs seconds), so a config edited into a broken state since the
    submit still shows its jobs, in config order, reached over SSH at the submission's host."""
    text = remote.config.read_text()
    remote.config.write_text("driver: [this is: not a config\n")
    try:
        payload = json.loads(gym.ok("status", "json=1", f"config={remote.config}", cwd=remote.workdir))
        resolved = gym.run("resolve", f"config={remote.config}", cwd=remote.workdir)
    finally:
        remote.config.write_text(text)
    assert [r["benchmark"] for r in payload["benchmarks"]] == ["a", "b"]
    assert {r["benchmark"]: r["job_id"] for r in payload["benchmarks"]} == remote.ids
    assert resolved.rc == 1 and "invalid YAML" in resolved.stderr  # the verbs that need it still say so


def test_status_at_an_unreachable_host_is_one_clear_error(remote: Remote, gym: Gym, tmp_path: Path) -> None:
    """The SSH handshake for status starts before doit is imported (Link.ahead); its failure must
    still be one message naming the host, with no traceback and no control socket left behind."""
    workspace = tmp_path / "ws"
    mine = Workspace(workspaces(gym.home), remote.config).config_dir  # the state follows the config
    shutil.copytree(mine, workspace / mine.name, ignore=shutil.ignore_patterns("lock"))
    (submission_file,) = workspace.glob("*/submission.json")
    submission = json.loads(submission_file.read_text())
    submission["hostname"] = "gym-no-such-host.invalid"
    submission_file.write_text(json.dumps(submission))
    # The control socket goes to the temp dir: this run's own, so other tests' sockets never count.
    sockets = tmp_path / "tmp"
    sockets.mkdir()
    result = gymbuild(
        "status", f"config={remote.config}", f"workspace={workspace}", cwd=tmp_path,
        env={**gym.env(None), "TMPDIR": str(sockets)}, timeout=120,
    )  # fmt: skip
    assert result.rc == 1, result.stdout + result.stderr
    assert "cannot connect to gym-no-such-host.invalid over SSH" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert list(sockets.glob("gymbuild-*.ssh")) == []


def test_logs_follow_streams_the_driver_log_until_ctrl_c(remote: Remote, gym: Gym, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        gymbuild_argv("logs", f"run={remote.gym_job_id}", "only=a", "follow=1"),
        cwd=tmp_path,
        env=gym.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True).start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while not any("[fake-gym@" in line for line in seen) and time.monotonic() < deadline:
            try:
                seen.append(lines.get(timeout=1))
            except queue.Empty:
                assert proc.poll() is None, f"logs follow=1 ended by itself: {seen}"
        assert any("[fake-gym@" in line for line in seen), seen
        assert proc.poll() is None  # still following
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the foreground group
        assert proc.wait(timeout=30) == 0
        time.sleep(0.5)  # the reader thread drains what was printed on the way out
        rest = []
        while not lines.empty():
            rest.append(lines.get())
        assert not any("Traceback" in line or "KeyboardInterrupt" in line for line in rest), rest
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    # The login node is this machine: no `tail -F` of the run dir is left running there.
    deadline = time.monotonic() + 15
    while tails_of(remote.run_dir) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert tails_of(remote.run_dir) == []


def tails_of(run_dir: Path) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    return [line for line in ps.splitlines() if "tail " in line and str(run_dir) in line]


def test_cancel_narrowed_by_only_then_the_rest_by_run_id(
    remote: Remote, gym: Gym, cluster: Cluster, tmp_path: Path
) -> None:
    out = gym.ok("cancel", f"config={remote.config}", "only=a", cwd=remote.workdir)
    assert remote.ids["a"] in out and remote.ids["b"] not in out
    assert cluster.wait_for_job(remote.ids["a"]).state == "CANCELLED"
    assert gym.status(f"config={remote.config}", cwd=remote.workdir)["b"]["state"] == "RUNNING"

    out = gym.ok("cancel", f"run={remote.gym_job_id}", cwd=tmp_path)
    assert remote.ids["b"] in out
    assert cluster.wait_for_job(remote.ids["b"]).state == "CANCELLED"
    assert live_jobs_under(remote.run_dir) == []  # b's successor too
    # squeue shows a cancelled job as COMPLETING for a moment while its steps end; status reports
    # what squeue says, so wait for that moment to pass (bounded) before comparing.
    deadline = time.monotonic() + 60
    while True:
        rows = gym.status(f"run={remote.gym_job_id}", cwd=tmp_path)
        states = {r["state"] for r in rows.values()}
        if "COMPLETING" not in states or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert states == {"CANCELLED"}


def test_runs_lists_this_machines_submissions_newest_first(
    mixed: Submitted, remote: Remote, gym: Gym, tmp_path: Path
) -> None:
    # A third submission, by the local executor, into the same local index.
    local = {
        "services": {},
        "compute": {"here": {"type": "local", "walltime": "00:01:00"}},
        "driver": {"benchmarks": {"hello": {"command": "echo hello"}}},
        "job": {"output_path": str(tmp_path / "runs")},
        "otel": {"enabled": False},
    }
    gym.ok("submit", f"config={write_config(tmp_path, local, 'local.yaml')}", cwd=tmp_path)
    (local_run,) = (tmp_path / "runs").glob("gym-job-*")

    runs = json.loads(gym.ok("runs", "json=1", cwd=tmp_path))
    assert [r["submitted_at"] for r in runs] == sorted((r["submitted_at"] for r in runs), reverse=True)
    assert runs[0]["gym_job_id"] == local_run.name  # the newest
    by_id = {r["gym_job_id"]: r for r in runs}
    assert set(by_id) == {mixed.gym_job_id, remote.gym_job_id, local_run.name}
    assert {r["executor"] for r in runs} == {"slurm", "local"}
    # Each run's benchmarks counted by the state their jobs are in (one status round trip per host).
    # `refused` waits for room: counted among the benchmarks (as waiting), not as "not queued".
    assert (sum(by_id[mixed.gym_job_id]["benchmarks"].values()), by_id[mixed.gym_job_id]["not_queued"]) == (
        5,
        0,
    )
    assert by_id[mixed.gym_job_id]["benchmarks"]["waiting"] == 1
    assert (sum(by_id[remote.gym_job_id]["benchmarks"].values()), by_id[remote.gym_job_id]["not_queued"]) == (
        2,
        0,
    )
    assert by_id[mixed.gym_job_id]["state"] in ("RUNNING", "PENDING")  # one waits for room: not ended
    assert by_id[remote.gym_job_id]["hostname"] == "gym-login"
    assert by_id[mixed.gym_job_id]["run_dir"] == str(mixed.run_dir)

    header, *text = gym.ok("runs", cwd=tmp_path).splitlines()
    assert header.split()[:4] == ["GYM_JOB_ID", "SUBMITTED", "WHERE", "STATE"]
    assert [line.split()[0] for line in text] == [r["gym_job_id"] for r in runs]
    remote_line = next(line for line in text if line.startswith(remote.gym_job_id))
    assert "slurm:cluster@gym-login" in remote_line
    assert "local:here" in text[0] and text[0].endswith(str(local_run))


def test_status_of_a_resumable_benchmark_is_the_newest_job_of_its_chain(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The first job fails (driver exit 3); its successor, queued by the job itself with
    afternotok, runs and fails too; the next one stops at max_retries 1 without joining the chain.
    Status names the successor; after resubmit, the new job (the record never sees successors),
    then the new chain's own successor."""
    gym = Gym(tmp_path)  # an index of its own: `runs` above lists exactly the module's submissions
    config = config_file(
        tmp_path / "chain.yaml",
        output_path=cluster.run_dir("day-two-chain"),
        benchmarks={"chain": {"fake_exit_code": 3}},
        resumable={"chain": {"max_retries": 1}},
        hostname=None,
        account=cluster.account,
        walltime="5",
    )
    cfg = f"config={config}"
    gym.ok("submit", cfg, cwd=tmp_path)
    run_dir = Path(json.loads(gym.ok("status", "json=1", cfg, cwd=tmp_path))["run_dir"])
    # The job submit queued (status may already name its successor: the head fails within a poll)
    first = json.loads((run_dir / "gym-job.json").read_text())["benchmarks"][0]["job_id"]
    chain_file = run_dir / "chain" / ".gym_job_chain"

    def chain_ids() -> list[str]:
        """The ids the chain's jobs have appended; the file appears when the first job starts."""
        try:
            return chain_file.read_text().split()
        except FileNotFoundError:
            return []

    def chain_of(length: int) -> list[str]:
        deadline = time.monotonic() + 240
        while len(chain_ids()) < length and time.monotonic() < deadline:
            time.sleep(2)
        return chain_ids()

    try:
        chain = chain_of(2)
        assert chain[0] == first and len(chain) == 2, chain
        cluster.wait_for_job(chain[1], timeout=240)
        row = gym.status(cfg, cwd=tmp_path)["chain"]
        assert (row["job_id"], row["state"], row["exit_code"]) == (chain[1], "FAILED", "3:0")

        out = gym.ok("resubmit", cfg, cwd=tmp_path)
        assert "submitted chain -> Slurm job" in out
        record = json.loads((run_dir / "gym-job.json").read_text())["benchmarks"][0]
        assert record["previous_job_ids"] == [first]  # the record knows the ids it queued
        # The new job, or (its head fails within a poll) a successor it queued after itself.
        newest, ids = gym.status(cfg, cwd=tmp_path)["chain"]["job_id"], chain_ids()
        assert newest == record["job_id"] or (ids[2] == record["job_id"] and newest in ids[3:]), (newest, ids)

        # The resubmitted chain gets its own retry: its head fails, and a successor resumes it
        # (with the old chain's count it would have stopped at max_retries at once).
        chain = chain_of(4)
        assert chain[2] == record["job_id"] and len(chain) == 4, chain
        cluster.wait_for_job(chain[3], timeout=240)
        row = gym.status(cfg, cwd=tmp_path)["chain"]
        assert (row["job_id"], row["state"]) == (chain[3], "FAILED")
    finally:
        scancel_under(run_dir)


def test_status_answers_while_a_submit_holds_the_workspace(cluster: Cluster, tmp_path: Path) -> None:
    """A long submit holds the workspace; `status` in another terminal must not wait for it (it
    waited 10 s for the lock, then failed with 'in use'). sbatch is slowed by a PATH wrapper (20 s a
    call) for a submission from this machine, so the submit is still running when status asks."""
    gym = Gym(tmp_path / "home")
    wrapper = sbatch_wrapper(tmp_path, sleep=20)
    output_path = cluster.run_dir("day-two-busy")
    config = config_file(
        tmp_path / "busy.yaml",
        output_path=output_path,
        benchmarks={"one": {}, "two": {}},
        hostname=None,
        account=cluster.account,
    )
    submit = subprocess.Popen(
        gymbuild_argv("submit", f"config={config}"),
        cwd=tmp_path,
        env=gym.env(path_prefix=wrapper.bin_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180  # a busy controller (others' 1000-job runs) answers slowly
        while wrapper.calls() < 2 and time.monotonic() < deadline:  # the first sbatch has answered
            time.sleep(0.2)
        assert wrapper.calls() == 2 and submit.poll() is None
        rows = gym.status(f"config={config}", cwd=tmp_path)
        assert submit.poll() is None  # answered while the submit still held the workspace
        (queued,) = rows.values()  # the one queued so far
        assert queued["job_id"] and queued["state"] != "NOT QUEUED"
        out, err = submit.communicate(timeout=120)
        assert submit.returncode == 0, out + err
    finally:
        if submit.poll() is None:
            submit.kill()
        submit.wait()
        scancel_under(output_path)
