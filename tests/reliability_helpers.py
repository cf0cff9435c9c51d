"""Fault injection from the outside, for the reliability tests (no tests here).

gymbuild has no fault hooks, and gets none: faults come from PATH wrappers around the programs it
runs, on the submit side (`rsync`, `ssh`) and on the login side (`sbatch`, `base64`, ...). The
login-side wrappers reach the remote `bash -s` session through a submit-side `ssh` wrapper that
prepends their directory to that session's PATH; every other ssh call passes through unchanged.
A wrapper can stop gymbuild at an exact point (its N-th call blocks, before or after running the real
program) so a test can SIGKILL the whole gymbuild process group there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from e2e_helpers import gymbuild_argv, sacct_jobs, user_env, with_default_signals

BLOCK_SECONDS = 600


@dataclass
class Faults:
    """A pair of wrapper directories under `root`, and the environment that puts them in use."""

    root: Path
    ssh_config: Path | None = None
    blocked: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.local_bin = self.root / "local-bin"
        self.login_bin = self.root / "login-bin"
        self.state = self.root / "state"
        for d in (self.local_bin, self.login_bin, self.state):
            d.mkdir(parents=True, exist_ok=True)
        use_config = f"-F {self.ssh_config} " if self.ssh_config else ""
        self._write(
            self.local_bin / "ssh",
            f"""
            if [ "$#" -gt 0 ] && [ "${{@: -1}}" = "bash -s" ]; then
              set -- "${{@:1:$#-1}}" "PATH={self.login_bin}:\\$PATH bash -s"
            fi
            exec /usr/bin/ssh {use_config}"$@"
            """,
        )

    @staticmethod
    def _write(path: Path, body: str) -> None:
        lines = [line.strip() for line in body.strip().splitlines()]
        path.write_text("#!/bin/bash\n" + "\n".join(lines) + "\n")
        path.chmod(0o755)

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        env = dict(base)
        env["PATH"] = f"{self.local_bin}:{env.get('PATH', '')}"
        return env

    def wrap(self, program: str, *, side: str, at: int = 1, when: str = "before", body: str = "") -> None:
        """Make the `at`-th call of `program` stop: `before` running it, or `after` (it ran, its
        answer never reaches gymbuild). `body` replaces blocking with any bash (e.g. `exit 23`; `{real}` is
        the real program)."""
        real = subprocess.run(["bash", "-c", f"type -P {program}"], capture_output=True, text=True).stdout
        real = real.strip()
        assert real, f"{program} is not installed"
        directory = self.local_bin if side == "local" else self.login_bin
        count = self.state / f"{program}.count"
        reached = self.state / f"{program}.reached"
        block = f"echo $$ > {reached}.tmp && mv {reached}.tmp {reached}; exec sleep {BLOCK_SECONDS}"
        if body:
            action = body.replace("{real}", real)
        elif when == "before":
            action = block
        else:
            action = f'{real} "$@" > {self.state}/{program}.out 2>&1; {block}'
        self._write(
            directory / program,
            f"""
            n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 )); echo "$n" > {count}
            if [ "$n" = {at} ]; then {action}; fi
            exec {real} "$@"
            """,
        )

    def calls(self, program: str) -> int:
        path = self.state / f"{program}.count"
        return int(path.read_text()) if path.exists() else 0

    def wait_reached(self, program: str, proc: subprocess.Popen[str], timeout: float = 120) -> int:
        """The pid of the blocked wrapper, once gymbuild has reached it."""
        path = self.state / f"{program}.reached"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if path.exists():
                pid = int(path.read_text())
                self.blocked.append(pid)
                return pid
            if proc.poll() is not None:
                out, err = proc.communicate()
                raise AssertionError(f"gymbuild ended (rc {proc.returncode}) before {program}: {err}{out}")
            time.sleep(0.05)
        raise AssertionError(f"gymbuild never reached {program}")

    def release(self) -> None:
        """End the wrappers this test blocked (only those: their pids were written by them)."""
        for pid in self.blocked:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.blocked.clear()


def start_gymbuild(args: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> subprocess.Popen[str]:
    """`gymbuild ARGS` in a process group of its own, so a test can SIGKILL all of it at once; the
    signals it handles at their defaults, whatever this run ignores (e2e_helpers.with_default_signals)."""
    return subprocess.Popen(
        with_default_signals(gymbuild_argv(*args)),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL gymbuild and every child in its group (rsync); not its connection's shell (or ssh
    client), which runs in a session of its own and finishes what it was sent (executors/attempts.py)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)


def wait_accounted(job_ids: Sequence[str], timeout: float = 60) -> None:
    """Until sacct knows every job id (slurmdbd lags slurmctld by a moment)."""
    deadline = time.monotonic() + timeout
    want = set(job_ids)
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-a", "-S", "now-1days", "-o", "JobID", "-j", ",".join(want)],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.split()
        if want <= set(out):
            return
        time.sleep(0.5)
    raise AssertionError(f"sacct never listed all of {sorted(want)}")


def cancel(job_ids: Sequence[str | None]) -> None:
    """scancel jobs this test queued (never anyone else's)."""
    ids = [j for j in job_ids if j]
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, check=False, timeout=30)


def jobs_queued(job_name: str, under: Path | str, expected: str | None, timeout: float = 60) -> list[str]:
    """Every job Slurm accounting lists by name under a directory, once it lists `expected` too
    (a name query can lag a job-id query for a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        found = sacct_jobs(job_name, under)
        if expected in found or time.monotonic() > deadline:
            return sorted(found, key=int)
        time.sleep(0.5)


SECRET_NAMES = ("HF_TOKEN", "WANDB_API_KEY", "OTEL_TOKEN")  # two host: values and the collector's token


def secret_user(home: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Random values for the secrets a scan looks for, and the submitting shell's environment with them."""
    secrets = {name: f"SEKRET-{name}-{uuid.uuid4()}" for name in SECRET_NAMES}
    return secrets, user_env(home, **secrets)
