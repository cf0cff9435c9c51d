"""`gymbuild export to=mlflow` (issue 29, item 4) against a real MLflow tracking server the test
starts on loopback with its SQLite store, read back with MLflow's own client: a local sweep over
three checkpoints becomes three runs, each with its metric at its training step and its tags;
exporting again adds no run and no point; the tracker's token is never printed nor written to the
run directory. Skipped, with the reason, where the `mlflow` extra is not installed."""

from __future__ import annotations

import csv
import io
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_helpers import gymbuild_argv, kill_local_jobs, local_command_config, user_env, write_config

from gymbuild import export
from gymbuild.errors import UserError

TOKEN = "tok-3b1f-never-shown"
SCORE = '"$NEMO_GYM_BENCH_DIR/artifacts/metrics.json"'


def test_a_missing_extra_is_one_message_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # what `import mlflow` meets where it is absent
    with pytest.raises(UserError) as caught:
        export._library("mlflow")
    assert "pip install 'gymbuild[mlflow]'" in str(caught.value) and "submitting never needs it" in str(
        caught.value
    )


def test_a_uri_is_shown_without_its_user_info() -> None:
    assert export.shown_uri("https://me:secret@mlflow.example:443/x") == "https://mlflow.example:443/x"
    assert export.shown_uri("http://127.0.0.1:5000") == "http://127.0.0.1:5000"


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed: pip install mlflow")
    root = tmp_path_factory.mktemp("mlflow")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mlflow = shutil.which("mlflow", path=str(Path(sys.executable).parent))
    assert mlflow
    log = (root / "server.log").open("w")
    store = ["--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}", "--default-artifact-root", str(root)]
    server = subprocess.Popen(
        [mlflow, "server", *store, "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    try:
        while True:  # the event: the server answers its health check
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"mlflow server did not come up:\n{(root / 'server.log').read_text()[-3000:]}")
            time.sleep(0.2)
        yield uri
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
        log.close()


def checkpoint(directory: Path, step: int) -> None:
    script = directory / f"step_{step}"
    script.write_text(f'#!/bin/bash\nprintf \'{{"score": {step / 1000}, "note": "x"}}\' > {SCORE}\n')
    script.chmod(0o755)


def test_a_sweep_exports_a_run_per_checkpoint_at_its_step_and_again_adds_nothing(
    tmp_path: Path, tracking_server: str
) -> None:
    from mlflow.tracking import MlflowClient

    ckpts = tmp_path / "ckpts"
    ckpts.mkdir()
    for step in (1200, 300, 20):
        checkpoint(ckpts, step)
    write_config(tmp_path, local_command_config(), "eval.yaml")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = user_env(tmp_path, PATH=path, MLFLOW_TRACKING_URI=tracking_server, MLFLOW_TRACKING_TOKEN=TOKEN)
    line = ("config=eval.yaml", "multirun=1", f"driver.benchmarks.demo.command=paths({ckpts}/step_*)")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            gymbuild_argv(*args), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert TOKEN not in done.stdout + done.stderr
        return done

    try:
        run("submit", *line)
        deadline = time.monotonic() + 120
        while True:  # the event: every checkpoint's metrics are there
            rows = list(csv.DictReader(io.StringIO(run("results", *line, "series=1", "format=csv").stdout)))
            if all(r["state"] == "COMPLETED" and r["value"] for r in rows) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        first = run("export", *line, "to=mlflow", "experiment=sft-run")
        assert "3 run(s) created, 0 found again, 3 point(s) logged" in first.stdout, first.stdout
        assert tracking_server in first.stdout

        client = MlflowClient(tracking_uri=tracking_server)
        experiment = client.get_experiment_by_name("sft-run")
        assert experiment is not None

        def read_back() -> dict[int, tuple[dict[str, str], list[tuple[int, float]]]]:
            runs = client.search_runs([experiment.experiment_id], max_results=100)
            out = {}
            for r in runs:
                history = client.get_metric_history(r.info.run_id, "demo/score")
                out[int(r.data.tags["gymbuild.label"].split("_")[1])] = (
                    r.data.tags,
                    [(m.step, m.value) for m in history],
                )
            return out

        seen = read_back()
        assert sorted(seen) == [20, 300, 1200]
        for step, (tags, points) in seen.items():
            assert points == [(step, step / 1000)]  # one point, at the training step
            assert tags["checkpoint"] == f"{ckpts}/step_{step}"
            assert tags["gym_job_id"].startswith("gym-job-") and len(tags["config_digest"]) == 16
            assert "model" in tags and tags["gymbuild.sweep_id"].startswith("sweep-")
        assert len({tags["gym_job_id"] for tags, _ in seen.values()}) == 3

        again = run("export", *line, "to=mlflow", "experiment=sft-run")
        assert "0 run(s) created, 3 found again, 0 point(s) logged" in again.stdout, again.stdout
        assert read_back() == seen
        for file in (tmp_path / "runs").rglob("*"):
            assert not file.is_file() or TOKEN not in file.read_text(errors="replace"), file

        refused = subprocess.run(
            gymbuild_argv("export", *line, "to=tensorboard"),
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
        )
        assert (
            refused.returncode == 1
            and "fix: to=mlflow" in refused.stderr
            and "Traceback" not in refused.stderr
        )
    finally:
        kill_local_jobs(tmp_path / "runs")
