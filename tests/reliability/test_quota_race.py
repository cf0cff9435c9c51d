"""A refusal by a limit that comes anyway is a wait, not a failure (issue 43: "A rejection that comes
anyway ... is taken as 'wait', not as a failure, when sbatch names a limit").

gymbuild reads the limits before its first sbatch, so a refusal only comes when the reading is
stale: here, other jobs fill the room between the read and the sbatch. The read is sent before the
run directory is copied (submit/pipeline.py's sync); a PATH wrapper (tests/reliability_helpers.py)
holds the copy's `rsync` until the login node's `squeue` of the read has run, the test then queues
two held jobs of its own in the capped account, and lets the copy go on. Of three benchmarks under
MaxSubmitJobs=4 the read found room for all; Slurm takes two and refuses the third naming the limit.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import gymbuild, job_ids, manifest, slurm_config, user_env, write_config
from reliability_helpers import Faults, cancel, start_gymbuild

from tests.e2e.test_quota import LIMIT, _own_account

pytestmark = pytest.mark.cluster


def _wait_for(path: Path, proc: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"gymbuild never reached {path.name}"
        time.sleep(0.05)


def test_a_limit_refusal_after_a_stale_read_is_a_wait_and_a_later_submit_queues_it(
    cluster: Any, tmp_path: Path
) -> None:
    faults = Faults(tmp_path / "faults")
    read, copying, go = (faults.state / name for name in ("squeue.ran", "rsync.held", "rsync.go"))
    # The read's squeue (the submit's first) leaves a mark; the copy waits for the test's go.
    faults.wrap("squeue", side="login", body=f'{{real}} "$@"; s=$?; : > {read}; exit "$s"')
    faults.wrap("rsync", side="local", body=f": > {copying}; while [ ! -e {go} ]; do sleep 0.05; done")
    fillers: list[str] = []
    recorded: dict[str, str | None] = {}
    with _own_account(cluster, "gymquotarace", LIMIT) as account:
        try:
            benchmarks = {f"r{i}": {"command": "true"} for i in range(3)}
            data = slurm_config(cluster.run_dir("quota-race"), benchmarks, services={}, account=account)
            del data["driver"]["policy_model"]
            config = write_config(tmp_path, data)
            env = user_env(tmp_path)
            proc = start_gymbuild(["submit", f"config={config}"], cwd=tmp_path, env=faults.env(env))
            _wait_for(read, proc)
            _wait_for(copying, proc)
            for _ in range(LIMIT - 2):  # room for two now; the read said four
                held = cluster.ssh(
                    f"sbatch --parsable -H -A {account} -J quota-race-filler -o /dev/null --wrap true"
                )
                fillers.append(held.stdout.strip().split(";")[0])
            go.touch()
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, out + err  # waiting is not failing
            recorded = job_ids(manifest(data))
            assert [b for b, job_id in recorded.items() if job_id] == ["r0", "r1"], out + err
            assert "waiting 1 (r2): the limit sbatch named (sbatch said: " in out, out
            assert "MaxSubmitJob" in out and not [
                line for line in out.splitlines() if line.startswith("failed")
            ]

            cancel(fillers)  # room again: a plain submit queues the one that waited
            again = gymbuild("submit", f"config={config}", cwd=tmp_path, env=env)
            assert again.rc == 0, again.stdout + again.stderr
            assert [
                line.split()[1] for line in again.stdout.splitlines() if line.startswith("submitted")
            ] == ["r2"]
            recorded = job_ids(manifest(data))
        finally:
            cancel([*fillers, *recorded.values()])
