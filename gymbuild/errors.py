"""The errors a user can fix, kept apart from bugs so neither ever masquerades as the other.

A `UserError` is printed as its message alone (no traceback) and ends the command with status 1.
Anything else that escapes is a bug in gymbuild and keeps its traceback.
"""

from __future__ import annotations

import re
import select
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

# What a terminal acts on rather than shows: C0 and C1 controls, DEL, and Unicode's bidirectional
# overrides and isolates (they reorder what is shown). A config value echoed raw could repaint the
# user's terminal or hide a line, so every message escapes them (`printable`).
_CLASS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROLS = re.compile(f"[{_CLASS}]")
_CONTROLS_AND_NEWLINE = re.compile(f"[{_CLASS}\t\n]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match[0])
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e"}
    return named.get(match[0]) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: str, *, lines: bool = True) -> str:
    """`text` with every control character escaped (`\\e`, `\\x00`, `\\u202e`), so a value echoed in a
    message shows what it holds and does nothing to the terminal. With `lines`, the newlines and
    tabs a message is laid out with stay; without, they too are escaped (one value, one line)."""
    pattern = _CONTROLS if lines else _CONTROLS_AND_NEWLINE
    return pattern.sub(_escape, text)


def dotted(path: Iterable[object]) -> str:
    """A config path as users write it in overrides: `a.b.c`, list items as `a.b[0]`."""
    text = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config: where it is (a dotted config path) and how to fix it."""

    path: str
    message: str
    fix: str = ""

    def render(self) -> str:
        """The problem as the user reads it: each part one line, whatever values it quotes."""
        path, message, fix = (printable(part, lines=False) for part in (self.path, self.message, self.fix))
        where = f"{path}: " if path else ""
        text = f"{where}{message}"
        return f"{text}\n    fix: {fix}" if fix else text


class UserError(Exception):
    """A mistake in the user's input or environment; the message says what to do."""

    status: ClassVar[int] = 1  # the command's exit status

    def __init__(self, message: str) -> None:
        message = printable(message)  # the one place every user-facing error passes: escape it here
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(UserError):
    """Every problem found in one config file, reported together so one run shows them all."""

    def __init__(self, source: str, problems: Iterable[Problem]) -> None:
        self.source = source
        self.problems = tuple(problems)
        count = len(self.problems)
        where = printable(source, lines=False)
        head = f"error: {where}: {count} problem{'s' if count != 1 else ''} in the config"
        body = "\n".join(f"  - {p.render()}" for p in self.problems)
        super().__init__(f"{head}\n{body}")


class OutputClosed(BaseException):
    """Whoever read stdout has gone (`gymbuild render | head -1`): the verb stops quietly, as a Unix
    tool stops on SIGPIPE (status 141), never with a traceback. A BaseException, as Ctrl-C's is, so
    that doit, which takes every Exception of an action for a bug, lets it through to the console
    script (cli.main), its teardown done on the way."""


def stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (poll says POLLERR), as opposed to another
    pipe of the run breaking."""
    try:
        poller = select.poll()
        poller.register(1, select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no fd 1, or no poll() on this platform
        return False


class Inconclusive(UserError):
    """A gate that cannot decide (compare max_drop=: a side failed, is partial or has nothing to pair):
    printed as its message alone, like any UserError, but the command exits 2, not 1, so a CI step can
    tell "could not tell" from "dropped" and from a mistake on the command line (task_kinds.py)."""


class UsageError(UserError):
    """An argument a gate cannot use (compare: a bad max_drop=, an unknown run=, an only= or metric=
    naming nothing there): one message, as any UserError, but its own exit status, EX_USAGE of
    sysexits.h, so a CI step never reads a typo as a drop (1) or an undecided gate (2)."""

    status: ClassVar[int] = 64


class Stopped(BaseException):
    """A UsageError on its way out of doit, which ends a task with 1 or 2 only: raised by the task's
    action (cli/task_kinds.user_action), let through by doit as Ctrl-C is, and turned into its message
    and status by the console script (cli/main.py)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message, self.status = message, status
