"""A `gymbuild submit ... follow=1` process a test drives: its stdout lines as events, its state
file's poll count as the clock (tests/sweep/test_follow.py, tests/sweep/test_follow_slurm.py)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from e2e_helpers import gymbuild_argv, with_default_signals


class Follower:
    """A `gymbuild submit ... follow=1` process, its stdout lines in a queue."""

    def __init__(self, home: Path, args: list[str], env: dict[str, str]) -> None:
        self.home = home
        self.err = home / f"follower-{time.monotonic_ns()}.err"  # a file: a full stderr pipe would block it
        self.err_file = self.err.open("w")
        self.proc = subprocess.Popen(
            with_default_signals(gymbuild_argv(*args)),
            cwd=home,
            env=env,
            stdout=subprocess.PIPE,
            stderr=self.err_file,
            text=True,
            start_new_session=True,  # its own group: Ctrl-C is sent to the group, as a terminal does
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert self.proc.stdout is not None
        self.reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self.reader.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.put(line.rstrip("\n"))

    def expect(self, text: str, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while True:
            for line in self.seen:
                if text in line:
                    self.seen.remove(line)
                    return line
            left = deadline - time.monotonic()
            if left <= 0 or (self.proc.poll() is not None and self.lines.empty()):
                pytest.fail(f"the follower did not say {text!r}; it said: {self.seen}\n{self._stderr()}")
            with contextlib.suppress(queue.Empty):
                self.seen.append(self.lines.get(timeout=min(left, 1)))

    def _stderr(self) -> str:
        return self.err.read_text()

    def stop(self, sig: int) -> tuple[int, list[str], str]:
        os.killpg(self.proc.pid, sig) if sig == signal.SIGINT else self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=60)
        self.reader.join(timeout=30)  # it ends at the pipe's end, with every line queued
        rest = []
        while not self.lines.empty():
            rest.append(self.lines.get_nowait())
        return rc, self.seen + rest, self._stderr()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.err_file.close()


def state_file(state_home: Path) -> Path | None:
    """The follower's state file under XDG_STATE_HOME `state_home` (one sweep per test)."""
    found = list(state_home.glob("gymbuild/workspaces/**/follow/sweep-*.json"))
    return found[0] if found else None


def wait_polls(state_home: Path, more: int, timeout: float = 60) -> int:
    """Wait until the follower has made `more` polls after now; the count then."""

    def polls() -> int:
        path = state_file(state_home)
        try:
            return int(json.loads(path.read_text())["polls"]) if path else 0
        except (OSError, ValueError):
            return 0

    start, deadline = polls(), time.monotonic() + timeout
    while polls() < start + more:
        if time.monotonic() > deadline:
            pytest.fail(f"the follower made fewer than {more} polls in {timeout}s")
        time.sleep(0.05)
    return polls()
