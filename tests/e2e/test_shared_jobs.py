"""Several benchmarks in one job on the test cluster: one Slurm job whose fake vLLM starts once, three
benchmarks as their own driver steps; one fails, the others complete; status shows each beside the
job's state; resubmit queues exactly the failed one, alone."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from e2e_helpers import (
    DRIVER_IMAGE,
    gymbuild,
    job_ids,
    manifest,
    run_dir,
    slurm_config,
    user_env,
    write_config,
)

pytestmark = pytest.mark.cluster


def _status(home: Any) -> dict[str, dict[str, Any]]:
    done = gymbuild("status", "json=1", cwd=home, env=user_env(home))
    assert done.rc == 0, done.stdout + done.stderr
    return {row["benchmark"]: row for row in json.loads(done.stdout)["benchmarks"]}


def test_a_shared_job_where_one_benchmark_fails_and_resubmit_runs_exactly_it(
    cluster: Any, tmp_path: Any
) -> None:
    flag = cluster.run_dir("shared-flag") / "fixed"
    benchmarks = {
        "gpqa": {"run": {"config_paths": ["benchmarks/gpqa/config.yaml"], "fake_num_calls": 2}},
        "flaky": {"command": f"test -e {flag}"},
        "last": {"command": 'echo done >"$NEMO_GYM_BENCH_DIR/artifacts/out"'},
    }
    config = slurm_config(cluster.run_dir("e2e-shared"), benchmarks, driver={"benchmarks_per_job": "all"})
    write_config(tmp_path, config)
    submit = gymbuild("submit", cwd=tmp_path, env=user_env(tmp_path))
    assert submit.rc == 0, submit.stdout + submit.stderr
    ids = job_ids(manifest(config))
    assert len(set(ids.values())) == 1  # one Slurm job for the three
    (job,) = set(ids.values())
    result = cluster.wait_for_job(job, timeout=240)
    assert result.state == "FAILED"  # the job fails when one of its benchmarks does
    rows = _status(tmp_path)
    assert {b: (r["state"], r["exit_code"], r["job_state"]) for b, r in rows.items()} == {
        "gpqa": ("COMPLETED", "0:0", "FAILED"),
        "flaky": ("FAILED", "1:0", "FAILED"),
        "last": ("COMPLETED", "0:0", "FAILED"),
    }
    run = run_dir(config)
    (job_dir,) = [d for d in (run / "+jobs").iterdir() if d.is_dir()]
    assert len(list((job_dir / "logs").glob(f"policy-{job}.log"))) == 1  # the model loaded once
    for bench in benchmarks:
        assert (run / bench / "logs" / f"driver-{job}.log").is_file()

    flag.touch()
    again = gymbuild("resubmit", cwd=tmp_path, env=user_env(tmp_path))
    assert again.rc == 0, again.stdout + again.stderr
    submitted = [line.split()[1] for line in again.stdout.splitlines() if line.startswith("submitted")]
    assert submitted == ["flaky"]
    second = job_ids(manifest(config))["flaky"]
    assert second != job
    assert cluster.wait_for_job(second, timeout=180).state == "COMPLETED"
    rows = _status(tmp_path)
    assert {b: r["state"] for b, r in rows.items()} == dict.fromkeys(benchmarks, "COMPLETED")
    assert (rows["gpqa"]["job_id"], rows["last"]["job_id"]) == (job, job)


def test_a_shared_resumable_job_that_times_out_resumes_only_what_did_not_finish(
    cluster: Any, tmp_path: Any
) -> None:
    # A one-minute walltime (Slurm enforces it up to half a minute late): `quick` finishes at once,
    # `slow` makes one call, then pauses 200 s before its second, so the job times out in `slow`.
    benchmarks = {
        "quick": {"resumable": True, "run": {"fake_num_calls": 1}},
        "slow": {"resumable": True, "run": {"fake_num_calls": 2, "fake_call_interval_seconds": 200}},
    }
    config = slurm_config(
        cluster.run_dir("e2e-shared-resumable"), benchmarks, walltime="1", driver={"benchmarks_per_job": 2}
    )
    write_config(tmp_path, config)
    submit = gymbuild("submit", cwd=tmp_path, env=user_env(tmp_path))
    assert submit.rc == 0, submit.stdout + submit.stderr
    (first,) = set(job_ids(manifest(config)).values())
    assert cluster.wait_for_job(first, timeout=150).state == "TIMEOUT"
    run = run_dir(config)
    (job_dir,) = [d for d in (run / "+jobs").iterdir() if d.is_dir()]
    chain: list[str] = []
    for _ in range(60):  # the successor appends itself when it starts
        chain = (job_dir / ".gym_job_chain").read_text().split()
        if len(chain) == 2:
            break
        time.sleep(1)
    assert chain[0] == first and len(chain) == 2, chain
    second = chain[1]
    result = cluster.wait_for_job(second, timeout=150)
    log = (job_dir / "logs" / f"slurm-{second}.log").read_text()
    assert result.state == "COMPLETED", log
    assert "benchmark quick completed in an earlier job; not run again" in log
    assert not (run / "quick" / "logs" / f"driver-{second}.log").exists()  # not run again
    assert (run / "slow" / "logs" / f"driver-{second}.log").is_file()
    rows = _status(tmp_path)
    assert {b: (r["state"], r["job_id"]) for b, r in rows.items()} == {
        "quick": ("COMPLETED", second),
        "slow": ("COMPLETED", second),
    }


def test_a_service_that_dies_mid_job_leaves_the_rest_not_run_and_resubmit_runs_exactly_those(
    cluster: Any, tmp_path: Any
) -> None:
    stop = cluster.run_dir("shared-stop") / "stop"
    # The service stops serving once `stop` exists; benchmark `b` makes it so, then waits to be stopped.
    service = {
        "type": "command",
        "container": DRIVER_IMAGE,
        "port": 18952,
        "command": f'python3 -m http.server --bind 127.0.0.1 "$GYM_PORT" & '
        f"while [ ! -e {stop} ]; do sleep 0.2; done; kill $!",
        "health_check": {"path": "/", "timeout_seconds": 60},
    }
    benchmarks: dict[str, Any] = {
        "a": {"command": "true"},
        "b": {"command": f"touch {stop}; sleep 120"},
        "c": {"command": "true"},
        "d": {"command": "true"},
    }
    output = cluster.run_dir("e2e-shared-dies")

    def config_of(benches: dict[str, Any]) -> dict[str, Any]:
        config = slurm_config(
            output, benches, services={"web": service}, driver={"benchmarks_per_job": "all"}
        )
        del config["driver"]["policy_model"]
        return config

    config = config_of(benchmarks)
    write_config(tmp_path, config)
    submit = gymbuild("submit", cwd=tmp_path, env=user_env(tmp_path))
    assert submit.rc == 0, submit.stdout + submit.stderr
    (first,) = set(job_ids(manifest(config)).values())
    assert cluster.wait_for_job(first, timeout=240).state == "FAILED"
    rows = _status(tmp_path)
    assert {b: r["state"] for b, r in rows.items()} == {
        "a": "COMPLETED",
        "b": "FAILED",
        "c": "NOT RUN",
        "d": "NOT RUN",
    }

    stop.unlink()
    benchmarks["b"] = {"command": "true"}
    write_config(tmp_path, config_of(benchmarks))
    again = gymbuild("resubmit", cwd=tmp_path, env=user_env(tmp_path))
    assert again.rc == 0, again.stdout + again.stderr
    submitted = sorted(line.split()[1] for line in again.stdout.splitlines() if line.startswith("submitted"))
    assert submitted == ["b", "c", "d"]
    ids = job_ids(manifest(config))
    assert ids["a"] == first and len({ids[b] for b in "bcd"}) == 1  # packed anew into one job
    assert cluster.wait_for_job(ids["b"], timeout=240).state == "COMPLETED"
    rows = _status(tmp_path)
    assert {b: r["state"] for b, r in rows.items()} == dict.fromkeys("abcd", "COMPLETED")
