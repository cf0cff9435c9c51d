"""What the model-based tests of DESIGN.md's promises look at: the state a verb may not change, the
jobs that are really alive, the jobs that really started, and what stdout held.

tests/reliability/test_promises_model.py (the local executor) and
tests/reliability/test_promises_cluster.py (the test Slurm cluster) drive random sequences of verbs
through `hypothesis.stateful`; after each step they judge gymbuild by these observations, never
by what gymbuild itself says about them:

- `Snapshot`: every file of the state a dry run or an inspecting verb must leave alone (names, modes
  and contents), in areas (`jobs`, `records`, `workspace`, `doit`), so a failure names what changed.
- `live_local_jobs`: the local jobs alive on this machine, read from /proc: a local job is a process
  group whose leader runs `bash <bench dir>/job.sh` (gymbuild/executors/local), so every process
  whose command line names a bench dir's job.sh belongs to that bench dir's job, its group is the job.
- `started_local_jobs`: every local job that ever started, by the log the job's own shell opens
  first (`logs/local-<job id>.log`), whether or not gymbuild lived to write its id down.
- `recorded_jobs`: the ids a run's gym-job.json (or its local index entry) names for each benchmark.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

# How an interrupted gymbuild may end, by signal: a shell's 128 + n, or killed by it (Popen's -n),
# which a shell reports as the same 128 + n.
INTERRUPT_STATUS = {
    signal.SIGINT: 130,
    signal.SIGTERM: 143,
    signal.SIGHUP: 129,
}


def wait_until(probe: Callable[[], T | None], what: str, timeout: float = 60, poll: float = 0.02) -> T:
    """Poll `probe` until it returns something truthy, bounded; fail naming `what` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(poll)


def _stopped_or_gone(pid: int) -> str | None:
    """The state of process `pid` once it is stopped (T, t) or has exited (Z, X, or gone), else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return "X"
    state = stat.rpartition(")")[2].split()[0]
    return state if state in "TtZX" else None


def signal_while_alive(proc: subprocess.Popen[str], sig: int, *, group: bool) -> bool:
    """Send `sig` to gymbuild (`group`: to its process group, as a terminal does) unless it has begun
    to exit; say whether it was sent to a live gymbuild.

    A process that has called exit is past every handler, and for the few milliseconds its exit takes
    the kernel drops any signal sent to it while `poll()` still says it runs (it is no zombie yet): a
    test that signalled it then saw a submit that had ended on its own exit 0 (issue 40 item 4's
    promise was judged on a signal gymbuild never got). So gymbuild is stopped first: SIGSTOP is
    dropped likewise by an exiting process, and one that stopped is alive and cannot begin to exit.
    The signal is sent while it is stopped, and SIGCONT lets it answer."""
    if proc.poll() is not None:
        return False
    os.kill(proc.pid, signal.SIGSTOP)  # not reaped yet (poll said so): the pid is still gymbuild's
    state = wait_until(lambda: _stopped_or_gone(proc.pid), f"gymbuild {proc.pid} stopping", poll=0.001)
    if state not in "Tt":
        return False
    try:
        if group:
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    return True


def json_documents(stdout: str) -> list[Any]:
    """The JSON documents `stdout` holds one after another (whitespace between them); raises
    ValueError when anything else is there."""
    decoder = json.JSONDecoder()
    docs, pos = [], 0
    while True:
        while pos < len(stdout) and stdout[pos].isspace():
            pos += 1
        if pos == len(stdout):
            return docs
        doc, pos = decoder.raw_decode(stdout, pos)
        docs.append(doc)


def one_json_document(stdout: str) -> bool:
    """Whether stdout is exactly one JSON document (what `json=1` promises) and nothing else."""
    try:
        return len(json_documents(stdout)) == 1
    except ValueError:
        return False


def _digest(path: Path) -> str:
    if path.is_symlink():
        return f"-> {os.readlink(path)}"
    if path.is_dir():
        return f"dir {path.stat().st_mode & 0o7777:o}"
    return f"{path.stat().st_mode & 0o7777:o} {hashlib.sha256(path.read_bytes()).hexdigest()[:16]}"


@dataclass(frozen=True)
class Snapshot:
    """area -> {path: mode and digest} of every file and directory under the area's roots.

    `skip(path)` leaves out what is a cache of derived data (not state), and names-only files whose
    content is not state (a lock's holder); a directory that holds only skipped entries is left out
    with them."""

    areas: Mapping[str, Mapping[str, str]]

    @classmethod
    def take(
        cls, roots: Mapping[str, Iterable[Path]], skip: Callable[[Path], bool] = lambda p: False
    ) -> Snapshot:
        areas: dict[str, dict[str, str]] = {}
        for area, paths in roots.items():
            files: dict[str, str] = {}
            for root in paths:
                if not root.exists():
                    continue
                holders: set[str] = set()  # directories with something recorded beneath them
                for dirpath, dirnames, filenames in os.walk(root, topdown=False):
                    for name in sorted(dirnames + filenames):
                        path = Path(dirpath) / name
                        if skip(path):
                            continue
                        # A directory that holds only what is skipped (a config's corner made for
                        # its draft) is a cache's container, not state; an empty one is recorded.
                        with contextlib.suppress(FileNotFoundError):
                            if name in dirnames and str(path) not in holders and any(path.iterdir()):
                                continue
                            files[str(path)] = _digest(path)
                            holders.update(str(p) for p in path.parents)
            areas[area] = files
        return cls(areas)

    def changes(self, after: Snapshot, area: str) -> list[str]:
        """What differs in `area` between this snapshot and `after`, one line per path."""
        before, now = self.areas.get(area, {}), after.areas.get(area, {})
        out = [f"+ {p}" for p in sorted(now.keys() - before.keys())]
        out += [f"- {p}" for p in sorted(before.keys() - now.keys())]
        out += [f"~ {p}" for p in sorted(before.keys() & now.keys()) if before[p] != now[p]]
        return out


def _cmdline(pid: str) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _pgid(pid: str) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":  # a zombie holds nothing any more
        return None
    return int(fields[2])


def live_local_jobs(under: Path) -> dict[str, set[str]]:
    """bench dir -> the process groups alive on this machine that run its job.sh, for every bench
    dir under `under`. A job's processes all name its script (bash forks keep the command line), so
    a job counts once however many processes it has, and not at all once every one has exited."""
    top = str(under).rstrip("/") + "/"
    found: dict[str, set[str]] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for arg in _cmdline(pid):
            if arg.startswith(top) and arg.endswith("/job.sh"):
                group = _pgid(pid)
                if group is not None:
                    found.setdefault(arg.removesuffix("/job.sh"), set()).add(str(group))
                break
    return found


def kill_groups(groups: Iterable[str]) -> None:
    """SIGKILL each process group (a test's leftover local jobs)."""
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(group), signal.SIGKILL)


def run_dirs(output: Path) -> list[Path]:
    """Every submission's run directory under a config's job.output_path."""
    return sorted(p for p in output.glob("gym-job-*") if p.is_dir())


def started_local_jobs(output: Path) -> dict[tuple[str, str], set[str]]:
    """(run dir, benchmark) -> the ids of every local job that started there: the job's shell opens
    `logs/local-<id>.log` before it runs a line of job.sh."""
    found: dict[tuple[str, str], set[str]] = {}
    for run in run_dirs(output):
        for log in run.glob("*/logs/local-*.log"):
            bench = log.parent.parent.name
            found.setdefault((str(run), bench), set()).add(
                log.name.removeprefix("local-").removesuffix(".log")
            )
    return found


def recorded_jobs(record_file: Path) -> dict[str, set[str]] | None:
    """benchmark -> every job id a record (gym-job.json or a local index entry) names for it, the
    current and the earlier ones; None when there is no such record or it is not JSON."""
    try:
        record = json.loads(record_file.read_text())
    except (OSError, ValueError):
        return None
    out: dict[str, set[str]] = {}
    for job in record.get("benchmarks", []):
        ids = {job.get("job_id"), *job.get("previous_job_ids", [])}
        out[job["benchmark"]] = {str(i) for i in ids if i}
    return out


@dataclass
class Figures:
    """What a model run did, for the report: sequences, steps, interrupts tried and delivered, and
    the doubles it saw (a second live job of one benchmark)."""

    sequences: int = 0
    steps: int = 0
    verbs: dict[str, int] = field(default_factory=dict)
    interrupts_tried: int = 0
    interrupts_delivered: int = 0
    doubles: int = 0

    def step(self, name: str) -> None:
        self.steps += 1
        self.verbs[name] = self.verbs.get(name, 0) + 1

    def summary(self) -> str:
        verbs = ", ".join(f"{k} {v}" for k, v in sorted(self.verbs.items()))
        return (
            f"{self.sequences} sequences, {self.steps} steps ({verbs}); interrupts: "
            f"{self.interrupts_tried} tried, {self.interrupts_delivered} delivered mid-submit; "
            f"doubles seen: {self.doubles}"
        )
