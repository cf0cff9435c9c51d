"""The verbs of a sweep (multirun=1): each combination's submission is a Session of its own, and the
verbs act on them as a batch through the same code as on one submission (pipeline.run_batch,
states.states_of, day_two.requeue), over the base run's one connection (its Link, lent to every
cell). What is a sweep's own (expanding it, its record, which one a verb means) is in sweep/expand.py;
what is here is the batch and its output: each cell's under a heading naming its values.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from gymbuild.config import load_config
from gymbuild.errors import UserError, printable
from gymbuild.request.verb_args import (
    RenderArgs,
    ResolveArgs,
    ResubmitArgs,
    SubmitArgs,
)
from gymbuild.state.workspace import Workspace
from gymbuild.submit import pipeline, show
from gymbuild.submit.queue import queued
from gymbuild.submit.session import Session
from gymbuild.sweep.expand import (
    Cell,
    blamed,
    expand,
    glob_script,
    globs,
    header,
    labels,
    parse_globbed,
    path_keys,
    probe_overrides,
    ready_markers,
)
from gymbuild.sweep.record import Records, expression, merged

if TYPE_CHECKING:
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


def each(
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


def report_cells(
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
        report_cells(args, ident, cells, sessions, [None] * len(cells))
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
    each(s, cells, lambda cs: show.print_resolved(cs, args), ident=ident, as_json=args.json, field="config")


def render(s: Session, args: RenderArgs) -> None:
    """The dry run of each combination (its globs expanded on the target): nothing is copied or queued."""
    ident, overrides = expression(s, None)  # render reads no sweep=: the overrides are the sweep
    cells = [cell_of(cs) for cs in sessions_of(s, expand_for_submit(s, overrides), overrides)]

    def dry_run(cs: Session) -> None:
        pipeline.stage_only(cs)
        show.print_dry_run(cs, args)

    each(s, cells, dry_run, ident=ident, as_json=args.json, field="dry_run")
