"""doit's json database, written whole or not at all: the `gymjson` backend of every gymbuild run.

doit's own JsonDB saves by truncating its file and writing it again, at the end of a run (Runner.finish).
A signal in between (Ctrl-C, SIGTERM from a scheduler, SIGHUP from a closed terminal: all of which a
submit now answers by recording its jobs and going on to doit's end) leaves an empty or half file, and
the next run of that config dies on doit's DatabaseException before it can do anything. This backend
writes the same JSON through a temp file and a rename (workspace.atomic_write), so the file is always
the last whole save. It is registered under doit's public plug-in group `doit.BACKEND`
(pyproject.toml) and named by tasks.doit_config; doit's database stays a cache (the outcome files are
the truth about what is queued), so no fsync.
"""

from __future__ import annotations

from pathlib import Path

from doit.dependency import JsonDB

from gymbuild.state.workspace import atomic_write


class AtomicJsonDB(JsonDB):
    """doit's JsonDB, whose dump replaces the file in one rename."""

    desc = "doit's json backend, saved through a temp file and a rename (gymbuild)"

    def dump(self) -> None:
        atomic_write(Path(self.name), self.codec.encode(self._db), durable=False)
