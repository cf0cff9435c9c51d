"""Quota: queue what fits the user's limits, and write down the rest as waiting for room.

Why: a cluster caps what one user may have queued (MaxSubmitJobs of the association or the QOS), and
an sbatch beyond it is refused. Before the first sbatch of a pass, the executor reads the limits in
the run's session (executors/slurm/limits.py: one round trip); the jobs that fit are queued, in
config order, and the others get an outcome with no job id and an error that starts with
states.WAITING_FOR_ROOM and names the limit: the record says "waiting", `status` shows WAITING, and
the next `submit` (or `submit watch=1`, which feeds them as room frees) queues them like anything
else that has no job id. No sbatch the limit is known to refuse is run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from gymbuild.errors import UserError, printable
from gymbuild.executors.states import WAITING_FOR_ROOM, waits_for_room
from gymbuild.state.provenance import utc_now, utc_timestamp
from gymbuild.state.workspace import Outcome

if TYPE_CHECKING:
    from gymbuild.executors.connection import Connection
    from gymbuild.executors.slurm.limits import Limits
    from gymbuild.plan.job import Packing
    from gymbuild.submit.settled import Settled

FEED_HINT = "`gymbuild submit watch=1` queues it as room frees"


def split(groups: Sequence[Sequence[str]], limits: Limits | None) -> tuple[list[str], list[str]]:
    """(what to queue, what waits): the benchmarks of the jobs `groups` (each job's benchmarks, in
    order) that fit the limits now, and the rest. A job is one submission (one task): its
    benchmarks are queued or wait together."""
    fit = len(groups) if limits is None else limits.fits([1] * len(groups))
    return [b for g in groups[:fit] for b in g], [b for g in groups[fit:] for b in g]


def dry_run_note(jobs: int, directives: dict[str, str | None]) -> str:
    """What the dry run can say of the quota without a connection: what a submit will check, and
    what it then does with the jobs beyond the room."""
    account = f"account {directives['account']}" if directives.get("account") else "your default account"
    qos = f"QOS {directives['qos']}" if directives.get("qos") else "its default QOS"
    return (
        f"note: at submit, gymbuild reads your limits in {account} and {qos} (MaxSubmitJobs and "
        "MaxJobs from sacctmgr, MaxArraySize from scontrol) and your jobs already queued; of these "
        f"{jobs} job(s), those beyond the room wait, named with the limit (`gymbuild submit watch=1` "
        "feeds them as room frees); a limit that lets no job in at all (0) ends the submit with an "
        "error before any sbatch"
    )


def refused_why(message: str) -> str:
    """Why a benchmark waits after sbatch refused it naming a limit gymbuild did not read: the words
    every verb puts after "waiting for room under" (executors/states.py, unqueued_reason)."""
    return f"the limit sbatch named (sbatch said: {message})"


def waiting_text(why: str) -> str:
    """The error a waiting benchmark's record entry carries: it names the limit and its source."""
    return f"{WAITING_FOR_ROOM}{why}; {FEED_HINT}"


Scope = tuple[str | None, str | None]  # the account and the QOS a job names
Pass = tuple["Settled", "Packing", Sequence[str]]  # a run of the pass, its packing and what it queues


class Room:
    """The room a pass has under the user's limits: asked once a pass per account and QOS (sent
    early by the sync, so the login node's sacctmgr calls overlap the copy), then counted down as
    the pass's runs queue, so a sweep's cells share one reading."""

    def __init__(self) -> None:
        self.asked: dict[Scope, Callable[[], Limits | None]] = {}
        self.limits: dict[Scope, Limits | None] = {}

    def ask(self, conn: Connection, run: Settled, packing: Packing, benches: Sequence[str]) -> Scope | None:
        """Send the question of the limits `benches`' jobs meet, unless it was asked: the answer is
        read by `take`. None: nothing to ask about."""
        jobs = packing.jobs(list(benches))
        if not jobs:
            return None
        directives = dict(run.plans.job(jobs[0]).plan.directives)
        scope = (directives.get("account"), directives.get("qos"))
        if scope not in self.asked:
            self.asked[scope] = run.executor.ask_limits(conn, directives)
        return scope

    def max_array_size(self) -> int | None:
        """The cluster's MaxArraySize as the pass's readings found it (None: none found it)."""
        sizes = [limits.max_array_size for limits in self.limits.values() if limits is not None]
        return min((size for size in sizes if size is not None), default=None)

    def read(self, scope: Scope) -> Limits | None:
        """The limits of `scope` as the pass read them (the answer to `ask`, read once)."""
        if scope not in self.limits:
            self.limits[scope] = self.asked[scope]()
        return self.limits[scope]

    def refuse_never(self, conn: Connection, passes: Sequence[Pass]) -> None:
        """Before the pass's first sbatch: a run whose jobs meet a limit that lets no job in (0) ends
        the submit with one error, nothing queued. Waiting for it would never end (`submit watch=1`
        would poll until Ctrl-C), and each sbatch would only be refused."""
        for run, packing, benches in passes:
            scope = self.ask(conn, run, packing, benches) if benches else None
            limits = self.read(scope) if scope is not None else None
            if limits is None or scope is None:
                continue
            if limits.never:
                raise UserError(never_text(run, scope, limits.never, len(benches)))
            plans = [run.plans.job(job).plan for job in packing.jobs(list(benches))]
            too_big = next(filter(None, (limits.too_big(dict(p.directives)) for p in plans)), "")
            if too_big:
                pools = f"compute.{run.config.compute.name}.node_pools"
                fix = f"ask fewer nodes or GPUs per job ({pools}), or an account or QOS that allows them"
                raise UserError(never_text(run, scope, too_big, len(benches), fix))

    def take(self, conn: Connection, run: Settled, packing: Packing, benches: list[str]) -> list[str]:
        """The benchmarks of `benches` to queue now; the others' outcomes say they wait for room."""
        scope = self.ask(conn, run, packing, benches)
        if scope is None:
            return benches
        limits = self.read(scope)
        groups = [job.members for job in map(run.plans.job, packing.jobs(benches))]
        fit, wait = split(groups, limits)
        if limits is not None:  # what this pass queues counts against the limit for the rest
            queued = limits.queued + limits.fits([1] * len(groups))
            limits = self.limits[scope] = replace(limits, queued=queued)
        if wait and limits is not None:
            hold(run, wait, limits.why())
        return fit


def never_text(run: Settled, scope: Scope, limit: str, benches: int, fix: str = "") -> str:
    """The one error for jobs no room can ever let in: the config, the limit, and the fix."""
    account, qos = scope
    where = f"compute.{run.config.compute.name}.account"
    named = f"account {account}" if account else "your default account"
    fix = fix or (
        f"name an account (and QOS) whose limits let jobs in ({where}=<account>), or ask the "
        "cluster's admins to raise the limit (sacctmgr show assoc, sacctmgr show qos)"
    )
    text = (
        f"error: {run.config_file}: {where}: {limit} lets none of these jobs ({named}"
        f"{f', QOS {qos}' if qos else ''}) in, so {benches} benchmark(s) would wait for room that "
        f"never frees; nothing was queued\n    fix: {fix}"
    )
    return printable(text)


def hold(run: Settled, benches: Sequence[str], why: str) -> None:
    """Write each of `benches` down as waiting for room, for the record and `status`; the report
    names them and why."""
    # One already waiting is left as it is: a feed of a thousand waiting benchmarks would rewrite
    # (and fsync) a thousand outcome files to say the same again.
    outcomes = run.workspace.outcomes()
    fresh = [b for b in benches if not (b in outcomes and waits_for_room(outcomes[b].error))]
    unqueued(run, fresh, waiting_text(why), outcomes)
    with run.memory.lock:
        run.memory.waiting.extend(benches)


def unqueued(
    run: Settled, benches: Sequence[str], error: str, earlier: Mapping[str, Outcome] | None = None
) -> None:
    """The outcome of each of `benches` that has no job: no job id, and `error` saying why. An
    earlier job id is never overwritten. `earlier`: the outcomes as the pass read them (default:
    read now)."""
    workspace = run.workspace
    for bench in benches:
        before = earlier.get(bench) if earlier is not None else workspace.outcome(bench)
        if before is not None and before.job_id is not None:
            continue
        workspace.save_outcome(
            Outcome(
                benchmark=bench,
                job_id=None,
                error=error,
                script_digest=run.plans.stage_digest(bench),
                at=utc_timestamp(utc_now()),
                previous_job_ids=before.previous_job_ids if before else (),
            )
        )
        with run.memory.lock:
            run.memory.queued_now.append(bench)
