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


# What turns a resolved config into a job script: the model built from the tree, the planner, the
# renderer with its quoting, and the templates. A change to any of them may change every script.
# The plan asks the executor what it does (executors/base.py: executor_for), so its modules count too.
_SCRIPT_CODE = (
    "config/model.py",
    "plan.py",
    "shell.py",
    "render/__init__.py",
    "render/templates/*.j2",
    "executors/base.py",
    "executors/local.py",
    "executors/slurm.py",
)


@cache
def script_code_digest() -> str:
    """A digest of the code that makes job scripts from a resolved config, so a staged script is known
    stale after gymbuild changes without planning anything (see Session.stage_digest).

    Here rather than beside that code so that asking for it (a no-op submit does) imports none of it.
    """
    import hashlib

    files = [f for pattern in _SCRIPT_CODE for f in sorted(_PACKAGE.glob(pattern))]
    blob = b"".join(f"{f.relative_to(_PACKAGE)}\0".encode() + f.read_bytes() for f in files)
    return hashlib.sha256(blob).hexdigest()[:16]


def user_cache_home() -> Path:
    """`$XDG_CACHE_HOME`, else `~/.cache`. An empty or relative XDG_CACHE_HOME is ignored, as the XDG
    spec asks: a relative one would scatter caches over whatever directories commands ran in."""
    cache_home = os.environ.get("XDG_CACHE_HOME", "")
    return Path(cache_home) if os.path.isabs(cache_home) else Path.home() / ".cache"
