"""Follow a training run: `submit multirun=1 follow=1` keeps a sweep over `paths(GLOB)` evaluating
each checkpoint as it lands, until SIGINT or SIGTERM.

Each poll is one round trip when nothing is new and nothing is in flight: the glob, which also checks
the ready markers (`ready=`, default config.json or metadata.json), so a checkpoint directory still
being written is left for a later poll. A checkpoint found complete is submitted as any sweep cell
is (batch.py: its own submission, queued once). While some of its jobs are in flight, a poll
looks at their states too (one more round trip, whatever their number): a checkpoint whose jobs all
completed is done; one whose jobs failed is re-queued (day_two.requeue) up to `retries=` times and
then given up on, said on stdout and kept in the state file.

The state file, `<config corner>/follow/<sweep id>.json`, remembers per checkpoint its gym_job_id,
its attempts and where it stands, so a follower restarted after a crash or a reboot submits nothing
twice and gives up on nothing early; the workspace's outcomes would refuse a second queue anyway.
A signal only sets a flag: the poll under way ends (no checkpoint is left half-queued), then the
follower says what it did and exits 0.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict

from gymbuild.day_two import act
from gymbuild.errors import UserError
from gymbuild.executors import states
from gymbuild.executors.base import executor_for
from gymbuild.state.workspace import atomic_write
from gymbuild.submit import pipeline
from gymbuild.submit.queue import queued
from gymbuild.sweep import batch
from gymbuild.sweep import day_two as sweep_day_two
from gymbuild.sweep.expand import globs, header, ready_markers, unescaped
from gymbuild.sweep.record import Records, expression, merged

if TYPE_CHECKING:
    from gymbuild.request.verb_args import SubmitArgs
    from gymbuild.submit.session import Session
    from gymbuild.sweep.expand import Cell

DEFAULT_EVERY = 300.0
DEFAULT_RETRIES = 2

SUBMITTED, COMPLETED, GAVE_UP = "submitted", "completed", "gave up"


class Followed(TypedDict):
    """What the follower keeps of one checkpoint it submitted (its state file, per cell key)."""

    name: str
    values: list[str]
    gym_job_id: str
    attempts: int
    state: str  # SUBMITTED, COMPLETED or GAVE_UP
    why: NotRequired[str]  # what failed, once given up on


@dataclass(frozen=True)
class Options:
    every: float  # seconds between polls
    ready: tuple[str, ...]  # marker files: any one present makes a checkpoint complete (none: any match)
    retries: int  # re-queues of a checkpoint whose jobs failed, before it is given up on


def options(args: SubmitArgs) -> Options:
    """every=, ready=, retries= as the command line gave them (their arguments read and checked
    them, arguments.py), or the defaults."""
    every = DEFAULT_EVERY if args.every is None else args.every
    retries = DEFAULT_RETRIES if args.retries is None else args.retries
    return Options(every, ready_markers(args.ready), retries)


class State:
    """The follower's memory of a sweep: per checkpoint (cell key) its values, gym_job_id, attempts
    and where it stands; and how many polls have been made (what a test or a user waits on)."""

    def __init__(self, path: Path, ident: str) -> None:
        self.path = path
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        self.ident = ident
        self.polls: int = int(data.get("polls", 0))
        self.checkpoints: dict[str, Followed] = dict(data.get("checkpoints", {}))

    def save(self) -> None:
        doc = {"sweep_id": self.ident, "polls": self.polls, "checkpoints": self.checkpoints}
        atomic_write(self.path, json.dumps(doc, indent=2) + "\n")

    def gym_job_id(self, key: str) -> str | None:
        """The submission of a checkpoint, None when it was not submitted yet."""
        entry = self.checkpoints.get(key)
        return entry["gym_job_id"] if entry else None

    def state_of(self, key: str) -> str | None:
        entry = self.checkpoints.get(key)
        return entry["state"] if entry else None

    def with_state(self, state: str) -> list[str]:
        return [key for key, entry in self.checkpoints.items() if entry["state"] == state]


def _say(text: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}  {text}", flush=True)


def _name(cell: Cell) -> str:
    return " ".join(unescaped(v.split("=", 1)[1]) for v in cell.values) or "(no swept key)"


@contextmanager
def _stoppable() -> Iterator[threading.Event]:
    """SIGINT and SIGTERM set the event (the poll under way finishes); the handlers before are back
    after."""
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        stop.set()

    before = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in before.items():
            signal.signal(sig, old)


def follow(s: Session, args: SubmitArgs) -> None:
    """The verb: poll until a signal, then one summary line (and what was given up on)."""
    ident, overrides = expression(s, None)  # submit reads no sweep=: the overrides are the sweep
    opts = options(args)
    if not globs(overrides, str(args.config)):
        raise UserError(
            f"error: {args.config}: follow=1 follows checkpoints as they appear; the sweep has no paths()\n"
            "    fix: sweep the checkpoint over a glob: 'services.policy.model=paths(/lustre/ckpts/iter_*)'"
        )
    state = State(s.workspace.config_dir / "follow" / f"{ident}.json", ident)
    markers = ", ".join(opts.ready) or "none"
    _say(
        f"following sweep {ident} every {opts.every:g} s (ready markers: {markers}; retries: {opts.retries})"
    )
    with _stoppable() as stop:
        while not stop.is_set():
            try:
                poll(s, args, ident, overrides, opts, state)
            except UserError as err:  # a network blip must not end a follower that runs for days
                print(f"poll failed, trying again in {opts.every:g} s: {err}", file=sys.stderr, flush=True)
                # The connection may be what failed (sshd restarted, the link dropped): the next
                # poll opens a new one rather than asking a dead one forever.
                s.link.close()
            state.polls += 1
            state.save()
            stop.wait(opts.every)
    given_up = state.with_state(GAVE_UP)
    _say(
        f"stopped following sweep {ident}: {len(state.checkpoints)} checkpoint(s) submitted, "
        f"{len(state.with_state(COMPLETED))} completed, {len(given_up)} given up on"
    )
    for key in given_up:
        entry = state.checkpoints[key]
        print(f"  gave up on {entry['name']} ({entry['gym_job_id']}): {entry.get('why', '')}", flush=True)


def poll(
    s: Session, args: SubmitArgs, ident: str, overrides: Sequence[str], opts: Options, state: State
) -> None:
    """One look: submit the complete checkpoints not submitted yet, then settle the ones in flight."""
    cells = batch.expand_for_submit(s, overrides, args.ready, quiet=True)
    fresh = [cell for cell in cells if cell.key not in state.checkpoints]
    if fresh:
        _submit(s, fresh, ident, state, overrides)
        records = Records(s.workspace)
        ids = [(cell, state.gym_job_id(cell.key)) for cell in cells]
        records.save(merged(records.load(ident), ident, args.config, overrides, ids))
    in_flight = [cell for cell in cells if state.state_of(cell.key) == SUBMITTED]
    if in_flight:
        _settle(s, args.only, in_flight, opts, state)


def _submit(s: Session, cells: Sequence[Cell], ident: str, state: State, overrides: Sequence[str]) -> None:
    sessions = batch.sessions_of(s, cells, overrides)  # a checkpoint whose config fails: skipped
    cells = [batch.cell_of(cs) for cs in sessions]
    try:
        todo = [[b for b in cs.selected() if not queued(cs.settled, b)] for cs in sessions]
        try:
            pipeline.run_batch(sessions, todo, [header(cell, ident) for cell in cells])
        finally:
            for cell, cs in zip(cells, sessions, strict=True):
                current = cs.workspace.submission()
                if current is None or not cs.workspace.has_outcomes():
                    continue  # nothing reached the scheduler: the next poll tries it again
                state.checkpoints[cell.key] = {
                    "name": _name(cell),
                    "values": list(cell.values),
                    "gym_job_id": current.gym_job_id,
                    "attempts": 1,
                    "state": SUBMITTED,
                }
                waits = len(cs.memory.waiting)  # under the quota: fed by a later poll (_settle)
                how = f"{len(cs.queued_now) - waits} job(s) queued" if cs.queued_now else "queued before"
                how += f", {waits} waiting for room" if waits else ""
                _say(f"submitted {_name(cell)} ({current.gym_job_id}): {how}")
            state.save()
    finally:
        batch.close_all(sessions)


def _settle(s: Session, only: Sequence[str], cells: Sequence[Cell], opts: Options, state: State) -> None:
    """One look at the jobs of the checkpoints in flight (of the benchmarks `only` names, none: every
    one): completed, re-queued, or given up on."""
    records = sweep_day_two.records_of(s, cells)
    looks = sweep_day_two.look_at(s, records, only)
    retry: list[int] = []
    waiting: list[Cell] = []  # checkpoints with benchmarks that wait for room under the quota
    for i, (cell, record, rows) in enumerate(zip(cells, records, looks, strict=True)):
        if record is None:
            continue
        executor = executor_for(record.executor)
        total = states.tally(rows, executor.LIVE)
        if total.waiting:
            waiting.append(cell)
        if not total.ended or total.waiting:
            continue
        entry = state.checkpoints[cell.key]
        failed = [r for r in rows if r.state != states.COMPLETED]
        if not failed:
            entry["state"] = COMPLETED
            _say(f"completed {entry['name']} ({record.gym_job_id})")
        elif entry["attempts"] <= opts.retries and all(r.state in executor.RETRYABLE for r in failed):
            retry.append(i)
        else:
            entry["state"] = GAVE_UP
            entry["why"] = ", ".join(f"{r.benchmark} {r.state}" for r in failed)
            tries = entry["attempts"]
            _say(f"gave up on {entry['name']} ({record.gym_job_id}) after {tries} attempt(s): {entry['why']}")
    if waiting:
        _feed(s, waiting)
    if retry:
        sessions = batch.sessions_of(s, [cells[i] for i in retry])
        try:
            found = [records[i] for i in retry]
            picked = act.requeue(sessions, [r for r in found if r is not None], only)
        finally:
            batch.close_all(sessions)
        for i, benches in zip(retry, picked, strict=True):
            entry = state.checkpoints[cells[i].key]
            entry["attempts"] += 1
            _say(f"re-queued {entry['name']} (attempt {entry['attempts']}): {', '.join(benches)}")
    state.save()


def _feed(s: Session, cells: Sequence[Cell]) -> None:
    """Queue what fits of the checkpoints' benchmarks that wait for room (submit/quota.py): the submit
    pipeline over what has no job id yet, in one batch (the limits read once for them all)."""
    sessions = batch.sessions_of(s, cells)
    try:
        todo = [[b for b in cs.selected() if not queued(cs.settled, b)] for cs in sessions]
        pipeline.run_batch(sessions, todo)
        for cell, cs in zip(cells, sessions, strict=True):
            fed = [b for b in cs.queued_now if queued(cs.settled, b)]
            if fed:
                _say(f"fed {_name(cell)}: {len(fed)} waiting job(s) queued")
    finally:
        batch.close_all(sessions)
