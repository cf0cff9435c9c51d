"""SIGKILL `gymbuild submit` at every point of a submission; the next submit must finish the job.

Each point is reached deterministically by a PATH wrapper that blocks (tests/reliability_helpers.py):
the submit-side `rsync` (before it copies, after it copied), the login-side `sbatch` (before the first,
second and third call, and after the second ran but before its answer came back), and the login-side
`base64` that writes the manifest (every job queued, the record not yet on the cluster). The whole
gymbuild process group is then killed. The next plain `gymbuild submit` must exit 0, and Slurm's
accounting (by job name and working directory) must hold exactly one job per benchmark, the one the
manifest and the local index name.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_helpers import gymbuild, job_ids, manifest, run_dir, slurm_config, user_env, write_config
from reliability_helpers import Faults, cancel, jobs_queued, kill_group, start_gymbuild, wait_accounted

pytestmark = pytest.mark.cluster

BENCHES = ("alpha", "beta", "gamma")

# point -> (program, side, which call, before/after it ran)
CRASH_POINTS = {
    "before-sync": ("rsync", "local", 1, "before"),
    "mid-sync": ("rsync", "local", 1, "after"),
    "before-first-sbatch": ("sbatch", "login", 1, "before"),
    "between-sbatch-1-2": ("sbatch", "login", 2, "before"),
    "between-sbatch-2-3": ("sbatch", "login", 3, "before"),
    "sbatch-answer-lost": ("sbatch", "login", 2, "after"),
    "before-record": ("base64", "login", 1, "before"),
}


def _config(output: Path) -> dict:
    run = {"config_paths": ["benchmarks/gpqa/config.yaml"], "fake_num_calls": 1}
    return slurm_config(output, {b: {"run": run} for b in BENCHES})


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_sigkill_then_submit_again_queues_each_benchmark_exactly_once(cluster, tmp_path, point) -> None:
    program, side, at, when = CRASH_POINTS[point]
    output = cluster.run_dir(f"crash-{point}")
    config = write_config(tmp_path, _config(output))
    env = user_env(tmp_path)
    faults = Faults(tmp_path / "faults")
    faults.wrap(program, side=side, at=at, when=when)
    recorded: dict[str, str | None] = {}
    try:
        proc = start_gymbuild(["submit", f"config={config}"], cwd=tmp_path, env=faults.env(env))
        faults.wait_reached(program, proc)
        kill_group(proc)
        faults.release()

        again = gymbuild("submit", f"config={config}", cwd=tmp_path, env=env)
        assert again.rc == 0, again.stderr
        assert "Traceback" not in again.stderr
        record = manifest(output)
        recorded = job_ids(record)
        assert set(recorded) == set(BENCHES) and all(recorded.values()), recorded
        index = tmp_path / "xdg-cache" / "nemo-gym" / "jobs" / f"{record['gym_job_id']}.json"
        assert job_ids(json.loads(index.read_text())) == recorded

        wait_accounted([j for j in recorded.values() if j])
        assert run_dir(output).name == record["gym_job_id"]  # one submission, not a fresh one beside it
        for bench in BENCHES:
            queued = jobs_queued(f"gym-{bench}", output, recorded[bench])  # anywhere under the output path
            assert queued == [recorded[bench]], f"{point}: {bench} queued as {queued}"

        settled = gymbuild("submit", f"config={config}", cwd=tmp_path, env=env)
        assert settled.rc == 0 and "nothing to submit" in settled.stdout, settled
    finally:
        faults.release()
        cancel(list(recorded.values()))


def _arrays_under(cluster, top: Path) -> set[str]:
    """The ids of every job array Slurm's accounting lists under `top` (gymbuild names each after
    its queue attempt, `gym-array-<attempt>`), whatever gymbuild's record says."""
    out = cluster.ssh("sacct -X -n -P -a -S now-1days -o JobID,JobName,WorkDir").stdout
    rows = (line.split("|", 2) for line in out.splitlines() if line.count("|") >= 2)
    return {
        job_id.split("_", 1)[0]
        for job_id, name, work_dir in rows
        if name.startswith("gym-array-") and work_dir.startswith(f"{top}/")
    }


def test_an_array_whose_sbatch_answer_was_lost_is_adopted_by_name_not_queued_twice(cluster, tmp_path) -> None:
    # The array's sbatch runs, and its answer never reaches gymbuild nor the queue log (the wrapper is
    # killed after it: the log's line has no job id). The next submit finds it by its name and run
    # dir in Slurm, and gives each benchmark its task: one array, not two.
    output = cluster.run_dir("crash-array-answer-lost")
    data = slurm_config(output, {b: {"command": "true"} for b in BENCHES}, services={})
    del data["driver"]["policy_model"]
    data["compute"]["cluster"]["array"] = True
    config = write_config(tmp_path, data)
    env = user_env(tmp_path)
    faults = Faults(tmp_path / "faults")
    faults.wrap("sbatch", side="login", at=1, when="after")
    recorded: dict[str, str | None] = {}
    lost = ""
    try:
        proc = start_gymbuild(["submit", f"config={config}"], cwd=tmp_path, env=faults.env(env))
        faults.wait_reached("sbatch", proc)
        kill_group(proc)
        faults.release()
        lost = (faults.state / "sbatch.out").read_text().split(";")[0].strip()
        assert lost.isdigit(), lost  # the array the lost answer named

        again = gymbuild("submit", f"config={config}", cwd=tmp_path, env=env)
        assert again.rc == 0 and "Traceback" not in again.stderr, again.stderr
        recorded = job_ids(manifest(output))
        assert recorded == {b: f"{lost}_{i}" for i, b in enumerate(BENCHES)}, recorded
        wait_accounted([j for j in recorded.values() if j])
        assert _arrays_under(cluster, output) == {lost}  # no second array
    finally:
        faults.release()
        cancel([*recorded.values(), lost])
