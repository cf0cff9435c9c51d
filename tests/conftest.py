"""Shared pytest fixtures.

The test Slurm cluster (tests/cluster/README.md): the session fixture `cluster` skips a test with a
reason when the cluster is not up, and otherwise hands it a `Cluster` describing it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.oracle import nemo_gym as _oracle

CLUSTER_NOT_UP = "test cluster is not up: run tests/cluster/install && tests/cluster/up"

# The job scripts' poll intervals (README, "Poll intervals"): 5 s and 20 s for users, short here, so
# a test waits for the event it needs (a port, a health answer, a step's end), not for the next poll.
# Set before any test starts a job: local jobs and hand-run scripts inherit them, a local sbatch
# exports them, and `ssh gym-login` sends them to the login shell (tests/cluster/up accepts them).
os.environ.setdefault("GYM_POLL_SECONDS", "0.2")
os.environ.setdefault("GYM_COLLECTOR_FLUSH_SECONDS", "1")

# Ctrl-C as a terminal delivers it: a suite started in the background by a non-interactive shell (a CI
# runner's `cmd &`, nohup) inherits SIGINT ignored, and every gymbuild the tests start would inherit
# that too, so the tests of what Ctrl-C does would see nothing happen. A handler here (not SIG_IGN)
# is reset to the default on exec, so each child's Python turns SIGINT into KeyboardInterrupt again.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# Hypothesis measures how long an example takes; on a machine loaded by the other workers that is a
# walltime raced against load, not a property of the code. The profile keeps every other check.
settings.register_profile(
    "gymbuild", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile("gymbuild")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark what needs the cluster or the oracle by the fixtures it asks for, so the fast loop
    (`pytest -m "not cluster and not oracle"`) leaves out exactly those."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "cluster" in names:
            item.add_marker(pytest.mark.cluster)
        if "nemo_gym" in names:
            item.add_marker(pytest.mark.oracle)


# sacct states after which a job never changes again (CANCELLED appears as "CANCELLED by <uid>").
TERMINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "REVOKED",
    }
)


@dataclass(frozen=True)
class JobResult:
    """A finished job as sacct reports it."""

    job_id: str
    state: str  # e.g. COMPLETED, FAILED, TIMEOUT, CANCELLED (without "by <uid>")
    exit_code: int  # the job's exit status
    signal: int  # the signal that ended it, or 0


def _job_result(job_id: str | int, fields: dict[str, str]) -> JobResult | None:
    """A job's state, exit code and signal from slurmctld's fields of it, or None without them."""
    if "JobState" not in fields:
        return None
    code, _, sig = fields.get("ExitCode", "0:0").partition(":")
    return JobResult(str(job_id), fields["JobState"], int(code or 0), int(sig or 0))


# Why slurmctld holds a job back when the job is only waiting its turn: Resources (other jobs hold
# what it needs), Priority (an older job comes first), Licenses (the real-gym jobs' two licenses are
# taken), None (the scheduler has not looked at it yet). Held, dependent or requeued jobs
# (JobHeldUser, Dependency, BeginTime) wait for the test's own doing.
QUEUED_REASONS = frozenset({"None", "Priority", "Resources", "Licenses"})
# How long in all Cluster.wait_for_job lets a job wait its turn before failing the test: the longest
# another test's job can hold what it waits for (cores, a license) is that job's walltime, 10 minutes.
QUEUE_WAIT = 600


@dataclass(frozen=True)
class Cluster:
    """The running test cluster, as the `cluster` fixture sees it."""

    ssh_alias: str = "gym-login"  # use as compute.<name>.hostname; `ssh gym-login ...` works
    account: str = "gym"
    partition: str = "gpu"
    nodes: tuple[str, ...] = ("node1", "node2")
    runs_root: Path = Path("/var/tmp/gymbuild-cluster/runs")  # seen by the login node and every node
    fake_pyxis_dir: Path = Path("/var/lib/gymbuild-cluster/fake-pyxis")  # <jobid>.<step>.json

    def run_dir(self, name: str = "run") -> Path:
        """A fresh, empty directory for one test's run output, visible on every node."""
        path = self.runs_root / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        path.mkdir(parents=True, mode=0o755)
        return path

    def ssh(self, command: str, *, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run a shell command on the login node; text output captured."""
        return subprocess.run(
            ["ssh", "-o", "BatchMode=yes", self.ssh_alias, command],
            capture_output=True,
            text=True,
            check=check,
            timeout=timeout,
        )

    def sacct(self, job_id: str | int) -> JobResult | None:
        """The job's accounting record, or None while sacct does not know it yet."""
        out = subprocess.run(
            ["sacct", "-j", str(job_id), "-X", "-n", "-P", "-o", "JobID,State,ExitCode"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        for line in out.splitlines():
            jid, state, exit_code = line.split("|")
            if jid == str(job_id):
                code, _, sig = exit_code.partition(":")
                return JobResult(jid, state.split()[0], int(code or 0), int(sig or 0))
        return None

    def wait_for_job(self, job_id: str | int, timeout: float = 120) -> JobResult:
        """Poll until the job has ended and sacct's record of it is whole. sacct lags slurmctld, and
        not only in time: when a short job ends before slurmdbd has answered its start, slurmctld
        sends the start again with the job's final state, so for a moment sacct reads FAILED with
        exit code 0 (which no finished job has: FAILED is a non-zero exit) until the completion
        record follows. And a job shutting down reads COMPLETING in slurmctld (so in squeue, which
        `gymbuild status` asks first) for a moment after scancel or its end. So the answer is
        sacct's record once slurmctld shows the same end state (or has forgotten the job: MinJobAge)
        and it is not that FAILED 0. The exit codes are not compared: for a cancelled job slurmctld
        keeps the batch shell's (143) and accounting 0.

        `timeout` bounds the job's own time. While slurmctld holds it pending its turn (QUEUED_REASONS:
        other tests' jobs hold what it needs, or an older job comes first) the clock stops, for
        up to QUEUE_WAIT seconds in all: how long the cluster is busy with other files' jobs is the
        suite's load, and a bound that counts it is a walltime raced against that load. Fails the
        test on timeout, with the job's pending reason and the queue, so the cause is in the report."""
        deadline = time.monotonic() + timeout
        queued = 0.0
        last = ctld = None
        fields: dict[str, str] = {}
        while time.monotonic() < deadline:
            polled = time.monotonic()
            fields = self._scontrol_fields(job_id)
            ctld = _job_result(job_id, fields)
            last = self.sacct(job_id)
            if (
                last is not None
                and last.state in TERMINAL_STATES
                and (ctld is None or ctld.state == last.state)
                and (last.state, last.exit_code, last.signal) != ("FAILED", 0, 0)
            ):
                return last
            time.sleep(0.2)
            waiting_its_turn = fields.get("JobState") == "PENDING" and fields.get("Reason") in QUEUED_REASONS
            if waiting_its_turn and queued < QUEUE_WAIT:
                spent = time.monotonic() - polled
                queued += spent
                deadline += spent
        queue = subprocess.run(
            ["squeue", "-h", "-o", "%i %j %T %r %C %N"], capture_output=True, text=True, timeout=30
        ).stdout
        pytest.fail(
            f"job {job_id} did not end within {timeout}s of its own time after {queued:.0f}s queued "
            f"(slurmctld: {ctld}, reason {fields.get('Reason')}; sacct: {last}); the queue:\n{queue}"
        )

    def _scontrol_fields(self, job_id: str | int) -> dict[str, str]:
        """slurmctld's fields of the job (`scontrol show job -o`), or {} once it has forgotten it."""
        out = subprocess.run(
            ["scontrol", "show", "job", "-o", str(job_id)], capture_output=True, text=True, timeout=30
        ).stdout
        fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
        return fields if fields.get("JobId") == str(job_id) else {}

    def scontrol_job(self, job_id: str | int) -> JobResult | None:
        """The job as slurmctld holds it (state, exit code, signal), or None once it has forgotten
        the job. COMPLETING is its state while the job shuts down."""
        return _job_result(job_id, self._scontrol_fields(job_id))

    def pyxis_records(self, job_id: str | int, step: str | int) -> list[dict]:
        """What the fake pyxis plugin recorded for a step: one dict per node that ran it."""
        path = self.fake_pyxis_dir / f"{job_id}.{step}.json"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _cluster_is_up() -> str | None:
    """None when the cluster answers, else why not."""
    if shutil.which("sinfo") is None or shutil.which("ssh") is None:
        return "sinfo or ssh is not installed"
    if not Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).is_file():
        return "no Slurm configuration"
    try:
        sinfo = subprocess.run(
            ["sinfo", "-h", "-p", "gpu", "-o", "%T"], capture_output=True, text=True, timeout=10
        )
        if sinfo.returncode != 0 or not sinfo.stdout.strip():
            return f"sinfo failed: {sinfo.stderr.strip()[:200]}"
        login = subprocess.run(
            ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "gym-login", "true"],
            capture_output=True,
            text=True,
            timeout=15,
        )
        if login.returncode != 0:
            return f"ssh gym-login failed: {login.stderr.strip()[:200]}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    problem = _cluster_is_up()
    if problem is not None:
        # CI brings the cluster up and sets this: there a down cluster is a failure, not a skip,
        # so a broken harness can never turn the e2e suite green by skipping it.
        if os.environ.get("GYMBUILD_REQUIRE_CLUSTER") == "1":
            pytest.fail(f"{CLUSTER_NOT_UP} ({problem})")
        pytest.skip(f"{CLUSTER_NOT_UP} ({problem})")
    return Cluster()


@pytest.fixture(scope="session")
def nemo_gym() -> _oracle.NemoGym:
    """The real nemo-gym 0.7.0 (tests/oracle/install); skipped with a reason when it is absent.

    CI installs it and sets GYMBUILD_REQUIRE_NEMO_GYM=1: there an absent oracle fails the test, so the
    parity suites can never pass by skipping.
    """
    found, problem = _oracle.find()
    if found is None:
        if os.environ.get("GYMBUILD_REQUIRE_NEMO_GYM") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    return found


@pytest.fixture(autouse=True)
def _own_state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's gymbuild keeps its workspaces (XDG_STATE_HOME: they follow the config, not the
    working directory) in a directory of its own, never the user's ~/.local/state, so tests that
    render the same example config in parallel never share a workspace. Restored after the test."""
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state
