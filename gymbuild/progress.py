"""Progress of long work on the user's terminal: one line on stderr, rewritten in place.

Only when a person is watching: stdout and stderr both a terminal, and no json=1 (a script reading
stdout wants nothing else, and a log file full of carriage returns helps nobody). Otherwise every
call is a no-op, so callers never ask.
"""

from __future__ import annotations

import sys
from typing import TextIO

CLEAR_LINE = "\r\x1b[K"


def on_a_terminal(*, json: bool) -> bool:
    """A person watches this run: both streams go to a terminal and no JSON was asked for."""
    return not json and _isatty(sys.stdout) and _isatty(sys.stderr)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


class Progress:
    """A line of progress ("queued 350/1000"); `done` leaves it (or clears it) so what follows starts
    on a fresh line."""

    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self._shown = False

    def show(self, text: str) -> None:
        if self.enabled:
            self.stream.write(CLEAR_LINE + text)
            self.stream.flush()
            self._shown = True

    def done(self, *, keep: bool = True) -> None:
        """End the line: kept as the last word on the work (`keep`), or wiped."""
        if self._shown:
            self.stream.write("\n" if keep else CLEAR_LINE)
            self.stream.flush()
            self._shown = False
