"""No secret leaves the owner-only secrets file: every byte gymbuild prints or writes is searched.

Two `host:` variables and the collector's ingest token are set to random values. Then every verb runs
for real against the cluster over SSH (resolve, resolve json=1, render, submit, status, logs, runs),
plus the cheap error paths (bad override, unset variable, missing mount) and a submit that sbatch
refuses. While the job runs, every process's command line on this machine (which is the login node
and both compute nodes) is scanned again and again.
"""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from e2e_helpers import gymbuild, job_ids, manifest, run_dir, slurm_config, write_config
from reliability_helpers import cancel, secret_user

pytestmark = pytest.mark.cluster


def _scan_cmdlines(values: list[bytes], hits: list[str], stop: threading.Event) -> None:
    """Read /proc/*/cmdline until told to stop; note every process whose argv holds a value."""
    scans = 0
    while not stop.is_set() or scans == 0:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                argv = Path(entry.path, "cmdline").read_bytes()
            except OSError:
                continue
            if any(v in argv for v in values):
                hits.append(argv.replace(b"\0", b" ").decode(errors="replace"))
        scans += 1
    hits.append(f"scans={scans}")


@pytest.fixture(scope="module")
def secret_run(cluster, tmp_path_factory):
    home = tmp_path_factory.mktemp("secrets")
    secrets, env = secret_user(home)
    output = cluster.run_dir("secrets")
    data = slurm_config(
        output,
        {"gpqa": {"run": {"config_paths": ["benchmarks/gpqa/config.yaml"], "fake_sleep_seconds": 8}}},
        driver={"env": {"WANDB_API_KEY": "host:WANDB_API_KEY", "WANDB_RUN_GROUP": "runtime:SLURM_JOB_ID"}},
    )
    data["services"]["policy"]["env"] = {"HF_TOKEN": "host:HF_TOKEN"}
    data["otel"] = {"endpoint": "http://127.0.0.1:9", "service_name": "reliability", "gym_telemetry": False}
    config = write_config(home, data)
    cfg = f"config={config}"
    printed: dict[str, object] = {}

    def run(label: str, *args: str, environ: dict[str, str] | None = None) -> object:
        printed[label] = result = gymbuild(*args, cwd=home, env=environ or env)
        return result

    run("resolve", "resolve", cfg)
    run("resolve-json", "resolve", cfg, "json=1")
    run("render", "render", cfg)
    hits: list[str] = []
    stop = threading.Event()
    scanner = threading.Thread(
        target=_scan_cmdlines, args=([v.encode() for v in secrets.values()], hits, stop)
    )
    scanner.start()
    try:
        submitted = run("submit", "submit", cfg)
        assert submitted.rc == 0, submitted.stderr
        job_id = job_ids(manifest(output))["gpqa"]
        result = cluster.wait_for_job(job_id, timeout=180)
    finally:
        stop.set()
        scanner.join()
    run("status", "status", cfg)
    run("status-json", "status", cfg, "json=1")
    run("logs", "logs", cfg, "only=gpqa")
    run("runs", "runs")
    run("bad-override", "submit", cfg, "services.policy.portt=1")
    run("unset-var", "submit", cfg, environ={k: v for k, v in env.items() if k != "WANDB_API_KEY"})
    mount_cfg = write_config(
        home, {**data, "driver": {**data["driver"], "mounts": ["/nonexistent/rel"]}}, "m.yaml"
    )
    run("missing-mount", "submit", f"config={mount_cfg}")
    refused_out = cluster.run_dir("secrets-refused")
    refused = write_config(home, {**data, "job": {"output_path": str(refused_out)}}, "refused.yaml")
    run("refused-submit", "submit", f"config={refused}", "compute.cluster.account=no-such-account")
    yield {
        "secrets": secrets,
        "home": home,
        "printed": printed,
        "outputs": [output, refused_out],
        "run_dir": run_dir(output),
        "hits": hits,
        "result": result,
    }
    cancel([job_id])


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_every_error_path_was_taken(secret_run) -> None:
    printed = secret_run["printed"]
    assert secret_run["result"].state == "COMPLETED"
    for label in ("bad-override", "unset-var", "missing-mount", "refused-submit"):
        assert printed[label].rc == 1, (label, printed[label])
        assert "Traceback" not in printed[label].stderr
    assert "WANDB_API_KEY" in printed["unset-var"].stderr
    assert "/nonexistent/rel" in printed["missing-mount"].stderr
    assert "Invalid account" in printed["refused-submit"].stdout  # sbatch's refusal, in the report


def test_no_secret_in_anything_gymbuild_printed_or_wrote(secret_run) -> None:
    values = list(secret_run["secrets"].values())
    found = []
    for label, result in secret_run["printed"].items():
        for stream in (result.stdout, result.stderr):
            found += [(label, v) for v in values if v in stream]
    # the workspace (staged tree, outcomes, stamps, doit's database), the local index, the run dirs
    roots = [secret_run["home"], *secret_run["outputs"]]
    scanned = 0
    for root in roots:
        for path in _files(root):  # job.sh too: it names its secrets file and holds no value (issue 19)
            data = path.read_bytes()
            scanned += 1
            found += [(str(path), v) for v in values if v.encode() in data]
    assert scanned > 20
    assert found == []


def test_job_sh_holds_no_secret_and_the_secrets_file_went_with_the_job(secret_run, cluster) -> None:
    secrets = secret_run["secrets"]
    scripts = [p for root in (secret_run["home"], *secret_run["outputs"]) for p in root.rglob("job.sh")]
    assert len(scripts) >= 3  # staged and remote copy of the run, and of the refused submit
    for script in scripts:
        text = script.read_text()
        assert "__gym_secrets_file=~/.gymbuild-secrets/" in text
        assert not [v for v in secrets.values() if v in text]
    # The job COMPLETED, so its end removed its file; sbatch refused the other, so the submit did.
    for output in secret_run["outputs"]:
        gym_job_id = run_dir(output).name
        assert cluster.ssh(f"ls -a ~/.gymbuild-secrets/{gym_job_id}", check=False).returncode != 0


def test_job_sh_is_owner_only_and_the_rest_of_the_run_dir_is_readable(secret_run, cluster) -> None:
    stage = next(p for p in secret_run["home"].rglob("stage") if p.parent.name != "draft")  # not the draft
    remote = secret_run["run_dir"]
    for root in (stage, remote):
        assert stat.S_IMODE((root / "gpqa" / "job.sh").stat().st_mode) == 0o600
    remote_mode = cluster.ssh(f"stat -c %a {remote}/gpqa/job.sh").stdout.strip()
    assert remote_mode == "600"
    for path in stage.rglob("*"):  # everything gymbuild copies, checked on both sides
        if path.name == "job.sh":
            continue
        want = 0o755 if path.is_dir() else 0o644
        for side in (path, remote / path.relative_to(stage)):
            assert stat.S_IMODE(side.stat().st_mode) == want, side
    assert stat.S_IMODE((remote / "gym-job.json").stat().st_mode) == 0o644
    assert stat.S_IMODE(remote.stat().st_mode) == 0o755
    benches = [job.parent.name for job in stage.glob("*/job.sh")]
    assert benches and not any(stage.glob("*/logs"))  # not staged: the sync makes logs/ ...
    for bench in benches:  # ... before the job is queued, since Slurm opens logs/slurm-<id>.log
        assert stat.S_IMODE((remote / bench / "logs").stat().st_mode) == 0o755
    nobody = subprocess.run(
        [
            "setpriv",
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "cat",
            str(remote / "gym-job.json"),
        ],
        capture_output=True,
    )
    assert nobody.returncode == 0 and nobody.stdout
    denied = subprocess.run(
        [
            "setpriv",
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "cat",
            str(remote / "gpqa" / "job.sh"),
        ],
        capture_output=True,
    )
    assert denied.returncode != 0


def test_no_secret_on_any_command_line_while_the_job_runs(secret_run) -> None:
    hits = secret_run["hits"]
    assert hits[-1].startswith("scans=") and int(hits[-1].split("=")[1]) > 10
    assert hits[:-1] == []
