"""Running a rendered job.sh by hand, outside Slurm, as the render and service-step tests do."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def run_job_script(
    script: Path, *, cwd: Path, env: Mapping[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `script` with bash in its own process group, its output captured; when it ends, kill the
    group, because the servers its steps left behind are what Slurm would stop with the job."""
    proc = subprocess.Popen(
        ["bash", str(script)],
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def stage_secrets(home: Path, plan: Any, secrets: Mapping[str, str]) -> None:
    """Write `plan`'s secrets file under `home` as a submit does (the same bash, on a shell's stdin),
    for a job run by hand with HOME=home: the job reads its secret values from that file."""
    from gymbuild.executors.secrets import SecretsFile
    from gymbuild.render import secret_values

    values = secret_values(plan, secrets)
    if not values:
        return
    home.mkdir(parents=True, exist_ok=True)
    write = SecretsFile(plan.gym_job_id, plan.bench, values).write()
    subprocess.run(["bash", "-s"], input=write, text=True, env={"HOME": str(home)}, check=True)


def step_lib(reserved: tuple[int, ...] = ()) -> str:
    """GYM_STEP_LIB as a job's batch shell exports it (lib.sh.j2's port functions), for a step or
    driver script run alone: the driver settles its head server's port with them."""
    from gymbuild.render import _ENV

    lib = _ENV.get_template("lib.sh.j2").module.port_functions(reserved)  # type: ignore[attr-defined]
    done = subprocess.run(
        ["bash", "-c", f'{lib}\nprintf "%s" "$GYM_STEP_LIB"'],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout
