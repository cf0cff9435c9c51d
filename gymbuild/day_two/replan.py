"""resubmit's plan, before it acts: per benchmark its state, the rows gym's own files say are scored,
expected and failed, what a resubmit would queue (a continuation from the rollouts, a fresh start, or
nothing) and why, and what it may cost.

One pure function (`plan`) from the look `resubmit` already takes (states.BenchStatus: the newest
job's state and the rollout counts of state/rollouts.py) and the config's part in it (`how_it_runs`),
so `resubmit --dry-run`, the first lines of a real `resubmit` and a sweep's resubmit print the same
plan, and the real one queues exactly the plan's `queued` (day_two/act.py `requeue`).

The rule the job state cannot override: a benchmark whose files say every row is scored
(scored == expected) is never queued again, whatever its job's state (a job that FAILED after its
last row, a TIMEOUT at N/N): a re-run would only ask the model again for rows it has.

What a re-queued job does with the rows an earlier job wrote is decided in the job, not here; the
plan says what the job will find (plan/driver.py, render/templates/driver.sh.j2, and NeMo Gym 0.7.0's
rollout_collection.py):
- a `resumable` benchmark runs `gym eval run +resume_from_cache=True`: gym continues when the
  rollouts and the materialized inputs are both there;
- any other `run` benchmark continues the same way when its job finds both files non-empty
  (driver.sh.j2 adds +resume_from_cache), and otherwise starts from the first row;
- `run.resume_from_cache: false` (the user's) always starts again;
- gym that starts again (no cache) REMOVES the rollouts and failures written before;
- a `command` benchmark runs its command again from the start: gymbuild cannot tell it to continue.

The cost is an upper bound, never an estimate: the job's walltime limit times the GPUs its job asks
for (`--nodes` x `--gpus-per-node`); a resumable benchmark on a scheduler may run successors, bounded
by its max_walltime and max_retries when it has a max_walltime (Step.chain_gpu_hours).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gymbuild.config.walltime import job_walltime_seconds, walltime_seconds
from gymbuild.executors.shard_states import to_requeue
from gymbuild.executors.states import (
    COMPLETED,
    NEVER_QUEUED,
    NOT_QUEUED,
    NOT_RUN,
    UNKNOWN,
    WAITING,
    WAITING_FOR_ROOM_STATE,
    BenchStatus,
    kind,
    unqueued_reason,
    waits_for_room,
)
from gymbuild.plan import shard_name
from gymbuild.state.rollouts import duration

if TYPE_CHECKING:
    from gymbuild.config.model import Config
    from gymbuild.state.rollouts import Progress

CONTINUE, FRESH, NOTHING = "continue", "fresh", "nothing"

# How a re-queued job of a benchmark treats the rows an earlier job wrote (module docstring).
RESUMABLE = "resumable"  # +resume_from_cache=True always
WHEN_WRITTEN = "when_written"  # +resume_from_cache=True when the job finds both files non-empty
NEVER = "never"  # run.resume_from_cache: false
COMMAND = "command"  # its own command: no gym files gymbuild can continue from
NOT_IN_CONFIG = "not_in_config"  # the config names it no more


@dataclass(frozen=True)
class HowItRuns:
    """A benchmark's re-queued job as the config makes it: how it resumes, the GPUs it asks for, its
    walltime limit (None: none), and for a resume chain (a resumable benchmark on a scheduler) the
    chain's max_walltime (None: no limit on the chain's total) and max_retries."""

    resumes: str
    gpus: int = 0
    walltime_seconds: int | None = None
    chain: bool = False
    chain_walltime_seconds: int | None = None
    chain_retries: int = 0


def how_it_runs(config: Config, *, scheduled: bool) -> dict[str, HowItRuns]:
    """Each benchmark of `config` -> HowItRuns. GPUs as the job's directives ask (plan/directives.py:
    the first pool's --gpus-per-node on each of --nodes); walltime from compute.walltime."""
    compute = config.compute
    pools = list(compute.node_pools.values())
    per_node = pools[0].gpus_per_node if pools and pools[0].gpus_per_node else 0
    gpus = per_node * compute.total_nodes
    walltime = job_walltime_seconds(compute.walltime) if compute.walltime else None
    out = {}
    for name, bench in config.driver.benchmarks.items():
        own = bench.run.get("resume_from_cache")  # the user's own value wins (plan/driver.py)
        if bench.command:
            resumes = COMMAND
        elif "resume_from_cache" in bench.run:
            resumes = RESUMABLE if own is True or str(own).lower() == "true" else NEVER
        elif bench.resumable:
            resumes = RESUMABLE
        else:
            resumes = WHEN_WRITTEN
        chain = bool(bench.resumable) and scheduled
        limit = bench.resumable.max_walltime if bench.resumable else None
        retries = bench.resumable.max_retries if chain and bench.resumable else 0
        out[name] = HowItRuns(
            resumes, gpus, walltime, chain, walltime_seconds(limit) if chain and limit else None, retries
        )
    return out


@dataclass(frozen=True)
class Step:
    """One benchmark's line of the plan."""

    benchmark: str
    job_id: str | None
    state: str
    progress: Progress | None
    action: str  # CONTINUE, FRESH or NOTHING
    why: str
    how: HowItRuns
    shards: tuple[int, ...] = ()  # a sharded benchmark: the shards it queues again (shard_states)

    @property
    def units(self) -> list[str]:
        """What a resubmit releases and queues: the benchmark, or the shards it picks."""
        return [shard_name(self.benchmark, k) for k in self.shards] or [self.benchmark]

    @property
    def complete(self) -> bool:
        return is_complete(self.progress)

    @property
    def gpu_hours(self) -> float | None:
        """Upper bound of one queued job: walltime x GPUs; None: nothing queued, or GPUs without a limit."""
        return None if self.action == NOTHING else _bound(self.how.gpus, self.how.walltime_seconds)

    @property
    def chain_gpu_hours(self) -> float | None:
        """Upper bound of its whole resume chain, from how its jobs' prologue decides (resume.sh.j2):
        a successor after a TIMEOUT, PREEMPTED or NODE_FAIL with new rows starts only while the chain's
        time so far is under max_walltime, and may then run a whole walltime; any other end (an
        unknown one too) spends one of max_retries. So (max_walltime + (max_retries + 1) x walltime)
        x GPUs; None without max_walltime or a walltime. `driver.budget` may stop it sooner."""
        how = self.how
        if self.action == NOTHING or not how.chain:
            return None
        if how.chain_walltime_seconds is None or how.walltime_seconds is None:
            return _bound(how.gpus, None)
        return _bound(how.gpus, how.chain_walltime_seconds + (how.chain_retries + 1) * how.walltime_seconds)

    def bound(self) -> float | None:
        """What this step may cost at most (GPU-hours): its chain's bound, else its job's; None: unbounded."""
        if self.action == NOTHING:
            return 0.0
        if self.how.chain:
            return self.chain_gpu_hours
        return self.gpu_hours


def _bound(gpus: int, seconds: int | None) -> float | None:
    """GPU-hours at most: no GPU costs none; GPUs without a time limit have no bound."""
    if not gpus:
        return 0.0
    return None if seconds is None else gpus * seconds / 3600


@dataclass(frozen=True)
class Plan:
    gym_job_id: str
    steps: tuple[Step, ...]

    @property
    def queued(self) -> list[str]:
        """The benchmarks a resubmit queues, in the look's order."""
        return [s.benchmark for s in self.steps if s.action != NOTHING]

    def gpu_hours(self) -> float | None:
        """The sum of the queued steps' bounds; None when one of them has none (no walltime, a chain
        without max_walltime)."""
        bounds = [s.bound() for s in self.steps if s.action != NOTHING]
        return None if any(b is None for b in bounds) else sum(b or 0.0 for b in bounds)


def is_complete(progress: Progress | None) -> bool:
    """Every row gym set out to run is scored, by its own files."""
    return progress is not None and bool(progress.expected) and progress.done >= (progress.expected or 0)


def plan(
    gym_job_id: str,
    rows: Sequence[BenchStatus],
    only: Sequence[str],
    retryable: frozenset[str],
    how: Mapping[str, HowItRuns],
    live: frozenset[str] = frozenset(),
) -> Plan:
    """The plan for the benchmarks of `rows` (of `only`, when given): each one's state and rows, and
    what a resubmit would queue. Queued: a newest job that ended in a `retryable` state or NOT RUN
    (its shared job ended first), or CANCELLED when `only` names it; never a complete benchmark."""
    steps = []
    for row in rows:
        if only and row.benchmark not in only:
            continue
        one = how.get(row.benchmark, HowItRuns(NOT_IN_CONFIG))
        if row.shards:
            picked, action, why = _decide_shards(row, only, retryable, live)
            steps.append(Step(row.benchmark, row.job_id, row.state, row.progress, action, why, one, picked))
            continue
        action, why = _decide(row, only, retryable, one, live)
        steps.append(Step(row.benchmark, row.job_id, row.state, row.progress, action, why, one))
    return Plan(gym_job_id, tuple(steps))


def _decide(
    row: BenchStatus, only: Sequence[str], retryable: frozenset[str], how: HowItRuns, live: frozenset[str]
) -> tuple[str, str]:
    state, progress = row.state, row.progress
    eligible = state in retryable or state == NOT_RUN or (state == "CANCELLED" and row.benchmark in only)
    if is_complete(progress):
        assert progress is not None
        if eligible:
            return NOTHING, f"complete: every row is scored, so not queued again though its job ended {state}"
        return (
            NOTHING,
            "complete: its job completed" if state == COMPLETED else f"complete (its job: {state})",
        )
    if not eligible:
        return NOTHING, _why_not(row, live)
    if how.resumes == COMMAND:
        return FRESH, "its command runs again from the start (gymbuild cannot continue a command)"
    if how.resumes == NOT_IN_CONFIG:
        return FRESH, "the config names it no more; it is queued as it was last rendered"
    done = progress.done if progress else 0
    has_inputs = progress is not None and bool(progress.expected)
    chain = "; the head of a new resume chain (it may queue successors)" if how.chain else ""
    if how.resumes in (RESUMABLE, WHEN_WRITTEN) and done and has_inputs:
        assert progress is not None and progress.expected is not None
        left = progress.expected - done
        failed = (
            f" ({progress.failed} failed attempt(s) among what is asked again)" if progress.failed else ""
        )
        return (
            CONTINUE,
            f"continues from its {done} scored rows (+resume_from_cache): {left} left to run{failed}{chain}",
        )
    if not done:
        return FRESH, f"no row scored yet: starts from the first row{chain}"
    if how.resumes == NEVER:
        cause = "run.resume_from_cache is false"
    else:  # rows but no materialized inputs: gym cannot match them to inputs
        cause = "gym's materialized inputs are missing"
    return FRESH, f"{cause}: gym removes the {done} rows written and starts from the first row{chain}"


def _decide_shards(
    row: BenchStatus, only: Sequence[str], retryable: frozenset[str], live: frozenset[str]
) -> tuple[tuple[int, ...], str, str]:
    """A sharded benchmark's step: re-queued when its state would re-queue a benchmark (or it
    completed every shard with no merge), and then only the shards that are missing rows
    (shard_states.to_requeue); each resumes its own slice, the last to end merges."""
    state, kinds = row.state, [kind(s, live) for s in row.shards]  # (all completed, no merge: FAILED)
    eligible = state in retryable or state == NOT_RUN or (state == "CANCELLED" and row.benchmark in only)
    if state == COMPLETED:
        return (), NOTHING, "complete: every shard completed and their rows are merged"
    if not eligible:
        return (), NOTHING, _why_not(row, live)
    partial = [s.progress is not None and s.progress.partial for s in row.shards]
    picked = tuple(to_requeue(kinds, partial, is_merged=False))  # merged: COMPLETED, above
    if not picked:
        return (), NOTHING, "every shard has all its rows"
    names = ", ".join(str(k) for k in picked)
    kept = len(row.shards) - len(picked)
    return (
        picked,
        CONTINUE,
        f"re-queues shard(s) {names} of {len(row.shards)} (each resumes its own slice; the {kept} with all "
        "their rows are left alone; the last to end merges)",
    )


def _why_not(row: BenchStatus, live: frozenset[str]) -> str:
    """Why a benchmark whose rows are not all scored is not queued: its state."""
    state = row.state
    if state == COMPLETED:
        return "its job completed"
    if state == "CANCELLED":
        return f"cancelled: re-queued only when named (only={row.benchmark})"
    if state == UNKNOWN:
        return "its state is unknown (`gymbuild status` says why): not re-queued blind"
    if row.job_id is None and state in (NOT_QUEUED, WAITING_FOR_ROOM_STATE):
        reason = unqueued_reason(row.error)  # status's and results' words
        return reason if waits_for_room(row.error) else f"{NEVER_QUEUED}: `gymbuild submit` queues it"
    if state in WAITING or state in live:
        return f"its job is {state}: still live"
    return f"{state} is not a state resubmit re-queues"


# --- as a person reads it, and as data ----------------------------------------------------------


def _hours(h: float) -> str:
    """GPU-hours rounded UP to the hundredth (a bound shown lower than it is would be no bound): `8`,
    `0.34`."""
    return f"{math.ceil(h * 100 - 1e-9) / 100:.2f}".rstrip("0").rstrip(".")


def _cost(step: Step) -> str:
    how = step.how
    if step.action == NOTHING:
        return ""
    if not how.gpus:
        return "; no GPUs asked for"
    if how.walltime_seconds is None:
        return "; no walltime limit, so no bound on its cost"
    gpus = f"{how.gpus} GPU{'s' if how.gpus != 1 else ''}"
    per_job = f"{duration(how.walltime_seconds)} walltime x {gpus}"
    text = f"; at most {_hours(step.gpu_hours or 0.0)} GPU-hours per job ({per_job})"
    if how.chain:
        chain = step.chain_gpu_hours
        text += (
            f", its chain at most {_hours(chain)} (max_walltime {duration(how.chain_walltime_seconds or 0)}"
            f" + {how.chain_retries + 1} x walltime)"
            if chain is not None
            else ", its chain unbounded (no max_walltime)"
        )
    return text


def rows_text(progress: Progress | None) -> str:
    """`rows 31/40 scored, 2 failed`; `no rollout files` (a command benchmark, or not started)."""
    if progress is None:
        return "no rollout files"
    expected = progress.expected if progress.expected is not None else "?"
    return f"rows {progress.done}/{expected} scored" + (
        f", {progress.failed} failed" if progress.failed else ""
    )


def lines(p: Plan) -> list[str]:
    """The plan's heading and a line per benchmark."""
    queued = p.queued
    total = p.gpu_hours()
    cost = (
        f", at most {_hours(total)} GPU-hours (an upper bound: walltime x GPUs of each job)"
        if queued and total is not None
        else (", cost unbounded (see below)" if queued else "")
    )
    head = f"plan for {p.gym_job_id}: queue {len(queued)} of {len(p.steps)} benchmark(s){cost}"
    out = [head]
    for s in p.steps:
        job = f"job {s.job_id}" if s.job_id else "no job"
        if s.shards:
            job += f"; shards to queue: {', '.join(s.units)}"
        out.append(
            f"  {s.benchmark}: {s.state} ({job}), {rows_text(s.progress)} -> {s.action}: {s.why}{_cost(s)}"
        )
    return out


def nothing_message(p: Plan, what: str, config: object) -> str:
    """Why a resubmit queues nothing: the complete, and the cancelled (re-queued only when named)."""
    complete = [s.benchmark for s in p.steps if s.complete and s.state != COMPLETED]
    cancelled = [s.benchmark for s in p.steps if s.state == "CANCELLED" and not s.complete]
    text = f"nothing to resubmit: no benchmark of {what} ended in a retryable state with rows left to score"
    if complete:
        text += f"; complete whatever their job's state: {', '.join(complete)}"
    if cancelled:
        text += (
            f"; cancelled: {', '.join(cancelled)}, re-queued only when named: "
            f"gymbuild resubmit config={config} only={','.join(cancelled)}"
        )
    return text


def as_json(p: Plan) -> dict[str, object]:
    """The plan as data: the same fields `lines` prints, bounds in GPU-hours (upper bounds)."""
    return {
        "gym_job_id": p.gym_job_id,
        "queued": p.queued,
        "gpu_hours_upper_bound": p.gpu_hours(),
        "benchmarks": [
            {
                "benchmark": s.benchmark,
                "job_id": s.job_id,
                "state": s.state,
                "rows": s.progress.as_json() if s.progress else None,
                "complete": s.complete,
                "queue": s.action,
                "why": s.why,
                **({"shards": list(s.shards)} if s.shards else {}),
                "resumes": s.how.resumes,
                "gpus": s.how.gpus,
                "walltime_seconds": s.how.walltime_seconds,
                "gpu_hours_upper_bound": s.gpu_hours,
                "chain_gpu_hours_upper_bound": s.chain_gpu_hours,
            }
            for s in p.steps
        ],
    }
