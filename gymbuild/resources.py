"""Where the files that ship with gymbuild live, in a source checkout and in an installed wheel.

The wheel carries `schemas/` inside the package; a checkout (and an editable install) keeps it at the
project root, where editors find it for completion. Both layouts resolve through here.
"""

from __future__ import annotations

import json
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
