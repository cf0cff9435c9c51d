"""Running a rendered job.sh by hand, outside Slurm, as the render and service-step tests do."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path


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
