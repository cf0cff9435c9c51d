"""Small checks of what a config hands to the shell: variable names, env entries and mounts."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from gymbuild.config.model import EnvValue
from gymbuild.errors import UserError
from gymbuild.plan.model import EnvEntry
from gymbuild.shell import is_reserved_name, is_shell_name


def shell_name(name: str) -> str:
    """A config name as part of a shell variable name: upper case, other characters as `_`."""
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def _env(env: Mapping[str, EnvValue], where: str) -> tuple[EnvEntry, ...]:
    for key in env:
        if not is_shell_name(key) or is_reserved_name(key):  # the rules refused these first
            raise UserError(f"{where}.env: {key!r} is not a shell variable name a config may set")
    return tuple(EnvEntry(k, v) for k, v in env.items())


def _mounts(mounts: Iterable[str], where: str) -> tuple[str, ...]:
    """`--container-mounts` is comma-separated, so one entry may hold several mounts (NeMo Gym passes
    `a:/a,b:/b` as two): each becomes a mount of its own, quoted on its own."""
    out = tuple(one for mount in mounts for one in mount.split(","))
    for mount in out:
        if "\n" in mount:
            raise UserError(f"{where}.mounts: {mount!r} cannot contain a newline")
    return out
