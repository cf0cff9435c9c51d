"""The rules about string syntaxes whose errors deserve a better message than "does not match
pattern": names, env values, Slurm times and mounts.

One group because each reads a string wherever the config holds it (a service, a tier, the driver, a
benchmark) and says how to spell it: what they share is a syntax, not a section.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gymbuild.config.rules_tree import Path, Rules
from gymbuild.config.walltime import FORMS, is_walltime
from gymbuild.shell import is_shell_name

NAME = re.compile(r"^[A-Za-z0-9._-]+$")
ENV_FIX = (
    "write lit:<value> for a literal, host:VAR to read VAR from your shell, "
    "or runtime:VAR to expand it on the cluster"
)
VAR_FIX = "use letters, digits and _, not starting with a digit"


def names(r: Rules) -> None:
    """Service and benchmark names become file and job names: keep them to a safe alphabet."""
    groups = [(("services",), "service"), (("driver", "benchmarks"), "benchmark")]
    for base, what in groups:
        for name in r.mapping(base):
            if not (isinstance(name, str) and NAME.match(name)):
                r.error(
                    (*base, name),
                    f"{what} name `{name}` may only contain letters, digits, '.', '_' and '-'",
                    f"rename the {what} (it names log files and Slurm jobs)",
                )
    services = r.mapping(("services",))
    for path, kind, _svc in r.services():
        if kind == "vllm_pd":
            for tier in ("prefill", "decode"):
                derived = f"{path[-1]}-{tier}"
                if derived in services:
                    r.error(
                        ("services", derived),
                        f"`{derived}` is also the name of vllm_pd service `{path[-1]}`'s {tier} tier",
                        f"rename services.{derived}",
                    )


def _env_paths(r: Rules) -> Iterator[Path]:
    for path, _kind, _unit in r.deployments():
        yield (*path, "env")
    yield ("driver", "env")


def env_values(r: Rules) -> None:
    """Every env value says where it comes from; the names must be ones a shell can set."""
    for env in _env_paths(r):
        for key, value in r.mapping(env).items():
            path = (*env, key)
            if not (isinstance(key, str) and is_shell_name(key)):
                r.error(path, f"`{key}` is not a valid environment variable name", VAR_FIX)
            if not isinstance(value, str) or not r.ok(path):
                continue
            kind, sep, var = value.partition(":")
            if not sep or kind not in ("lit", "host", "runtime"):
                r.error(path, f"the value of {key} has no lit:, host: or runtime: prefix", ENV_FIX)
            elif kind != "lit" and not is_shell_name(var):
                r.error(
                    path,
                    f"{kind}:{var} does not name a valid environment variable",
                    f"write {kind}:VAR with VAR made of letters, digits and _, not starting with a digit",
                )


def _walltime(r: Rules, path: Path, *, unlimited: bool = False) -> None:
    value = r.get(path)
    if isinstance(value, str) and not is_walltime(value, unlimited=unlimited):
        extra = ", or UNLIMITED" if unlimited else ""
        r.error(
            path,
            f"`{value}` is not a Slurm time",
            f"use {FORMS}{extra} (e.g. 04:00:00 or 1-00:00:00)",
        )


def walltimes(r: Rules) -> None:
    for name in r.mapping(("compute",)):
        _walltime(r, ("compute", name, "walltime"), unlimited=True)
    for path, bench in r.benchmarks():
        if isinstance(bench.get("resumable"), dict):
            _walltime(r, (*path, "resumable", "max_walltime"))


def _mount_problem(mount: str) -> str | None:
    """What is wrong with one entry of `mounts`. An entry may hold several mounts separated by commas,
    as pyxis's --container-mounts does (NeMo Gym passes them so): each one is checked."""
    for one in mount.split(","):
        problem = _one_mount_problem(one)
        if problem:
            return problem if one == mount else f"has `{one}`, which {problem}"
    return None


def _one_mount_problem(mount: str) -> str | None:
    parts = mount.split(":")
    if len(parts) > 3 or any(not p for p in parts):
        return "is not src[:dst[:flags]]"
    if not parts[0].startswith("/"):
        return "has a relative source; it must be an absolute path on the cluster"
    if len(parts) > 1 and not parts[1].startswith("/"):
        return "has a relative destination; it must be an absolute path in the container"
    return None


def mounts(r: Rules) -> None:
    units: list[Path] = [path for path, _kind, _unit in r.deployments()]
    for base in [*units, ("driver",)]:
        items = r.get((*base, "mounts"))
        for index, mount in enumerate(items if isinstance(items, list) else []):
            problem = _mount_problem(mount) if isinstance(mount, str) else None
            if problem:
                r.error(
                    (*base, "mounts", index),
                    f"mount `{mount}` {problem}",
                    "write /absolute/src[:/absolute/dst[:flags]], e.g. /lustre/data:/data:ro",
                )
