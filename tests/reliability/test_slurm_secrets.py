"""No secret at rest in Slurm (issue 19): what slurmctld and accounting keep holds no secret value.

The test cluster stores job scripts and environments in accounting (`AccountingStoreFlags=job_script,
job_env`), as many real sites do. One submit with two `host:` values and the collector on, two
benchmarks: `chain` (resumable; its command fails in the first job, so a successor resumes it) and
`held` (runs until cancelled; Slurm requeues it once on the way). Every step that asked for a secret
writes a hash of the value it received; then `sacct --batch-script`, `sacct --env-vars`, `scontrol
write batch_script` of every job, and every file under slurmctld's StateSaveLocation, are searched for
the values. The secrets files are owner-only while the jobs run, and gone once they have ended.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import (
    gymbuild,
    job_ids,
    manifest,
    policy_service,
    run_dir,
    slurm_config,
    write_config,
)
from reliability_helpers import cancel, secret_user

pytestmark = pytest.mark.cluster

# A step's own record of what it received: the hash of each value, and the names of its environment.
RECORD = (
    'mkdir -p "$GYM_BENCH_DIR/recv"; r="$GYM_BENCH_DIR/recv/{step}-$SLURM_JOB_ID-$$"; '
    "for v in HF_TOKEN WANDB_API_KEY OTEL_TOKEN; do "
    'if printenv "$v" >/dev/null; then '
    'printf "%s=%s\\n" "$v" "$(printf %s "$(printenv "$v")" | sha256sum | cut -c1-64)"; fi; '
    'done >"$r"'
)
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
GYM_SHIM = """#!/bin/bash
{record}
[[ -e "$GYM_BENCH_DIR/failed-once" ]] || {{ : >"$GYM_BENCH_DIR/failed-once"; exit 1; }}
exec /usr/local/bin/gym "$@"
"""
COLLECTOR = """#!/bin/bash
{record}
exec otelcol-contrib "$@"
"""


def _sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _received(bench_dir: Path, step: str) -> dict[str, dict[str, str]]:
    """job id -> what the step received there (the last record of each job)."""
    found: dict[str, dict[str, str]] = {}
    for path in sorted((bench_dir / "recv").glob(f"{step}-*"), key=lambda p: p.stat().st_mtime):
        job_id = path.name.split("-")[1]
        found[job_id] = dict(line.split("=", 1) for line in path.read_text().splitlines())
    return found


def _wait(what: str, check: Any, timeout: float = 240) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(2)
    pytest.fail(f"timed out waiting for {what}")


def _secrets_dir(gym_job_id: str) -> Path:
    return (
        Path(os.path.expanduser("~root")) / ".gymbuild-secrets" / gym_job_id
    )  # the cluster's jobs run as root


@pytest.fixture(scope="module")
def slurm_run(cluster, tmp_path_factory):
    home = tmp_path_factory.mktemp("slurm-secrets")
    secrets, env = secret_user(home)
    output = cluster.run_dir("slurm-secrets")
    wrapper = Path(cluster.run_dir("slurm-secrets-bin")) / "collector"
    wrapper.write_text(COLLECTOR.format(record=RECORD.format(step="collector")))
    wrapper.chmod(0o755)
    # `chain`'s gym: records what it received, and fails the first job (so a successor resumes it)
    shim = wrapper.parent / "gym"
    shim.write_text(GYM_SHIM.format(record=RECORD.format(step="driver")))
    shim.chmod(0o755)
    data = slurm_config(
        output,
        {
            "chain": {
                "resumable": {"max_retries": 2},
                "run": {"config_paths": ["benchmarks/gpqa/config.yaml"], "fake_num_calls": 1},
            },
            "held": {"command": f"{RECORD.format(step='driver')}\nexec sleep 600"},
        },
        services={
            "policy": policy_service(
                env={"HF_TOKEN": "host:HF_TOKEN"}, pre_command=RECORD.format(step="policy")
            )
        },
        driver={"env": {"WANDB_API_KEY": "host:WANDB_API_KEY", "PATH": f"lit:{shim.parent}:{SYSTEM_PATH}"}},
    )
    data["otel"] = {
        "endpoint": "http://127.0.0.1:9",
        "service_name": "slurm-secrets",
        "gym_telemetry": False,
        "binary": str(wrapper),
        "container": None,
    }
    config = write_config(home, data)
    cfg = f"config={config}"
    submitted = gymbuild("submit", cfg, cwd=home, env=env)
    assert submitted.rc == 0, submitted.stdout + submitted.stderr
    record = manifest(output)
    ids = job_ids(record)
    run = run_dir(output)
    gym_job_id = run.name
    held = run / "held"
    # `held` ran its driver: its secrets file is there and owner-only while it runs ...
    _wait("held's driver", lambda: _received(held, "driver"))
    secrets_dir = _secrets_dir(gym_job_id)
    modes = {
        p.name: stat.S_IMODE(p.stat().st_mode)
        for p in (secrets_dir.parent, secrets_dir, secrets_dir / "held")
    }
    # ... Slurm requeues it: the same job id runs again and finds its file
    subprocess.run(["scontrol", "requeue", ids["held"]], check=True)
    _wait("held's requeued run", lambda: len(list((held / "recv").glob("driver-*"))) >= 2, timeout=400)
    state_while_running = _state_files()
    chain_file = run / "chain" / ".gym_job_chain"

    def chain_ended() -> list[str] | None:
        chain = chain_file.read_text().split() if chain_file.exists() else []
        return chain if len(chain) == 2 and cluster.wait_for_job(chain[1], timeout=300) else None

    chain = _wait("chain's successor to end", chain_ended, timeout=400)
    chain_file_left = (secrets_dir / "chain").exists()
    cancelled = gymbuild("cancel", cfg, "only=held", cwd=home, env=env)
    cluster.wait_for_job(ids["held"], timeout=120)
    yield {
        "secrets": secrets,
        "ids": [*chain, ids["held"]],
        "chain": chain,
        "run": run,
        "secrets_dir": secrets_dir,
        "modes": modes,
        "chain_file_left": chain_file_left,
        "cancelled": cancelled,
        "chain_result": cluster.wait_for_job(chain[1], timeout=60),
        "state": [state_while_running, _state_files()],
    }
    cancel([*chain, ids["held"]])


def _state_files() -> list[Path]:
    """Every file under slurmctld's StateSaveLocation (its job scripts, environments and state)."""
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    line = next(line for line in config.splitlines() if line.startswith("StateSaveLocation"))
    return [p for p in Path(line.split("=", 1)[1].strip()).rglob("*") if p.is_file()]


def _hits(values: list[str], data: bytes) -> list[str]:
    return [v for v in values if v.encode() in data]


def test_slurm_keeps_no_secret_in_scripts_environments_or_state(slurm_run) -> None:
    values = list(slurm_run["secrets"].values())
    found: list[tuple[str, str]] = []
    looked = 0
    for job_id in slurm_run["ids"]:
        for argv in (
            ["sacct", "--batch-script", "-j", job_id],
            ["sacct", "--env-vars", "-j", job_id],
            ["scontrol", "write", "batch_script", job_id, "-"],
        ):
            out = subprocess.run(argv, capture_output=True, check=False).stdout
            assert out.strip(), argv  # each really gave the script or environment back
            looked += 1
            found += [(" ".join(argv), v) for v in _hits(values, out)]
        env_out = subprocess.run(["sacct", "--env-vars", "-j", job_id], capture_output=True, text=True).stdout
        assert "SLURM_JOB_" in env_out or "PATH=" in env_out  # the job's environment was stored
    scanned = 0
    for files in slurm_run["state"]:  # while `held` ran, and after every job ended
        assert any(p.name == "script" for p in files)  # slurmctld's copies of the batch scripts
        for path in files:
            try:
                data = path.read_bytes()
            except OSError:  # gone since: slurmctld purges a job's files
                continue
            scanned += 1
            found += [(str(path), v) for v in _hits(values, data)]
    assert looked == 3 * len(slurm_run["ids"]) and scanned > 10
    assert found == []


def test_every_step_that_asked_received_its_secret_and_no_other(slurm_run) -> None:
    s = {name: _sha(v) for name, v in slurm_run["secrets"].items()}
    run = slurm_run["run"]
    first, second = slurm_run["chain"]
    for bench in ("chain", "held"):
        policy, driver, collector = (
            _received(run / bench, step) for step in ("policy", "driver", "collector")
        )
        assert policy and all(r == {"HF_TOKEN": s["HF_TOKEN"]} for r in policy.values()), policy
        assert driver and all(r == {"WANDB_API_KEY": s["WANDB_API_KEY"]} for r in driver.values()), driver
        assert collector and all(r == {"OTEL_TOKEN": s["OTEL_TOKEN"]} for r in collector.values()), collector
    assert set(_received(run / "chain", "driver")) == {first, second}  # the resumed job received them too
    assert slurm_run["chain_result"].state == "COMPLETED"
    assert len(list((run / "held" / "recv").glob("driver-*"))) >= 2  # the requeued run too


def test_the_secrets_files_are_owner_only_and_gone_once_the_jobs_ended(slurm_run) -> None:
    assert slurm_run["modes"] == {
        ".gymbuild-secrets": 0o700,
        slurm_run["secrets_dir"].name: 0o700,
        "held": 0o600,
    }
    assert not slurm_run["chain_file_left"]  # the chain's last job removed it when it completed
    assert slurm_run["cancelled"].rc == 0, slurm_run["cancelled"].stderr
    assert not slurm_run["secrets_dir"].exists()  # `cancel` removed held's, and with it the directory
