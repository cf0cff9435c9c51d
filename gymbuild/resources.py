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
def load_schema(name: str) -> dict[str, object]:
    """A JSON Schema by file name, parsed once per process."""
    return json.loads((schema_dir() / name).read_text(encoding="utf-8"))


# What turns a resolved config into a job script: every file of these packages (the model built from
# the tree, the planner, the renderer and its templates, the Ray Serve gateway a job carries) and the
# top-level modules they import. A change to any of them may change every script. Whole directories,
# so a new module or template is covered without a line here; tests/submit/test_script_digest.py checks that
# every gymbuild module render_job imports is covered.
_SCRIPT_PACKAGES = ("config", "plan", "render")
# Each executor's folder (its module, whose traits the planner is handed, and its templates) counts
# too, found as folders so a new executor is covered; not the connection they run commands over.
_SCRIPT_MODULES = (
    "__init__.py",
    "errors.py",
    "shell.py",
    "executors/__init__.py",
    "executors/base.py",
    "executors/secrets.py",  # an executor's module imports it
    "state/__init__.py",
    "state/ids.py",  # executors/secrets.py checks the ids of what it removes
)


def script_code_files(package: Path = _PACKAGE) -> list[Path]:
    """Every file the script-code digest reads under `package` (gymbuild's own directory), in order."""
    files = [package / name for name in _SCRIPT_MODULES]
    executors = sorted(
        f"executors/{p.name}" for p in (package / "executors").iterdir() if (p / "__init__.py").is_file()
    )
    for name in (*_SCRIPT_PACKAGES, *executors):
        files += sorted(
            path
            for path in (package / name).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
        )
    return files


def template_files(package: Path = _PACKAGE) -> list[Path]:
    """Every template a job script is rendered from: the shared ones (render/templates) and each
    executor's (executors/<name>/templates), in order."""
    folders = [package / "render" / "templates", *sorted(package.glob("executors/*/templates"))]
    return [path for folder in folders for path in sorted(folder.iterdir()) if path.is_file()]


def code_digest(package: Path = _PACKAGE) -> str:
    """The digest of `script_code_files(package)`: their paths (relative to it) and their bytes."""
    import hashlib  # late: measured, OpenSSL off the paths that never digest (House rules)

    files = script_code_files(package)
    blob = b"".join(f"{f.relative_to(package).as_posix()}\0".encode() + f.read_bytes() for f in files)
    return hashlib.sha256(blob).hexdigest()[:16]


@cache
def script_code_digest() -> str:
    """A digest of the code that makes job scripts from a resolved config, so a staged script is known
    stale after gymbuild changes without planning anything (submit/plans.py: RunPlans.stage_digest).

    Here rather than beside that code so that asking for it (a no-op submit does) imports none of it.
    """
    return code_digest(_PACKAGE)


def user_cache_home() -> Path:
    """`$XDG_CACHE_HOME`, else `~/.cache`. An empty or relative XDG_CACHE_HOME is ignored, as the XDG
    spec asks: a relative one would scatter caches over whatever directories commands ran in."""
    cache_home = os.environ.get("XDG_CACHE_HOME", "")
    return Path(cache_home) if os.path.isabs(cache_home) else Path.home() / ".cache"


def user_state_home() -> Path:
    """`$XDG_STATE_HOME`, else `~/.local/state` (an empty or relative value is ignored, as above)."""
    state_home = os.environ.get("XDG_STATE_HOME", "")
    return Path(state_home) if os.path.isabs(state_home) else Path.home() / ".local" / "state"
