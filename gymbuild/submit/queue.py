"""Queue: one sbatch (or local start) per job, the outcomes of its benchmarks written the moment its
answer is read, and the recovery of what a killed run left in flight.

The one batched step: every benchmark a run queues goes through one pipelined pass (queue_many) in
the run's shell, whatever doit task or verb asked for it (pipeline.py).
"""

from __future__ import annotations

import collections
import secrets
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from gymbuild import interrupts
from gymbuild.executors.base import Answer, Queued
from gymbuild.executors.secrets import SecretsFile
from gymbuild.state.provenance import utc_now, utc_timestamp
from gymbuild.state.workspace import Outcome
from gymbuild.submit.quota import hold, refused_why, unqueued, waiting_text
from gymbuild.submit.record import keep_benchmark_order

if TYPE_CHECKING:
    from gymbuild.executors.connection import Connection
    from gymbuild.plan.job import JobPlan, Packing
    from gymbuild.submit.settled import Settled

IO_THREADS = 4  # outcome and stamp writes (each fsynced) at once while sbatch calls are in flight
QUEUE_PIPELINE = 16  # sbatch calls in flight at once in the run's shell (a few KB of pipe either way)


def queued(run: Settled, bench: str) -> bool:
    """`bench` has a job id in the run's submission (its outcome file, queue:<bench>'s target), and
    so has each of its shards when it is sharded."""
    workspace = run.workspace
    return all(
        (o := workspace.outcome(u)) is not None and o.job_id is not None
        for u in (bench, *run.plans.units(bench))
    )


def queue_many(run: Settled, conn: Connection, packing: Packing, benches: list[str]) -> None:
    """sbatch the job of each of `benches` (once a job) and write its outcomes the moment its answer
    is read.

    Up to QUEUE_PIPELINE sbatch calls are in flight in the run's shell at once (each still its own
    command, with its own status and output), so writing outcomes and stamps here overlaps sbatch
    there: one at a time, a thousand benchmarks waited for ~10 ms of local work per sbatch. Each
    in-flight stamp is durable before its sbatch is sent, so a run killed with calls in flight
    leaves the next one what it needs to recover them (the executor's `recover_lost`); the stamps of the next
    few benchmarks and the outcomes are written (and fsynced) on IO threads, because two fsyncs a
    benchmark in this thread were most of a submit's local time.
    """
    executor, workspace, memory = run.executor, run.workspace, run.memory
    keep_benchmark_order(run)
    # Packed once for the pass; a job's state (its in-flight stamp) is its first benchmark's.
    jobs = {job.key: job for job in map(run.plans.job, packing.jobs(benches))}
    benches = list(jobs)
    if memory.queue_total is None:  # once per run: reading every outcome per sbatch was O(N^2)
        memory.queue_total = len(run.to_queue())
    executor.hold_queue(conn, run.submission.run_dir)
    # Read before any new stamp is written: these are the attempts of a killed run.
    lost = {b: a for b in benches if (a := workspace.stamp(f"inflight-{b}")) is not None}
    earlier_outcomes = workspace.outcomes()  # once: only this run writes them (it holds the lock)
    fresh = collections.deque(b for b in benches if b not in lost)
    stamped: collections.deque[tuple[str, str, Future[None]]] = collections.deque()
    in_flight: collections.deque[tuple[str, Outcome | None, Answer]] = collections.deque()
    with ThreadPoolExecutor(IO_THREADS, thread_name_prefix="gymbuild-io") as io:
        writes: list[Future[None]] = []

        def stamp(bench: str) -> tuple[str, Future[None]]:
            attempt = secrets.token_hex(6)
            return attempt, io.submit(workspace.set_stamp, f"inflight-{bench}", attempt)

        def done(bench: str, earlier: Outcome | None, result: Queued) -> None:
            writes.append(io.submit(_queued, run, jobs[bench], earlier, result))

        refused: list[str] = []  # what a limit refused: the rest waits too (no sbatch it would refuse)

        def receive_one() -> None:
            bench, earlier, answer = in_flight.popleft()
            result = answer()
            if result.waits:
                refused.append(result.error or "")
            done(bench, earlier, result)

        answered: set[str] = set()
        try:
            for bench, job in jobs.items():
                if interrupts.pending() or refused:  # a signal or a limit: start nothing more
                    break
                answered.add(bench)
                script = f"{job.plan.bench_dir}/job.sh"
                earlier = earlier_outcomes.get(bench)
                if bench in lost:
                    while in_flight:  # answers come back in order: read those sent before
                        receive_one()
                    known = frozenset(earlier.previous_job_ids) if earlier else frozenset()
                    adopted = executor.recover_lost(conn, script, lost[bench], job.plan, known)
                    if adopted is not None:
                        done(bench, earlier, adopted)
                        continue
                    attempt, stamp_written = stamp(bench)
                else:
                    # A few benchmarks ahead are stamped at once, no more: a run killed now
                    # leaves each stamped benchmark one recovery round trip for the next run.
                    while fresh and len(stamped) < QUEUE_PIPELINE:
                        ahead = fresh.popleft()
                        stamped.append((ahead, *stamp(ahead)))
                    _, attempt, stamp_written = stamped.popleft()
                stamp_written.result()  # durable before the command is sent
                answer = executor.send(conn, script, secrets_file(run, job), attempt)
                in_flight.append((bench, earlier, answer))
                if len(in_flight) >= QUEUE_PIPELINE:
                    receive_one()
            while in_flight:
                receive_one()
        finally:
            for write in writes:  # every answer read is on disk before anything else is said
                write.result()
            unsent = [jobs[b] for b in jobs if b not in answered]
            if interrupts.pending():
                _not_started(run, unsent, earlier_outcomes)
            elif refused:
                hold(run, [m for job in unsent for m in job.members], refused_why(refused[0]))
            if interrupts.pending() or refused:
                for ahead, _, stamp_written in stamped:  # stamped, never sent: no attempt to recover
                    stamp_written.result()
                    (workspace.stamps_dir / f"inflight-{ahead}").unlink(missing_ok=True)


def _queued(run: Settled, job: JobPlan, earlier: Outcome | None, result: Queued) -> None:
    """Write what queueing `job` gave (on an IO thread): every member gets its id. Then drop its
    in-flight stamp. `earlier`: the outcome of its first benchmark before."""
    bench, members, workspace, memory = job.key, job.members, run.workspace, run.memory
    error = waiting_text(refused_why(result.error or "")) if result.waits else result.error
    for member in members:
        before = earlier if member == bench else workspace.outcome(member)
        workspace.save_outcome(
            Outcome(
                benchmark=member,
                job_id=result.job_id,
                error=error,
                script_digest=run.plans.stage_digest(member),
                at=utc_timestamp(utc_now()),
                previous_job_ids=before.previous_job_ids if before else (),
            )
        )
    (workspace.stamps_dir / f"inflight-{bench}").unlink(missing_ok=True)
    with memory.lock:
        if result.waits:  # not done: a later pass of this run (submit watch=1) queues it again
            memory.waiting.extend(members)
        else:
            memory.queue_done.update(members)
        memory.queued_now.extend(members)
        memory.progress.show(f"queued {len(memory.queued_now)}/{memory.queue_total}")


NOT_STARTED = "not queued: the submit was interrupted before its job started (`gymbuild submit` queues it)"


def _not_started(run: Settled, jobs: list[JobPlan], earlier: dict[str, Outcome]) -> None:
    """The outcome of each benchmark an interrupted pass never started: no job id, and why, so that
    the record and `status` list it (as NOT QUEUED) beside those it did start. An earlier job id is
    never overwritten; a killed run's attempt keeps its in-flight stamp, for the next run to recover."""
    members = [member for job in jobs for member in job.members]
    unqueued(run, members, NOT_STARTED, earlier)


def secrets_file(run: Settled, job: JobPlan) -> SecretsFile:
    """The job's secrets file, written just before its job is queued (and again by each
    resubmit): its `host:` values and the collector's ingest token, which DESIGN keeps out of the
    run directory, the batch script and sbatch's environment, all of which Slurm stores."""
    from gymbuild.render import secret_values  # late: Jinja2 (House rules)

    plan, secrets = job.plan, run.resolved.secrets  # a shared job's file is its own, as the job reads it
    values = secret_values(plan, secrets)
    return SecretsFile(run.submission.gym_job_id, plan.bench, values, tuple(sorted(secrets)))
