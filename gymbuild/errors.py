"""The errors a user can fix, kept apart from bugs so neither ever masquerades as the other.

A `UserError` is printed as its message alone (no traceback) and ends the command with status 1.
Anything else that escapes is a bug in gymbuild and keeps its traceback.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


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
        where = f"{self.path}: " if self.path else ""
        text = f"{where}{self.message}"
        return f"{text}\n    fix: {self.fix}" if self.fix else text


class UserError(Exception):
    """A mistake in the user's input or environment; the message says what to do."""

    def __init__(self, message: str) -> None:
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
        head = f"error: {source}: {count} problem{'s' if count != 1 else ''} in the config"
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
    import select

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


def escaped(text: str) -> str:
    """`text` with every control character (a newline, ESC, DEL...) written as its Python escape, so a
    value from outside (a directory name, a file's line) echoed in a message cannot break its line or
    drive the terminal."""
    import unicodedata

    if text.isprintable():
        return text
    return "".join(
        ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch) in ("Cc", "Cs") else ch
        for ch in text
    )
