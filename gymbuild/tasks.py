"""The doit task graph. Each action is a call into the modules that do the work; no logic lives here.

Both entry points load this module: `doit` through the project's dodo.py, and the `gymbuild` console
script through doit's ModuleTaskLoader, so `doit VERB` and `gymbuild VERB` are the same command.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doit import doit_cmd
from doit.exceptions import TaskFailed

from gymbuild.errors import UserError
from gymbuild.reporter import GymReporter

RESERVED = frozenset({"config", "json", "new", "only", "run", "workspace", "follow"})
DEFAULT_CONFIG = "submit.yaml"
DEFAULT_WORKSPACE = ".gymbuild"


@dataclass(frozen=True)
class Invocation:
    """What the command line asked for: the reserved `name=value` arguments and the Hydra overrides."""

    config: Path
    overrides: tuple[str, ...]
    json: bool
    new: bool
    only: tuple[str, ...]
    run: str | None
    workspace: Path

    @classmethod
    def from_vars(cls, variables: dict[str, str]) -> Invocation:
        """doit keeps `name=value` arguments in command-line order; all but the reserved are overrides."""
        def flag(name: str) -> bool:
            return variables.get(name, "0").lower() not in ("", "0", "false", "no")

        only = variables.get("only", "")
        return cls(
            config=Path(variables.get("config", DEFAULT_CONFIG)),
            overrides=tuple(f"{k}={v}" for k, v in variables.items() if k not in RESERVED),
            json=flag("json"),
            new=flag("new"),
            only=tuple(name for name in only.split(",") if name),
            run=variables.get("run") or None,
            workspace=Path(variables.get("workspace", DEFAULT_WORKSPACE)),
        )


def invocation() -> Invocation:
    return Invocation.from_vars(dict(doit_cmd._CMDLINE_VARS or {}))


def doit_config(workspace: Path | None = None) -> dict[str, Any]:
    """DOIT_CONFIG for this run: doit's database in the workspace, json backend, `continue` on."""
    ws = workspace or invocation().workspace
    ws.mkdir(parents=True, exist_ok=True)
    return {
        "default_tasks": ["submit"],
        "dep_file": str(ws / "doit-db.json"),
        "backend": "json",
        "continue": True,
        "verbosity": 2,
        "reporter": GymReporter,
    }


def user_action(func: Callable[..., Any]) -> Callable[..., Any]:
    """A task action whose UserError becomes doit's TaskFailed: the message, exit 1, no traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            result = func(*args, **kwargs)
        except UserError as err:
            return TaskFailed(str(err))
        return None if result is None else result

    return wrapper


def _warn(warnings: tuple[str, ...]) -> None:
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)


@user_action
def _resolve() -> None:
    from gymbuild.config import load_config
    from gymbuild.config.output import dump_tree

    inv = invocation()
    resolved = load_config(inv.config, inv.overrides)
    _warn(resolved.warnings)
    sys.stdout.write(dump_tree(resolved.tree, as_json=inv.json))


def task_resolve() -> dict[str, Any]:
    """Validate the config and print it resolved (YAML; json=1 for JSON). host: values stay references."""
    return {"actions": [_resolve], "uptodate": [False], "verbosity": 2}

