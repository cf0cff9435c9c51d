"""A sweep's day two: `status`, `cancel`, `resubmit`, `logs` and `results` over every cell of a
sweep (`multirun=1` or `sweep=ID`), with one look (one squeue and one sacct) for all of them; and
`gathered`, a sweep's scores, which its series, report and export read."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gymbuild.day_two import act, find, watch
from gymbuild.day_two.logs import print_logs
from gymbuild.day_two.status import format_statuses, statuses_json
from gymbuild.errors import UsageError, UserError, printable
from gymbuild.executors import states
from gymbuild.executors.base import executor_for
from gymbuild.request.verb_args import (
    CancelArgs,
    ExportArgs,
    LogsArgs,
    ReportArgs,
    ResubmitArgs,
    ResultsArgs,
    StatusArgs,
    args_of,
)
from gymbuild.resources import user_cache_home
from gymbuild.state.records import SubmissionRecord
from gymbuild.submit.session import Session
from gymbuild.sweep.batch import (
    cell_session,
    close_all,
    each,
    render,
    report_cells,
    resolve,
    sessions_of,
    submit,
)
from gymbuild.sweep.expand import Cell, labels
from gymbuild.sweep.record import SweepRecord, cells_of, find_sweep

if TYPE_CHECKING:
    from gymbuild.results.choose import Choice
    from gymbuild.results.table import RunResult
    from gymbuild.submit.session import Session
    from gymbuild.sweep.series import Point


# --- the cells as sessions -----------------------------------------------------------------------


def _submitted(record: SweepRecord) -> list[Cell]:
    cells = cells_of(record)
    if not cells:
        raise UserError(
            f"error: the sweep {record['sweep_id']} has no combination yet\n"
            "    fix: submit it again once its paths() match something"
        )
    return cells


def records_of(s: Session, cells: Sequence[Cell]) -> list[SubmissionRecord | None]:
    """Each cell's submission record from its workspace corner (None: never submitted); no I/O remote."""
    found: list[SubmissionRecord | None] = []
    for cell in cells:
        cs = cell_session(s, cell)
        submitted = cs.workspace.submission() is not None and cs.workspace.has_outcomes()
        found.append(find.find_record(cs, "", connect=False) if submitted else None)
    return found


def _check_only(only: Sequence[str], records: Sequence[SubmissionRecord | None]) -> None:
    have = {job.benchmark for r in records if r is not None for job in r.benchmarks}
    unknown = [b for b in only if b not in have]
    if unknown:
        raise UserError(
            f"error: only= names benchmark(s) the sweep does not have: {', '.join(unknown)}\n"
            f"    fix: pick from {', '.join(sorted(have))}"
        )


def look_at(
    s: Session, records: Sequence[SubmissionRecord | None], only: Sequence[str]
) -> list[list[states.BenchStatus]]:
    """One look at every job of the sweep, shared jobs' members included (states.py), of the
    benchmarks `only` names (none: every one): one status round trip per executor, however many cells."""
    present = [r for r in records if r is not None]
    if not present:
        return [[] for _ in records]
    found = iter(states.states_of(s.connection(present[0].hostname, use_config=False), present))
    rows = [next(found) if r is not None else [] for r in records]
    return [[r for r in cell if r.benchmark in only] if only else cell for cell in rows]


def _tables(
    cells: Sequence[Cell],
    records: Sequence[SubmissionRecord | None],
    rows: Sequence[list[states.BenchStatus]],
    live: frozenset[str],
) -> str:
    """Every combination's table under its heading, as `status` shows one submission's."""
    out = []
    for label, found, cell_rows in zip(labels(cells), records, rows, strict=True):
        if found is None:
            out.append(f"== {label}  (not submitted)\n")
        else:
            table = format_statuses(found, cell_rows, states.tally(cell_rows, live))
            out.append(f"== {label}  ({found.gym_job_id})\n{table}\n")
    return "".join(out)


def status(s: Session, args: StatusArgs) -> None:
    """Every combination's table under its heading, and the sweep's summary line; one look for all
    of them (watch=1: looks again, as `status watch=1` does, until every job has ended)."""
    record = find_sweep(s, args.sweep)
    cells = _submitted(record)
    records = records_of(s, cells)
    _check_only(args.only, records)
    live = frozenset().union(*(executor_for(r.executor).LIVE for r in records if r is not None))
    rows = look_at(s, records, args.only)
    looks = None
    if args.watch:

        def look() -> list[states.BenchStatus]:
            rows[:] = look_at(s, records, args.only)
            return [row for cell_rows in rows for row in cell_rows]

        _, total, looks = watch.watch(
            look,
            live,
            as_json=args.json,
            draw=lambda _rows, _summary: _tables(cells, records, rows, live),
            what=f"the sweep {record['sweep_id']}",
        )
    total = states.tally([row for cell_rows in rows for row in cell_rows], live)
    if args.json:
        docs = []
        for cell, label, found, cell_rows in zip(cells, labels(cells), records, rows, strict=True):
            summary = states.tally(cell_rows, live)
            doc = json.loads(statuses_json(found, cell_rows, summary)) if found else None
            docs.append(
                {"label": label, "values": list(cell.values), "gym_job_id": found and found.gym_job_id}
                | {"status": doc}
            )
        payload = {"sweep_id": record["sweep_id"], "cells": docs, "summary": dataclasses.asdict(total)}
        sys.stdout.write(json.dumps(payload | ({"looks": looks} if looks else {}), indent=2) + "\n")
    else:
        sys.stdout.write(_tables(cells, records, rows, live))
        watched = f" (watched: {looks} looks)" if looks else ""
        print(f"sweep {record['sweep_id']}: {len(cells)} combinations, {total.line()}{watched}")
    if args.watch and (total.failed or total.unknown or total.waiting):
        raise UserError(
            f"error: not every benchmark of the sweep {record['sweep_id']} completed: {total.line()}\n"
            "    fix: see the tables above; `gymbuild resubmit ... multirun=1` re-queues what failed"
        )


def cancel(s: Session, args: CancelArgs) -> None:
    record = find_sweep(s, args.sweep)
    cells = _submitted(record)
    each(
        s, cells, lambda cs: act.cancel(cs, args), ident=record["sweep_id"], as_json=args.json, field="cancel"
    )


def resubmit(s: Session, args: ResubmitArgs) -> None:
    """Re-queue each cell's benchmarks that ended in a retryable state, as `resubmit` does for one
    submission (day_two.requeue): one look, one copy, one sbatch per job re-queued."""
    record = find_sweep(s, args.sweep)
    cells = _submitted(record)
    if args.dry_run:  # each combination's dry run (day_two/act.py): nothing is released or queued
        ident = record["sweep_id"]
        each(s, cells, lambda cs: act.resubmit(cs, args), ident=ident, as_json=args.json, field="resubmit")
        return
    sessions = sessions_of(s, cells)
    try:
        mine = [i for i, cs in enumerate(sessions) if cs.workspace.submission() is not None]
        found = [find.find_record(sessions[i], "") for i in mine]
        plans = act.replan_runs([sessions[i] for i in mine], found, args.only)
        for one in plans:  # each cell's plan first, as a resubmit of one submission prints it
            act.tell_plan(args, one)
        picked = act.requeue([sessions[i] for i in mine], found, args.only, plans)
        if not any(picked):
            said = (
                f"nothing to resubmit: no benchmark of the sweep {record['sweep_id']} ended in a "
                "retryable state with rows left to score"
            )
            if args.json:
                print(said, file=sys.stderr)
                sys.stdout.write(json.dumps({"sweep_id": record["sweep_id"], "cells": []}, indent=2) + "\n")
            else:
                print(said)
            return
        busy = [(i, p) for i, p in zip(mine, picked, strict=True) if p]
        report_cells(
            args,
            record["sweep_id"],
            [cells[i] for i, _ in busy],
            [sessions[i] for i, _ in busy],
            [p for _, p in busy],
        )
    finally:
        close_all(sessions)


def gathered(
    s: Session, sweep: str | None, only: Sequence[str]
) -> tuple[SweepRecord, list[Cell], list[RunResult]]:
    """The sweep's record (`sweep`, the verb's sweep=), its submitted combinations and their results
    (of the benchmarks `only` names; one status and one read round trip for every combination; what
    is cached is not read again)."""
    from gymbuild.results import read  # late: measured, about 9 ms with the next two (House rules)

    record = find_sweep(s, sweep)
    cells = _submitted(record)
    records = records_of(s, cells)
    found = [r for r in records if r is not None]
    names = [label for label, r in zip(labels(cells), records, strict=True) if r is not None]
    if not found:
        raise UserError(
            f"error: no combination of the sweep {record['sweep_id']} has been submitted yet\n"
            "    fix: submit it first"
        )
    if only:
        _check_only(only, found)
        found = [replace(r, benchmarks=tuple(j for j in r.benchmarks if j.benchmark in only)) for r in found]
    cache = read.Cache(user_cache_home() / "gymbuild" / "results")
    runs = [replace(run, label=name) for run, name in zip(read.gather(s, cache, found), names, strict=True)]
    submitted = [cell for cell, r in zip(cells, records, strict=True) if r is not None]
    return record, submitted, runs


def gated_series(
    s: Session, args: ResultsArgs | ExportArgs | ReportArgs
) -> tuple[SweepRecord, list[Point], Choice | None]:
    """The sweep's series rows (`results series=1`), and, with baseline= and max_drop=, every
    checkpoint gated against the baseline and the one chosen (gated.py): what results, report and
    export show."""
    from gymbuild.sweep import gated, series  # late: measured, as in gathered

    pattern = series.step_pattern(args.step)
    rule = gated.policy_of(args)  # a mistake in the gate's arguments is said before anything is read
    record, cells, runs = gathered(s, args.sweep, args.only)
    rows = series.points([c.values for c in cells], runs, pattern)
    if rule is None or args.baseline is None:
        return record, rows, None
    records = [r for r in records_of(s, cells) if r is not None]
    return record, rows, gated.judge(s, rule, args.baseline, records, runs, rows, args.only)


def results(s: Session, args: ResultsArgs) -> None:
    """One column per combination, labelled by its values; series=1: a row per combination and
    metric, the swept values and the training step as columns (series.py)."""
    from gymbuild.results import table as tables  # late: measured, as in gathered
    from gymbuild.sweep import series  # late: measured, as in gathered

    fmt = args.format or "table"  # one of arguments.FORMATS: format= read it
    if args.series:
        record, rows, choice = gated_series(s, args)
        sys.stdout.write(series.render(record["sweep_id"], rows, as_json=args.json, fmt=fmt, choice=choice))
        if choice is not None and fmt == "csv" and not args.json:  # the CSV stays a table
            print(printable(choice.line(), lines=False), file=sys.stderr)
        return
    if args.baseline is not None or args.max_drop is not None or args.policy is not None:
        raise UsageError(
            "error: baseline= with max_drop= or policy= gates a sweep's checkpoints, shown as a series\n"
            "    fix: add series=1"
        )
    series.step_pattern(args.step)  # a mistake in step= is said even without series=1
    _, _, runs = gathered(s, args.sweep, args.only)
    sys.stdout.write(tables.render(runs, as_json=args.json, fmt=fmt))


def logs(s: Session, args: LogsArgs) -> None:
    """Logs are one submission's: with run=<gym_job_id> they are shown; else the sweep's ids are named."""
    if args.run:
        return print_logs(s, args)
    record = find_sweep(s, args.sweep)
    cells = _submitted(record)
    named = [
        f"  {label}: run={c.get('gym_job_id') or '(not submitted)'}"
        for label, c in zip(labels(cells), record["cells"], strict=True)
    ]
    raise UserError(
        f"error: logs shows one submission's logs, and the sweep {record['sweep_id']} has {len(cells)}:\n"
        + "\n".join(named)
        + "\n    fix: name one: gymbuild logs run=<gym_job_id> only=<benchmark>"
    )


# Each takes the run and its verb's own arguments (request/verb_args.ARGS[name]: tests/cli/test_verb_args.py
# checks each function's second parameter is its verb's class).
VERBS: dict[str, Callable[[Session, Any], None]] = {
    "logs": logs,
    "resolve": resolve,
    "render": render,
    "submit": submit,
    "status": status,
    "cancel": cancel,
    "resubmit": resubmit,
    "results": results,
}


def verb_action(name: str, s: Session) -> Callable[[], None]:
    """The action of verb `name` on the sweep of this run (cli/graph.py's hook)."""
    return lambda: VERBS[name](s, args_of(name, s.inv))
