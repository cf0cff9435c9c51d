"""DESIGN.md's promises on the test Slurm cluster: test_promises_model.py's model, smaller.

The same state machine (tests/promises_machine.py) with two gated `command` benchmarks submitted
through `gym-login` (one SSH connection, sbatch on the login node): submit (plain, `new=1`, `only=`,
`--json`), submit interrupted by SIGINT / SIGTERM / SIGHUP once gymbuild holds the workspace's lock or
once its first job is queued, cancel, inspecting verbs and dry runs, every path to the config, the
workspace deleted, jobs let to end. Slurm, not gymbuild, says what is alive and what started: a job
is this run's when its working directory is a bench dir under the test's output directory; `squeue`
lists the live ones, `squeue` and `sacct` together every one that was ever queued. After each step:
(a) no bench dir has two live jobs, and no second submission without `new=1`; (b) a dry run or an
inspecting verb queued, cancelled and changed nothing; (c) every queued job is in gym-job.json and
in the local index; and, as everywhere, one JSON document for `json=1` and the interrupt's status.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from e2e_helpers import slurm_config
from promises_helpers import Figures
from promises_machine import PromisesMachine, machine_settings

if TYPE_CHECKING:
    from tests.conftest import Cluster

pytestmark = pytest.mark.cluster
FIGURES = Figures()


def _squeue(prefix: str) -> list[tuple[str, str, str]]:
    """(job id, state, working directory) of every job slurmctld holds under `prefix`."""
    out = subprocess.run(
        ["squeue", "-h", "-a", "-o", "%i|%T|%Z"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    rows = (line.split("|", 2) for line in out.splitlines() if line.count("|") >= 2)
    return [(job, state, wd) for job, state, wd in rows if wd.startswith(prefix)]


def _sacct(prefix: str) -> list[tuple[str, str]]:
    """(job id, working directory) of every job accounting knows under `prefix` (it lags a moment)."""
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-a", "-S", "now-1days", "-o", "JobID,WorkDir"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    rows = (line.split("|", 1) for line in out.splitlines() if "|" in line)
    return [(job, wd) for job, wd in rows if wd.startswith(prefix)]


class ClusterPromises(PromisesMachine):
    """The Slurm executor on the test cluster, through gym-login."""

    INSPECT = (
        ("render",),
        ("resolve",),
        ("status",),
        ("logs", "only=a"),
        ("list", "--status"),
        ("submit", "--dry-run"),
        ("cancel", "--dry-run"),
    )
    MOMENTS = ("lock", "job1")
    SETTLE_SECONDS = 300  # a queued job may wait its turn behind other tests' jobs
    figures = FIGURES
    cluster: Cluster  # set by the test before the machine runs

    def shared_dir(self) -> Path:
        return self.cluster.run_dir("promises")

    @property
    def prefix(self) -> str:
        return f"{self.output}/"

    def config_for(self, benchmarks: dict[str, Any]) -> dict[str, Any]:
        config = slurm_config(self.output, benchmarks, services={}, hostname=self.cluster.ssh_alias)
        del config["driver"]["policy_model"]  # a `command` benchmark asks no policy
        return config

    def live(self) -> dict[str, set[str]]:
        """Queued or running; a job shutting down (COMPLETING) is on its way out."""
        found: dict[str, set[str]] = {}
        for job, state, wd in _squeue(self.prefix):
            if state != "COMPLETING":
                found.setdefault(wd, set()).add(job)
        return found

    def started(self) -> dict[tuple[str, str], set[str]]:
        found: dict[tuple[str, str], set[str]] = {}
        queued = [(job, wd) for job, _, wd in _squeue(self.prefix)]
        for job, wd in queued + _sacct(self.prefix):
            bench = Path(wd)
            found.setdefault((str(bench.parent), bench.name), set()).add(job)
        return found

    def settled(self) -> bool:
        """Every job of this run is running and waiting at its gate: none pending, none shutting down."""
        return all(
            state == "RUNNING" and Path(wd, f"waiting-{job}").exists()
            for job, state, wd in _squeue(self.prefix)
        )

    def stop_all(self) -> None:
        jobs = [job for job, _, _ in _squeue(self.prefix)]
        if jobs:
            subprocess.run(["scancel", *jobs], capture_output=True, timeout=60, check=False)


ClusterPromises.TestCase.settings = machine_settings(max_examples=8, steps=8)


def test_promises_hold_on_the_test_cluster(cluster: Cluster) -> None:
    ClusterPromises.cluster = cluster
    try:
        ClusterPromises.TestCase().runTest()
    finally:
        print(f"\npromises model (cluster): {FIGURES.summary()}")
