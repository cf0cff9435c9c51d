"""The queue attempt protocol every executor queues through: a run dir's queue lock and queue log.

A run (one gymbuild process) sends each job's start as an *attempt* with a random id into its session
shell, after a stamp naming that attempt is durable in the workspace (submit/queue.py). The command
that starts the job (Slurm's `sbatch --parsable`, the local executor's detached `setsid bash`) is the
executor's; the rest is shared, so both recover a killed run's attempts the same way:

- `hold_queue_lock`: the session's shell takes `<run dir>/.gym_queue.lock` for the rest of the
  session, on an fd of its own per run dir (a sweep's session holds every cell's lock at once).
- `queue_command`: refuses an attempt a later run revoked; else writes the secrets file, starts the
  job, and appends `<attempt> <first line of the start's answer>` to the `.gym_queue.log` beside
  the job's directory, before the answer is printed to gymbuild: an answer a killed gymbuild never read
  is in the log.
- `recover`: the next run, holding the lock (so the killed run's shell has run, or never will run,
  each attempt), reads an attempt's answer back from the log, or revokes it.

The lock fds (listed in the session's `__gym_lockfds`) are closed for the started job itself: a
local job lives for hours, and holding the queue lock that long would keep every later submit waiting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gymbuild.errors import UserError
from gymbuild.executors.base import Queued
from gymbuild.shell import quote

if TYPE_CHECKING:
    from gymbuild.executors.connection import Connection
    from gymbuild.executors.secrets import SecretsFile

QUEUE_LOCK_WAIT = 60  # seconds a run waits for a killed run's shell to finish what it was sent
QUEUE_LOG = ".gym_queue.log"  # in the run dir: `<attempt> <the start's answer>`, a line per attempt
QUEUE_LOCK = ".gym_queue.lock"

# `flock` is util-linux's; where there is none (macOS, for the local executor) Python's flock(2) on the
# same inherited fd: the lock belongs to the open file, which the shell keeps open after python exits.
_FLOCK = (
    f'if command -v flock >/dev/null 2>&1; then flock -w {QUEUE_LOCK_WAIT} "$__gym_lockfd"; else python3 -c '
    "'import fcntl, sys, time\nfor _ in range(" + str(QUEUE_LOCK_WAIT * 10) + "):\n"
    "    try: fcntl.flock(int(sys.argv[1]), fcntl.LOCK_EX | fcntl.LOCK_NB); sys.exit(0)\n"
    '    except BlockingIOError: time.sleep(0.1)\nsys.exit(1)\' "$__gym_lockfd"; fi'
)
# Bash closing every queue lock fd of the session, in the (sub)shell that then starts a job.
CLOSE_LOCKS = 'for __gym_f in ${__gym_lockfds[@]+"${__gym_lockfds[@]}"}; do exec {__gym_f}>&-; done'


def hold_queue_lock(conn: Connection, run_dir: str) -> None:
    """Take the run directory's queue lock in the session's own shell, for the rest of the session.

    A run killed while its queue commands are still in the shell's input leaves that shell running
    them, and it holds this lock until it has. So once a run holds it, no attempt of a killed run can
    still be running: `recover` can read what each one left, and revoke what never ran, with no race.
    One lock per session instead of a flock per start: `flock` is a process of its own, and with the
    `mv` and `cat` an attempt used to run, that was ~5 ms of the login node's time per benchmark.

    Each run dir's lock is on an fd of its own (bash picks it, >= 10), kept open for the session:
    one fixed fd for every run dir dropped the first cell's lock when a sweep's session took the
    second's. The answers go to the run dir's log by path (an append is one open(2), no process),
    so an attempt's line lands in the log `recover` reads for its script whatever lock was taken last.
    """
    lock = quote(f"{run_dir}/{QUEUE_LOCK}")
    result = conn.run_in_session(
        f'exec {{__gym_lockfd}}>>{lock} && {{ {_FLOCK}; }} && __gym_lockfds+=("$__gym_lockfd")'
    )
    if not result.ok:
        raise UserError(
            f"error: {conn.target}:{run_dir} is still being queued by another gymbuild run's shell "
            f"(waited {QUEUE_LOCK_WAIT} s for {run_dir}/{QUEUE_LOCK}): {result.stderr.strip()}\n"
            "    fix: wait for that run to end, then submit again"
        )


def hold_queue(conn: Connection, run_dir: str) -> None:
    """`hold_queue_lock` once a session: later passes of the same shell already hold it."""
    if run_dir not in conn.held_queue_locks:
        hold_queue_lock(conn, run_dir)
        conn.held_queue_locks.add(run_dir)


def _revoked_file(script: str, attempt: str) -> str:
    """The mark `recover` leaves beside the job script: this attempt must never run."""
    return quote(f"{script.rsplit('/', 1)[0]}/.gym_queue-{attempt}.revoked")


def _queue_log(script: str) -> str:
    """The queue log beside a job's directory, from its script's path: the run dir's
    (`<run dir>/<bench>/job.sh`), or for a shared job its `+jobs/` (`<run dir>/+jobs/<job>/job.sh`).
    Both the attempt and `recover` name it from the script, so they always agree."""
    return quote(f"{script.rsplit('/', 2)[0]}/{QUEUE_LOG}")


def queue_command(start: str, script: str, secrets: SecretsFile | None, attempt: str) -> str:
    """The command that runs `start` (the executor's command starting `script`, printing its job id
    first) as attempt `attempt`, to be sent into the session's own shell (`send(..., in_session=True)`:
    no subshell per job), which holds the run dir's queue lock (`hold_queue_lock`). The
    benchmark's secrets file is written first (nothing starts if it cannot be), and removed again if
    the start fails.

    An attempt refuses to run once a later run has revoked it, and appends the first line of the
    start's answer to the queue log, where that later run finds it (`recover`): a job is started
    exactly once whichever of the two gets the lock first. Only bash builtins besides `start`, and no
    file made per attempt but the secrets file (written by a builtin redirection, no process).
    """
    write = (
        f"elif ! {{ {secrets.write()}\n}}; then echo {quote(secrets.failed)} >&2; __gym_q=1\n"
        if secrets
        else ""
    )
    refused = f'; [ "$__gym_q" = 0 ] || {{ {secrets.remove()}; }}' if secrets and secrets.values else ""
    return (
        f"if [ -e {_revoked_file(script, attempt)} ]; then "
        f'echo "queue attempt {attempt} was revoked by a later run" >&2; __gym_q=75\n'
        f"{write}"
        f"else __gym_out=$({start}); __gym_q=$?{refused}\n"
        f"printf '%s %s\\n' {attempt} \"${{__gym_out%%$'\\n'*}}\" >>{_queue_log(script)}; "
        "printf '%s\\n' \"$__gym_out\"; fi\n"
        '__gym_status "$__gym_q"'
    )


def parse_job_id(stdout: str) -> str | None:
    """The job id a start printed first: `<id>` (a local job's pid), or `<id>;<cluster>` (`sbatch
    --parsable`), where the id is what squeue and sacct know."""
    first = stdout.strip().splitlines()[0] if stdout.strip() else ""
    job_id = first.split(";", 1)[0].strip()
    return job_id if job_id.isdigit() else None


def recover(conn: Connection, script: str, attempt: str) -> Queued | None:
    """What became of an attempt a killed run sent: its job if it started one, else None after revoking
    it, so it can never run later and the caller may start it afresh. Asked while holding the queue
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
