"""Reading a resume chain: which job of a benchmark is its newest, and what each attempt did.

A resumable benchmark's jobs all work in its bench dir, and each one queues its own successor
(afternotok) under an id no record holds. What the jobs leave there (docs/chain-files, the contract
between the job scripts and the day-two verbs):

- `.gym_job_chain`: a job id a line, appended when a job of the chain starts (after its prologue has
  asked sacct about its predecessor: up to a minute);
- `.gym_successor-<id>`: the successor job `<id>` queued when it started;
- `.gym_attempts`: a tab-separated line per job start (`parse_attempts`);
- `.gym_chain_end`: why the chain stopped, once it has.

Every one of them can be behind the scheduler: a successor waiting its turn is in no chain file, and
a job killed just after its sbatch never wrote its successor file. So the newest job is found from
all of them and from the scheduler's own list of live jobs working in the bench dir, and a job is
believed only when the files say it joined the chain or the scheduler says it is live (`follow`).
This module is pure: the executor reads the files and the queue, in its one round trip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from gymbuild.state.ids import is_slurm_job_id

ATTEMPTS = ".gym_attempts"
CHAIN = ".gym_job_chain"
CHAIN_END = ".gym_chain_end"
CHAIN_CANCELLED = ".gym_chain_cancelled"
SUCCESSOR = ".gym_successor-"  # + the id of the job that queued it

DECISIONS = frozenset({"head", "resume", "retry", "stop"})


def job_id(text: str) -> str | None:
    """`text` as a job id (digits, or `<digits>_<digits>` for an array task), or None."""
    text = text.strip()
    return text if is_slurm_job_id(text) else None


def job_order(job: str) -> tuple[int, int]:
    """Slurm gives ids in order: a later job has a larger one."""
    head, _, task = job.partition("_")
    return int(head), int(task or 0)


@dataclass(frozen=True)
class Attempt:
    """One line of `.gym_attempts`: a job of the chain starting, and what its prologue decided."""

    job_id: str
    n: int  # 1 = the head of the chain
    predecessor: str | None
    predecessor_state: str | None  # what sacct said of it; UNKNOWN when sacct said nothing
    rows: int  # rollout lines scored when this job started
    decision: str  # head, resume, retry or stop
    reason: str


def parse_attempts(text: str) -> tuple[Attempt, ...]:
    """Every well-formed line of `.gym_attempts`; a line that is not one is skipped (a job killed
    mid-write, a hand edit): a reader never trusts the file blindly."""
    found = []
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) != 7:
            continue
        job, n, pred, pred_state, rows, decision, reason = fields
        if job_id(job) is None or not n.isdigit() or int(n) < 1 or not rows.isdigit():
            continue
        if decision not in DECISIONS or (pred != "-" and job_id(pred) is None):
            continue
        state = pred_state.strip()
        found.append(
            Attempt(
                job.strip(),
                int(n),
                None if pred == "-" else pred.strip(),
                None if state in ("", "-") else state,
                int(rows),
                decision,
                reason.strip(),
            )
        )
    return tuple(found)


def chain_ids(text: str) -> list[str]:
    """The ids of a `.gym_job_chain`, in order; none at all if any line is not an id."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines if all(job_id(line) for line in lines) else []


@dataclass(frozen=True)
class Files:
    """What a bench dir's chain files say (each may be missing: empty)."""

    chain: Sequence[str] = ()  # `.gym_job_chain`, in order
    successors: Mapping[str, str] | None = None  # job -> the successor it queued
    attempts: Sequence[Attempt] = ()
    end: str | None = None  # `.gym_chain_end`'s first line

    @property
    def any(self) -> bool:
        return bool(self.chain or self.successors or self.attempts or self.end)


def follow(
    recorded: str, files: Files, live_here: Iterable[str], is_live: Callable[[str], bool]
) -> list[str]:
    """The jobs of the chain `recorded` (the record's job: the head a submit or resubmit queued)
    started, oldest first, ending with its newest.

    Its members: `recorded` and the chain file's lines after it; every job newer than `recorded`
    that started (the chain file, a successor file's name, an attempt line or its predecessor names
    it) or is live working in the bench dir (`live_here`): Slurm's ids grow, and the chain's
    bookkeeping may be behind; and a linked successor (successor files, attempt lines) of a member
    that started, is live, or has a newer member after it (so it ran). Never a stopper once it has
    ended (a successor whose prologue ended the chain: it ran nothing), nor a successor its completed
    predecessor cancelled (dead, never started, nothing after it).
    """
    chain = list(files.chain)
    if job_id(recorded) is None:
        return [recorded]
    first = chain[chain.index(recorded) :] if recorded in chain else [recorded]
    # Joined: started as a job of a chain (a job writes its successor file when it starts; an
    # attempt line is written by a job starting, and names the job before it).
    joined = set(chain) | set(files.successors or {})
    joined |= {a.job_id for a in files.attempts} | {a.predecessor for a in files.attempts if a.predecessor}
    links = {a.predecessor: a.job_id for a in files.attempts if a.predecessor}
    links.update(files.successors or {})
    members = set(first) | {
        j for j in (*live_here, *joined) if job_order(j) > job_order(recorded) and job_id(j)
    }
    grown = True
    while grown:
        top = max(members, key=job_order)
        grown = False
        for job, successor in links.items():
            if job not in members or successor in members or not job_id(successor):
                continue
            if successor in joined or is_live(successor) or job_order(successor) < job_order(top):
                members.add(successor)
                grown = True
    # A stopper ran nothing: it is the benchmark's job only while live, whichever file names it.
    stoppers = {a.job_id for a in files.attempts if a.decision == "stop" and not is_live(a.job_id)}
    return [recorded, *sorted(members - stoppers - {recorded}, key=job_order)]


def shown(jobs: Sequence[str], is_live: Callable[[str], bool], is_waiting: Callable[[str], bool]) -> str:
    """The job whose state is the benchmark's: the newest that runs; else the newest waiting its turn
    (a successor whose predecessor is dead); else the newest of all. Never a dead job while another of
    the chain is live."""
    running = [j for j in jobs if is_live(j) and not is_waiting(j)]
    live = [j for j in jobs if is_live(j)]
    return (running or live or list(jobs))[-1]


@dataclass(frozen=True)
class Step:
    """One attempt of a chain as `status` shows it: its job, how it is or ended, and what the chain
    did next (the next attempt's decision and reason)."""

    job_id: str
    attempt: int
    state: str
    rows: int | None = None  # rows scored when it started
    then: str | None = None  # resume, retry or stop: what its successor's prologue decided
    reason: str | None = None


@dataclass(frozen=True)
class Chain:
    """A benchmark's resume chain: the attempt its shown job is, every attempt so far, why the chain
    ended (None while it may go on), and its live jobs (what `cancel` stops)."""

    attempt: int
    steps: tuple[Step, ...]
    end: str | None
    live: tuple[str, ...]

    def as_json(self) -> dict[str, object]:
        return {
            "attempt": self.attempt,
            "attempts": [{k: v for k, v in s.__dict__.items() if v is not None} for s in self.steps],
            "chain_end": self.end,
            "chain_live": list(self.live),
        }

    def line(self) -> str:
        """`987 FAILED -> retry (exit 3); 988 RUNNING` and the end, for the lines under status's table."""
        parts = []
        for step in self.steps:
            text = f"{step.job_id} {step.state}"
            if step.then:
                text += f" -> {step.then}" + (f" ({step.reason})" if step.reason else "")
            parts.append(text)
        return "; ".join(parts) + (f"; {self.end}" if self.end else "")


def describe(
    jobs: Sequence[str],
    newest: str,
    files: Files,
    state_of: Callable[[str], str | None],
    is_live: Callable[[str], bool],
) -> Chain:
    """The chain `follow` found, each job with its state (`state_of`: what the scheduler or the
    job's exit file says, None if nothing does: then its successor's prologue's word for it)."""
    by_job = {a.job_id: a for a in files.attempts}
    after = {a.predecessor: a for a in files.attempts if a.predecessor}
    steps = []
    for i, job in enumerate(jobs):
        own, nxt = by_job.get(job), after.get(job)
        state = state_of(job) or (nxt.predecessor_state if nxt else None) or "UNKNOWN"
        steps.append(
            Step(
                job,
                own.n if own else i + 1,
                state,
                own.rows if own else None,
                nxt.decision if nxt else None,
                nxt.reason if nxt else None,
            )
        )
    attempt = next((s.attempt for s in steps if s.job_id == newest), len(steps))
    live = tuple(j for j in jobs if is_live(j))
    return Chain(attempt, tuple(steps), None if live else files.end, live)


@dataclass(frozen=True)
class Stopped:
    """A job `cancel` stopped: its id, its state just before, and the bench dir it worked in."""

    job_id: str
    state: str
    bench_dir: str


def parse_stopped(stdout: str) -> list[Stopped]:
    """The `stopped<TAB>id<TAB>state<TAB>bench dir` lines an executor's cancel printed."""
    found = []
    for line in stdout.splitlines():
        fields = line.split("\t", 3)
        if len(fields) == 4 and fields[0] == "stopped" and (job := job_id(fields[1])):
            found.append(Stopped(job, fields[2], fields[3]))
    return found
