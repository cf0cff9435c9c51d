"""Faults from the outside world: each ends in one clear message, exit 1, and a record of what was queued.

SSH faults use Host aliases in an ssh config of the test's own (a submit-side `ssh` wrapper passes it
with -F); sbatch and rsync faults are PATH wrappers (tests/reliability_helpers.py); a read-only
output path is a read-only bind mount; an unwritable local index is XDG_CACHE_HOME under a file.
The shared slurmctld is never touched: the "dead controller" is a SLURM_CONF naming a closed port.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
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
from reliability_helpers import Faults, cancel, jobs_queued

pytestmark = pytest.mark.cluster

KNOWN_HOSTS = "/var/lib/gymbuild-cluster/sshd/known_hosts"


def _ssh_config(tmp_path: Path) -> Path:
    key = tmp_path / "wrong_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    changed = tmp_path / "changed_known_hosts"
    other_key = " ".join(Path(f"{key}.pub").read_text().split()[:2])  # a real key, not the server's
    changed.write_text(f"[127.0.0.1]:2222 {other_key}\n")
    path = tmp_path / "ssh_config"
    path.write_text(
        f"""Host rel-closed
    HostName 127.0.0.1
    Port 1
Host rel-wrong-key rel-changed-host-key
    HostName 127.0.0.1
    Port 2222
    User root
    IdentitiesOnly yes
Host rel-wrong-key
    IdentityFile {key}
    UserKnownHostsFile {KNOWN_HOSTS}
Host rel-changed-host-key
    IdentityFile /root/.ssh/gymbuild-test_ed25519
    UserKnownHostsFile {changed}
Host gym-login
    HostName 127.0.0.1
    Port 2222
    User root
    IdentityFile /root/.ssh/gymbuild-test_ed25519
    IdentitiesOnly yes
    UserKnownHostsFile {KNOWN_HOSTS}
"""
    )
    return path


def _bench(n: int = 1) -> dict:
    run = {"config_paths": ["benchmarks/gpqa/config.yaml"], "fake_num_calls": 1}
    return {f"b{i}": {"run": run} for i in range(1, n + 1)}


def _assert_clean_failure(result, *fragments: str) -> None:
    assert result.rc == 1, result
    assert "Traceback" not in result.stderr
    assert result.stderr.count("error:") == 1, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("alias", "says"),
    [
        ("rel-closed", "Connection refused"),
        ("rel-wrong-key", "Permission denied"),
        ("rel-changed-host-key", "host key"),
    ],
)
def test_ssh_faults_fail_clearly_and_leave_nothing(cluster, tmp_path, alias, says) -> None:
    faults = Faults(tmp_path / "faults", ssh_config=_ssh_config(tmp_path))
    output = cluster.run_dir(f"fault-{alias}")
    config = write_config(tmp_path, slurm_config(output, _bench(), hostname=alias))
    result = gymbuild("submit", f"config={config}", cwd=tmp_path, env=faults.env(user_env(tmp_path)))
    _assert_clean_failure(result, f"cannot connect to {alias}", says, "fix:")
    assert list(output.iterdir()) == []
    assert not (tmp_path / "xdg-cache" / "nemo-gym" / "jobs").exists() or not any(
        (tmp_path / "xdg-cache" / "nemo-gym" / "jobs").iterdir()
    )


def test_controller_dead_after_first_sbatch_records_what_was_queued(cluster, tmp_path) -> None:
    dead = tmp_path / "dead-slurm.conf"
    lines = Path("/etc/slurm/slurm.conf").read_text().splitlines()
    lines = [ln for ln in lines if not ln.startswith(("SlurmctldHost", "SlurmctldPort"))]
    dead.write_text("\n".join(["SlurmctldHost=deadctl(127.0.0.1)", "SlurmctldPort=1", *lines]) + "\n")
    faults = Faults(tmp_path / "faults")
    faults.wrap("sbatch", side="login", at=2, body=f'SLURM_CONF={dead} exec {{real}} "$@"')
    output = cluster.run_dir("fault-controller")
    config = write_config(tmp_path, slurm_config(output, _bench(3)))
    env = user_env(tmp_path)
    ids: dict = {}
    try:
        first = gymbuild("submit", f"config={config}", cwd=tmp_path, env=faults.env(env))
        assert first.rc == 1 and "Traceback" not in first.stderr, first
        ids = job_ids(manifest(output))
        queued = [b for b, j in ids.items() if j]
        assert len(queued) == 2, ids  # the wrapper fails the 2nd call only: one refused, two queued
        refused = next(b for b, j in ids.items() if not j)
        assert f"failed {refused}: " in first.stdout and "Unable to contact slurm controller" in first.stdout
        assert "1 of 3 benchmarks have no job id" in first.stderr
        again = gymbuild("submit", f"config={config}", cwd=tmp_path, env=env)
        assert again.rc == 0, again
        ids = job_ids(manifest(output))
        assert all(ids.values())
        for bench, job_id in ids.items():
            assert jobs_queued(f"gym-{bench}", output, job_id) == [job_id]
    finally:
        cancel(list(ids.values()))


def test_rsync_failure_fails_clearly_and_queues_nothing(cluster, tmp_path) -> None:
    faults = Faults(tmp_path / "faults")
    faults.wrap(
        "rsync", side="local", body='echo "rsync: write failed: No space left on device (28)" >&2; exit 23'
    )
    output = cluster.run_dir("fault-rsync")
    config = write_config(tmp_path, slurm_config(output, _bench(2)))
    result = gymbuild("submit", f"config={config}", cwd=tmp_path, env=faults.env(user_env(tmp_path)))
    _assert_clean_failure(result, "copying the run directory", "No space left on device", "fix:")
    assert sacct_jobs("gym-b1", output) == [] and sacct_jobs("gym-b2", output) == []
    assert all(not (d / "gym-job.json").exists() for d in run_dirs(output))


def test_read_only_output_path_fails_clearly_and_queues_nothing(cluster, tmp_path) -> None:
    output = cluster.run_dir("fault-readonly")
    subprocess.run(["mount", "--bind", str(output), str(output)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(output)], check=True)
        config = write_config(tmp_path, slurm_config(output, _bench()))
        result = gymbuild("submit", f"config={config}", cwd=tmp_path, env=user_env(tmp_path))
        _assert_clean_failure(result, "cannot create the run directory", "Read-only file system", "fix:")
        assert list(output.iterdir()) == []
        assert sacct_jobs("gym-b1", output) == []
    finally:
        subprocess.run(["umount", str(output)], check=True)


def test_unwritable_local_index_still_submits_and_says_so(cluster, tmp_path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a regular file where the cache directory should be\n")
    output = cluster.run_dir("fault-index")
    config = write_config(tmp_path, slurm_config(output, _bench()))
    env = user_env(tmp_path, XDG_CACHE_HOME=str(blocker / "cache"))
    ids: dict = {}
    try:
        result = gymbuild("submit", f"config={config}", cwd=tmp_path, env=env)
        assert "Traceback" not in result.stderr
        ids = job_ids(manifest(output))  # the manifest is the record that survives
        assert result.rc == 0 and ids["b1"], result
        assert "local index" in result.stderr  # the user learns `runs` will not list it
    finally:
        cancel(list(ids.values()))
