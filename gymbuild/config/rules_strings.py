"""The rules about string syntaxes whose errors deserve a better message than "does not match
pattern": names, env keys and values, the bounds every string keeps, Slurm times and #SBATCH lines,
mounts, health check paths and git refs.

One group because each reads a string wherever the config holds it (a service, a tier, the driver, a
benchmark) and says how to spell it: what they share is a syntax, not a section.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gymbuild.config.rules_tree import Path, Rules
from gymbuild.config.walltime import FORMS, is_walltime
from gymbuild.shell import RESERVED_NAMES, RESERVED_PREFIXES, is_reserved_name, is_shell_name

NAME_MAX = 100
NAME = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9._-]{{0,{NAME_MAX - 1}}}")
"""THE rule for every name the config defines that becomes a file or directory name, a step or job
name, a comment or part of a variable in a script: one plain path component of safe characters,
bounded, never `.`/`..`, never a leading dash or dot. Matched with `fullmatch` (`re.match` with `$`
lets a trailing newline through)."""
is_name = NAME.fullmatch
# The places that define a name: (path of the mapping whose keys are names, what the name names).
NAMED = (
    (("services",), "service"),
    (("driver", "benchmarks"), "benchmark"),
    (("compute",), "compute"),
)
ENV_FIX = (
    "write lit:<value> for a literal, host:VAR to read VAR from your shell, "
    "or runtime:VAR to expand it on the cluster"
)
VAR_FIX = "use letters, digits and _, not starting with a digit"


def _named(r: Rules) -> Iterator[tuple[Path, str]]:
    """(path of the mapping, what its keys name) for every mapping whose keys are names."""
    yield from NAMED
    for cname in r.mapping(("compute",)):
        yield ("compute", cname, "node_pools"), "node pool"


def names(r: Rules) -> None:
    """Names become file names, step and job names, comments and variables in the job script: each
    follows the one NAME rule, so none can leave the run directory or start a line of its own."""
    for base, what in _named(r):
        for name in r.mapping(base):
            if not (isinstance(name, str) and is_name(name)):
                r.error(
                    (*base, name),
                    f"{what} name {_shown(name)} may only contain letters, digits, '.', '_' and '-', "
                    f"start with a letter, digit or '_' and have at most {NAME_MAX} characters",
                    f"rename the {what} (it names files, steps and jobs)",
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


VALUE_MAX = 65_536
"""The longest string a config may hold (64 KiB): far above any model path, command or prompt
override, far below what makes `sbatch` or `exec` fail with "Argument list too long"."""


def _strings(node: object, path: Path) -> Iterator[tuple[Path, str]]:
    """Every string of the tree, keys included (a key is reported at its own path), iteratively."""
    stack: list[tuple[Path, object]] = [(path, node)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            yield where, value
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str):
                    yield (*where, key), key
                stack.append(((*where, key), item))
        elif isinstance(value, list):
            stack.extend(((*where, index), item) for index, item in enumerate(value))


def values(r: Rules) -> None:
    """No string holds NUL (bash, argv and file names cannot carry it: it would be cut or fail late)
    and none is longer than VALUE_MAX."""
    for path, text in _strings(r.tree, ()):
        if "\x00" in text:
            r.error(path, "holds a NUL character, which no command line or file can carry", "remove it")
        elif len(text) > VALUE_MAX:
            r.error(
                path,
                f"is {len(text)} characters long, more than the {VALUE_MAX} a config value may have",
                "shorten it (put long text in a file on the cluster and name the file)",
            )


def _shown(name: object) -> str:
    """A refused name as a message shows it (its control characters escaped by the message itself),
    cut when long."""
    text = str(name)
    return f"`{text}`" if len(text) <= 80 else f"`{text[:60]}...` ({len(text)} characters)"


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
                r.error(path, f"{_shown(key)} is not a valid environment variable name", VAR_FIX)
            elif is_reserved_name(key):
                r.error(
                    path,
                    f"`{key}` is a variable the job script or bash reads for its own behaviour",
                    f"use another name: {', '.join(f'{p}*' for p in RESERVED_PREFIXES)} and "
                    f"{', '.join(sorted(RESERVED_NAMES))} are reserved",
                )
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
    if isinstance(r.get(("driver", "resumable")), dict):
        _walltime(r, ("driver", "resumable", "max_walltime"))
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


def health_paths(r: Rules) -> None:
    """A health check's path is a path on the service's own host: `@other/` would make the probe's
    URL (`http://host:port` + path) point at another host."""
    for path, _kind, unit in r.deployments():
        check = unit.get("health_check")
        where = (*path, "health_check", "path")
        value = check.get("path") if isinstance(check, dict) else None
        if isinstance(value, str) and r.ok(where) and not value.startswith("/"):
            r.error(where, f"`{value}` does not start with '/'", "write the path on the server, e.g. /health")


def install_refs(r: Rules) -> None:
    """gym_install's repo and ref reach `git clone`/`git checkout` as words: one starting with '-'
    would be read as an option (older git has no --end-of-options to stop that)."""
    for key in ("repo", "ref"):
        where = ("driver", "gym_install", key)
        value = r.get(where)
        if isinstance(value, str) and r.ok(where) and value.startswith("-"):
            r.error(
                where, f"`{value}` starts with '-', which git reads as an option", f"write the {key} itself"
            )


SBATCH_UNSAFE = re.compile(r'["\n\r\\]')  # what an #SBATCH line cannot carry (sbatch parses it itself)
is_sbatch_option = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*").fullmatch


def directives(r: Rules) -> None:
    """What becomes an `#SBATCH` line (the account, partitions, extra_args) can be written as one."""
    for cname in r.mapping(("compute",)):
        base = ("compute", cname)
        args: list[Path] = [(*base, "extra_args")]
        values: list[Path] = [(*base, "account")]
        for pool in r.mapping((*base, "node_pools")):
            args.append((*base, "node_pools", pool, "extra_args"))
            values.append((*base, "node_pools", pool, "partition"))
        for where in args:
            for key, value in r.mapping(where).items():
                if not (isinstance(key, str) and is_sbatch_option(key)):
                    r.error(
                        (*where, key),
                        f"{_shown(key)} is not an sbatch option name",
                        "write it as sbatch spells it, e.g. qos",
                    )
                elif isinstance(value, str):
                    values.append((*where, key))
        for where in values:
            value = r.get(where)
            if isinstance(value, str) and r.ok(where) and SBATCH_UNSAFE.search(value):
                r.error(
                    where,
                    "cannot be written as an #SBATCH directive (no double quotes, backslashes or newlines)",
                    "remove them",
                )


def output_path(r: Rules) -> None:
    """The run directory is mounted into every container (`src:dst`, comma-separated): the path
    cannot hold ',' or ':', nor a line break. Checked here so it is refused with the rest, not at
    submit when the planner meets it (it still refuses the run directory it is given)."""
    value = r.get(("job", "output_path"))
    if isinstance(value, str) and r.ok(("job", "output_path")) and re.search(r"[,:\n\r]", value):
        r.error(
            ("job", "output_path"), "cannot contain ',', ':' or a line break (it is mounted)", "rename it"
        )
