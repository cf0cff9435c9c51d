"""Validated config trees kept between runs, in the user's cache directory.

Without it, every gymbuild command would import jsonschema and validate the whole config even when
neither the file nor gymbuild has changed since the last run.
load_config offers a tree for keeping only when it came from the file's bytes alone (no overrides,
no other file, no interpolation, so no environment variable) and validated without a problem; the
key is the file's bytes plus a digest of everything that decides validation (the schema and the
config package's code), so an edited file, or another gymbuild, never finds a stale entry. Secrets
are never kept: `host:` values are read from the environment on every run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import gymbuild
from gymbuild import config, shell
from gymbuild.config import Checked
from gymbuild.resources import schema_dir
from gymbuild.state.workspace import atomic_write

KEEP = 64  # entries; the oldest go first


@cache
def _code_digest() -> str:
    """What validation depends on besides the file: the schemas and the config package's source."""
    # shell.py: the rules read its shell-name pattern and the env names the job script reserves
    files = sorted(schema_dir().glob("*.json")) + sorted(Path(config.__file__).parent.glob("*.py"))
    files.append(Path(shell.__file__))
    blob = gymbuild.__version__.encode() + b"".join(f.name.encode() + f.read_bytes() for f in files)
    return hashlib.sha256(blob).hexdigest()


class ValidatedConfigs:
    """A ConfigCache (gymbuild.config) in a directory: one JSON file per config content."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, source: Path, overrides: Sequence[str]) -> Path | None:
        if overrides:
            return None
        try:
            data = source.read_bytes()
        except OSError:
            return None
        key = hashlib.sha256(_code_digest().encode() + b"\0" + data).hexdigest()[:32]
        return self.directory / f"{key}.json"

    def get(self, source: Path, overrides: Sequence[str]) -> Checked | None:
        path = self._path(source, overrides)
        if path is None:
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            return Checked(tree=entry["tree"], filled=entry["filled"], warnings=list(entry["warnings"]))
        except (OSError, ValueError, KeyError, TypeError):  # none yet, or damaged: validate afresh
            return None

    def put(self, source: Path, overrides: Sequence[str], checked: Checked) -> None:
        """Best-effort: a cache that cannot be written costs only the next run's validation."""
        path = self._path(source, overrides)
        if path is None:
            return
        entry = {"tree": checked.tree, "filled": checked.filled, "warnings": checked.warnings}
        with contextlib.suppress(OSError, ValueError, TypeError):
            self.directory.mkdir(parents=True, exist_ok=True)
            atomic_write(path, json.dumps(entry), durable=False)
            self._prune()

    def _prune(self) -> None:
        entries = sorted(self.directory.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for stale in entries[KEEP:]:
            with contextlib.suppress(OSError):
                os.unlink(stale)
