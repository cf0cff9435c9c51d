"""A sweep's record: its id (the config and the overrides that made it), its cells and the
submission each became, kept under the config's workspace and found again by the day-two verbs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, TypeGuard

from gymbuild.errors import UserError
from gymbuild.state.workspace import Workspace, atomic_write, digest
from gymbuild.sweep.expand import Cell

if TYPE_CHECKING:
    from gymbuild.submit.session import Session


def sweep_id(config: Path, overrides: Sequence[str]) -> str:
    """The sweep's id: its config and its overrides as typed (the cron line's `paths(...)` is the same
    sweep every time, whatever it matches)."""
    return f"sweep-{digest(str(config.resolve()), list(overrides))[:10]}"


class SweepCell(TypedDict):
    """One combination in a sweep's record: its overrides, its swept values, its submission."""

    key: str
    overrides: list[str]
    values: list[str]
    gym_job_id: str | None


class SweepRecord(TypedDict):
    """A sweep's record (`<config corner>/sweeps/<id>.json`), as `merged` writes it."""

    sweep_id: str
    config: str
    overrides: list[str]
    cells: list[SweepCell]


def _is_sweep_record(found: object) -> TypeGuard[SweepRecord]:
    """Whether a parsed file has a record's shape (a damaged one reads as no record)."""
    if not isinstance(found, dict):
        return False
    lists = (found.get("overrides"), found.get("cells"))
    return isinstance(found.get("sweep_id"), str) and all(isinstance(v, list) for v in lists)


class Records:
    """The config's sweeps: `<config corner>/sweeps/<id>.json`, and `latest` naming the last submitted."""

    def __init__(self, workspace: Workspace) -> None:
        self.dir = workspace.config_dir / "sweeps"

    def load(self, ident: str) -> SweepRecord | None:
        """The record `merged` wrote (gymbuild's own file, read as written), None when there is none."""
        try:
            found = json.loads((self.dir / f"{ident}.json").read_text())
        except (FileNotFoundError, ValueError):
            return None
        return found if _is_sweep_record(found) else None

    def latest(self) -> str | None:
        try:
            return (self.dir / "latest").read_text().strip() or None
        except FileNotFoundError:
            return None

    def known(self) -> list[str]:
        return sorted(p.stem for p in self.dir.glob("sweep-*.json"))

    def save(self, record: SweepRecord) -> None:
        atomic_write(self.dir / f"{record['sweep_id']}.json", json.dumps(record, indent=2) + "\n")
        atomic_write(self.dir / "latest", record["sweep_id"] + "\n")


def merged(
    earlier: SweepRecord | None,
    ident: str,
    config: Path,
    overrides: Sequence[str],
    cells: Sequence[tuple[Cell, str | None]],
) -> SweepRecord:
    """The record after this run: its cells in the order of the expansion, with their current
    gym_job_ids, then any earlier cell it no longer has (a checkpoint since deleted keeps its row)."""
    before = {c["key"]: c for c in (earlier["cells"] if earlier else [])}
    entries: dict[str, SweepCell] = {}
    for cell, gym_job_id in cells:
        old = before.get(cell.key)
        entries[cell.key] = {
            "key": cell.key,
            "overrides": list(cell.overrides),
            "values": list(cell.values),
            "gym_job_id": gym_job_id or (old.get("gym_job_id") if old else None),
        }
    entries.update({key: entry for key, entry in before.items() if key not in entries})
    return {
        "sweep_id": ident,
        "config": str(config),
        "overrides": list(overrides),
        "cells": list(entries.values()),
    }


def cells_of(record: SweepRecord) -> list[Cell]:
    return [Cell(tuple(c["overrides"]), tuple(c["values"])) for c in record.get("cells", [])]


# --- which sweep ---------------------------------------------------------------------------------


def expression(s: Session, sweep: str | None) -> tuple[str, list[str]]:
    """The sweep this run submits: its id and overrides (`sweep`, the verb's sweep=ID: the ones it
    was submitted with)."""
    inv = s.inv
    if sweep and not inv.overrides:
        record = _record_by_id(s, sweep)
        return sweep, list(record["overrides"])
    return sweep_id(inv.config, inv.overrides), list(inv.overrides)


def _record_by_id(s: Session, ident: str) -> SweepRecord:
    records = Records(s.workspace)
    record = records.load(ident)
    if record is None:
        known = ", ".join(records.known()) or "none yet"
        raise UserError(
            f"error: {s.inv.config} has no sweep {ident} in {s.inv.workspace} (its sweeps: {known})\n"
            "    fix: name one of those, or submit the sweep first with multirun=1"
        )
    return record


def find_sweep(s: Session, sweep: str | None) -> SweepRecord:
    """The sweep a day-two verb acts on: `sweep` (its sweep=ID); else the one of these overrides
    (multirun=1 and the command line it was submitted with); else, with no overrides, the config's
    latest."""
    inv = s.inv
    records = Records(s.workspace)
    if sweep:
        return _record_by_id(s, sweep)
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
