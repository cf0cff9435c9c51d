"""The Slurm executor: check mounts, copy the staged tree, one `sbatch --parsable` per benchmark.

Everything goes through the run's one Connection. Each sbatch is its own round trip with its own exit
status and output, so a refused benchmark fails alone and its neighbours' job ids cannot shift onto it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from gymbuild.executors.base import Answer, JobState, Queued
from gymbuild.executors.secrets import SecretsFile
from gymbuild.executors.secrets import forget_secrets as forget_secrets  # the Executor protocol's
from gymbuild.shell import join, quote

if TYPE_CHECKING:  # annotations only: planning reads this module, and needs no connection code
    from gymbuild.config.model import Config
    from gymbuild.executors.connection import Connection, Result
    from gymbuild.executors.slurm.limits import Limits
    from gymbuild.plan import BenchPlan


NAME = "slurm"
JOB_LABEL = "Slurm job"
CHECKS_MOUNTS = True  # every step runs in a container: a missing mount source fails the job late
RUNS_HERE = False  # a relative job.output_path is the login shell's, on the cluster
SCHEDULED = True  # jobs take #SBATCH directives and can resume as a chain (sbatch, sacct)


def queue_command(script: str, secrets: SecretsFile | None, attempt: str) -> str:
    """The attempt (attempts.queue_command) that queues one job.sh with `sbatch --parsable`. The
    protocol is imported when a job is queued: planning reads this module, and the script-code
    digest counts every module it imports (gymbuild/resources.py)."""
    from gymbuild.executors import attempts  # queueing only: planning reads this module

    return attempts.queue_command(f"sbatch --parsable {quote(script)}", script, secrets, attempt)


def queued(result: Result) -> Queued:
    """sbatch's result as a job id, or the reason it gave none."""
    from gymbuild.executors.attempts import parse_job_id  # queueing only: planning reads this module
    from gymbuild.executors.slurm.limits import refused_by_limit  # queueing only, as above

    job_id = parse_job_id(result.stdout) if result.ok else None
    if job_id is None:
        reason = result.stderr.strip() or result.stdout.strip() or f"sbatch exited {result.status}"
        return Queued(None, " ".join(reason.split()), waits=refused_by_limit(reason))
    return Queued(job_id, None)


def find_queued(conn: Connection, job_dir: str, job_name: str, known: frozenset[str]) -> str | None:
    """The job an interrupted sbatch queued for `job_dir` (its answer never came back), if any.

    Slurm is asked by name and working directory, squeue (which knows a job at once, and with `-t all`
    for MinJobAge after it ended: a short job may be over, and not yet in sacct, before the next submit
    asks) and sacct (which remembers it after squeue forgets); ids in `known` (this benchmark's earlier
    jobs) do not count. An array is found by its own id (squeue's %F; sacct lists its tasks
    `<id>_<index>`), which its tasks' ids are made of.
    """
    name = quote(job_name)
    result = conn.run(
        f"squeue -h -t all -o '%F|%Z' -n {name} 2>/dev/null; "
        f"sacct -X -n -P -a -S now-7days -o JobID,WorkDir -n {name} 2>/dev/null; true"
    )
    found = {
        job_id
        for raw, _, work_dir in (line.partition("|") for line in result.stdout.splitlines())
        if (job_id := raw.split("_", 1)[0]).isdigit() and work_dir == job_dir and job_id not in known
    }
    return max(found, key=int) if found else None


# --- the Executor protocol's queue: the attempt protocol above, as a run drives it -----------------


def hold_queue(conn: Connection, run_dir: str) -> None:
    """The session's shell takes the run dir's queue lock (attempts.hold_queue_lock) before its
    first sbatch, once: later passes of the same shell already hold it."""
    from gymbuild.executors import attempts  # queueing only: planning reads this module

    attempts.hold_queue(conn, run_dir)


def ask_limits(conn: Connection, directives: Mapping[str, str | None]) -> Callable[[], Limits]:
    """Send the question of the user's quota (limits.py) for a job with these #SBATCH directives
    into the session now; its answer is read (in the order sent) when the result is called."""
    from gymbuild.executors.slurm import limits  # queueing only: planning reads this module

    return limits.ask(conn, directives)


def read_limits(conn: Connection, directives: Mapping[str, str | None]) -> Limits:
    """The user's quota for a job with these #SBATCH directives, read now: one round trip."""
    return ask_limits(conn, directives)()


def send(conn: Connection, script: str, secrets: SecretsFile | None, attempt: str) -> Answer:
    """Send one attempt into the session's own shell and return at once: several are in flight while
    the caller writes the outcomes of those before (their answers come back in the order sent)."""
    marker = conn.send(queue_command(script, secrets, attempt), in_session=True)
    return lambda: queued(conn.receive(marker))


def recover_lost(
    conn: Connection, script: str, attempt: str, plan: BenchPlan, known: frozenset[str]
) -> Queued | None:
    """The job a killed run's attempt queued, if any (None: queue it afresh).

    First the attempt's own answer, left on the cluster (and the attempt revoked if it never ran,
    so the killed run's shell cannot run it later: this run holds the queue lock); then Slurm
    itself, by job name and work dir, for an sbatch whose answer was lost before it was written.
    Asked only after such a kill, so a normal submit pays nothing.
    """
    from gymbuild.executors.attempts import recover  # queueing only: planning reads this module

    adopted = recover(conn, script, attempt)
    if adopted is not None:
        return adopted
    job_id = find_queued(conn, plan.bench_dir, dict(plan.directives)["job-name"] or "", known)
    return Queued(job_id, None) if job_id else None


def own_number(conn: Connection, job_dir: str, job_id: str) -> str | None:
    """The number an array task's job.sh named its files (its logs) after (`$SLURM_JOB_ID`), from
    the mark the task script left in `job_dir` (arrays.task_script): one round trip, only for an
    array task; None for a plain job or a task not started."""
    if "_" not in job_id:
        return None
    mark = conn.run(f"readlink {quote(posixpath.join(job_dir, '.gym_exit-' + job_id))}").stdout.strip()
    number = mark.removeprefix(".gym_exit-")
    return number if mark.startswith(".gym_exit-") and number.isdigit() else None


def warnings(config: Config) -> tuple[str, ...]:
    """Slurm does everything a config can ask."""
    return ()


# --- day two: what became of the jobs -----------------------------------------------------------

RETRYABLE = frozenset({"FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL"})
LIVE = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"})


_EXIT = ".gym_exit-"  # + job id: the exit status every job writes when it ends (body.sh.j2)


# A chain file of ids, one a line (a job's number, or an array task's `<id>_<index>`, as
# state/ids.py's is_slurm_job_id), adds them all to $ids; one holding anything else, none: a word that
# is no job id would make squeue and sacct refuse the whole list. A regex, not a loop over the words
# (which would glob-expand them).
CHAIN_IDS_RE = (
    "__gym_chain_re='^([[:space:]]*[0-9]+(_[0-9]+)?[[:space:]])*([[:space:]]*[0-9]+(_[0-9]+)?)?[[:space:]]*$'"
)
CHAIN_IDS = "[[ $c =~ $__gym_chain_re ]] && ids+=,${c//[[:space:]]/,}"


def _place(bench_dir: str) -> tuple[str, str]:
    """(parent, name) of a bench dir, as the status script's glob over the parent spells them."""
    parent, name = posixpath.split(posixpath.normpath(bench_dir))
    return parent or ".", name


# Bash reading a file into $c with builtins only: `$(< f)` forks a subshell before bash 5.2, and a
# finished 1000-benchmark run has a thousand exit files. A file holds no NUL, so -d '' reads it all.
_READ = "c=; IFS= read -r -d '' c <"


def _each_file(pattern: str, then: str = "") -> str:
    """Bash printing `<parent index> <name>/<file> <contents>` (each field NUL-terminated) for every
    file `<parent>/<name>/<pattern>` of the parents in the `parents` array; `then` runs after each,
    with the contents in $c."""
    return (
        f'for i in "${{!parents[@]}}"; do p=${{parents[i]}}; for f in "$p"/*/{pattern}; do {_READ} "$f"; '
        f'printf \'%s\\0%s\\0%s\\0\' "$i" "${{f#"$p/"}}" "$c"{then}; done; done'
    )


_TOOLS = ("squeue.o", "squeue.e", "sacct.o", "sacct.e")  # what the status script prints last, in order


def _status_script(parents: Sequence[str], job_ids: Iterable[str], since: str | None = None) -> str:
    """One round trip: the chain files and exit files of every bench dir under `parents`, found by one
    glob per parent; ONE squeue and ONE sacct, side by side, over `job_ids` and every id the chain
    files hold (a superset of the ids wanted: the extra rows are ignored).

    Nothing in it runs per benchmark: a loop over the bench dirs (sent as a bash array, each dir
    stat'ed twice) made the script 80 KB and 0.08 s of the login node's time at 1000 benchmarks, and
    squeue then sacct ran one after the other. The exit files are read while the two run.

    Output, each field NUL-terminated (neither a path nor these files can hold a NUL; a dir's name
    may hold any other byte): `<parent index> <name>/<file> <contents>` per file (and per parent
    `<parent index> /counts <wc -l of its bench dirs' rollout files>`), then squeue's
    stdout and stderr, then sacct's. Uses the Connection session's `$__gym_tmp`.
    """
    from gymbuild.executors import chain  # status only: planning needs none
    from gymbuild.state.rollouts import count_command, dir_files  # status only: planning needs none

    tmp = '"$__gym_tmp"/status-'
    counts = count_command(dir_files('"$p"/*'))
    return "\n".join(
        [
            "shopt -s nullglob dotglob",
            f"parents=({join(parents)})",
            f"ids={quote(','.join(dict.fromkeys(job_ids)))}",
            CHAIN_IDS_RE,
            # A chain or successor file of ids (one a line) adds them all; one holding anything else,
            # none. Then the chain's other files (chain.py), read for Python alone.
            _each_file(chain.CHAIN, then=f"; {CHAIN_IDS}"),
            _each_file(f"{chain.SUCCESSOR}*", then=f"; {CHAIN_IDS}"),
            # The user's jobs, with their working dirs (a successor in no file yet is one of them), each
            # by its name and its own number: an array task is `<id>_<index>` to both tools, and its
            # job.sh (and a resume chain) knows it by its number (slurm/arrays.py).
            f"squeue -h -u \"$(id -un)\" -o $'%i\\t%T\\t%M\\t%N\\t%A\\t%Z' >{tmp}squeue.o 2>{tmp}squeue.e &",
            "sacct -X -n -P --delimiter=$'\\t' -o JobID,State,ExitCode,Elapsed,NodeList,JobIDRaw -j \"$ids\" "
            f"{_sacct_start(since)}>{tmp}sacct.o 2>{tmp}sacct.e &",
            _each_file(f"{_EXIT}*"),
            _each_file(chain.ATTEMPTS),
            _each_file(chain.CHAIN_END),
            # Every bench dir's rollout counts, one wc per parent (a name no bench dir has: `/counts`).
            f'for i in "${{!parents[@]}}"; do p=${{parents[i]}}; c=$({counts}); '
            '[ -n "$c" ] && printf \'%s\\0%s\\0%s\\0\' "$i" /counts "$c"; done',
            "wait",
            f"for f in {' '.join(_TOOLS)}; do {_READ} {tmp}$f; printf '%s\\0' \"$c\"; done",
        ]
    )


def _sacct_start(since: str | None) -> str:
    """`-S` a day before `since` (the submission's UTC time), or nothing without it.

    With `-j` and no `-S`, sacct searches the accounting database from the epoch: on this cluster
    0.26 s for 1000 ids, 0.09 s bounded, and a real cluster holds years of jobs. The day of slack
    covers the cluster's time zone, which `-S` is read in; no job of the submission is older.
    """
    if not since:
        return ""

    try:
        start = datetime.fromisoformat(since.replace("Z", "+00:00")) - timedelta(days=1)
    except ValueError:
        return ""
    return f"-S {start.strftime('%Y-%m-%dT%H:%M:%S')} "


def _lines(text: str) -> list[str]:
    """A tool's complaints, one per line, as a status note strings them together."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def states(conn: Connection, jobs: Mapping[str, str], since: str | None = None) -> dict[str, JobState]:
    """bench dir -> state of its newest job (a resume chain followed to its newest: chain.py). squeue
    wins for live jobs; sacct for those it forgot; without accounting, the `.gym_exit-<id>` file the
    job wrote; else UNKNOWN. `since`: when the jobs were submitted (ISO 8601, UTC), which bounds
    sacct's search."""
    if not jobs:
        return {}

    from gymbuild.state.rollouts import parse_counts  # status only: planning needs none

    places = {bench_dir: _place(bench_dir) for bench_dir in jobs}
    parents = list(dict.fromkeys(parent for parent, _ in places.values()))
    result = conn.run(_status_script(parents, jobs.values(), since))
    parts = result.stdout.split("\0")
    if len(parts) % 3 != 2:  # not files' fields in threes, the tools' four and the last NUL's tail:
        parts = [""] * 5  # the script was cut short, and nothing it printed can be trusted
    *records, squeue_out, squeue_err, sacct_out, sacct_err, _ = parts
    files: dict[tuple[str, str], dict[str, str]] = {}  # (parent, bench dir name) -> file name -> contents
    counts = {}
    for index, path, contents in zip(records[::3], records[1::3], records[2::3], strict=True):
        name, _, file = path.rpartition("/")
        files.setdefault((parents[int(index)], name), {})[file] = contents
        if path == "/counts":
            counts.update(parse_counts(contents))
    seen = _Seen.read(squeue_out, sacct_out)
    # Only a job nothing could describe gets the complaints: squeue also complains about a job it has
    # merely forgotten, which sacct then describes.
    said = {"squeue": _lines(squeue_err), "sacct": _lines(sacct_err), "status script": _lines(result.stderr)}
    note = "; ".join(f"{tool}: {' '.join(msgs)}" for tool, msgs in said.items() if msgs) or None
    found = {}
    for bench_dir, recorded in jobs.items():
        place = places[bench_dir]
        here = files.get(place, {})
        state = seen.newest(recorded, here, posixpath.normpath(bench_dir), note)
        found[bench_dir] = replace(state, progress=counts.get("/".join(place)))
    return found


class _Seen:
    """What squeue and sacct said of the jobs, and each bench dir's files made into its newest job."""

    def __init__(self) -> None:
        self.live: dict[str, JobState] = {}
        self.accounted: dict[str, JobState] = {}
        self.dirs: dict[str, list[str]] = {}  # working dir -> the live jobs squeue lists there

    @classmethod
    def read(cls, squeue_out: str, sacct_out: str) -> _Seen:
        from gymbuild.executors import chain  # status only: planning reads this module

        seen = cls()
        for line in squeue_out.splitlines():
            if len(fields := line.split("\t", 5)) == 6 and chain.job_id(fields[0]):
                job_id, state_name, elapsed, nodes, raw, work_dir = fields
                seen.live[job_id] = JobState(job_id, state_name, None, elapsed, nodes or None)
                seen.own_number(seen.live, job_id, raw)
                if state_name in LIVE and work_dir:
                    seen.dirs.setdefault(posixpath.normpath(work_dir), []).append(job_id)
        for line in sacct_out.splitlines():
            if len(fields := line.split("\t")) == 6 and chain.job_id(fields[0]):
                job_id, state_name, exit_code, elapsed, nodes, raw = fields
                state = JobState(job_id, state_name.split()[0], exit_code, elapsed, nodes or None)
                seen.accounted[job_id] = state
                seen.own_number(seen.accounted, job_id, raw)
        return seen

    @staticmethod
    def own_number(states: dict[str, JobState], job_id: str, raw: str) -> None:
        """An array task (`<id>_<index>`) is also known by its own number, which its job.sh (and so
        its resume chain's files) names it by."""
        if raw != job_id and raw.isdigit() and "_" in job_id:
            states.setdefault(raw, states[job_id])

    def is_live(self, job_id: str) -> bool:
        return job_id in self.live and self.live[job_id].state in LIVE

    def state(self, job_id: str, files: Mapping[str, str]) -> JobState | None:
        """A job's state: squeue's while live, else sacct's, else squeue's end, else its exit file."""
        if self.is_live(job_id):
            return self.live[job_id]
        if job_id in self.accounted:
            return self.accounted[job_id]
        if job_id in self.live:
            return self.live[job_id]
        code = (files.get(f"{_EXIT}{job_id}") or "").strip()
        if code:  # empty: an array task's mark, its job not ended
            return JobState(job_id, "COMPLETED" if code == "0" else "FAILED", f"{code}:0")
        return None

    def newest(self, recorded: str, files: Mapping[str, str], bench_dir: str, note: str | None) -> JobState:
        """The state of the newest job of the chain `recorded` heads, with the chain (None for a
        benchmark that is no chain: one job, and no chain files)."""
        from gymbuild.executors import chain  # status only: planning reads this module

        read = chain.Files(
            chain.chain_ids(files.get(chain.CHAIN, "")),
            {
                job: succ
                for name, text in files.items()
                if name.startswith(chain.SUCCESSOR)
                and (job := chain.job_id(name.removeprefix(chain.SUCCESSOR)))
                and (succ := chain.job_id(text))
            },
            chain.parse_attempts(files.get(chain.ATTEMPTS, "")),
            (files.get(chain.CHAIN_END) or "").strip().partition("\n")[0] or None,
        )
        jobs = chain.follow(recorded, read, self.dirs.get(bench_dir, ()), self.is_live)
        job_id = chain.shown(jobs, self.is_live, lambda j: self.live[j].state in ("PENDING", "REQUEUED"))
        state = self.state(job_id, files) or JobState(job_id, "UNKNOWN", note=note)
        if not read.any and len(jobs) == 1:
            return state

        def state_of(job: str) -> str | None:
            known = self.state(job, files)
            return known.state if known else None

        return replace(state, chain=chain.describe(jobs, job_id, read, state_of, self.is_live))


def metadata() -> dict[str, str]:
    """Slurm needs nothing beyond the job ids to find a run again."""
    return {}


def cancel(conn: Connection, jobs: Mapping[str, str]) -> Result:
    """Stop every given job (bench dir -> its newest job id) and the rest of its chain, in one round
    trip: every job of the user's that squeue lists live working in those bench dirs (a running job's
    queued successor waits there under an id no record holds, and a chain's files may be behind), and
    the given ids wherever they work. Where a chain is stopped, `.gym_chain_cancelled` (a successor
    that starts anyway runs nothing: parts.sh.j2) and `.gym_chain_end` are written first, then one
    scancel. Prints `stopped<TAB>id<TAB>state<TAB>bench dir` per job (chain.parse_stopped)."""
    return conn.run(_cancel_script({posixpath.normpath(d): j for d, j in jobs.items()}))


_STOPPABLE = "PENDING,RUNNING,SUSPENDED,CONFIGURING,REQUEUED,RESIZING"  # live and not already ending


def _cancel_script(jobs: Mapping[str, str]) -> str:
    from gymbuild.executors import chain  # cancel only: planning reads this module

    stop = 'stop+=("$id"); stopped[$dir]=1; printf \'stopped\\t%s\\t%s\\t%s\\n\' "$id" "$st" "$dir"'
    return "\n".join(
        [
            f"dirs=({join(jobs)}); given=({join(jobs.values())})",
            "unset want ids stopped stop; declare -A want=() ids=() stopped=(); stop=()",
            # A bench dir is a chain's once one of its jobs started: its chain or successor files.
            f'chained() {{ local f; [ -e "$1/{chain.CHAIN}" ] && return; '
            f'for f in "$1"/{chain.SUCCESSOR}*; do [ -e "$f" ] && return; done; return 1; }}',
            'for i in "${!dirs[@]}"; do want[${dirs[i]}]=1; ids[${given[i]}]=${dirs[i]}; done',
            f"if listed=$(squeue -h -u \"$(id -un)\" -t {_STOPPABLE} -o $'%i\\t%T\\t%Z'); then",
            "  while IFS=$'\\t' read -r id st dir; do",
            '    dir=${dir%/}; [ -n "${ids[$id]+x}" ] && dir=${ids[$id]}',
            f'    [ -n "$id" ] && [ -n "${{want[$dir]+x}}" ] && {{ {stop}; }}',
            '  done <<<"$listed"',
            "else",  # squeue could not answer: the given jobs, as the look saw them
            f'  for id in "${{!ids[@]}}"; do dir=${{ids[$id]}}; st=UNKNOWN; {stop}; done',
            "fi",
            f'now=$(date -u +%Y-%m-%dT%H:%M:%SZ); for d in "${{!stopped[@]}}"; do '
            'if chained "$d"; then '
            f': >"$d/{chain.CHAIN_CANCELLED}"; '
            f'printf \'cancelled by gymbuild cancel at %s\\n\' "$now" >"$d/{chain.CHAIN_END}"; fi; done',
            '[ "${#stop[@]}" = 0 ] || scancel "${stop[@]}"',
        ]
    )
