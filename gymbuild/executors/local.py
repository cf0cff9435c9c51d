"""The local executor: the same job scripts, run on this machine as detached process groups.

A job is `setsid bash job.sh`, so its process id is also its session and process-group id: that is the
job id, what `cancel` signals (the whole group), and what the script names its logs after. The job
writes `.gym_exit-<id>` when it ends, so `status` can report it after the process is gone.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

from gymbuild.executors.connection import Connection, Result
from gymbuild.executors.slurm import JobState, Queued, exports
from gymbuild.shell import join, quote

NAME = "local"
RETRYABLE = frozenset({"FAILED"})
LIVE = frozenset({"RUNNING"})


def metadata() -> dict[str, str]:
    """What a reader needs to find the processes again: they live on this machine only."""
    return {"hostname": socket.gethostname()}


def queue(conn: Connection, script: str, environment: Mapping[str, str]) -> Queued:
    """Start the job detached from this terminal; the submit returns at once."""
    bench_dir = script.rsplit("/", 1)[0]
    result = conn.run(
        f"{exports(environment)}cd {quote(bench_dir)} && "
        f"setsid bash {quote(script)} </dev/null >/dev/null 2>&1 & echo $!"
    )
    job_id = result.stdout.strip()
    if not result.ok or not job_id.isdigit():
        return Queued(None, " ".join((result.stderr or f"could not start {script}").split()))
    return Queued(job_id, None)


def _status_script(jobs: Mapping[str, str]) -> str:
    lines = []
    for bench_dir, job_id in jobs.items():
        d, j = quote(bench_dir), quote(job_id)
        lines.append(
            f"if [ -f {d}/.gym_exit-{j} ]; then printf 'exit\\t%s\\t%s\\n' {d} \"$(cat {d}/.gym_exit-{j})\"; "
            f"elif [ -f {d}/.gym_cancelled-{j} ]; then printf 'cancelled\\t%s\\n' {d}; "
            f"elif tr '\\0' ' ' </proc/{j}/cmdline 2>/dev/null | grep -qF -- {quote(bench_dir + '/job.sh')}; "
            f"then printf 'running\\t%s\\t%s\\n' {d} \"$(ps -o etime= -p {j} | tr -d ' ')\"; "
            f"else printf 'gone\\t%s\\n' {d}; fi"
        )
    return "\n".join(lines) or "true"


def states(conn: Connection, jobs: Mapping[str, str]) -> dict[str, JobState]:
    """bench dir -> state, from the job's exit file or its live process; one round trip."""
    if not jobs:
        return {}
    host = socket.gethostname()
    found = {}
    for line in conn.run(_status_script(jobs)).stdout.splitlines():
        kind, bench_dir, *rest = line.split("\t")
        job_id = jobs.get(bench_dir, "")
        if kind == "exit":
            code = rest[0].strip() if rest else "?"
            state = "COMPLETED" if code == "0" else "FAILED"
            found[bench_dir] = JobState(job_id, state, f"{code}:0", None, host)
        elif kind == "running":
            found[bench_dir] = JobState(job_id, "RUNNING", None, rest[0] if rest else None, host)
        elif kind == "cancelled":
            found[bench_dir] = JobState(job_id, "CANCELLED", None, None, host)
        elif kind == "gone":
            # Neither running nor finished normally: killed from outside (e.g. SIGKILL, a reboot).
            found[bench_dir] = JobState(job_id, "FAILED", None, None, host)
    return found


def cancel(conn: Connection, jobs: Mapping[str, str]) -> Result:
    """TERM each job's whole process group (bench dir -> job id), marked cancelled first for status."""
    marks = "".join(f": > {quote(d)}/.gym_cancelled-{quote(j)}; " for d, j in jobs.items())
    kill = f'for id in {join(jobs.values())}; do kill -TERM -- -"$id" 2>/dev/null || true; done'
    return conn.run(marks + kill)
