"""`submit watch=1`: after the submit, go on feeding the benchmarks that wait for room under the
user's quota (submit/quota.py) as the queue drains, and end when every job has ended.

Each poll is the one look `status watch=1` takes (one squeue and one sacct for all the jobs, the same
backing-off intervals: watch.py). Only a poll that can have freed room feeds: one where fewer of this
submission's jobs are live than after the last feed, none is, or a few polls have passed (another
of the user's jobs may have ended); a feed is a plain submit pass over what waits (the limits read
again in one round trip, then an sbatch per job that fits), so a poll in which nothing ended costs
one round trip however many benchmarks wait.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

from gymbuild.day_two import watch
from gymbuild.day_two.status import format_statuses
from gymbuild.errors import UserError
from gymbuild.executors.states import BenchStatus, Tally, kind, states_of, waits_for_room
from gymbuild.request.verb_args import SubmitArgs
from gymbuild.submit import pipeline
from gymbuild.submit.record import build_record
from gymbuild.submit.session import Session

# Polls in a row without a feed before one is tried anyway: room can free outside this submission.
FEED_EVERY = 5


@dataclass
class Feeder:
    """What the feeding remembers between polls: how many of its jobs were live after the last feed,
    and the polls since it."""

    ctx: Session
    live_after_feed: int | None = None
    polls_since_feed: int = 0
    feeds: int = 0

    def look(self) -> list[BenchStatus]:
        """One status look; then, when room may have freed, one feed of what waits. A benchmark the
        feed queued shows PENDING (it was queued a moment ago) until the next look."""
        ctx = self.ctx
        live_states = ctx.executor.LIVE
        record = build_record(ctx.submission(), ctx.workspace, commit=False)
        selected = set(ctx.selected())
        (rows,) = states_of(ctx.connection(), [record], [selected])
        waiting = [r.benchmark for r in rows if kind(r, live_states) == "waiting"]
        live = sum(kind(r, live_states) in ("pending", "running") for r in rows)
        self.polls_since_feed += 1
        if self.live_after_feed is None:  # the first look: the submit's own pass has just fed
            self.live_after_feed = live
        freed = live < self.live_after_feed or not live
        if not waiting or not (freed or self.polls_since_feed >= FEED_EVERY):
            return rows
        ctx.memory.queued_now.clear()
        ctx.memory.waiting.clear()
        pipeline.run(ctx, waiting)
        self.feeds += 1
        self.polls_since_feed = 0
        outcomes = ctx.workspace.outcomes()
        fed = {b: o.job_id for b in waiting if (o := outcomes.get(b)) is not None and o.job_id}
        rows = [
            replace(r, job_id=fed[r.benchmark], state="PENDING", error=None) if r.benchmark in fed else r
            for r in rows
        ]
        still = [
            b
            for b in waiting
            if b not in fed and waits_for_room(outcomes[b].error if b in outcomes else None)
        ]
        self.live_after_feed = live + len(fed)
        if fed:
            _say(f"fed {len(fed)} waiting benchmark(s); {len(still)} still wait for room")
        return rows


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def feed(ctx: Session, args: SubmitArgs) -> None:
    """Feed and watch until every benchmark's job has ended and none waits; then the table (json=1:
    nothing more: the submit's manifest stays the one document on stdout). Exits 1 unless every
    benchmark completed."""
    feeder = Feeder(ctx)
    record = build_record(ctx.submission(), ctx.workspace, commit=False)
    live = ctx.executor.LIVE

    def draw(rows: list[BenchStatus], summary: Tally) -> str:
        return format_statuses(record, rows, summary)

    rows, summary, looks = watch.watch(
        feeder.look,
        live,
        as_json=args.json,
        draw=draw,
        what=record.gym_job_id,
        until=lambda summary: summary.ended and not summary.waiting,
    )
    record = build_record(ctx.submission(), ctx.workspace, commit=False)
    if not args.json:  # json=1: the manifest the submit printed stays the one document on stdout
        sys.stdout.write(format_statuses(record, rows, summary, looks))
    if summary.failed + summary.unknown + summary.waiting:
        raise UserError(watch.not_completed(record, rows, live))
