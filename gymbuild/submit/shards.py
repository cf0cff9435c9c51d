"""A sharded benchmark's jobs in the queue and the record: its shards are queued as jobs of their own
(each its own outcome, `<bench>+shard<k>`, in-flight stamp and queue-log line, exactly as a plain
benchmark's job), and the benchmark keeps ONE outcome, derived from them, that the record, `status`,
doit's queue:<bench> target and the report read as any benchmark's (state/shards.py: the record).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from gymbuild.errors import UserError
from gymbuild.executors.states import waits_for_room
from gymbuild.plan import shard_of
from gymbuild.state import shards as recorded
from gymbuild.state.provenance import utc_now, utc_timestamp
from gymbuild.state.workspace import Outcome, Workspace

if TYPE_CHECKING:
    from gymbuild.submit.settled import Settled


def sharded(run: Settled, benches: Sequence[str]) -> list[str]:
    """Which of `benches` the config shards."""
    config = run.config.driver.benchmarks
    return [b for b in benches if b in config and config[b].shards > 1]


def pending(run: Settled, benches: Sequence[str]) -> list[str]:
    """What a queue pass queues of `benches`: each plain benchmark, and each shard of a sharded one
    that has no job id yet and that this run did not try already (a resubmit released the shards it
    re-queues: day_two/replan.py)."""
    outcomes, done = run.workspace.outcomes(), run.memory.queue_done
    out: list[str] = []
    for bench in benches:
        units = run.plans.units(bench)
        if units == (bench,):
            out.append(bench)
            continue
        out += [u for u in units if u not in done and not ((o := outcomes.get(u)) and o.job_id)]
    return out


def remember(run: Settled, units: Sequence[str]) -> None:
    """Before a queue pass sends `units`: each sharded benchmark among them has its K written down
    once (Workspace.set_queued_shards), what refuse_changed compares a later config's K with."""
    workspace, config = run.workspace, run.config.driver.benchmarks
    for bench in dict.fromkeys(s[0] for u in units if (s := shard_of(u)) is not None):
        if bench in config and workspace.queued_shards(bench) is None:
            workspace.set_queued_shards(bench, config[bench].shards)


def queued_with(
    workspace: Workspace, bench: str, shards_seen: Mapping[str, int], plain: Outcome | None
) -> int | None:
    """The K `bench` was queued with in this submission, None when nothing of it was queued: as
    written down (remember), else (shards queued before gymbuild wrote K down) one more than its
    highest shard with an outcome (`shards_seen`), else 1 for a plain benchmark queued as one job
    (`plain`: its outcome)."""
    written = workspace.queued_shards(bench)
    if written is not None:
        return written
    if bench in shards_seen:
        return shards_seen[bench] + 1
    return 1 if plain is not None and (plain.job_id or plain.previous_job_ids) else None


def refuse_changed(run: Settled, benches: Sequence[str]) -> None:
    """A benchmark whose `shards: K` differs from the K its jobs were queued with is refused, before
    anything is staged, copied, released or queued: the shards already queued slice the rows by
    the old K, new ones would slice them by the new K (rows run twice or never, a merge of both);
    and a plain job and shards of one benchmark would write the same artifacts. The outcomes are
    read once, and a K file only for a benchmark that is or was sharded: a 1000-benchmark no-op
    submit opens no file more."""
    config, outcomes = run.config.driver.benchmarks, run.workspace.outcomes()
    shards_seen: dict[str, int] = {}
    for name in outcomes:
        if (shard := shard_of(name)) is not None:
            shards_seen[shard[0]] = max(shard[1], shards_seen.get(shard[0], 0))
    for bench in benches:
        now = config[bench].shards if bench in config else None
        if now is None or (now == 1 and bench not in shards_seen):
            continue  # not the config's, or plain and never sharded: nothing to slice apart
        before = queued_with(run.workspace, bench, shards_seen, outcomes.get(bench))
        if before is None or before == now:
            continue
        raise UserError(
            f"error: {run.config_file}: driver.benchmarks.{bench}.shards: {_k(now)} now, but "
            f"{run.submission.run_dir} queued {bench} with {_k(before)}: a different K slices its rows "
            "differently from the jobs already queued\n"
            f"    fix: restore shards: {before} to carry on with this run dir, or pass new=1 for a fresh "
            "submission with the new K"
        )


def _k(count: int) -> str:
    return f"shards: {count}" if count > 1 else "no shards (one job)"


def settle(run: Settled, benches: Sequence[str]) -> None:
    """Each sharded benchmark's own outcome, from its shards' (after a queue pass): the job id is shard
    0's, the error the first shard's with no job; the earlier ids every shard's, in order. Written only
    when it says something new; the benchmark counts as queued by this run once all its shards are."""
    workspace, memory = run.workspace, run.memory
    outcomes = workspace.outcomes()
    for bench in sharded(run, benches):
        units = run.plans.units(bench)
        mine = [outcomes.get(u) for u in units]
        if not any(mine):
            continue
        job_id, error = entry(mine)
        earlier = [i for o in mine if o for i in o.previous_job_ids]
        before = outcomes.get(bench)
        now = Outcome(
            benchmark=bench,
            job_id=job_id,
            error=error,
            script_digest=run.plans.stage_digest(bench),
            at=before.at if before else utc_timestamp(utc_now()),
            previous_job_ids=tuple(dict.fromkeys(earlier)),
        )
        if before is None or replace(before, at=now.at) != now:
            workspace.save_outcome(replace(now, at=utc_timestamp(utc_now())))
        with memory.lock:
            if any(u in memory.queued_now for u in units) and bench not in memory.queued_now:
                memory.queued_now.append(bench)
            if all(u in memory.queue_done or (o and o.job_id) for u, o in zip(units, mine, strict=True)):
                memory.queue_done.add(bench)
            if any(u in memory.waiting for u in units) and bench not in memory.waiting:
                memory.waiting.append(bench)


def entry(shards: Sequence[Outcome | None]) -> tuple[str | None, str | None]:
    """(job_id, error) of a sharded benchmark's record entry from its shards' outcomes, in order:
    shard 0's job once every shard has one; until then no job id (the benchmark is not all queued, as
    NeMo Gym's record says of a failed sbatch) and the first unqueued shard's error, a wait for room
    as it is (status shows WAITING), anything else with the shard named."""
    for k, outcome in enumerate(shards):
        if outcome is None or not outcome.job_id:
            why = (outcome.error if outcome else None) or "not queued yet (`gymbuild submit` queues it)"
            return None, why if waits_for_room(why) else f"shard {k}: {why}"
    first = shards[0]
    return (first.job_id if first else None), None


def metadata(outcomes: Mapping[str, Outcome]) -> dict[str, str]:
    """The record's `shards.<bench>` entries, from the shards' outcomes (state/shards.py)."""
    found: dict[str, dict[int, str | None]] = {}
    for name, outcome in outcomes.items():
        if (shard := shard_of(name)) is not None:
            found.setdefault(shard[0], {})[shard[1]] = outcome.job_id
    return {
        recorded.key(bench): recorded.format_ids([ids.get(k) for k in range(max(ids) + 1)])
        for bench, ids in found.items()
    }
