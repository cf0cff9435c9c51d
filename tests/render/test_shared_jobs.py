"""Several benchmarks in one job (driver.benchmarks_per_job): the script a shared job gets, and on this
machine (the local executor) what a user sees: one job, its services started once, each benchmark its
own state, log and exit status; resubmit runs exactly what failed or never ran. Without the
extension every script stays byte for byte what it was (tests/render/test_rendered.py's goldens)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from e2e_helpers import shellcheck

from gymbuild.config import load_config
from gymbuild.executors.base import planning_traits
from gymbuild.plan import plan_submission
from gymbuild.plan.shared import plan_shared_job
from gymbuild.render import render_job
from gymbuild.render.shared import render_shared_job
from tests.executors.test_local import User, echo_service, local_config

ECHO = 'python3 -m gymbuild.demo.echo_server --port "$GYM_PORT"'


def shared_config(
    benchmarks: dict[str, Any], per_job: Any = "all", concurrent: int = 1, **kw: Any
) -> dict[str, Any]:
    config = local_config(benchmarks, **kw)
    config["driver"].update(benchmarks_per_job=per_job, concurrent_benchmarks=concurrent)
    return config


def write(tmp_path: Path, config: dict[str, Any]) -> Path:
    import yaml

    path = tmp_path / "submit.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_a_shared_job_starts_its_services_once_and_runs_each_benchmark_in_its_own_directory(
    tmp_path: Path,
) -> None:
    config = shared_config({"a": {"command": "true"}, "b": {"command": "false"}}, compute={})
    config["compute"] = {"cluster": {"type": "slurm", "account": "gym", "walltime": "01:00:00"}}
    resolved = load_config(write(tmp_path, config))
    plans = list(
        plan_submission(
            resolved.config,
            planning_traits(resolved.config),
            run_dir="/runs/gym-job-x",
            gym_job_id="gym-job-x",
        ).values()
    )
    job = render_shared_job(plan_shared_job(plans, 1), {})
    text = job.files["job.sh"].text
    assert job.bench_dir.startswith("/runs/gym-job-x/+jobs/a+1-")
    assert f"#SBATCH --chdir={job.bench_dir}\n" in text
    assert "#SBATCH --job-name=gym-a+1-" in text
    assert text.count("--- service step") == 1  # one service start for both benchmarks
    assert text.count("--job-name=gym-driver") == 2  # one driver step each
    assert "GYM_BENCH_DIRS=(/runs/gym-job-x/a /runs/gym-job-x/b)" in text
    script = tmp_path / "job.sh"
    script.write_text(text)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    checked = subprocess.run([shellcheck(), "--shell=bash", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout
    # the benchmarks' own scripts are what they were: a shared job only adds its own
    alone = render_job(plans[0], {}).files["job.sh"].text
    assert "GYM_BENCHES" not in alone and "#SBATCH --job-name=gym-a\n" in alone


def wait_ended(user: User, timeout: float = 120) -> dict[str, dict[str, Any]]:
    """Poll status until no benchmark runs or waits (the bound only keeps a broken job from hanging)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = user.status()
        busy = any(
            r["state"] in ("RUNNING", "WAITING") or r.get("job_state") == "RUNNING" for r in rows.values()
        )
        if not busy or time.monotonic() > deadline:
            return rows
        time.sleep(1)


def test_one_failing_benchmark_does_not_stop_the_others_and_resubmit_runs_exactly_it(tmp_path: Path) -> None:
    flag = tmp_path / "fixed"
    benchmarks = {
        "a": {"command": 'echo a >"$NEMO_GYM_BENCH_DIR/artifacts/out"'},
        "b": {"command": f"test -e {flag}"},
        "c": {"command": 'echo c >"$NEMO_GYM_BENCH_DIR/artifacts/out"'},
    }
    user = User(tmp_path, shared_config(benchmarks, concurrent=2))
    done = user.submit()
    ids = {j["benchmark"]: j["job_id"] for j in user.record["benchmarks"]}
    assert len(set(ids.values())) == 1, done.stdout  # one job for the three
    rows = wait_ended(user)
    assert {b: (r["state"], r["exit_code"]) for b, r in rows.items()} == {
        "a": ("COMPLETED", "0:0"),
        "b": ("FAILED", "1:0"),
        "c": ("COMPLETED", "0:0"),
    }
    assert {r["job_state"] for r in rows.values()} == {"FAILED"}  # the job fails when one of them does
    (run_dir,) = (tmp_path / "runs").glob("gym-job-*")
    job_id = ids["a"]
    for bench in benchmarks:  # each its own log and exit status, in its own directory
        assert (run_dir / bench / "logs" / f"driver-{job_id}.log").is_file()
        assert (run_dir / bench / f".gym_exit-{job_id}").is_file()
    (job_dir,) = [d for d in (run_dir / "+jobs").iterdir() if d.is_dir()]  # beside it: its queue log
    assert len(list((job_dir / "logs").glob(f"echo-{job_id}.log"))) == 1  # the service started once

    flag.touch()
    again = user.run("resubmit")
    assert again.returncode == 0, again.stdout + again.stderr
    assert (
        "submitted b ->" in again.stdout
        and "submitted a" not in again.stdout
        and "submitted c" not in again.stdout
    )
    rows = wait_ended(user)
    assert {b: r["state"] for b, r in rows.items()} == dict.fromkeys("abc", "COMPLETED")
    assert rows["a"]["job_id"] == rows["c"]["job_id"] == job_id != rows["b"]["job_id"]
    assert (run_dir / "a" / "artifacts" / "out").read_text() == "a\n"  # a was not run again


def test_a_service_that_dies_leaves_the_rest_not_run_and_a_resubmit_runs_exactly_those(
    tmp_path: Path,
) -> None:
    stop = tmp_path / "stop"
    # The service stops when `stop` exists; the first benchmark makes it so and waits to be stopped.
    service = echo_service(f"{ECHO} & while [ ! -e {stop} ]; do sleep 0.2; done; kill $!")
    benchmarks = {
        "a": {"command": "true"},
        "b": {"command": f"touch {stop}; sleep 60"},
        "c": {"command": "true"},
        "d": {"command": "true"},
    }
    user = User(tmp_path, shared_config(benchmarks, services={"echo": service}))
    user.submit()
    rows = wait_ended(user)
    assert {b: r["state"] for b, r in rows.items()} == {
        "a": "COMPLETED",
        "b": "FAILED",
        "c": "NOT RUN",
        "d": "NOT RUN",
    }
    first = rows["a"]["job_id"]
    stop.unlink()
    benchmarks["b"] = {"command": "true"}
    write(tmp_path, shared_config(benchmarks, services={"echo": service}))
    again = user.run("resubmit")
    assert again.returncode == 0, again.stdout + again.stderr
    assert sorted(line.split()[1] for line in again.stdout.splitlines() if line.startswith("submitted")) == [
        "b",
        "c",
        "d",
    ]
    rows = wait_ended(user)
    assert {b: r["state"] for b, r in rows.items()} == dict.fromkeys("abcd", "COMPLETED")
    assert rows["a"]["job_id"] == first
    assert len({rows[b]["job_id"] for b in "bcd"}) == 1  # packed anew into one job
    record = json.loads(next((tmp_path / "runs").glob("gym-job-*/gym-job.json")).read_text())
    assert [j["previous_job_ids"] for j in record["benchmarks"]] == [[], [first], [first], [first]]


def test_logs_and_cancel_of_a_benchmark_in_a_shared_job(tmp_path: Path) -> None:
    benchmarks = {"a": {"command": "echo from-a; sleep 60"}, "b": {"command": "true"}}
    user = User(tmp_path, shared_config(benchmarks))
    user.submit()
    deadline = time.monotonic() + 60
    while user.status()["a"]["state"] != "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(1)
    logs = user.run("logs", "only=a")
    assert logs.returncode == 0, logs.stderr
    assert "from-a" in logs.stdout  # its own driver log ...
    assert "echo-" in logs.stdout  # ... and its job's service log (tail names each file)
    cancelled = user.run("cancel")
    assert cancelled.returncode == 0 and "cancelled 1 job(s)" in cancelled.stdout, (
        cancelled.stdout + cancelled.stderr
    )
    rows = wait_ended(user)
    assert {b: (r["state"], r["job_state"]) for b, r in rows.items()} == {
        "a": ("CANCELLED", "CANCELLED"),
        "b": ("CANCELLED", "CANCELLED"),
    }
    again = user.run("resubmit")  # CANCELLED is re-queued only when named
    assert again.returncode == 0 and "nothing to resubmit" in again.stdout, again.stdout + again.stderr
