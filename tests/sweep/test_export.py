"""`gymbuild export` (issue 29, item 4). to=mlflow against a real MLflow tracking server the test
starts on loopback with its SQLite store, read back with MLflow's own client; to=wandb in W&B's
offline mode, its run files read back with W&B's own record schema. A local sweep over three
checkpoints becomes three runs, each with its metric at its training step and its tags; exporting
again adds no run and no point; the tracker's token is never printed nor written to the run
directory. Each is skipped, with the reason, where its extra is not installed."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import gymbuild_argv, kill_local_jobs, local_command_config, user_env, write_config

from gymbuild.errors import UserError
from gymbuild.sweep import export

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
    # The test extra has the full mlflow (client and server): without it this fails, never skips.
    if importlib.util.find_spec("mlflow") is None:
        pytest.fail("mlflow is not installed: pip install -e '.[test]'")
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


class Sweep:
    """A local sweep over three checkpoints (steps 20, 300, 1200, scoring step/1000), run to the end."""

    def __init__(self, tmp_path: Path, **env: str) -> None:
        self.home = tmp_path
        self.ckpts = tmp_path / "ckpts"
        self.ckpts.mkdir()
        for step in (1200, 300, 20):
            checkpoint(self.ckpts, step)
        (self.ckpts / "config.json").write_text("{}")  # the ready marker a sweep waits for
        write_config(tmp_path, local_command_config(), "eval.yaml")
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        self.env = user_env(tmp_path, PATH=path, **env)
        self.line = (
            "config=eval.yaml",
            "multirun=1",
            f"driver.benchmarks.demo.command=paths({self.ckpts}/step_*)",
        )
        self.run("submit", *self.line)
        deadline = time.monotonic() + 120
        while True:  # the event: every checkpoint's metrics are there
            series = self.run("results", *self.line, "series=1", "format=csv").stdout
            rows = list(csv.DictReader(io.StringIO(series)))
            if all(r["state"] == "COMPLETED" and r["value"] for r in rows) or time.monotonic() > deadline:
                break
            time.sleep(0.5)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            gymbuild_argv(*args), cwd=self.home, env=self.env, capture_output=True, text=True, timeout=240
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert TOKEN not in done.stdout + done.stderr
        return done

    def token_nowhere(self) -> None:
        for file in (self.home / "runs").rglob("*"):
            assert not file.is_file() or TOKEN not in file.read_text(errors="replace"), file


def checkpoint(directory: Path, step: int) -> None:
    script = directory / f"step_{step}"
    script.write_text(f'#!/bin/bash\nprintf \'{{"score": {step / 1000}, "note": "x"}}\' > {SCORE}\n')
    script.chmod(0o755)


def test_a_sweep_exports_a_run_per_checkpoint_at_its_step_and_again_adds_nothing(
    tmp_path: Path, tracking_server: str
) -> None:
    from mlflow.tracking import MlflowClient

    sweep = Sweep(tmp_path, MLFLOW_TRACKING_URI=tracking_server, MLFLOW_TRACKING_TOKEN=TOKEN)
    ckpts, line, run, env = sweep.ckpts, sweep.line, sweep.run, sweep.env
    try:
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
        as_json = json.loads(run("export", *line, "to=mlflow", "experiment=sft-run", "--json").stdout)
        assert (as_json["created"], as_json["found_again"], as_json["logged"]) == (0, 3, 0)
        assert as_json["to"] == "mlflow" and as_json["sweep_id"].startswith("sweep-")
        assert read_back() == seen

        # Issue 40, item 10: where MLflow would log is misconfigured: one message with the fix.
        file_store = f"file://{tmp_path / 'mlruns'}"
        for uri, fix in (
            ("", "export MLFLOW_TRACKING_URI="),
            (file_store, "export MLFLOW_ALLOW_FILE_STORE=true"),
        ):
            bare = {
                k: v for k, v in env.items() if k not in ("MLFLOW_TRACKING_URI", "MLFLOW_ALLOW_FILE_STORE")
            }
            wrong = subprocess.run(
                gymbuild_argv("export", *line, "to=mlflow"),
                cwd=tmp_path,
                env={**bare, **({"MLFLOW_TRACKING_URI": uri} if uri else {})},
                capture_output=True,
                text=True,
                timeout=240,
            )
            lines = wrong.stderr.splitlines()
            assert (wrong.returncode, wrong.stdout) == (1, ""), wrong.stderr
            assert len(lines) == 2 and lines[0].startswith("error: to=mlflow") and fix in lines[1], lines
        assert not (tmp_path / "mlflow.db").exists() and not list((tmp_path / "mlruns").glob("*"))
        sweep.token_nowhere()

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


def wandb_records(path: Path) -> Iterator[Any]:
    """The records of a W&B run file (`run-<id>.wandb`: a header, then LevelDB-log framed records of
    W&B's own protobuf schema), parsed with that schema."""
    from wandb.proto import wandb_internal_pb2

    data, block, pos, pending = path.read_bytes(), 32768, 7, b""
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # the end of a block too short for a header: padding
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 4):  # a whole record, or a record's last piece
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending + chunk)
            pending = b""
            yield record
        elif kind in (2, 3):
            pending += chunk
        else:
            pos += block - pos % block  # zero padding to the end of the block


def test_a_sweep_exported_to_wandb_offline_is_a_run_per_checkpoint_once(tmp_path: Path) -> None:
    pytest.importorskip("wandb", reason="the wandb extra is not installed: pip install wandb")
    import json

    wandb_dir = tmp_path / "wandb-home"
    wandb_dir.mkdir()
    sweep = Sweep(tmp_path, WANDB_MODE="offline", WANDB_DIR=str(wandb_dir), WANDB_API_KEY=TOKEN)
    try:
        first = sweep.run("export", *sweep.line, "to=wandb", "experiment=sft-run")
        assert "3 run(s) created, 0 found again, 3 point(s) logged" in first.stdout, first.stdout
        again = sweep.run("export", *sweep.line, "to=wandb", "experiment=sft-run")
        assert "0 run(s) created, 3 found again, 0 point(s) logged" in again.stdout, again.stdout
        files = sorted(wandb_dir.glob("wandb/offline-run-*/run-*.wandb"))
        assert len(files) == 3  # one run per checkpoint, and none more after the second export
        seen = {}
        for file in files:
            config, points = {}, []
            for record in wandb_records(file):
                kind = record.WhichOneof("record_type")
                if kind == "run":
                    config.update({i.key: json.loads(i.value_json) for i in record.run.config.update})
                elif kind == "config":
                    config.update({i.key: json.loads(i.value_json) for i in record.config.update})
                elif kind == "history":
                    items = {
                        i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item
                    }
                    points.append((items.get("_step"), items.get("demo/score")))
            step = int(config["gymbuild.label"].split("_")[1])
            seen[step] = (config, points)
        assert sorted(seen) == [20, 300, 1200]
        for step, (config, points) in seen.items():
            assert points == [(step, step / 1000)]
            assert config["checkpoint"] == f"{sweep.ckpts}/step_{step}"
            assert config["gym_job_id"].startswith("gym-job-") and len(config["config_digest"]) == 16
        for file in wandb_dir.rglob("*"):  # W&B's key is not copied into its files either
            assert not file.is_file() or TOKEN.encode() not in file.read_bytes(), file
        sweep.token_nowhere()
    finally:
        kill_local_jobs(tmp_path / "runs")


def test_a_gated_sweep_tags_each_checkpoints_run_with_its_verdict_and_the_choice(
    tmp_path: Path, tracking_server: str
) -> None:
    """`export baseline= max_drop=`: each checkpoint's MLflow run carries gate.outcome,
    gate.non_inferior and gate.chosen, the baseline's run says it is the baseline."""
    from gate_sweep_helpers import GatedSweep
    from mlflow.tracking import MlflowClient

    sweep = GatedSweep(tmp_path, MLFLOW_TRACKING_URI=tracking_server)
    try:
        done = sweep.ok(
            "export", *sweep.line, "to=mlflow", "experiment=gated", "baseline=step_0", "max_drop=0.1"
        )
        assert "4 run(s) created" in done.stdout, done.stdout
        client = MlflowClient(tracking_uri=tracking_server)
        experiment = client.get_experiment_by_name("gated")
        assert experiment is not None
        runs = client.search_runs([experiment.experiment_id], max_results=100)
        tags = {r.data.tags["gymbuild.label"]: r.data.tags for r in runs}
        got = {
            label: (t["gate.outcome"], t["gate.non_inferior"], t["gate.chosen"], t["gate.baseline"])
            for label, t in tags.items()
        }
        base = sweep.ids[0]
        assert got == {
            "step_0": ("BASELINE", "false", "false", base),
            "step_100": ("PASS", "true", "false", base),
            "step_200": ("DROP", "false", "false", base),
            "step_300": ("PASS", "true", "true", base),
        }
        # Gated again against another margin, the tags follow: a checkpoint's verdict is never stale.
        sweep.ok("export", *sweep.line, "to=mlflow", "experiment=gated", "baseline=step_0", "max_drop=0.5")
        again = client.search_runs([experiment.experiment_id], max_results=100)
        assert {r.data.tags["gymbuild.label"]: r.data.tags["gate.outcome"] for r in again}[
            "step_200"
        ] == "PASS"
    finally:
        kill_local_jobs(tmp_path / "runs")


def test_a_gated_sweep_exported_to_wandb_carries_each_verdict_in_config_and_summary(tmp_path: Path) -> None:
    pytest.importorskip("wandb", reason="the wandb extra is not installed: pip install wandb")
    from gate_sweep_helpers import GatedSweep

    wandb_dir = tmp_path / "wandb-home"
    wandb_dir.mkdir()
    sweep = GatedSweep(tmp_path, WANDB_MODE="offline", WANDB_DIR=str(wandb_dir))
    try:
        sweep.ok("export", *sweep.line, "to=wandb", "experiment=gated", "baseline=step_0", "max_drop=0.1")
        seen = {}
        for file in sorted(wandb_dir.glob("wandb/offline-run-*/run-*.wandb")):
            config, summary = {}, {}
            for record in wandb_records(file):
                kind = record.WhichOneof("record_type")
                if kind in ("run", "config"):
                    items = record.run.config.update if kind == "run" else record.config.update
                    config.update({i.key: json.loads(i.value_json) for i in items})
                elif kind == "summary":
                    summary.update({i.key: json.loads(i.value_json) for i in record.summary.update})
            gate = ("gate.outcome", "gate.non_inferior", "gate.chosen")
            seen[config["gymbuild.label"]] = (
                tuple(config[k] for k in gate),
                tuple(summary.get(k) for k in gate),
            )
        expected = {
            "step_0": ("BASELINE", "false", "false"),
            "step_100": ("PASS", "true", "false"),
            "step_200": ("DROP", "false", "false"),
            "step_300": ("PASS", "true", "true"),
        }
        assert seen == {label: (tags, tags) for label, tags in expected.items()}
    finally:
        kill_local_jobs(tmp_path / "runs")
