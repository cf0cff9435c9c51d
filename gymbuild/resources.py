"""Where the files that ship with gymbuild live, in a source checkout and in an installed wheel.

The wheel carries `schemas/` inside the package; a checkout (and an editable install) keeps it at the
project root, where editors find it for completion. Both layouts resolve through here.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def schema_dir() -> Path:
    for candidate in (_PACKAGE / "schemas", _PACKAGE.parent / "schemas"):
        if candidate.is_dir():
            return candidate
    raise RuntimeError(f"gymbuild is installed without its schemas (looked beside {_PACKAGE})")


@cache
def load_schema(name: str) -> dict:
    """A JSON Schema by file name, parsed once per process."""
    return json.loads((schema_dir() / name).read_text(encoding="utf-8"))


@cache
def templates_digest() -> str:
    """A digest of the job templates: a changed template makes every staged script stale.

    Here rather than in gymbuild.render so that asking for it (every no-op submit digests every
    benchmark) does not import Jinja2.
    """
    import hashlib

    folder = _PACKAGE / "render" / "templates"
    blob = b"".join(p.name.encode() + p.read_bytes() for p in sorted(folder.glob("*.j2")))
    return hashlib.sha256(blob).hexdigest()[:16]


def user_cache_home() -> Path:
    """`$XDG_CACHE_HOME`, else `~/.cache`. An empty or relative XDG_CACHE_HOME is ignored, as the XDG
    spec asks: a relative one would scatter caches over whatever directories commands ran in."""
    cache_home = os.environ.get("XDG_CACHE_HOME", "")
    return Path(cache_home) if os.path.isabs(cache_home) else Path.home() / ".cache"
