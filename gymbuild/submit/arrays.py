"""Queue as job arrays (`compute.<name>.array`): the jobs of every run of a pass, one sbatch an array.

The counterpart of queue.queue_many for a run whose compute asks for arrays: the same outcomes (each
benchmark's own, with `<array id>_<index>` as its job id), the same in-flight stamps and recovery of a
killed run's attempts, but the jobs of the pass (of every run of a batch: a sweep's cells too) are
planned into arrays first (plan/arrays.py), under the cluster's MaxArraySize, read once in the
batch's session. A job alone in its group, and every job of a resubmit of one, is a plain job.

A stamp of an array's member says `array <attempt> <index> <first job dir>`: the next run reads the
array's answer from the queue log (or revokes the attempt) and gives each member its task's id.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gymbuild import interrupts
from gymbuild.errors import UserError
from gymbuild.executors.base import Queued
from gymbuild.plan.arrays import ArrayJob, plan_arrays
from gymbuild.submit import queue
from gymbuild.submit.quota import hold, refused_why
from gymbuild.submit.record import keep_benchmark_order
from gymbuild.submit.shards import sharded

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gymbuild.executors.connection import Connection
    from gymbuild.plan.job import JobPlan, Packing
    from gymbuild.state.workspace import Outcome
    from gymbuild.submit.settled import Settled


@dataclass(frozen=True)
class _Job:
    """One job of the pass: its run, its plan, and its first benchmark's outcome before the pass."""

    run: Settled
    job: JobPlan
    earlier: Outcome | None

    @property
    def key(self) -> tuple[str, str]:  # the run dir tells cells of a sweep apart
        return self.run.submission.run_dir, self.job.key

    @property
    def job_dir(self) -> str:
        return self.job.plan.bench_dir


def enabled(run: Settled) -> bool:
    """Whether `run` queues its jobs as arrays: its compute asks, and its executor schedules jobs."""
    return run.config.compute.array is not None and run.executor.SCHEDULED


def refuse_shards(run: Settled, benches: Sequence[str]) -> None:
    """Job arrays (`compute.array`) and shards (`shards: K`) are not combined: an array task per shard
    would need its own slice, log and resume per task. Refused before anything reaches the cluster,
    by submit (pipeline.py) and by the dry run (show.py) alike: this one check, this one message."""
    found = sharded(run, benches) if enabled(run) else []
    if found:
        raise UserError(
            f"error: {run.config_file}: driver.benchmarks.{found[0]}.shards: a sharded benchmark cannot be "
            "queued as a job array's task (compute.array is set)\n"
            f"    fix: remove shards from {', '.join(found)}, or turn the array off for this submission"
        )


def queue_arrays(
    conn: Connection, passes: Sequence[tuple[Settled, Packing, list[str]]], max_array_size: int | None
) -> None:
    """Queue the jobs of `benches` of every (run, packing, benches) of the pass as arrays."""

    jobs: list[_Job] = []
    for run, packing, benches in passes:
        keep_benchmark_order(run)
        if run.memory.queue_total is None:
            run.memory.queue_total = len(run.to_queue())
        run.executor.hold_queue(conn, run.submission.run_dir)
        outcomes = run.workspace.outcomes()
        jobs += [_Job(run, j, outcomes.get(j.key)) for j in map(run.plans.job, packing.jobs(benches))]
    fresh = _recover(conn, jobs)
    if not fresh:
        return
    by_key = {j.key: j for j in fresh}
    planned: list[ArrayJob[tuple[str, str]]] = []
    for parallel in dict.fromkeys(_parallel(j.run) for j in fresh):
        items = [(j.key, j.job.plan.directives) for j in fresh if _parallel(j.run) == parallel]
        planned += plan_arrays(items, max_array_size, parallel)
    left = list(planned)
    refused: Queued | None = None  # a limit refused an sbatch: the rest waits, none is sent
    try:
        while left and not interrupts.pending() and refused is None:
            array = left.pop(0)
            members = [by_key[k] for k in array.keys]
            answer = _send_array(conn, array, members) if array.is_array else _send_plain(conn, members[0])
            refused = answer if answer.waits else None
    finally:
        for array in left if interrupts.pending() else ():  # what never started says so, as in queue_many
            for member in (by_key[k] for k in array.keys):
                queue._not_started(member.run, [member.job], member.run.workspace.outcomes())
        if refused is not None:
            for member in (by_key[k] for array in left for k in array.keys):
                hold(member.run, member.job.members, refused_why(refused.error or ""))


def _parallel(run: Settled) -> int | None:
    array = run.config.compute.array
    return array.parallel if array else None


def _recover(conn: Connection, jobs: list[_Job]) -> list[_Job]:
    """The jobs a killed run's attempts did not queue (the rest get their ids): each array attempt is
    asked once, a plain job's as queue_many asks it."""
    from gymbuild.executors.slurm import arrays as slurm_arrays  # queueing only

    fresh: list[_Job] = []
    answers: dict[str, Queued | None] = {}
    for j in jobs:
        stamp = j.run.workspace.stamp(f"inflight-{j.job.key}")
        if stamp is None:
            fresh.append(j)
            continue
        word, _, rest = stamp.partition(" ")
        if word == "array":
            attempt, index, first_dir = rest.split(" ", 2)
            if attempt not in answers:
                answers[attempt] = slurm_arrays.recover(conn, first_dir, attempt, j.run.submission.run_dir)
            answer = answers[attempt]
            task = slurm_arrays.task_id(answer.job_id, int(index)) if answer and answer.job_id else None
            adopted = Queued(task, None) if task else None
        else:
            known = frozenset(j.earlier.previous_job_ids) if j.earlier else frozenset()
            adopted = j.run.executor.recover_lost(conn, f"{j.job_dir}/job.sh", stamp, j.job.plan, known)
        if adopted is None:
            fresh.append(j)
        else:
            queue._queued(j.run, j.job, j.earlier, adopted)
    return fresh


def _send_plain(conn: Connection, j: _Job) -> Queued:
    attempt = secrets.token_hex(6)
    j.run.workspace.set_stamp(f"inflight-{j.job.key}", attempt)
    answer = j.run.executor.send(conn, f"{j.job_dir}/job.sh", queue.secrets_file(j.run, j.job), attempt)()
    queue._queued(j.run, j.job, j.earlier, answer)
    return answer


def _send_array(conn: Connection, array: ArrayJob[tuple[str, str]], members: list[_Job]) -> Queued:
    """One array: every member's stamp durable first, then the one sbatch; each member's outcome is
    its task's id (or the array's error)."""
    from gymbuild.executors.slurm import arrays as slurm_arrays  # queueing only

    attempt = secrets.token_hex(6)
    dirs = [m.job_dir for m in members]
    for index, m in enumerate(members):
        m.run.workspace.set_stamp(f"inflight-{m.job.key}", f"array {attempt} {index} {dirs[0]}")
    command = slurm_arrays.queue_command(
        array.spec,
        array.directives,
        members[0].run.submission.run_dir,
        dirs,
        [queue.secrets_file(m.run, m.job) for m in members],
        attempt,
    )
    answer = slurm_arrays.send(conn, command)()
    for index, m in enumerate(members):
        task = Queued(slurm_arrays.task_id(answer.job_id, index), None) if answer.job_id else answer
        queue._queued(m.run, m.job, m.earlier, task)
    return answer
