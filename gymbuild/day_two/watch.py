"""`status watch=1`: look at a submission's jobs again and again until every one has ended.

Each look is one status round trip (one squeue and one sacct for all the jobs), and the looks back
off: the first again after a few seconds (a job that fails at once is seen failing at once), then
further apart up to about a minute, so a day-long watch of a thousand jobs costs the controller a
call a minute. On a terminal the table is redrawn in place; elsewhere (a pipe, a log, json=1) nothing
is printed until the end, and then the table, or one JSON document, once.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TextIO

from gymbuild import interrupts
from gymbuild.errors import UserError
from gymbuild.executors import states
from gymbuild.progress import on_a_terminal
from gymbuild.state.records import SubmissionRecord

# Seconds before each next look; the last repeats. GYMBUILD_WATCH_INTERVALS replaces them (the tests'
# short intervals; a script's own pace).
INTERVALS = (5.0, 10.0, 20.0, 40.0, 60.0)
INTERVALS_ENV = "GYMBUILD_WATCH_INTERVALS"
# Looks in a row at which nothing is live and some job's state is unknown before watch gives up on it:
# a controller down for a moment is waited out, a job nothing will ever describe again is not.
UNKNOWN_LOOKS = 5


def intervals(env: Mapping[str, str] = os.environ) -> Iterator[float]:
    """The waits between looks: INTERVALS, or GYMBUILD_WATCH_INTERVALS (comma-separated seconds)."""
    text = env.get(INTERVALS_ENV, "").strip()
    values: Sequence[float] = INTERVALS
    if text:
        try:
            values = [float(v) for v in text.split(",")]
        except ValueError:
            values = []
        if not values or any(v < 0 for v in values):
            raise UserError(
                f"error: {INTERVALS_ENV}={text!r} is not a list of seconds\n"
                f"    fix: seconds between looks, like {','.join(f'{v:g}' for v in INTERVALS)}, or unset it"
            )
    return itertools.chain(values, itertools.repeat(values[-1]))


class LiveView:
    """The table drawn in place on a terminal: each draw erases the last one (cursor up, clear). A
    table taller than the terminal is cut in the middle, so its head and summary stay in sight."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.lines = 0

    def draw(self, text: str) -> None:
        size = shutil.get_terminal_size()
        # Lines cut to the width, so each takes one terminal row and the erase knows how many.
        lines = [line[: max(size.columns - 1, 20)] for line in text.splitlines()]
        room = max(size.lines - 1, 6)
        if len(lines) > room:
            cut = len(lines) - room + 1
            lines = [
                *lines[: room - 3],
                f"... {cut} more lines (the whole table comes at the end)",
                *lines[-2:],
            ]
        self.clear()
        self.out.write("\n".join(lines) + "\n")
        self.out.flush()
        self.lines = len(lines)

    def clear(self) -> None:
        if self.lines:
            self.out.write(f"\x1b[{self.lines}F\x1b[J")
            self.out.flush()
            self.lines = 0


def watch(
    look: Callable[[], list[states.BenchStatus]],
    live: frozenset[str],
    *,
    as_json: bool,
    draw: Callable[[list[states.BenchStatus], states.Tally], str],
    what: str,
    backoff: Iterator[float] | None = None,
    wait: Callable[[float], None] = time.sleep,
    out: TextIO | None = None,
    until: Callable[[states.Tally], bool] | None = None,
) -> tuple[list[states.BenchStatus], states.Tally, int]:
    """Look until every job has ended; the last look's rows, their tally and the number of looks.

    One submission's jobs or a sweep's (`what` names them); on a terminal `draw` gives the table
    redrawn after each look. `backoff` and `wait` are the waits between looks and how to wait
    (tests pass their own); `until` when to stop (default: every job has ended; `submit watch=1`
    also waits for the benchmarks that wait for room).
    Ctrl-C stops the watching (not the jobs) with the last table left on the screen.
    """
    out = out or sys.stdout
    gaps = backoff or intervals()
    view = LiveView(out) if on_a_terminal(json=as_json) else None
    looks = unknown_streak = 0
    try:
        while True:
            rows = look()
            looks += 1
            summary = states.tally(rows, live)
            quiet = not (summary.pending or summary.running)
            unknown_streak = unknown_streak + 1 if summary.unknown and quiet else 0
            if (until(summary) if until else summary.ended) or unknown_streak >= UNKNOWN_LOOKS:
                break
            gap = next(gaps)
            if view is not None:
                table = draw(rows, summary)
                view.draw(f"{table}next look in {gap:g} s (Ctrl-C stops watching; the jobs go on)")
            wait(gap)
    except KeyboardInterrupt as err:
        if not interrupts.by_the_user(err):
            raise
        raise UserError(f"watch stopped; the jobs of {what} go on (`gymbuild status` shows them)") from None
    if view is not None:
        view.clear()
    return rows, summary, looks


def not_completed(record: SubmissionRecord, rows: Sequence[states.BenchStatus], live: frozenset[str]) -> str:
    """Why watch exits 1: which benchmarks have no result, and what to do about each kind."""
    bad = [r for r in rows if states.kind(r, live) in ("failed", "unknown", "waiting")]
    named = ", ".join(f"{r.benchmark} ({r.state}{' ' + r.exit_code if r.exit_code else ''})" for r in bad)
    return (
        f"error: {len(bad)} of {len(rows)} benchmarks of {record.gym_job_id} did not complete: {named}\n"
        "    fix: `gymbuild logs only=<bench>` shows why; `gymbuild resubmit` re-queues the failed, "
        "`gymbuild submit` what was not queued (watch=1: and goes on feeding what waits for room)"
    )
