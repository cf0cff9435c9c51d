"""Sweeps (multirun=1): one config, Hydra's sweep syntax in the overrides, one submission per combination.

`key=a,b,c`, `range(...)`, `choice(...)` and several such keys (their product) are read by Hydra's own
override parser and expanded the way its BasicSweeper expands them for `hydra -m`; gymbuild adds one
sweep function, `paths(GLOB)`: the paths the glob matches on the submit target (where checkpoints
live), found in one round trip over the run's connection, in natural order (iter_200 before
iter_1000). Each combination (a "cell") is a submission of its own, with its own gym_job_id, run
directory and workspace corner under the config's (`<config corner>/cells/<key>`), keyed by its
overrides, so running the same sweep again, or the sweep with one value more, queues only the cells
and benchmarks that have no job id yet. The sweep record (`<config corner>/sweeps/<id>.json`) lists
the combinations and their gym_job_ids; status, results, cancel and resubmit read it.

The cost rules of one submit hold for the whole sweep: one connection, one copy (rsync) of every run
directory that needs one (they sit side by side under job.output_path), one sbatch per job queued.
The expansion is pure; the connection and the workspace are used only by the verbs below.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gymbuild.errors import ConfigError, Problem, UserError
from gymbuild.invocation import Invocation
from gymbuild.shell import quote
from gymbuild.steps import show, stage, sync
from gymbuild.steps.queue import queue_many, queued
from gymbuild.steps.record import record as write_record
from gymbuild.workspace import Workspace, atomic_write, digest

if TYPE_CHECKING:
    from gymbuild.session import Session

PATHS = "paths"
SYNTAX_FIX = (
    "a sweep value is a,b,c  range(start,stop[,step])  choice(a,b)  or paths(GLOB); "
    "quote the override for the shell: 'key=paths(/lustre/ckpts/iter_*)'"
)


# --- the expansion (pure) ------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One combination: every override it is submitted with, and the swept ones among them."""

    overrides: tuple[str, ...]
    values: tuple[str, ...]  # the swept `key=value`s, in the order of the command line

    @property
    def key(self) -> str:
        """The cell's name in the workspace: its overrides, so one more value leaves the rest alone."""
        return digest(list(self.overrides))[:12]


def _parser(found: Mapping[str, Sequence[str]] | None, seen: list[str] | None = None) -> Any:
    """Hydra's override parser with its functions, and `paths(GLOB)`: the paths `found` for the glob
    (while only looking for globs, `seen` collects them and each stands for itself)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser, create_functions
    from hydra.core.override_parser.types import ChoiceSweep

    functions = create_functions()

    def paths(pattern: str) -> ChoiceSweep:
        if seen is not None:
            seen.append(pattern)
            return ChoiceSweep(list=[pattern])
        return ChoiceSweep(list=list((found or {}).get(pattern, ())))

    # Hydra checks each argument against the annotations, which must be types, not strings.
    paths.__annotations__ = {"pattern": str, "return": ChoiceSweep}
    functions.register(name=PATHS, func=paths)
    return OverridesParser(functions)


def _key_of(text: str) -> str:
    return text.split("=", 1)[0].lstrip("+~")


def _parse(overrides: Sequence[str], source: str, parser: Any) -> list[Any]:
    """Each override as Hydra reads it; a mistake is one ConfigError naming every bad override."""
    from hydra.errors import HydraException

    parsed, problems = [], []
    for text in overrides:
        try:
            parsed.extend(parser.parse_overrides([text]))
        except HydraException as err:
            lines = [line for line in str(err).splitlines() if line.strip() and "hydra.cc" not in line]
            detail = " ".join(lines[1:]) or lines[0] if lines else "Hydra could not read it"
            problems.append(
                Problem(_key_of(text), f"override {text!r} is not a sweep Hydra reads: {detail}", SYNTAX_FIX)
            )
    if problems:
        raise ConfigError(source, problems)
    return parsed


def globs(overrides: Sequence[str], source: str) -> list[str]:
    """The globs of the overrides' `paths(...)` values, in order, each once."""
    seen: list[str] = []
    _parse(overrides, source, _parser(None, seen))
    return list(dict.fromkeys(seen))


def expand(
    overrides: Sequence[str], source: str, found: Mapping[str, Sequence[str]] | None = None
) -> list[Cell]:
    """The combinations, as `hydra -m` makes them (BasicSweeper.split_arguments): each sweep's values,
    a later override of a key replacing an earlier one, the product in command-line order. An override
    that sweeps nothing is kept as typed (Hydra would write `~key` back as `~key=null`)."""
    problems: list[Problem] = []
    per_key: dict[str, tuple[bool, list[str]]] = {}
    for override in _parse(overrides, source, _parser(found or {})):
        key = override.get_key_element()
        if not override.is_sweep_override():
            per_key[key] = (False, [override.input_line])
            continue
        if not override.is_discrete_sweep():
            problems.append(
                Problem(
                    override.key_or_group,
                    f"override {override.input_line!r} is a continuous interval: it has no values to submit",
                    "sweep discrete values: range(0,1,0.25) or 0,0.5,1",
                )
            )
            continue
        try:
            values = [f"{key}={value}" for value in override.sweep_string_iterator()]
        except Exception as err:  # glob() (config group options) needs Hydra's config loader
            problems.append(
                Problem(
                    override.key_or_group,
                    f"override {override.input_line!r} cannot be expanded: {err}",
                    SYNTAX_FIX,
                )
            )
            continue
        per_key[key] = (True, values)
    if problems:
        raise ConfigError(source, problems)
    cells = []
    for combo in itertools.product(*(values for _, values in per_key.values())):
        swept = tuple(text for (sweeps, _), text in zip(per_key.values(), combo, strict=True) if sweeps)
        cells.append(Cell(tuple(combo), swept))
    return list({cell.key: cell for cell in cells}.values())


def probe_overrides(overrides: Sequence[str], source: str) -> list[str]:
    """The overrides with each sweep at its first value (a glob at itself): a config that tells
    where the sweep goes (its compute host) before its globs are expanded there."""
    patterns = globs(overrides, source)
    cells = expand(overrides, source, {p: [p] for p in patterns})
    return list(cells[0].overrides) if cells else list(overrides)


def labels(cells: Sequence[Cell]) -> list[str]:
    """Each cell's name in tables: its swept values, keys shortened to their last part where that is
    still unambiguous (`model=/ckpts/iter_2 temperature=0.5`)."""
    keys = list(dict.fromkeys(_key_of(v) for cell in cells for v in cell.values))
    last = [k.rsplit(".", 1)[-1] for k in keys]
    short = {k: (s if last.count(s) == 1 else k) for k, s in zip(keys, last, strict=True)}
    out = []
    for cell in cells:
        parts = [f"{short[_key_of(v)]}={_unescaped(v.split('=', 1)[1])}" for v in cell.values]
        out.append(" ".join(parts) or "(no swept key)")
    return out


def _unescaped(value: str) -> str:
    """A value as the user reads it: without the backslashes Hydra writes before `:`, `,`, spaces..."""
    return re.sub(r"\\(.)", r"\1", value)


def natural(path: str) -> list[Any]:
    """Sort key: digits compared as numbers, so iter_200 comes before iter_1000."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def glob_script(patterns: Sequence[str]) -> str:
    """bash printing `<index>\\0<path>\\0` for every existing path each glob matches: one round trip
    for every glob. Word splitting is off (IFS empty), so a pattern with spaces stays one pattern;
    `~/` is the remote home."""
    lines = ["(", "shopt -s nullglob; IFS="]
    for index, pattern in enumerate(patterns):
        value = f'"$HOME"/{quote(pattern[2:])}' if pattern.startswith("~/") else quote(pattern)
        lines.append(
            f'__gym_g={value}; for __gym_f in $__gym_g; do [ -e "$__gym_f" ] && '
            f"printf '%s\\0%s\\0' {index} \"$__gym_f\"; done"
        )
    lines.append("true )")
    return "\n".join(lines)


def parse_globbed(stdout: str, patterns: Sequence[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {p: [] for p in patterns}
    fields = stdout.split("\0")
    for index, path in zip(fields[0::2], fields[1::2], strict=False):
        if index.isdigit() and int(index) < len(patterns):
            found[patterns[int(index)]].append(path)
    return {p: sorted(set(paths), key=natural) for p, paths in found.items()}


# --- the sweep record (the workspace) ------------------------------------------------------------


def sweep_id(config: Path, overrides: Sequence[str]) -> str:
    """The sweep's id: its config and its overrides as typed (the cron line's `paths(...)` is the same
    sweep every time, whatever it matches)."""
    return f"sweep-{digest(str(config.resolve()), list(overrides))[:10]}"


class Records:
    """The config's sweeps: `<config corner>/sweeps/<id>.json`, and `latest` naming the last submitted."""

    def __init__(self, workspace: Workspace) -> None:
        self.dir = workspace.config_dir / "sweeps"

    def load(self, ident: str) -> dict[str, Any] | None:
        try:
            return dict(json.loads((self.dir / f"{ident}.json").read_text()))
        except (FileNotFoundError, ValueError):
            return None

    def latest(self) -> str | None:
        try:
            return (self.dir / "latest").read_text().strip() or None
        except FileNotFoundError:
            return None

    def known(self) -> list[str]:
        return sorted(p.stem for p in self.dir.glob("sweep-*.json"))

    def save(self, record: dict[str, Any]) -> None:
        atomic_write(self.dir / f"{record['sweep_id']}.json", json.dumps(record, indent=2) + "\n")
        atomic_write(self.dir / "latest", record["sweep_id"] + "\n")


def merged(
    earlier: dict[str, Any] | None,
    ident: str,
    config: Path,
    overrides: Sequence[str],
    cells: Sequence[tuple[Cell, str | None]],
) -> dict[str, Any]:
    """The record after this run: its cells in the order of the expansion, with their current
    gym_job_ids, then any earlier cell it no longer has (a checkpoint since deleted keeps its row)."""
    before = {c["key"]: c for c in (earlier or {}).get("cells", [])}
    entries: dict[str, dict[str, Any]] = {}
    for cell, gym_job_id in cells:
        entries[cell.key] = {
            "key": cell.key,
            "overrides": list(cell.overrides),
            "values": list(cell.values),
            "gym_job_id": gym_job_id or before.get(cell.key, {}).get("gym_job_id"),
        }
    entries.update({key: entry for key, entry in before.items() if key not in entries})
    return {
        "sweep_id": ident,
        "config": str(config),
        "overrides": list(overrides),
        "cells": list(entries.values()),
    }


def _cells_of(record: Mapping[str, Any]) -> list[Cell]:
    return [Cell(tuple(c["overrides"]), tuple(c["values"])) for c in record.get("cells", [])]


# --- the cells as sessions -----------------------------------------------------------------------


def cell_session(s: Session, cell: Cell) -> Session:
    """The cell's own Session: the config with the cell's overrides, its own corner of the workspace."""
    from gymbuild.session import Session

    inv = replace(s.inv, overrides=cell.overrides, multirun=False, sweep=None)
    cs = Session(inv)
    cs.workspace = Workspace(s.inv.workspace, s.inv.config, cell=cell.key)
    return cs


class Shared:
    """The run's one connection, handed from cell to cell; the base session closes it at the end."""

    def __init__(self, s: Session) -> None:
        self.s = s
        self.conn: Any = None

    def lend(self, cs: Session) -> None:
        if self.conn is not None:
            cs._connection = self.conn

    def adopt(self, cs: Session) -> None:
        """The connection `cs` opened becomes the run's."""
        if self.conn is None and cs._connection is not None:
            self.conn = self.s._connection = cs._connection

    def take_back(self, cs: Session) -> None:
        if cs._connection is not None:
            self.conn = cs._connection
            self.s._connection = self.conn  # closed by the verb's teardown
        cs._connection = None
        cs.close()

    def open(self, hostname: str | None) -> Any:
        if self.conn is None:
            self.conn = self.s.connection(hostname, use_config=False)
        return self.conn


def _combined(errors: Sequence[tuple[str, UserError]]) -> UserError:
    texts = dict.fromkeys(str(err) for _, err in errors)
    where = ", ".join(label for label, _ in errors)
    return UserError(
        "\n".join(texts) + f"\n    (in the sweep's combination{'s' if len(errors) > 1 else ''}: {where})"
    )


# --- which sweep ---------------------------------------------------------------------------------


def _source(inv: Invocation) -> str:
    return str(inv.config)


def _expression(s: Session) -> tuple[str, list[str]]:
    """The sweep this run submits: its id and overrides (sweep=ID: the ones it was submitted with)."""
    inv = s.inv
    if inv.sweep and not inv.overrides:
        record = _record_by_id(s, inv.sweep)
        return inv.sweep, list(record["overrides"])
    return sweep_id(inv.config, inv.overrides), list(inv.overrides)


def _record_by_id(s: Session, ident: str) -> dict[str, Any]:
    records = Records(s.workspace)
    record = records.load(ident)
    if record is None:
        known = ", ".join(records.known()) or "none yet"
        raise UserError(
            f"error: {s.inv.config} has no sweep {ident} in {s.inv.workspace} (its sweeps: {known})\n"
            "    fix: name one of those, or submit the sweep first with multirun=1"
        )
    return record


def find_sweep(s: Session) -> dict[str, Any]:
    """The sweep a day-two verb acts on: sweep=ID; else the one of these overrides (multirun=1 and the
    command line it was submitted with); else, with no overrides, the config's latest."""
    inv = s.inv
    records = Records(s.workspace)
    if inv.sweep:
        return _record_by_id(s, inv.sweep)
    if inv.overrides:
        ident = sweep_id(inv.config, inv.overrides)
        record = records.load(ident)
        if record is None:
            raise UserError(
                f"error: {inv.config}: no sweep was submitted with the overrides "
                f"{' '.join(inv.overrides)}\n"
                "    fix: give the overrides exactly as submitted, drop them for the config's latest "
                f"sweep, or name one with sweep=ID (known: {', '.join(records.known()) or 'none yet'})"
            )
        return record
    latest = records.latest()
    if latest is None:
        raise UserError(
            f"error: {inv.config} has no sweep in {inv.workspace} yet\n"
            "    fix: submit one: gymbuild submit config=FILE multirun=1 'key=a,b'"
        )
    return _record_by_id(s, latest)


# --- output --------------------------------------------------------------------------------------


def _each(
    s: Session, cells: Sequence[Cell], act: Callable[[Session], Any], *, ident: str, as_json: bool, field: str
) -> list[Any]:
    """`act` on each cell's session (sharing the one connection): each cell's output under a heading
    naming its values, or (json=1) one JSON document with each cell's under `field`."""
    shared = Shared(s)
    docs, results, failures, said = [], [], [], io.StringIO()
    for cell, label in zip(cells, labels(cells), strict=True):
        cs = cell_session(s, cell)
        shared.lend(cs)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(said):
                results.append(act(cs))
        except UserError as err:
            failures.append((label, err))
            results.append(None)
        finally:
            shared.take_back(cs)
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
    return results


def _say_once(said: io.StringIO) -> None:
    """What the cells printed on stderr (their warnings are the config's, the same for each), once."""
    for line in dict.fromkeys(said.getvalue().splitlines()):
        print(line, file=sys.stderr)


# --- submit ----------------------------------------------------------------------------------------


def _expand_for_submit(s: Session, overrides: Sequence[str], shared: Shared) -> list[Cell]:
    """The cells of the overrides; `paths(...)` globs expanded on the submit target in one round trip."""
    from gymbuild.config import load_config

    source = _source(s.inv)
    patterns = globs(overrides, source)
    found: dict[str, list[str]] = {}
    if patterns:
        probe = load_config(s.inv.config, probe_overrides(overrides, source))
        conn = shared.open(probe.config.compute.hostname)
        result = conn.run(glob_script(patterns))
        if not result.ok:
            raise UserError(
                f"error: {source}: expanding {', '.join(f'paths({p})' for p in patterns)} on {conn.target} "
                f"failed: {result.stderr.strip()}\n    fix: check that the glob names a readable directory"
            )
        found = parse_globbed(result.stdout, patterns)
        for pattern, paths in found.items():
            if not paths:
                print(f"note: paths({pattern}) matches nothing on {conn.target} yet", file=sys.stderr)
    return expand(overrides, source, found)


def _sessions(s: Session, cells: Sequence[Cell]) -> list[Session]:
    """Each cell's session with its config loaded; every cell's mistakes at once, before anything is done."""
    sessions = [cell_session(s, cell) for cell in cells]
    errors = [(label, cs.error) for cs, label in zip(sessions, labels(cells), strict=True) if cs.error]
    if errors:
        raise _combined([(label, err) for label, err in errors if err is not None])
    hosts = {cs.config.compute.hostname or "" for cs in sessions}
    if len(hosts) > 1:
        raise UserError(
            f"error: {s.inv.config}: the sweep's combinations submit to different hosts "
            f"({', '.join(sorted(hosts))})\n"
            "    fix: sweep compute.*.hostname in separate sweeps: a sweep uses one connection"
        )
    return sessions


def _header(cell: Cell, ident: str) -> str:
    values = "\n".join(f"#   {v}" for v in cell.values) or "#   (no swept key)"
    return f"# sweep {ident}, the combination:\n{values}\n"


def run_pipeline(
    s: Session,
    ident: str,
    cells: Sequence[Cell],
    sessions: Sequence[Session],
    todo: Sequence[list[str]],
    shared: Shared,
) -> None:
    """Stage, sync, queue and record every cell with something to queue: the mounts checked once, one
    copy per output directory (one, unless job.output_path is swept), one sbatch per job."""
    from gymbuild.executors import rundir
    from gymbuild.jobs import RESOLVED_CONFIG_NAME

    busy = [i for i, benches in enumerate(todo) if benches]
    if not busy:
        return
    host = sessions[busy[0]].config.compute.hostname
    conn = shared.open(host)
    for i in busy:
        sessions[i]._connection = conn
    for i in busy:
        cs = sessions[i]
        stage.stage_all(cs)
    to_sync = [i for i in busy if not sync.synced(sessions[i])]
    mounts: dict[str, list[str]] = {}
    for i in to_sync:
        if sessions[i].executor.CHECKS_MOUNTS:
            for path, owners in rundir.mount_sources(sessions[i].config).items():
                mounts.setdefault(path, list(dict.fromkeys([*mounts.get(path, []), *owners])))
    rundir.check_mounts(conn, mounts, str(s.inv.config))
    by_parent: dict[str, list[int]] = {}
    for i in to_sync:
        cs = sessions[i]
        sync.prepare_sync(cs, check_mounts=False)
        staged = cs.workspace.stage / RESOLVED_CONFIG_NAME
        text, header = staged.read_text(), _header(cells[i], ident)
        if not text.startswith(header):  # written afresh by this sync, or headed by an earlier one
            staged.write_text(header + text)
        by_parent.setdefault(str(Path(cs.submission().run_dir).parent), []).append(i)
    for parent, group in by_parent.items():
        outbox = s.workspace.config_dir / "outbox"
        shutil.rmtree(outbox, ignore_errors=True)
        names = [
            _link_tree(sessions[i].workspace.stage, outbox / sessions[i].submission().gym_job_id)
            for i in group
        ]
        s.progress.show(f"copying {len(names)} run directories to {conn.target}:{parent}")
        rundir.sync(conn, str(outbox), parent, names)
        s.progress.done(keep=False)
        shutil.rmtree(outbox, ignore_errors=True)
        for i in group:
            sync.synced_now(sessions[i])
    for i in busy:
        try:
            queue_many(sessions[i], todo[i])
        finally:
            if sessions[i].queued_now:
                write_record(sessions[i])


def _link_tree(source: Path, dest: Path) -> str:
    """`dest` a copy of the staged tree made of hard links (no file is copied twice); its name."""
    for root, _dirs, files in os.walk(source):
        target = dest / Path(root).relative_to(source)
        target.mkdir(parents=True, exist_ok=True)
        shutil.copymode(root, target)
        for name in files:
            os.link(os.path.join(root, name), target / name)
    return dest.name


def _report(
    s: Session,
    ident: str,
    cells: Sequence[Cell],
    sessions: Sequence[Session],
    benches: Sequence[list[str] | None],
) -> None:
    """Each cell's submit report under its heading (json=1: one document of manifests); the warnings
    the cells share are said once."""
    docs, failures, said = [], [], io.StringIO()
    queued = sum(len(cs.queued_now) for cs in sessions)
    if not s.inv.json:
        plural = "s" if len(cells) != 1 else ""
        print(f"sweep {ident}: {len(cells)} combination{plural}, {queued} job(s) queued now")
    for cell, label, cs, picked in zip(cells, labels(cells), sessions, benches, strict=True):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(said):
            failed = show.report_submit(cs, picked)
        if failed is not None:
            failures.append((label, UserError(failed)))
        gym_job_id = cs.submission().gym_job_id
        if s.inv.json:
            manifest = json.loads(out.getvalue())
            docs.append({"label": label, "values": list(cell.values), "gym_job_id": gym_job_id, **manifest})
        else:
            sys.stdout.write(f"== {label}  ({gym_job_id})\n{out.getvalue()}")
    _say_once(said)
    if s.inv.json:
        sys.stdout.write(json.dumps({"sweep_id": ident, "cells": docs}, indent=2) + "\n")
    if failures:
        raise _combined(failures)


def _close_all(sessions: Sequence[Session], shared: Shared) -> None:
    for cs in sessions:
        shared.take_back(cs)


def submit(s: Session) -> None:
    """submit multirun=1: every cell's benchmarks that have no job id yet (with new=1: every cell
    afresh); the sweep record lists the cells and their gym_job_ids."""
    ident, overrides = _expression(s)
    shared = Shared(s)
    cells = _expand_for_submit(s, overrides, shared)
    records = Records(s.workspace)
    if not cells:
        records.save(merged(records.load(ident), ident, s.inv.config, overrides, []))
        if s.inv.json:
            sys.stdout.write(json.dumps({"sweep_id": ident, "cells": []}, indent=2) + "\n")
        else:
            print(f"nothing to submit: the sweep {ident} has no combination yet")
        return
    sessions = _sessions(s, cells)
    try:
        todo = [[b for b in cs.selected() if not queued(cs, b)] for cs in sessions]
        try:
            run_pipeline(s, ident, cells, sessions, todo, shared)
        finally:
            records.save(merged(records.load(ident), ident, s.inv.config, overrides, _ids(cells, sessions)))
        _report(s, ident, cells, sessions, [None] * len(cells))
    finally:
        _close_all(sessions, shared)


def _ids(cells: Sequence[Cell], sessions: Sequence[Session]) -> list[tuple[Cell, str | None]]:
    found = []
    for cell, cs in zip(cells, sessions, strict=True):
        current = cs.workspace.submission()
        found.append((cell, current.gym_job_id if current else None))
    return found


# --- the other verbs -------------------------------------------------------------------------------


def _day_two() -> Any:
    from gymbuild import day_two

    return day_two


def resolve(s: Session) -> None:
    ident, overrides = _expression(s)
    cells = _expand_for_submit(s, overrides, Shared(s))
    _sessions(s, cells)
    _each(s, cells, show.print_resolved, ident=ident, as_json=s.inv.json, field="config")


def render(s: Session) -> None:
    """The dry run of each combination (its globs expanded on the target): nothing is copied or queued."""
    ident, overrides = _expression(s)
    cells = _expand_for_submit(s, overrides, Shared(s))
    _sessions(s, cells)

    def dry_run(cs: Session) -> None:
        stage.stage_all(cs)
        show.print_dry_run(cs)

    _each(s, cells, dry_run, ident=ident, as_json=s.inv.json, field="dry_run")


def _submitted(s: Session, record: Mapping[str, Any]) -> list[Cell]:
    cells = _cells_of(record)
    if not cells:
        raise UserError(
            f"error: the sweep {record['sweep_id']} has no combination yet\n"
            "    fix: submit it again once its paths() match something"
        )
    return cells


def _records(s: Session, cells: Sequence[Cell]) -> list[Any]:
    """Each cell's submission record from its workspace corner (None: never submitted); no I/O remote."""
    found = []
    for cell in cells:
        cs = cell_session(s, cell)
        submitted = cs.workspace.submission() is not None and cs.workspace.has_outcomes()
        found.append(_day_two().find_record(cs, "", connect=False) if submitted else None)
    return found


def _check_only(s: Session, records: Sequence[Any]) -> None:
    have = {job.benchmark for r in records if r is not None for job in r.benchmarks}
    unknown = [b for b in s.inv.only if b not in have]
    if unknown:
        raise UserError(
            f"error: only= names benchmark(s) the sweep does not have: {', '.join(unknown)}\n"
            f"    fix: pick from {', '.join(sorted(have))}"
        )


def _look(s: Session, records: Sequence[Any]) -> list[list[Any]]:
    """One look at every job of the sweep, shared jobs' members included (states.py): one status
    round trip per executor, however many cells."""
    from gymbuild.states import states_of

    present = [r for r in records if r is not None]
    if not present:
        return [[] for _ in records]
    found = iter(states_of(s.connection(present[0].hostname, use_config=False), present))
    rows = [next(found) if r is not None else [] for r in records]
    return [[r for r in cell if r.benchmark in s.inv.only] if s.inv.only else cell for cell in rows]


def status(s: Session) -> None:
    """Every combination's table under its heading, and the sweep's summary line; one look for all
    of them (watch=1: looks again, as `status watch=1` does, until every job has ended)."""
    import dataclasses

    from gymbuild import states, watch
    from gymbuild.executors.base import executor_for

    record = find_sweep(s)
    cells = _submitted(s, record)
    records = _records(s, cells)
    _check_only(s, records)
    lives = {r.executor: executor_for(r.executor).LIVE for r in records if r is not None}
    live = frozenset().union(*lives.values())
    looks = 0
    for wait in watch.intervals() if s.inv.watch else iter([0.0]):
        rows = _look(s, records)
        looks += 1
        total = states.tally([row for cell_rows in rows for row in cell_rows], live)
        if not s.inv.watch or total.ended:
            break
        s.progress.show(f"sweep {record['sweep_id']}: {total.line()}")
        time.sleep(wait)
    s.progress.done(keep=False)
    shown = looks if s.inv.watch else None
    docs = []
    for cell, label, found, cell_rows in zip(cells, labels(cells), records, rows, strict=True):
        summary = states.tally(cell_rows, live)
        if s.inv.json:
            doc = json.loads(states.statuses_json(found, cell_rows, summary)) if found else None
            docs.append(
                {"label": label, "values": list(cell.values), "gym_job_id": found and found.gym_job_id}
                | {"status": doc}
            )
        elif found is None:
            sys.stdout.write(f"== {label}  (not submitted)\n")
        else:
            sys.stdout.write(f"== {label}  ({found.gym_job_id})\n")
            sys.stdout.write(states.format_statuses(found, cell_rows, summary) + "\n")
    if s.inv.json:
        payload = {"sweep_id": record["sweep_id"], "cells": docs, "summary": dataclasses.asdict(total)}
        sys.stdout.write(json.dumps(payload | ({"looks": shown} if shown else {}), indent=2) + "\n")
    else:
        watched = f" (watched: {shown} looks)" if shown else ""
        print(f"sweep {record['sweep_id']}: {len(cells)} combinations, {total.line()}{watched}")
    if s.inv.watch and (total.failed or total.unknown):
        raise UserError(
            f"error: not every benchmark of the sweep {record['sweep_id']} completed: {total.line()}\n"
            "    fix: see the tables above; `gymbuild resubmit ... multirun=1` re-queues what failed"
        )


def cancel(s: Session) -> None:
    record = find_sweep(s)
    _each(s, _submitted(s, record), _day_two().cancel, ident=record["sweep_id"], as_json=False, field="")


def resubmit(s: Session) -> None:
    """Re-queue each cell's benchmarks that ended in a retryable state, in one pipeline: one copy,
    one sbatch per job re-queued."""
    from gymbuild import day_two
    from gymbuild.executors.base import executor_for

    record = find_sweep(s)
    cells = _submitted(s, record)
    sessions = _sessions(s, cells)
    shared = Shared(s)
    try:
        picked_all: list[list[str]] = []
        for cs in sessions:
            if cs.workspace.submission() is None:
                picked_all.append([])
                continue
            shared.lend(cs)
            found = _day_two().find_record(cs, "")  # opens the connection, unless lent one
            shared.adopt(cs)
            rows = day_two.statuses(shared.conn, found)
            executor = executor_for(found.executor)
            picked = day_two.to_resubmit(rows, s.inv.only, executor.RETRYABLE)
            states = {r.benchmark: r.state for r in rows}
            for bench in picked:
                cs.workspace.release(bench, states[bench])
            picked_all.append(picked)
        if not any(picked_all):
            print(
                f"nothing to resubmit: no benchmark of the sweep {record['sweep_id']} ended in a "
                "retryable state"
            )
            return
        busy = [i for i, p in enumerate(picked_all) if p]
        run_pipeline(s, record["sweep_id"], cells, sessions, picked_all, shared)
        _report(
            s,
            record["sweep_id"],
            [cells[i] for i in busy],
            [sessions[i] for i in busy],
            [picked_all[i] for i in busy],
        )
    finally:
        _close_all(sessions, shared)


def results(s: Session) -> None:
    """One column per combination, labelled by its values; one status and one read round trip."""
    from gymbuild import results as tables
    from gymbuild import results_read
    from gymbuild.resources import user_cache_home

    fmt = s.inv.format or "table"
    if fmt not in tables.FORMATS:
        raise UserError(
            f"error: format={fmt} is not a format results prints\n"
            f"    fix: use one of {', '.join(tables.FORMATS)}"
        )
    record = find_sweep(s)
    cells = _submitted(s, record)
    records = _records(s, cells)
    found = [r for r in records if r is not None]
    names = [label for label, r in zip(labels(cells), records, strict=True) if r is not None]
    if not found:
        raise UserError(
            f"error: no combination of the sweep {record['sweep_id']} has been submitted yet\n"
            "    fix: submit it first"
        )
    if s.inv.only:
        _check_only(s, found)
        found = [
            replace(r, benchmarks=tuple(j for j in r.benchmarks if j.benchmark in s.inv.only)) for r in found
        ]
    cache = results_read.Cache(user_cache_home() / "gymbuild" / "results")
    runs = [
        replace(run, label=name)
        for run, name in zip(results_read.gather(s, cache, found), names, strict=True)
    ]
    sys.stdout.write(tables.render(runs, as_json=s.inv.json, fmt=fmt))


def logs(s: Session) -> None:
    """Logs are one submission's: with run=<gym_job_id> they are shown; else the sweep's ids are named."""
    if s.inv.run:
        return _day_two().print_logs(s)
    record = find_sweep(s)
    cells = _submitted(s, record)
    named = [
        f"  {label}: run={c.get('gym_job_id') or '(not submitted)'}"
        for label, c in zip(labels(cells), record["cells"], strict=True)
    ]
    raise UserError(
        f"error: logs shows one submission's logs, and the sweep {record['sweep_id']} has {len(cells)}:\n"
        + "\n".join(named)
        + "\n    fix: name one: gymbuild logs run=<gym_job_id> only=<benchmark>"
    )


VERBS: dict[str, Callable[[Session], None]] = {
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
    """The action of verb `name` on the sweep of this run (tasks.py's hook)."""
    return lambda: VERBS[name](s)
