"""`compute.<name>.array` in the dry run: `render` says which jobs go into which array, and every
job's script is the one it renders without arrays (each array task runs it unchanged)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

BENCHMARKS = {
    "gpqa": {"run": {"config_paths": "benchmarks/gpqa/config.yaml"}},
    "alpha": {"command": "true"},
    "beta": {"command": "true"},
}


def _config(
    directory: Path,
    *,
    array: Any = None,
    driver: dict[str, Any] | None = None,
    benchmarks: dict[str, Any] = BENCHMARKS,
) -> Path:
    compute: dict[str, Any] = {
        "type": "slurm",
        "account": "gym",
        "walltime": "04:00:00",
        "node_pools": {"gpu": {"partition": "gpu", "gpus_per_node": 1}},
    }
    if array is not None:
        compute["array"] = array
    config = {
        "services": {"policy": {"type": "vllm", "container": "vllm/vllm-openai:v0.10.1", "model": "m"}},
        "compute": {"cluster": compute},
        "driver": {"policy_model": "policy", **(driver or {}), "benchmarks": benchmarks},
        "job": {"output_path": "/var/tmp/gymbuild-runs"},
        "otel": {"enabled": False},
    }
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "submit.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _render(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gymbuild.cli.main", "render", f"config={config}", *args],
        cwd=config.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _scripts(config: Path) -> dict[str, str]:
    done = _render(config, "json=1")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    run_dir = payload["run_dir"]
    gym_job_id = run_dir.rsplit("/", 1)[1]
    return {
        job: files["job.sh"].replace(run_dir, "<run>").replace(gym_job_id, "<id>")
        for job, files in payload["benchmarks"].items()
    }


def test_render_says_which_arrays_and_renders_the_same_scripts(tmp_path: Path) -> None:
    with_arrays = _config(tmp_path / "arrays", array={"parallel": 2})
    done = _render(with_arrays)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("[dry-run] ")]
    assert lines[1].startswith("[dry-run] job arrays (compute.cluster.array): 1 array, each split at submit")
    assert lines[2] == (
        "[dry-run] array --array=0-2%2: gpqa, alpha, beta; shared directives: --account=gym "
        "--time=04:00:00 --partition=gpu --nodes=1 --ntasks-per-node=1 --gpus-per-node=1"
    )
    # each task runs its benchmark's own script: the one a submission without arrays renders
    assert _scripts(with_arrays) == _scripts(_config(tmp_path / "plain"))


def test_render_json_lists_the_arrays_and_shared_jobs_are_array_tasks(tmp_path: Path) -> None:
    config = _config(tmp_path, array=True, driver={"benchmarks_per_job": 2})
    done = _render(config, "json=1")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    (array,) = payload["arrays"]
    assert array["array"] == "0-1"  # no throttle: `array: true`
    shared = next(job for job in payload["benchmarks"] if job.startswith("+jobs/"))
    assert array["jobs"] == [shared, "beta"]  # a shared job of gpqa and alpha is one task


def test_render_says_a_resumable_benchmarks_successor_is_a_plain_job(tmp_path: Path) -> None:
    resumable = {**BENCHMARKS, "gpqa": {**BENCHMARKS["gpqa"], "resumable": True}}
    done = _render(_config(tmp_path, array=True, benchmarks=resumable))
    assert done.returncode == 0, done.stderr
    assert "[dry-run] resumable in an array: gpqa: a successor" in done.stdout
    assert "is a plain job" in done.stdout


def test_without_array_the_dry_run_says_nothing_of_arrays(tmp_path: Path) -> None:
    config = _config(tmp_path)
    done = _render(config)
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stdout.splitlines() if line.startswith("[dry-run] ")] == [
        done.stdout.splitlines()[0]  # the run dir, and nothing of arrays
    ]
    assert "arrays" not in json.loads(_render(config, "json=1").stdout)


def test_array_on_a_local_compute_is_refused_in_one_message(tmp_path: Path) -> None:
    path = tmp_path / "submit.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "services": {},
                "compute": {"here": {"type": "local", "array": True}},
                "driver": {"benchmarks": {"demo": {"command": "true"}}},
                "job": {"output_path": "runs"},
            }
        )
    )
    done = _render(path)
    assert done.returncode == 1
    assert "compute.here.array" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()
