"""Following and stopping a resume chain on the real test cluster.

One resumable benchmark whose every job fails (the fake driver exits 3) once a gate file exists
(+fake_wait_for_file): each job holds RUNNING until the test lets it end, so every step of the chain
is an event the test waits for, never a sleep. Its successors are queued by the jobs themselves
(sbatch --dependency=afternotok), under ids the record never sees.

- The head runs; its successor waits, held (`scontrol hold`, the test's own job), so for as long
  as the test likes the record's job is dead and the chain's newest job is PENDING and in no chain
  file (a successor appends itself only when it starts): `status` must show the successor and its
  attempt, not the dead head (the issue: "status showed job 987 FAILED while 988 then 989 ran").
- The successor is released with the gate gone: it runs (attempt 2) and queues its own successor.
  `logs` shows the newest job's driver log; `cancel` in the middle stops the running job and its
  pending successor in one call and names both (the issue: "cancel answered nothing to cancel while
  989 ran and 990 was queued").
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from e2e_helpers import wait_for_file

from tests.day_two.test_slurm import Gym, config_file, scancel_under

if TYPE_CHECKING:
    from tests.conftest import Cluster

pytestmark = pytest.mark.cluster

LIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED"}


def squeue_state(job_id: str) -> str | None:
    """slurmctld's state of a job (None once it has forgotten it)."""
    out = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"], capture_output=True, text=True, check=False
    ).stdout.split()
    return out[0] if out else None


def wait_until(what: str, check: Any, timeout: float = 240) -> Any:
    """Poll `check()` until it returns something truthy (bounded): the event, not a sleep."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout}s")
        time.sleep(1)
    return value


def successor_of(bench_dir: Path, job_id: str) -> str:
    """The successor job `job_id` queued when it started (the job's own `.gym_successor-<id>`)."""
    path = bench_dir / f".gym_successor-{job_id}"
    wait_for_file(path, timeout=240)
    return wait_until(f"{path} written", lambda: path.read_text().strip())


def test_status_follows_a_chain_and_cancel_stops_it_in_the_middle(cluster: Cluster, tmp_path: Path) -> None:
    gym = Gym(tmp_path / "home")
    gate = cluster.run_dir("chain-gate") / "go"
    config = config_file(
        tmp_path / "chain.yaml",
        output_path=cluster.run_dir("chain-follow"),
        benchmarks={"chain": {"fake_exit_code": 3, "fake_wait_for_file": str(gate)}},
        resumable={"chain": {"max_retries": 3}},
        hostname=None,
        account=cluster.account,
        walltime="5",
    )
    cfg = f"config={config}"
    gym.ok("submit", cfg, cwd=tmp_path)
    record = json.loads(gym.ok("status", "json=1", cfg, cwd=tmp_path))
    run_dir = Path(record["run_dir"])
    bench_dir = run_dir / "chain"
    head = record["benchmarks"][0]["job_id"]
    try:
        first = successor_of(bench_dir, head)
        subprocess.run(["scontrol", "hold", first], check=True, capture_output=True)
        gate.touch()  # the head ends FAILED (exit 3); its successor stays held, PENDING
        assert cluster.wait_for_job(head, timeout=240).state == "FAILED"
        gate.unlink()
        assert squeue_state(first) == "PENDING"

        # The record's job is dead; the chain goes on in a successor no chain file names yet.
        row = gym.status(cfg, cwd=tmp_path)["chain"]
        assert (row["job_id"], row["state"]) == (first, "PENDING"), row
        assert row["attempt"] == 2
        assert [(a["job_id"], a["state"]) for a in row["attempts"]] == [(head, "FAILED"), (first, "PENDING")]
        table = gym.ok("status", cfg, cwd=tmp_path)
        line = next(x for x in table.splitlines() if x.startswith("chain "))
        assert line.split()[1:4] == [first, "PENDING", "2"], table  # JOB, STATE, ATTEMPT
        dry = gym.ok("cancel", cfg, "--dry-run", cwd=tmp_path)
        assert (
            f"would cancel 1 job(s) of {record['gym_job_id']}: {first} (chain PENDING, successor)" in dry
        ), dry
        assert squeue_state(first) == "PENDING"  # the dry run stopped nothing

        # Released: it runs (attempt 2, held by the gate) and queues its own successor.
        subprocess.run(["scontrol", "release", first], check=True, capture_output=True)
        second = successor_of(bench_dir, first)
        wait_until(f"job {first} running", lambda: squeue_state(first) == "RUNNING")
        assert squeue_state(second) == "PENDING"
        row = gym.status(cfg, cwd=tmp_path)["chain"]
        assert (row["job_id"], row["state"], row["attempt"]) == (first, "RUNNING", 2), row

        wait_for_file(bench_dir / "logs" / f"driver-{first}.log", timeout=240)
        logs = gym.ok("logs", cfg, "only=chain", cwd=tmp_path)
        assert f"driver-{first}.log" in logs and f"driver-{head}.log" not in logs, logs

        out = json.loads(gym.ok("cancel", cfg, "json=1", cwd=tmp_path))
        assert sorted(out["cancelled"]) == sorted([first, second]), out
        stopped = {s["job_id"]: s for s in out["stopped"]}
        assert stopped[first]["successor"] and stopped[second]["successor"]
        assert (stopped[first]["state"], stopped[second]["state"]) == ("RUNNING", "PENDING")
        for job in (first, second):
            assert cluster.wait_for_job(job, timeout=240).state == "CANCELLED"
        assert (bench_dir / ".gym_chain_cancelled").is_file()
        assert (bench_dir / ".gym_chain_end").read_text().startswith("cancelled by gymbuild cancel at ")

        row = gym.status(cfg, cwd=tmp_path)["chain"]
        assert (row["job_id"], row["state"]) == (first, "CANCELLED"), row
        assert row["chain_end"].startswith("cancelled by gymbuild cancel at ")
        again = gym.ok("cancel", cfg, cwd=tmp_path)
        assert again.startswith("nothing to cancel"), again
        # watch=1: every job has ended, so one look; the table shows the attempt, the chain its end.
        watched = gym.run("status", cfg, "watch=1", cwd=tmp_path)
        assert watched.rc == 1, watched.stdout + watched.stderr  # the benchmark has no result
        line = next(x for x in watched.stdout.splitlines() if x.startswith("chain "))
        assert line.split()[1:4] == [first, "CANCELLED", "2"], watched.stdout
        chain_line = next(x for x in watched.stdout.splitlines() if x.startswith("  chain: "))
        assert chain_line.startswith(f"  chain: {head} FAILED"), watched.stdout  # then what the chain did
        assert f"; {first} CANCELLED; cancelled by gymbuild cancel at " in chain_line, watched.stdout
    finally:
        gate.touch()
        scancel_under(run_dir)
