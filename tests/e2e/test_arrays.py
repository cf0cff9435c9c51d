"""Job arrays on the test cluster (`compute.<name>.array`): a submission larger than the cluster's
MaxArraySize (tests/cluster/up sets 4) is queued as several arrays that Slurm accepts, each indexed
from 0; each benchmark keeps its own record entry, status, logs, resubmit and cancel."""

from __future__ import annotations

import json
import re
import subprocess
import time
from typing import Any

import pytest
from e2e_helpers import gymbuild, job_ids, manifest, run_dir, slurm_config, user_env, write_config

from tests.oracle.nemo_gym import venv_path

pytestmark = pytest.mark.cluster


def _status(home: Any) -> dict[str, dict[str, Any]]:
    done = gymbuild("status", "json=1", cwd=home, env=user_env(home))
    assert done.rc == 0, done.stdout + done.stderr
    return {row["benchmark"]: row for row in json.loads(done.stdout)["benchmarks"]}


def _wait_status(home: Any, want: dict[str, str], timeout: float = 240) -> dict[str, dict[str, Any]]:
    """`gymbuild status` until each named benchmark shows its wanted state (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = _status(home)
        if all(rows[b]["state"] == s for b, s in want.items()):
            return rows
        assert time.monotonic() < deadline, {b: (r["state"], r["job_id"]) for b, r in rows.items()}
        time.sleep(1)


def _max_array_size(cluster: Any) -> int:
    config = cluster.ssh("scontrol show config").stdout
    found = re.search(r"^MaxArraySize\s*=\s*([0-9]+)", config, re.MULTILINE)
    assert found, config
    return int(found.group(1))


def test_an_array_submission_larger_than_max_array_size(cluster: Any, tmp_path: Any) -> None:
    limit = _max_array_size(cluster)
    if limit > 6:
        pytest.skip(f"the cluster's MaxArraySize is {limit}: rerun tests/cluster/up (it sets 4)")
    flag = cluster.run_dir("arrays-flag") / "fixed"
    release = cluster.run_dir("arrays-release") / "go"
    benchmarks: dict[str, Any] = {f"quick{i}": {"command": "true"} for i in range(limit + 1)}
    for name in ("flaky", "flaky2", "flaky3"):
        benchmarks[name] = {"command": f"test -e {flag}"}
    benchmarks["slow"] = {"command": f"while [ ! -e {release} ]; do sleep 1; done"}
    benchmarks["slow2"] = benchmarks["slow"]
    config = slurm_config(cluster.run_dir("e2e-arrays"), benchmarks, services={}, driver={"container": "c"})
    config["driver"].pop("policy_model")
    config["compute"]["cluster"]["array"] = {"parallel": 3}
    write_config(tmp_path, config)

    dry = gymbuild("render", cwd=tmp_path, env=user_env(tmp_path))
    assert dry.rc == 0, dry.stderr
    assert f"[dry-run] array --array=0-{len(benchmarks) - 1}%3: quick0," in dry.stdout

    try:
        submit = gymbuild("submit", cwd=tmp_path, env=user_env(tmp_path))
        assert submit.rc == 0, submit.stdout + submit.stderr
        ids = job_ids(manifest(config))
        tasks = {b: str(i).partition("_") for b, i in ids.items()}
        assert all(sep == "_" for _, sep, _ in tasks.values()), ids  # every benchmark an array task
        arrays: dict[str, list[int]] = {}
        for array_id, _, index in tasks.values():
            arrays.setdefault(array_id, []).append(int(index))
        # more benchmarks than MaxArraySize: several arrays, each indexed 0..n-1 below the limit
        assert len(arrays) == -(-len(benchmarks) // limit)
        assert all(sorted(ix) == list(range(len(ix))) and max(ix) < limit for ix in arrays.values())

        # NeMo Gym 0.7.0 reads the record, array task ids and all
        oracle = venv_path() / "bin" / "python"
        if oracle.is_file():
            read = subprocess.run(
                [
                    str(oracle),
                    "-c",
                    "import sys; from nemo_gym.orchestration.jobs import SubmissionRecord as R; "
                    "print(*[b.job_id for b in R.model_validate_json(open(sys.argv[1]).read()).benchmarks])",
                    str(run_dir(config) / "gym-job.json"),
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert read.stdout.split() == list(ids.values()), read.stderr

        done = {b: "COMPLETED" for b in benchmarks if b.startswith("quick")}
        failed = {b: "FAILED" for b in benchmarks if b.startswith("flaky")}
        rows = _wait_status(tmp_path, {**done, **failed, "slow": "RUNNING", "slow2": "RUNNING"})
        assert {b: rows[b]["job_id"] for b in benchmarks} == ids  # each benchmark, its own task's state

        # its own logs: Slurm's output by the task's name, the driver's by the task's own number
        logs = gymbuild("logs", "only=flaky", cwd=tmp_path, env=user_env(tmp_path))
        assert logs.rc == 0, logs.stderr
        assert f"slurm-{ids['flaky']}.log" in logs.stdout and "driver-" in logs.stdout

        # cancel one benchmark's task: the others of its array are left alone
        cancel = gymbuild("cancel", "only=slow", cwd=tmp_path, env=user_env(tmp_path))
        assert cancel.rc == 0, cancel.stdout + cancel.stderr
        assert cluster.wait_for_job(ids["slow"], timeout=120).state == "CANCELLED"
        assert _status(tmp_path)["slow2"]["state"] == "RUNNING"  # its neighbour in the array runs on

        # the failed one, fixed, resubmitted alone: a plain job, the task id kept in its history
        flag.touch()
        resubmit = gymbuild("resubmit", "only=flaky", cwd=tmp_path, env=user_env(tmp_path))
        assert resubmit.rc == 0, resubmit.stdout + resubmit.stderr
        after = {b["benchmark"]: b for b in manifest(config)["benchmarks"]}
        new_id = after["flaky"]["job_id"]
        assert new_id.isdigit() and after["flaky"]["previous_job_ids"] == [ids["flaky"]]
        assert {b: after[b]["job_id"] for b in benchmarks if b != "flaky"} == {
            b: i for b, i in ids.items() if b != "flaky"
        }
        assert cluster.wait_for_job(new_id, timeout=120).state == "COMPLETED"

        # the two failed ones left, resubmitted: a new array of just them
        again = gymbuild("resubmit", cwd=tmp_path, env=user_env(tmp_path))
        assert again.rc == 0, again.stdout + again.stderr
        newer = job_ids(manifest(config))
        renamed = {b for b in benchmarks if newer[b] != after[b]["job_id"]}
        assert renamed == {"flaky2", "flaky3"}
        array_id = str(newer["flaky2"]).partition("_")[0]
        assert (newer["flaky2"], newer["flaky3"]) == (f"{array_id}_0", f"{array_id}_1")
    finally:
        release.touch()  # the slow ones end, whatever failed above
    completed = {b: "COMPLETED" for b in benchmarks if b != "slow"}
    _wait_status(tmp_path, {**completed, "slow": "CANCELLED"})


def test_a_sweeps_cells_are_queued_in_arrays_together(cluster: Any, tmp_path: Any) -> None:
    limit = _max_array_size(cluster)
    if limit > 4:
        pytest.skip(f"the cluster's MaxArraySize is {limit}: rerun tests/cluster/up (it sets 4)")
    output = cluster.run_dir("e2e-arrays-sweep")
    benchmarks = {name: {"command": "true"} for name in ("a", "b", "c")}
    config = slurm_config(output, benchmarks, services={}, driver={"container": "c"})
    config["driver"].pop("policy_model")
    config["compute"]["cluster"]["array"] = True
    write_config(tmp_path, config)
    submit = gymbuild(
        "submit",
        "multirun=1",
        "driver.benchmarks.a.command=echo 1,echo 2",
        cwd=tmp_path,
        env=user_env(tmp_path),
    )
    assert submit.rc == 0, submit.stdout + submit.stderr
    cells = [json.loads(path.read_text()) for path in sorted(output.glob("gym-job-*/gym-job.json"))]
    assert len(cells) == 2
    ids = [job_ids(cell) for cell in cells]
    by_array: dict[str, set[int]] = {}
    for cell, cell_ids in enumerate(ids):
        for job_id in cell_ids.values():
            array_id, sep, _ = str(job_id).partition("_")
            assert sep == "_", ids
            by_array.setdefault(array_id, set()).add(cell)
    # six jobs under MaxArraySize 4: two arrays, not one a cell, and one of them spans both cells
    assert len(by_array) == 2 and {0, 1} in by_array.values()
    every = [job_id for cell_ids in ids for job_id in cell_ids.values() if job_id]
    assert {cluster.wait_for_job(job_id).state for job_id in every} == {"COMPLETED"}


def test_a_resumable_benchmark_in_an_array_is_resumed_by_a_plain_job(cluster: Any, tmp_path: Any) -> None:
    """Two resumable benchmarks as one array's tasks time out (a one-minute walltime, a 200 s pause
    between their two calls); each one's successor is a plain job that resumes it, and status follows
    each benchmark's own chain to it."""
    benchmarks = {
        name: {"resumable": True, "run": {"fake_num_calls": 2, "fake_call_interval_seconds": 200}}
        for name in ("aime25", "gpqa")
    }
    config = slurm_config(cluster.run_dir("e2e-arrays-resume"), benchmarks, walltime="1")
    config["compute"]["cluster"]["array"] = True
    write_config(tmp_path, config)
    submit = gymbuild("submit", cwd=tmp_path, env=user_env(tmp_path))
    assert submit.rc == 0, submit.stdout + submit.stderr
    ids = job_ids(manifest(config))
    assert {str(i).rpartition("_")[2] for i in ids.values()} == {"0", "1"}, ids
    for task in ids.values():
        assert cluster.wait_for_job(str(task), timeout=150).state == "TIMEOUT"
    rows = _wait_status(tmp_path, {b: "COMPLETED" for b in benchmarks}, timeout=300)
    for bench, task in ids.items():
        successor = rows[bench]["job_id"]
        assert successor.isdigit() and successor != task  # a plain job, not another task
        rollouts = [
            json.loads(line) for line in (run_dir(config) / bench / "artifacts/rollouts.jsonl").open()
        ]
        assert [r["index"] for r in rollouts] == [0, 1]  # the successor resumed, not restarted
        assert rollouts[1]["slurm_job_id"] == successor


def test_shared_jobs_are_array_tasks_and_each_member_keeps_its_own_state(cluster: Any, tmp_path: Any) -> None:
    benchmarks = {"first": {"command": "true"}, "flaky": {"command": "false"}, "last": {"command": "true"}}
    config = slurm_config(
        cluster.run_dir("e2e-arrays-shared"),
        benchmarks,
        services={},
        driver={"container": "c", "benchmarks_per_job": 2},
    )
    config["driver"].pop("policy_model")
    config["compute"]["cluster"]["array"] = True
    write_config(tmp_path, config)
    submit = gymbuild("submit", cwd=tmp_path, env=user_env(tmp_path))
    assert submit.rc == 0, submit.stdout + submit.stderr
    ids = job_ids(manifest(config))
    array_id = str(ids["first"]).partition("_")[0]
    # first and flaky share a job, task 0; last is task 1 of the same array
    assert ids == {"first": f"{array_id}_0", "flaky": f"{array_id}_0", "last": f"{array_id}_1"}
    rows = _wait_status(tmp_path, {"first": "COMPLETED", "flaky": "FAILED", "last": "COMPLETED"})
    assert (rows["flaky"]["job_id"], rows["flaky"]["job_state"]) == (ids["flaky"], "FAILED")
    assert rows["first"]["job_state"] == "FAILED"  # its job failed, because flaky did


class Crash(BaseException):
    """What a kill is to the submit: nothing after it runs (not an Exception doit would report)."""


def test_an_array_queued_by_a_killed_submit_is_adopted_not_queued_again(
    cluster: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The submit is killed once the array's sbatch is in the session's shell, before its answer is
    read: the next submit reads the answer from the run dir's queue log and gives each benchmark its
    task, and Slurm holds one array, not two."""
    from gymbuild.cli import main
    from gymbuild.executors.slurm import arrays

    output = cluster.run_dir("e2e-arrays-killed")
    config = slurm_config(
        output, {b: {"command": "true"} for b in ("a", "b", "c")}, services={}, driver={"container": "c"}
    )
    config["driver"].pop("policy_model")
    config["compute"]["cluster"]["array"] = True
    path = write_config(tmp_path, config)
    monkeypatch.chdir(tmp_path)
    for key, value in user_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    real_send = arrays.send

    def send_then_crash(conn: Any, command: str) -> Any:
        real_send(conn, command)  # in the shell's input: it runs, its answer is never read
        raise Crash

    monkeypatch.setattr(arrays, "send", send_then_crash)
    with pytest.raises(Crash):
        main.main(["submit", f"config={path}"])
    monkeypatch.setattr(arrays, "send", real_send)
    assert not list(output.glob("gym-job-*/gym-job.json"))

    assert main.main(["submit", f"config={path}"]) == 0
    ids = job_ids(manifest(config))
    (run,) = output.glob("gym-job-*")
    queued = cluster.ssh(
        f"squeue -h -t all -o '%F|%Z|%j' | sort -u | grep -F '|{run}|gym-array-'", check=False
    )
    arrays_of_run = {line.split("|")[0] for line in queued.stdout.split()}
    assert len(arrays_of_run) == 1, queued.stdout  # one array: the killed run's, adopted
    (array_id,) = arrays_of_run
    assert ids == {b: f"{array_id}_{i}" for i, b in enumerate(("a", "b", "c"))}
