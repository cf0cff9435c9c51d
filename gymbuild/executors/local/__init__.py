"""The local executor: the same job scripts, run on this machine as detached process groups.

A job is `setsid bash job.sh`, so its process id is also its session and process-group id: that is the
job id, what `cancel` signals (the whole group), and what the script names its logs after. Like
`#SBATCH --output`, the job's own output goes to `logs/local-<job id>.log`. The job writes
`.gym_exit-<id>` when it ends (its EXIT trap, after stopping its services), so `status` can report it
after the process is gone; `.gym_cancelled-<id>` and `.gym_timeout-<id>` say why it ended.

Jobs start through the same attempt protocol as sbatch (executors/attempts.py: the run dir's queue
lock and `.gym_queue.log`), so a submit killed between a start and its outcome leaves the next one
the pid; the job itself refuses to run beside a live copy of itself (`.gym_job.lock`, body.sh.j2).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from gymbuild.config.model import VllmPdService
from gymbuild.executors.base import Answer, JobState, Queued
from gymbuild.executors.secrets import SecretsFile
from gymbuild.executors.secrets import forget_secrets as forget_secrets  # `cancel` calls it here too
from gymbuild.shell import quote

if TYPE_CHECKING:  # annotations only: planning reads this module, and needs no connection code
    from gymbuild.config.model import Config
    from gymbuild.executors.connection import Connection, Result
    from gymbuild.plan import BenchPlan

NAME = "local"
JOB_LABEL = "local job"
RETRYABLE = frozenset({"FAILED", "TIMEOUT"})
LIVE = frozenset({"RUNNING"})
CHECKS_MOUNTS = False  # no containers run: nothing is mounted
RUNS_HERE = True  # `gym-runs` works from a fresh clone: relative to where gymbuild runs
SCHEDULED = False  # no batch scheduler: no directives, no resume chain (it needs sbatch and sacct)

# A new session for the job: setsid(1) where it exists (util-linux), else Python's os.setsid (macOS
# has no setsid command). Started as one background simple command, neither forks: the process id
# `$!` names is the job's, and its process-group id. The inner bash sends its own output to the job's
# log, named by that id, then becomes the job.
_SETSID = (
    "if command -v setsid >/dev/null 2>&1; then __gym_setsid=(setsid); else __gym_setsid=(python3 -c "
    "'import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])'); fi"
)
_INNER = 'exec >"logs/local-$$.log" 2>&1 </dev/null; exec bash "$1"'


def metadata() -> dict[str, str]:
    """What a reader needs to find the processes again: they live on this machine only."""
    return {"hostname": socket.gethostname()}


def start_command(script: str) -> str:
    """Bash starting `script` detached (its own session), printing the job id (its pid) first.

    The job gets none of the session's queue lock fds (attempts.py): it outlives the submit, and would
    hold the queue locks for its whole run. They are closed in the subshell that then becomes the job.
    """
    from gymbuild.executors.attempts import CLOSE_LOCKS  # queueing only: planning reads this module

    bench_dir = script.rsplit("/", 1)[0]
    # `python3` in the job is the Python gymbuild runs on (its venv's bin first on PATH, as activating
    # it would): from pipx or a venv used by path, the PATH's python3 cannot import gymbuild's demo.
    here = os.path.dirname(sys.executable)
    return (
        f"{_SETSID}\ncd {quote(bench_dir)} && mkdir -p logs && "
        f'{{ ( {CLOSE_LOCKS}; PATH={quote(here)}:"$PATH" exec "${{__gym_setsid[@]}}" bash -c {quote(_INNER)} '
        f"bash {quote(script)} ) </dev/null >/dev/null 2>&1 & echo $!; }}"
    )


def queued(result: Result) -> Queued:
    """The start's answer as a job id, or the reason it gave none."""
    from gymbuild.executors import attempts  # queueing only: planning reads this module

    job_id = attempts.parse_job_id(result.stdout) if result.ok else None
    if job_id is None:
        return Queued(None, " ".join((result.stderr or result.stdout or "could not start the job").split()))
    return Queued(job_id, None)


def ask_limits(conn: Connection, directives: Mapping[str, str | None]) -> Callable[[], None]:
    """A local job meets no scheduler's quota: nothing is asked."""
    return lambda: None


def hold_queue(conn: Connection, run_dir: str) -> None:
    """The run dir's queue lock and log, as on Slurm (attempts.py): a killed submit's starts are
    found again in the log by the next one, which holds the lock."""
    from gymbuild.executors import attempts  # queueing only: planning reads this module

    attempts.hold_queue(conn, run_dir)


def send(conn: Connection, script: str, secrets: SecretsFile | None, attempt: str) -> Answer:
    """Send one attempt (attempts.queue_command) into the session's own shell and return at once:
    the job's secrets file is written first (the job reads it and removes it when it ends), this
    shell's own secret variables unset, so the job does not inherit them."""
    from gymbuild.executors import attempts  # queueing only: planning reads this module

    marker = conn.send(
        attempts.queue_command(start_command(script), script, secrets, attempt), in_session=True
    )
    return lambda: queued(conn.receive(marker))


def recover_lost(
    conn: Connection, script: str, attempt: str, plan: BenchPlan, known: frozenset[str]
) -> Queued | None:
    """The job a killed run's attempt started, from the queue log (attempts.recover: the attempt is
    revoked if it never ran); None: start it afresh. The session shell appends the pid right after
    the fork, and no signal sent to gymbuild reaches that shell (its own session); only a SIGKILL
    of the shell itself between the two could lose a pid, and the job's lock then stops the copy."""
    from gymbuild.executors import attempts  # queueing only: planning reads this module

    return attempts.recover(conn, script, attempt)


def warnings(config: Config) -> tuple[str, ...]:
    """What a config asks of the local executor that it does not do: it runs every command on this
    machine (no container) and resumes nothing (a resume chain needs sbatch and sacct). Said at
    render and submit; the config itself is valid, and runs the same on a cluster."""
    unused = []
    for name, svc in config.services.items():
        unused.append(f"services.{name}.container")
        if isinstance(svc, VllmPdService):
            unused += [f"services.{name}.{tier}.container" for tier in ("prefill", "decode")]
    unused.append("driver.container")
    if config.otel.enabled and config.otel.container:
        unused.append("otel.container")
    out = [
        f"compute.{config.compute.name} is local: containers ({', '.join(unused)}) are not used; "
        "the commands run on this machine"
    ]
    out += [
        f"driver.benchmarks.{bench.name}.resumable: a local job is not resumed; it runs once"
        for bench in config.driver.benchmarks.values()
        if bench.resumable
    ]
    return tuple(out)


def _status_script(jobs: Mapping[str, str]) -> str:
    """A line per job: its exit status, its elapsed time while its process still runs
    `bash <bench dir>/job.sh`, or that it is gone; then its marks (cancelled, timeout).

    The order is what makes it right while jobs end: a job writes its exit file before its process
    ends, and a mark is written before the signal that ends the job. So the exit file is looked for
    again once the process is seen gone, and the marks are read last: a job seen ended always comes
    with the mark that explains it. (Marks read first let a timeout that struck between the looks
    read FAILED.)

    Last, one `wc -l` of every job's rollout files, each of its lines as `count<TAB><wc line>`.
    """
    from gymbuild.state.rollouts import count_command, dir_files  # status only: planning needs none

    lines = []
    for bench_dir, job_id in jobs.items():
        d, j = quote(bench_dir), quote(job_id)
        script = quote(f"{bench_dir}/job.sh")
        exit_line = f"printf 'exit\\t%s\\t%s\\n' {d} \"$(cat {d}/.gym_exit-{j})\""
        lines.append(
            f"if [ -f {d}/.gym_exit-{j} ]; then {exit_line}; "
            f"elif ps -ww -o args= -p {j} 2>/dev/null | grep -qF -- {script}; "
            f"then printf 'running\\t%s\\t%s\\n' {d} \"$(ps -o etime= -p {j} | tr -d ' ')\"; "
            f"elif [ -f {d}/.gym_exit-{j} ]; then {exit_line}; "
            f"else printf 'gone\\t%s\\n' {d}; fi; "
            f"for m in cancelled timeout; do "
            f"if [ -f {d}/.gym_$m-{j} ]; then printf 'mark\\t%s\\t%s\\n' {d} $m; fi; done"
        )
    if lines:
        files = " ".join(dir_files(quote(d)) for d in jobs)
        lines.append(f"(shopt -s nullglob; {count_command(files)}) | sed 's/^/count\\t/'")
    return "\n".join(lines) or "true"


def states(conn: Connection, jobs: Mapping[str, str], since: str | None = None) -> dict[str, JobState]:
    """bench dir -> state, from the job's marks and exit file or its live process; one round trip.

    A job that is gone without an exit file was killed from outside (SIGKILL, a reboot): FAILED.
    `since` bounds Slurm's accounting search; here there is nothing to search.
    """
    if not jobs:
        return {}
    host = socket.gethostname()

    from gymbuild.state.rollouts import parse_counts  # status only: planning needs none

    marks: dict[str, str] = {}
    seen: list[tuple[str, str, str | None]] = []
    counted: list[str] = []
    for line in conn.run(_status_script(jobs)).stdout.splitlines():
        if line.startswith("count\t"):
            counted.append(line.removeprefix("count\t"))
            continue
        kind, bench_dir, *rest = line.split("\t")
        value = rest[0].strip() if rest else None
        if kind == "mark":
            if value:
                marks.setdefault(bench_dir, value)
        else:
            seen.append((kind, bench_dir, value))
    found: dict[str, JobState] = {}
    for kind, bench_dir, value in seen:  # after every mark: a job's marks follow its state line
        job_id = jobs.get(bench_dir, "")
        if kind == "exit":
            code = value if value and value.isdigit() else "?"
            state = {"cancelled": "CANCELLED", "timeout": "TIMEOUT"}.get(marks.get(bench_dir, ""), "")
            found[bench_dir] = JobState(
                job_id, state or ("COMPLETED" if code == "0" else "FAILED"), f"{code}:0", None, host
            )
        elif kind == "running":
            found[bench_dir] = JobState(job_id, "RUNNING", None, value, host)
        elif kind == "gone":
            state = "CANCELLED" if marks.get(bench_dir) == "cancelled" else "FAILED"
            found[bench_dir] = JobState(job_id, state, None, None, host)
    counts = parse_counts("\n".join(counted))
    return {d: replace(state, progress=counts.get(d)) for d, state in found.items()}


def cancel(conn: Connection, jobs: Mapping[str, str]) -> Result:
    """TERM each job's whole process group (bench dir -> job id), marked cancelled first for status.

    The job's own traps then stop what is left of it and record its exit status.
    """
    marks = "".join(f": > {quote(d)}/.gym_cancelled-{quote(j)}; " for d, j in jobs.items())
    # A job id is a pid, and pids are reused: TERM a group only while its leader runs this job.sh.
    kills = "".join(
        f"if ps -ww -o args= -p {quote(j)} 2>/dev/null | grep -qF -- {quote(f'{d}/job.sh')}; "
        f"then kill -TERM -- -{quote(j)} 2>/dev/null || true; fi; "
        for d, j in jobs.items()
    )
    return conn.run(marks + kills + "true")


def own_number(conn: Connection, job_dir: str, job_id: str) -> str | None:
    """A local job's files are named after its own id: nothing else to find (no round trip)."""
    return None
