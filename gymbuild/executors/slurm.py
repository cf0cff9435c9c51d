"""The Slurm executor: check mounts, copy the staged tree, one `sbatch --parsable` per benchmark.

Everything goes through the run's one Connection. Each sbatch is its own round trip with its own exit
status and output, so a refused benchmark fails alone and its neighbours' job ids cannot shift onto it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gymbuild.errors import UserError
from gymbuild.executors.connection import Connection, Result
from gymbuild.shell import join, quote

NAME = "slurm"


@dataclass(frozen=True)
class Queued:
    """sbatch's answer for one benchmark: a job id, or the error that kept it from one."""

    job_id: str | None
    error: str | None


def parse_job_id(stdout: str) -> str | None:
    """`sbatch --parsable` prints `<id>` or `<id>;<cluster>`; the id is what squeue and sacct know."""
    first = stdout.strip().splitlines()[0] if stdout.strip() else ""
    job_id = first.split(";", 1)[0].strip()
    return job_id if job_id.isdigit() else None


def exports(environment: Mapping[str, str]) -> str:
    """`export` lines for values a job reads from its environment (the collector's token): they
    travel on the session's stdin, never on a command line where `ps` would show them."""
    return "".join(f"export {name}={quote(value)}\n" for name, value in environment.items())


QUEUE_LOCK_WAIT = 60  # seconds a run waits for a killed run's shell to finish what it was sent
QUEUE_LOG = ".gym_queue.log"  # in the run dir: `<attempt> <sbatch's answer>`, a line per attempt


def hold_queue_lock(conn: Connection, run_dir: str) -> None:
    """Take the run directory's queue lock in the session's own shell, for the rest of the session,
    and open the queue log (fd 8) that the queue commands append sbatch's answers to.

    A run killed while its sbatch commands are still in the shell's input leaves that shell running
    them, and it holds this lock until it has. So once a run holds it, no attempt of a killed run can
    still be running: `recover` can read what each one left, and revoke what never ran, with no race.
    One lock per session instead of a flock per sbatch: `flock` is a process of its own, and with the
    `mv` and `cat` an attempt used to run, that was ~5 ms of the login node's time per benchmark.
    """
    lock = quote(f"{run_dir}/.gym_queue.lock")
    log = quote(f"{run_dir}/{QUEUE_LOG}")
    result = conn.run_in_session(f"exec 9>>{lock} && flock -w {QUEUE_LOCK_WAIT} 9 && exec 8>>{log}")
    if not result.ok:
        raise UserError(
            f"error: {conn.target}:{run_dir} is still being queued by another gymbuild run's shell "
            f"(waited {QUEUE_LOCK_WAIT} s for {run_dir}/.gym_queue.lock): {result.stderr.strip()}\n"
            "    fix: wait for that run to end, then submit again"
        )


def _revoked_file(script: str, attempt: str) -> str:
    """The mark `recover` leaves beside the job script: this attempt must never run."""
    return quote(f"{script.rsplit('/', 1)[0]}/.gym_queue-{attempt}.revoked")


def _queue_log(script: str) -> str:
    """The run dir's queue log, from a job script's path (`<run dir>/<bench>/job.sh`)."""
    return quote(f"{script.rsplit('/', 2)[0]}/{QUEUE_LOG}")


def queue_command(script: str, environment: Mapping[str, str], attempt: str) -> str:
    """The command that queues one job.sh as attempt `attempt`; Session pipelines these, in a session
    that holds the queue lock and the queue log (`hold_queue_lock`).

    An attempt refuses to run once a later run has revoked it, and appends the first line of sbatch's
    answer to the queue log, where that later run finds it (`recover`): a job is queued exactly once
    whichever of the two gets the lock first. Only bash builtins besides sbatch itself, and no file
    made per attempt: creating one per sbatch cost the login node about a millisecond each.
    """
    return (
        f"if [ -e {_revoked_file(script, attempt)} ]; then "
        f'echo "queue attempt {attempt} was revoked by a later run" >&2; exit 75; fi\n'
        f"{exports(environment)}__gym_out=$(sbatch --parsable {quote(script)}); __gym_rc=$?\n"
        f"printf '%s %s\\n' {attempt} \"${{__gym_out%%$'\\n'*}}\" >&8; "
        'printf \'%s\\n\' "$__gym_out"; exit "$__gym_rc"'
    )


def queued(result: Result) -> Queued:
    """sbatch's result as a job id, or the reason it gave none."""
    job_id = parse_job_id(result.stdout) if result.ok else None
    if job_id is None:
        reason = result.stderr.strip() or result.stdout.strip() or f"sbatch exited {result.status}"
        return Queued(None, " ".join(reason.split()))
    return Queued(job_id, None)


def recover(conn: Connection, script: str, attempt: str) -> Queued | None:
    """What became of an attempt a killed run sent: its job if it queued one, else None after revoking
    it, so it can never run later and the caller may queue afresh. Asked while holding the queue
    lock, so the killed run's shell has run, or will never run, that attempt."""
    line = quote(f"^{attempt} ")
    result = conn.run(
        f"__gym_answer=$(grep -m 1 -e {line} {_queue_log(script)} 2>/dev/null)\n"
        "__gym_answer=${__gym_answer#* }\n"
        f'if [ -n "$__gym_answer" ]; then printf \'%s\\n\' "$__gym_answer"; '
        f"else : > {_revoked_file(script, attempt)}; fi"
    )
    job_id = parse_job_id(result.stdout) if result.ok else None
    return Queued(job_id, None) if job_id else None


def find_queued(conn: Connection, job_dir: str, job_name: str, known: frozenset[str]) -> str | None:
    """The job an interrupted sbatch queued for `job_dir` (its answer never came back), if any.

    Slurm is asked by name and working directory, squeue (which knows a job at once) and sacct (which
    remembers it after squeue forgets); ids in `known` (this benchmark's earlier jobs) do not count.
    """
    name = quote(job_name)
    result = conn.run(
        f"squeue -h -o '%i|%Z' -n {name} 2>/dev/null; "
        f"sacct -X -n -P -a -S now-7days -o JobID,WorkDir -n {name} 2>/dev/null; true"
    )
    found = {
        job_id
        for job_id, _, work_dir in (line.partition("|") for line in result.stdout.splitlines())
        if job_id.isdigit() and work_dir == job_dir and job_id not in known
    }
    return max(found, key=int) if found else None


# --- day two: what became of the jobs -----------------------------------------------------------

RETRYABLE = frozenset({"FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL"})
LIVE = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"})


@dataclass(frozen=True)
class JobState:
    """One job as Slurm (or, without accounting, the job's own files) last described it."""

    job_id: str
    state: str
    exit_code: str | None = None
    elapsed: str | None = None
    nodes: str | None = None
    note: str | None = None  # why the state is UNKNOWN: what squeue and sacct said


# The newest job of the chain the recorded job started: the last line of `.gym_job_chain` at or after
# the recorded id. Not simply the file's last line: after `resubmit`, the file still ends with the old
# chain until the new job starts and appends itself, and status would show the old chain's end (and a
# second resubmit would queue the benchmark twice).
_CHAIN_TAIL = "$0 == j {f = 1} f {last = $0} END {if (f) print last}"


def _status_script(jobs: Mapping[str, str]) -> str:
    """One round trip: each benchmark's newest job (its resume chain's tail), then ONE squeue and ONE
    sacct over all of them, then the exit files jobs leave behind for clusters without accounting.

    The benchmarks travel as two arrays walked by one loop: a script line per benchmark made bash
    parse 650 KB for a 1000-job status (0.3 s of the login node's time; the loop takes 0.07 s). awk
    runs only where a chain file exists: a fork and an exec per benchmark were 7 s of such a status,
    and most benchmarks never write one.
    """
    lines = [
        f"dirs=({join(jobs)})",
        f"jobs=({join(jobs.values())})",
        "ids=''",
        'for i in "${!dirs[@]}"; do d=${dirs[i]}; j=${jobs[i]}; id=; '
        '[ -s "$d/.gym_job_chain" ] && '
        f'id=$(awk -v j="$j" {quote(_CHAIN_TAIL)} "$d/.gym_job_chain" 2>/dev/null); '
        '[ -n "$id" ] || id=$j; '
        'ids="$ids,$id"; printf "chain\\t%s\\t%s\\n" "$d" "$id"; '
        '[ -f "$d/.gym_exit-$id" ] && printf "exit\\t%s\\t%s\\n" "$id" "$(< "$d/.gym_exit-$id")"; '
        "done",
    ]
    lines.append("ids=${ids#,}")
    # squeue's complaints (a controller it cannot reach) go through the pipe, its rows to fd 3.
    lines.append(
        "{ squeue -h -o $'squeue\\t%i\\t%T\\t%M\\t%N' -j \"$ids\" 2>&1 1>&3"
        " | sed $'s/^/squeue-error\\t/'; } 3>&1"
    )
    lines.append(
        "sacct -X -n -P --delimiter=$'\\t' -o JobID,State,ExitCode,Elapsed,NodeList -j \"$ids\" 2>&1"
        " | sed $'s/^/sacct\\t/'"
    )
    lines.append("true")
    return "\n".join(lines)


def states(conn: Connection, jobs: Mapping[str, str]) -> dict[str, JobState]:
    """bench dir -> state of its newest job. squeue wins for live jobs; sacct for those it forgot;
    without accounting, the `.gym_exit-<id>` file the job wrote; else UNKNOWN."""
    if not jobs:
        return {}
    result = conn.run(_status_script(jobs))
    newest: dict[str, str] = {}
    exits: dict[str, str] = {}
    live: dict[str, JobState] = {}
    accounted: dict[str, JobState] = {}
    said: dict[str, list[str]] = {"squeue": [], "sacct": []}
    for line in result.stdout.splitlines():
        kind, *fields = line.split("\t")
        if kind == "chain" and len(fields) >= 2:  # the dir may hold a tab itself; the id cannot
            newest["\t".join(fields[:-1])] = fields[-1]
        elif kind == "exit" and len(fields) == 2:
            exits[fields[0]] = fields[1].strip()
        elif kind == "squeue" and len(fields) == 4:
            job_id, state, elapsed, nodes = fields
            live[job_id] = JobState(job_id, state, None, elapsed, nodes or None)
        elif kind == "sacct" and len(fields) == 5 and fields[0].isdigit():
            job_id, state, exit_code, elapsed, nodes = fields
            accounted[job_id] = JobState(job_id, state.split()[0], exit_code, elapsed, nodes or None)
        elif kind in ("squeue-error", "sacct") and len(fields) == 1 and fields[0].strip():
            said[kind.split("-")[0]].append(fields[0].strip())
    # Only a job nothing could describe gets the complaints: squeue also complains about a job it has
    # merely forgotten, which sacct then describes.
    note = "; ".join(f"{tool}: {' '.join(msgs)}" for tool, msgs in said.items() if msgs) or None
    found = {}
    for bench_dir, job_id in newest.items():
        if job_id in live and live[job_id].state in LIVE:
            found[bench_dir] = live[job_id]
        elif job_id in accounted:
            found[bench_dir] = accounted[job_id]
        elif job_id in live:
            found[bench_dir] = live[job_id]
        elif job_id in exits:
            code = exits[job_id]
            found[bench_dir] = JobState(job_id, "COMPLETED" if code == "0" else "FAILED", f"{code}:0")
        else:
            found[bench_dir] = JobState(job_id, "UNKNOWN", note=note)
    return found


def metadata() -> dict[str, str]:
    """Slurm needs nothing beyond the job ids to find a run again."""
    return {}


def cancel(conn: Connection, jobs: Mapping[str, str]) -> Result:
    """scancel every given job (bench dir -> job id) and, in the same call, the user's other queued
    jobs working in those bench dirs: a resumable job's successor waits there (afternotok) under an
    id no record holds, and would otherwise stay PENDING, then start once its predecessor is gone."""
    dirs = "|".join(quote(d) for d in jobs)
    return conn.run(
        f"successors=$(squeue -h -u \"$(id -un)\" -o '%i %Z' 2>/dev/null | while read -r id dir; do "
        f'case $dir in {dirs}) echo "$id" ;; esac; done)\n'
        f"scancel {join(jobs.values())} $successors"
    )
