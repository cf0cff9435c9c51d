"""The one quoting path for everything gymbuild hands to bash, locally or on the cluster.

Every value that reaches a shell goes through `quote` (or `join`, for an argv). Nothing else in the
code base builds shell text from user values, so a value holding quotes, `$()`, backticks or newlines
arrives byte-exact and runs nothing.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

# The words shlex.quote leaves bare (its own test, made a full match): most of what a job script
# quotes (flags, names, paths), so they return here without the call into shlex.
_BARE = re.compile(r"[\w@%+=:,./-]+", re.ASCII).fullmatch

SHELL_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
"""A shell variable name (letters, digits and _, not first a digit), as a pattern to build on.

The one definition: the config rules refuse an env key, `host:`/`runtime:` variable or token_env
that is not one, the planner re-checks what it turns into assignments, and the renderer checks what
it expands. Unicode letters are not names to bash, so the classes are ASCII on purpose."""
is_shell_name = re.compile(SHELL_NAME).fullmatch

RESERVED_PREFIXES = ("GYM_", "__gym", "SLURM_", "BASH")
"""Variables a config's `env` may not set: the job script's own (`GYM_*`, `__gym*`: one of them,
GYM_STEP_LIB, is evaluated by every step), Slurm's (`SLURM_PROCID` picks a step's role and reaches an
arithmetic expansion) and bash's (`BASH_ENV` is sourced by every `bash -c`, `BASH_FUNC_*` defines
functions). Anything the script evaluates or trusts from its environment is named here."""
RESERVED_NAMES = frozenset({"ENV", "SHELLOPTS", "IFS", "PS4", "PROMPT_COMMAND", "GLOBIGNORE", "CDPATH"})


def is_reserved_name(name: str) -> bool:
    """Whether `name` is a variable the job script or bash reads for its own behaviour."""
    return name in RESERVED_NAMES or name.startswith(RESERVED_PREFIXES)


def quote(value: object) -> str:
    """One shell word that bash reads back as exactly `str(value)`."""
    text = value if type(value) is str else str(value)
    return text if _BARE(text) else shlex.quote(text)


def join(argv: Iterable[object]) -> str:
    """A command line whose words bash reads back as exactly `argv`."""
    return " ".join(quote(a) for a in argv)


SECRETS_DIR = ".gymbuild-secrets"  # under the submitting user's home on the submit target


def secrets_path(gym_job_id: str, bench: str = "") -> str:
    """The bash word naming a benchmark's secrets file (or, without `bench`, its submission's dir):
    `~/.gymbuild-secrets/<gym_job_id>/<bench>` on the submit target, read again by the job.

    In the home directory, not the run directory (which is shared with a collection job under another
    account) nor the workspace (under the user's state directory, invocation.default_workspace). `~`
    is expanded by the shell that reads it: `$HOME`, else the user's passwd entry; a Slurm cluster's
    home is the same on its login and compute nodes.
    """
    word = f"~/{SECRETS_DIR}/{quote(gym_job_id)}"
    return f"{word}/{quote(bench)}" if bench else word
