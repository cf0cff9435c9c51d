"""The verbs of a sweep (multirun=1): each combination's submission is a Session of its own, and the
verbs act on them as a batch through the same code as on one submission (pipeline.run_batch,
states.states_of, day_two.requeue), over the base run's one connection (its Link, lent to every
cell). What is a sweep's own (expanding it, its record, which one a verb means) is in sweep/expand.py;
what is here is the batch and its output: each cell's under a heading naming its values.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gymbuild.config import load_config
from gymbuild.day_two import act, find, watch
from gymbuild.day_two.logs import print_logs
from gymbuild.day_two.status import format_statuses, statuses_json
from gymbuild.errors import UserError, printable
from gymbuild.executors import states
from gymbuild.executors.base import executor_for
from gymbuild.request.verb_args import (
    CancelArgs,
    LogsArgs,
    RenderArgs,
    ResolveArgs,
    ResubmitArgs,
    ResultsArgs,
    StatusArgs,
    SubmitArgs,
    args_of,
)
from gymbuild.resources import user_cache_home
from gymbuild.state.records import SubmissionRecord
from gymbuild.state.workspace import Workspace
from gymbuild.submit import pipeline, show
from gymbuild.submit.queue import queued
from gymbuild.submit.session import Session
from gymbuild.sweep.expand import (
    Cell,
    Records,
    SweepRecord,
    blamed,
    cells_of,
    expand,
    expression,
    find_sweep,
    glob_script,
    globs,
    header,
    labels,
    merged,
    parse_globbed,
    path_keys,
    probe_overrides,
    ready_markers,
)

if TYPE_CHECKING:
    from gymbuild.results.table import RunResult
    from gymbuild.submit.session import Session


# --- the cells as sessions -----------------------------------------------------------------------


def cell_session(s: Session, cell: Cell) -> Session:
    """The cell's own Session: the config with the cell's overrides, its own corner of the workspace,
    and the base run's connection (closed by the base run, not the cell)."""
    inv = replace(s.inv, overrides=cell.overrides, multirun=False, sweep=None)
    cs = Session(inv, workspace=Workspace(s.inv.workspace, s.inv.config, cell=cell.key), link=s.link)
    cs.sweep_values = cell.values  # `gymbuild runs` names the combination
    return cs


def _combined(errors: Sequence[tuple[str, UserError]]) -> UserError:
    texts = dict.fromkeys(str(err) for _, err in errors)
    where = ", ".join(label for label, _ in errors)
    return UserError(
        "\n".join(texts) + f"\n    (in the sweep's combination{'s' if len(errors) > 1 else ''}: {where})"
    )


# --- output --------------------------------------------------------------------------------------


def _each(
    s: Session,
    cells: Sequence[Cell],
    act: Callable[[Session], object],
    *,
    ident: str,
    as_json: bool,
    field: str,
) -> None:
    """`act` on each cell's session (sharing the one connection): each cell's output under a heading
    naming its values, or (json=1) one JSON document with each cell's under `field`."""
    docs, failures, said = [], [], io.StringIO()
    for cell, label in zip(cells, labels(cells), strict=True):
        cs = cell_session(s, cell)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(said):
                act(cs)
        except UserError as err:
            failures.append((label, err))
        finally:
            cs.close()
        current = cs.workspace.submission()
        gym_job_id = current.gym_job_id if current else None
        if as_json:
            text = out.getvalue().strip()
            doc = json.loads(text) if text.startswith(("{", "[")) else (text or None)
            docs.append({"label": label, "values": list(cell.values), "gym_job_id": gym_job_id, field: doc})
        else:
            sys.stdout.write(f"== {label}  ({gym_job_id or 'not submitted'})\n{out.getvalue()}")
    _say_once(said)
    if as_json:
        sys.stdout.write(json.dumps({"sweep_id": ident, "cells": docs}, indent=2) + "\n")
    if failures:
        raise _combined(failures)


def _say_once(said: io.StringIO) -> None:
    """What the cells printed on stderr (their warnings are the config's, the same for each), once."""
    for line in dict.fromkeys(said.getvalue().splitlines()):
        print(line, file=sys.stderr)


# --- submit ----------------------------------------------------------------------------------------


def expand_for_submit(
    s: Session, overrides: Sequence[str], ready_given: tuple[str, ...] | None = None, *, quiet: bool = False
) -> list[Cell]:
    """The cells of the overrides; `paths(...)` globs expanded on the submit target in one round trip,
    taking only the paths a ready marker says are complete (`ready_given`, submit's ready=; None:
    the default markers, sweep.ready_markers). What is
    waiting for its marker, and a name no job can carry, is named on stderr, one line each (`quiet`,
    the follower's every poll: only the names refused)."""
    source = str(s.inv.config)
    ready = ready_markers(ready_given)
    patterns = globs(overrides, source)
    found: dict[str, list[str]] = {}
    if patterns:
        probe = load_config(s.inv.config, probe_overrides(overrides, source), secrets_needed=False)
        conn = s.connection(probe.config.compute.hostname, use_config=False)
        result = conn.run(glob_script(patterns, ready))
        if not result.ok:
            raise UserError(
                f"error: {source}: expanding {', '.join(f'paths({p})' for p in patterns)} on {conn.target} "
                f"failed: {result.stderr.strip()}\n    fix: check that the glob names a readable directory"
            )
        globbed = parse_globbed(result.stdout, patterns)
        found = globbed.found
        for line in globbed.said(ready, conn.target, quiet=quiet):
            print(line, file=sys.stderr)
    return expand(overrides, source, found)


def sessions_of(s: Session, cells: Sequence[Cell], overrides: Sequence[str] = ()) -> list[Session]:
    """Each cell's session with its config loaded; every cell's mistakes at once, before anything is
    done. With the sweep's `overrides`, a cell that fails only because of a path its paths() found
    (sweep.blamed) is skipped with one warning, and left out: `cell_of` names the cells kept."""
    found: list[Session | None] = [cell_session(s, cell) for cell in cells]
    names, errors = labels(cells), {i: cs.error for i, cs in enumerate(found) if cs and cs.error}
    for i in blamed(cells, {i: str(e) for i, e in errors.items()}, path_keys(overrides, str(s.inv.config))):
        lines = str(errors.pop(i)).strip().splitlines()  # a ConfigError's first problem, else its last line
        why = next((ln.strip()[2:] for ln in lines if ln.startswith("  - ")), lines[-1].strip())
        said = printable(f"{names[i]}: its config does not load: {why}", lines=False)
        print(f"warning: skipped {said}", file=sys.stderr)
        found[i] = None
    if errors:
        raise _combined([(names[i], err) for i, err in errors.items()])
    sessions = [cs for cs in found if cs is not None]
    hosts = {cs.config.compute.hostname or "" for cs in sessions}
    if len(hosts) > 1:
        raise UserError(
            f"error: {s.inv.config}: the sweep's combinations submit to different hosts "
            f"({', '.join(sorted(hosts))})\n"
            "    fix: sweep compute.*.hostname in separate sweeps: a sweep uses one connection"
        )
    return sessions


def cell_of(cs: Session) -> Cell:
    """The combination a cell's session submits (cell_session's inverse)."""
    return Cell(tuple(cs.inv.overrides), cs.sweep_values)


def _report(
    args: SubmitArgs | ResubmitArgs,
    ident: str,
    cells: Sequence[Cell],
    sessions: Sequence[Session],
    benches: Sequence[list[str] | None],
) -> None:
    """Each cell's submit report under its heading (json=1: one document of manifests); the warnings
    the cells share are said once."""
    docs, failures, said = [], [], io.StringIO()
    queued = sum(len(cs.queued_now) for cs in sessions)
    if not args.json:
        plural = "s" if len(cells) != 1 else ""
        print(f"sweep {ident}: {len(cells)} combination{plural}, {queued} job(s) queued now")
    for cell, label, cs, picked in zip(cells, labels(cells), sessions, benches, strict=True):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(said):
            failed = show.report_submit(cs, args, picked)
        if failed is not None:
            failures.append((label, UserError(failed)))
        gym_job_id = cs.submission().gym_job_id
        if args.json:
            manifest = json.loads(out.getvalue())
            docs.append({"label": label, "values": list(cell.values), "gym_job_id": gym_job_id, **manifest})
        else:
            sys.stdout.write(f"== {label}  ({gym_job_id})\n{out.getvalue()}")
    _say_once(said)
    if args.json:
        sys.stdout.write(json.dumps({"sweep_id": ident, "cells": docs}, indent=2) + "\n")
    if failures:
        raise _combined(failures)


def close_all(sessions: Sequence[Session]) -> None:
    for cs in sessions:
        cs.close()


def submit(s: Session, args: SubmitArgs) -> None:
    """submit multirun=1: every cell's benchmarks that have no job id yet (with new=1: every cell
    afresh), in one pipeline; the sweep record lists the cells and their gym_job_ids."""
    ident, overrides = expression(s, None)  # submit reads no sweep=: the overrides are the sweep
    cells = expand_for_submit(s, overrides, args.ready)
    records = Records(s.workspace)
    if not cells:
        records.save(merged(records.load(ident), ident, args.config, overrides, []))
        if args.json:
            sys.stdout.write(json.dumps({"sweep_id": ident, "cells": []}, indent=2) + "\n")
        else:
            print(f"nothing to submit: the sweep {ident} has no combination yet")
        return
    sessions = sessions_of(s, cells, overrides)
    cells = [cell_of(cs) for cs in sessions]
    try:
        todo = [[b for b in cs.selected() if not queued(cs.settled, b)] for cs in sessions]
        try:
            pipeline.run_batch(sessions, todo, [header(cell, ident) for cell in cells])
        finally:
            records.save(merged(records.load(ident), ident, args.config, overrides, _ids(cells, sessions)))
        _report(args, ident, cells, sessions, [None] * len(cells))
    finally:
        close_all(sessions)


def _ids(cells: Sequence[Cell], sessions: Sequence[Session]) -> list[tuple[Cell, str | None]]:
    found = []
    for cell, cs in zip(cells, sessions, strict=True):
        current = cs.workspace.submission()
        found.append((cell, current.gym_job_id if current else None))
    return found


# --- the other verbs -------------------------------------------------------------------------------


def resolve(s: Session, args: ResolveArgs) -> None:
    ident, overrides = expression(s, None)  # resolve reads no sweep=: the overrides are the sweep
    cells = [cell_of(cs) for cs in sessions_of(s, expand_for_submit(s, overrides), overrides)]
    _each(s, cells, lambda cs: show.print_resolved(cs, args), ident=ident, as_json=args.json, field="config")


def render(s: Session, args: RenderArgs) -> None:
    """The dry run of each combination (its globs expanded on the target): nothing is copied or queued."""
    ident, overrides = expression(s, None)  # render reads no sweep=: the overrides are the sweep
    cells = [cell_of(cs) for cs in sessions_of(s, expand_for_submit(s, overrides), overrides)]

    def dry_run(cs: Session) -> None:
        pipeline.stage_only(cs)
        show.print_dry_run(cs, args)

    _each(s, cells, dry_run, ident=ident, as_json=args.json, field="dry_run")


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
    if args.watch and (total.failed or total.unknown):
        raise UserError(
            f"error: not every benchmark of the sweep {record['sweep_id']} completed: {total.line()}\n"
            "    fix: see the tables above; `gymbuild resubmit ... multirun=1` re-queues what failed"
        )


def cancel(s: Session, args: CancelArgs) -> None:
    record = find_sweep(s, args.sweep)
    cells = _submitted(record)
    _each(
        s, cells, lambda cs: act.cancel(cs, args), ident=record["sweep_id"], as_json=args.json, field="cancel"
    )


def resubmit(s: Session, args: ResubmitArgs) -> None:
    """Re-queue each cell's benchmarks that ended in a retryable state, as `resubmit` does for one
    submission (day_two.requeue): one look, one copy, one sbatch per job re-queued."""
    record = find_sweep(s, args.sweep)
    cells = _submitted(record)
    if args.dry_run:  # each combination's dry run (day_two/act.py): nothing is released or queued
        each = record["sweep_id"]
        _each(s, cells, lambda cs: act.resubmit(cs, args), ident=each, as_json=args.json, field="resubmit")
        return
    sessions = sessions_of(s, cells)
    try:
        mine = [i for i, cs in enumerate(sessions) if cs.workspace.submission() is not None]
        found = [find.find_record(sessions[i], "") for i in mine]
        picked = act.requeue([sessions[i] for i in mine], found, args.only)
        if not any(picked):
            said = (
                f"nothing to resubmit: no benchmark of the sweep {record['sweep_id']} ended in a "
                "retryable state"
            )
            if args.json:
                print(said, file=sys.stderr)
                sys.stdout.write(json.dumps({"sweep_id": record["sweep_id"], "cells": []}, indent=2) + "\n")
            else:
                print(said)
            return
        busy = [(i, p) for i, p in zip(mine, picked, strict=True) if p]
        _report(
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


def results(s: Session, args: ResultsArgs) -> None:
    """One column per combination, labelled by its values; series=1: a row per combination and
    metric, the swept values and the training step as columns (series.py)."""
    from gymbuild.results import table as tables  # late: measured, as in gathered
    from gymbuild.sweep import series  # late: measured, as in gathered

    fmt = args.format or "table"  # one of arguments.FORMATS: format= read it
    pattern = series.step_pattern(args.step)
    record, cells, runs = gathered(s, args.sweep, args.only)
    if args.series:
        rows = series.points([c.values for c in cells], runs, pattern)
        sys.stdout.write(series.render(record["sweep_id"], rows, as_json=args.json, fmt=fmt))
        return
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
