"""A local sweep whose checkpoints' rollouts the test chooses, for the sweep's gate (choose.py):
four checkpoints of one command benchmark, each writing a reward per task (rollouts.jsonl, as NeMo
Gym writes them) and its accuracy (metrics.json), run to the end under the local executor.

Against step_0 with max_drop=0.1: step_100 is step_0 itself (PASS), step_200 lost twelve of its
thirty solved tasks (DROP), step_300 solved two more (PASS, the best, but on forty tasks not shown
better than step_100)."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

from compare_helpers import rollouts
from e2e_helpers import gymbuild_argv, local_command_config, user_env, write_config
from promises_helpers import wait_until

BASE = [1] * 30 + [0] * 10  # step_0's rewards, task by task


def flipped(tasks: range | list[int]) -> list[int]:
    return [1 - r if t in tasks else r for t, r in enumerate(BASE)]


REWARDS = {0: BASE, 100: list(BASE), 200: flipped(range(12)), 300: flipped([30, 31])}


def checkpoint(path: Path, rewards: list[int]) -> None:
    """A "checkpoint" script: it writes its rollouts and its accuracy where gym's artifacts go."""
    lines = rollouts({t: [r] for t, r in enumerate(rewards)})
    accuracy = sum(rewards) / len(rewards)
    path.write_text(
        "#!/bin/bash\n"
        "cat > \"$NEMO_GYM_BENCH_DIR/artifacts/rollouts.jsonl\" <<'EOF'\n"
        f"{lines}EOF\n"
        f'printf \'{{"accuracy": {accuracy}}}\' > "$NEMO_GYM_BENCH_DIR/artifacts/metrics.json"\n'
    )
    path.chmod(0o755)


class GatedSweep:
    """The sweep (steps 0, 100, 200, 300) and, as another run, the baseline on its own config."""

    def __init__(self, home: Path, **env: str) -> None:
        self.home = home
        self.ckpts = home / "ckpts"
        self.ckpts.mkdir()
        for step, rewards in REWARDS.items():
            checkpoint(self.ckpts / f"step_{step}", rewards)
        (self.ckpts / "config.json").write_text("{}")  # the ready marker a sweep waits for
        (home / "other").mkdir()
        checkpoint(home / "other" / "baseline", BASE)
        write_config(home, local_command_config(), "eval.yaml")
        write_config(home, local_command_config(str(home / "other" / "baseline")), "base.yaml")
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        self.env = user_env(home, PATH=path, **env)
        self.line = (
            "config=eval.yaml",
            "multirun=1",
            f"driver.benchmarks.demo.command=paths({self.ckpts}/step_*)",
        )
        self.ok("submit", *self.line)
        self.ok("submit", "config=base.yaml")
        self.ids = {
            int(r["step"]): r["gym_job_id"] for r in wait_until(self._ended, "the jobs' metrics", 180, 0.5)
        }

    def _ended(self) -> list[dict[str, str]] | None:
        """The series' rows once every checkpoint's metrics, and the baseline's, are there."""
        series = self.ok("results", *self.line, "series=1", "format=csv").stdout
        rows = list(csv.DictReader(io.StringIO(series)))
        base = self.ok("results", "config=base.yaml", "format=csv").stdout
        return (
            rows
            if all(r["state"] == "COMPLETED" and r["value"] for r in rows) and "COMPLETED" in base
            else None
        )

    def run(self, *args: str, path_first: Path | None = None) -> subprocess.CompletedProcess[str]:
        """`gymbuild ARGS`; `path_first`: a directory put first on PATH (a wrapper that records)."""
        env = {**self.env, "PATH": f"{path_first}{os.pathsep}{self.env['PATH']}"} if path_first else self.env
        return subprocess.run(
            gymbuild_argv(*args), cwd=self.home, env=env, capture_output=True, text=True, timeout=240
        )

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = self.run(*args)
        assert done.returncode == 0, done.stdout + done.stderr
        return done
