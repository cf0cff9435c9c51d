"""The queue attempt protocol (attempts.hold_queue_lock, slurm.queue_command, attempts.recover), real sbatch.

A submit killed with sbatch commands in flight leaves the next submit to find out what each attempt
did. These tests drive the protocol directly, in local shell sessions, so the answer must come from
the queue log itself (the gymbuild-level kill tests could also be saved by the Slurm lookup that
backs it up, `find_queued`).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from gymbuild.executors import attempts, slurm
from gymbuild.executors.base import Queued
from gymbuild.executors.connection import Connection, Result
from gymbuild.executors.secrets import SecretsFile, forget_secrets
from gymbuild.state.provenance import new_gym_job_id, utc_now

if TYPE_CHECKING:
    from tests.conftest import Cluster

pytestmark = pytest.mark.cluster


def _job_script(cluster: Cluster, run_dir: Path, bench: str) -> str:
    bench_dir = run_dir / bench
    bench_dir.mkdir()
    script = bench_dir / "job.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"#SBATCH --account={cluster.account}\n#SBATCH --partition={cluster.partition}\n"
        f"#SBATCH --chdir={bench_dir}\n#SBATCH --output=/dev/null\n#SBATCH --time=2\n#SBATCH --hold\n"
        "true\n"
    )
    return str(script)


def _queue(conn: Connection, script: str, attempt: str, secrets: SecretsFile | None = None) -> Result:
    """As steps.queue.queue_many sends it: in the session's own shell, not a subshell."""
    return conn.receive(conn.send(slurm.queue_command(script, secrets, attempt), in_session=True))


def _scancel(*ids: str | None) -> None:
    subprocess.run(["scancel", *[i for i in ids if i]], check=False, capture_output=True)


def test_an_attempt_that_ran_is_recovered_from_the_queue_log(cluster: Cluster) -> None:
    run_dir = cluster.run_dir("attempts-ran")
    script = _job_script(cluster, run_dir, "a")
    gym_job_id = new_gym_job_id(utc_now())  # a secrets directory is named by a real id only (ids.py)
    with Connection(None) as first:
        attempts.hold_queue_lock(first, str(run_dir))
        first.run_in_session("export GYM_QUEUE_TEST_TOKEN=s3cret")  # the user's own, in the login shell
        secrets = SecretsFile(gym_job_id, "a", {"__gym_secret_T": "s3cret"}, ("GYM_QUEUE_TEST_TOKEN",))
        queued = slurm.queued(_queue(first, script, "a1b2c3", secrets))
        # The value went to the secrets file alone: neither sbatch nor the session's shell keeps it.
        assert first.run('printf %s "${GYM_QUEUE_TEST_TOKEN-unset}"').stdout == "unset"
        stored = Path(os.path.expanduser(f"~/.gymbuild-secrets/{gym_job_id}/a"))
        assert stored.read_bytes() == b"__gym_secret_T\0s3cret\0" and stored.stat().st_mode & 0o777 == 0o600
        assert forget_secrets(first, gym_job_id, ["a"]).ok and not stored.parent.exists()
    try:
        assert queued.job_id is not None, queued
        with Connection(None) as later:
            attempts.hold_queue_lock(later, str(run_dir))
            assert attempts.recover(later, script, "a1b2c3") == Queued(queued.job_id, None)
            # Another attempt of the same benchmark, never sent, is not mistaken for it.
            assert attempts.recover(later, script, "a1b2c4") is None
    finally:
        _scancel(queued.job_id)


def test_an_attempt_recovered_before_it_ran_is_revoked_and_never_queues(cluster: Cluster) -> None:
    run_dir = cluster.run_dir("attempts-revoked")
    script = _job_script(cluster, run_dir, "a")
    with Connection(None) as later:
        attempts.hold_queue_lock(later, str(run_dir))
        assert attempts.recover(later, script, "d4e5f6") is None
    with Connection(None) as stale:  # the killed run's shell, getting to its attempt at last
        attempts.hold_queue_lock(stale, str(run_dir))
        result = _queue(stale, script, "d4e5f6")
        assert stale.run("true").ok  # the session lives on after a refused attempt
    assert result.status == 75 and "revoked" in result.stderr, result
    names = subprocess.run(
        ["squeue", "-h", "-o", "%Z"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert str(run_dir / "a") not in names  # sbatch never ran


def test_a_refused_attempt_is_not_taken_for_a_job(cluster: Cluster) -> None:
    """sbatch refused the script (no job id): recovering that attempt revokes it, to queue afresh."""
    run_dir = cluster.run_dir("attempts-refused")
    script = _job_script(cluster, run_dir, "a")
    Path(script).write_text("#!/bin/bash\n#SBATCH --partition=no-such-partition\ntrue\n")
    with Connection(None) as first:
        attempts.hold_queue_lock(first, str(run_dir))
        refused = slurm.queued(_queue(first, script, "0a0b0c"))
    assert refused.job_id is None and refused.error
    with Connection(None) as later:
        attempts.hold_queue_lock(later, str(run_dir))
        assert attempts.recover(later, script, "0a0b0c") is None


def test_a_session_queueing_several_run_dirs_holds_every_lock_and_logs_each_attempt_in_its_own(
    cluster: Cluster,
) -> None:
    """A sweep's session takes one run dir's queue lock after another: each stays held until the
    session ends (another process cannot take it), and an attempt sent for the first run dir after
    the second's lock was taken is still answered from the first one's log."""
    run_dirs = [cluster.run_dir(f"attempts-two-{n}") for n in (1, 2)]
    scripts = [_job_script(cluster, run_dir, "a") for run_dir in run_dirs]
    with Connection(None) as session:
        for run_dir in run_dirs:
            attempts.hold_queue_lock(session, str(run_dir))
        for run_dir in run_dirs:
            taken = subprocess.run(["flock", "-n", str(run_dir / attempts.QUEUE_LOCK), "true"], check=False)
            assert taken.returncode == 1, f"{run_dir}: its lock was dropped"
        queued = slurm.queued(_queue(session, scripts[0], "f1f2f3"))
    try:
        assert queued.job_id is not None, queued
        assert (run_dirs[0] / attempts.QUEUE_LOG).read_text() == f"f1f2f3 {queued.job_id}\n"
        assert not (run_dirs[1] / attempts.QUEUE_LOG).exists()
        with Connection(None) as later:
            attempts.hold_queue_lock(later, str(run_dirs[0]))
            assert attempts.recover(later, scripts[0], "f1f2f3") == Queued(queued.job_id, None)
    finally:
        _scancel(queued.job_id)
