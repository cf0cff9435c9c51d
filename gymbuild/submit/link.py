"""The run's one connection: opened on first use, or early in the background, and closed by its owner.

A run has one Link; the runs of a batch (a sweep's combinations) are given their base run's, so they
all go over one SSH connection and none of them closes it.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from typing import TYPE_CHECKING

from gymbuild.errors import UserError

if TYPE_CHECKING:
    from gymbuild.executors.connection import Connection


class Link:
    """One connection, opened on first use (or early, in the background) and closed by its owner.

    A run has one; the runs of a batch (a sweep's combinations) are given their base run's, so they
    all go over one SSH connection and none of them closes it.

    Opened early, it overlaps the SSH handshake and the remote shell's start with other work: the
    console script starts it before importing doit (`ahead`, to the host the workspace or the config
    file names, a guess checked at first use), a submit's sync task while the stage tasks render
    (Session.connect_early). A failure is raised where the connection is first used, as if it had
    been opened there; a guess that turns out to be the wrong host is closed and the right one opened.
    """

    def __init__(self) -> None:
        self._conn: Connection | None = None
        self._opening: tuple[Connection, threading.Thread, list[BaseException]] | None = None
        self._guess: str | None = None  # the host being opened is a guess, checked by the first get()

    @classmethod
    def ahead(cls, hostname: str | None) -> Link:
        """A link already opening to `hostname`, a guess (nothing opens for this machine or no host)."""
        from gymbuild.executors.connection import is_this_machine  # late: measured, off resolve, list

        link = cls()
        if hostname is not None and not is_this_machine(hostname):
            link.start(hostname, guess=True)
        return link

    @property
    def used(self) -> bool:
        """Opened, or being opened: a run with nothing to do has neither."""
        return self._conn is not None or self._opening is not None

    @property
    def guessing(self) -> bool:
        """Being opened to a host nobody has asked for yet (Link.ahead)."""
        return self._opening is not None and self._guess is not None

    def start(self, hostname: str | None, *, guess: bool = False) -> None:
        """Start opening the connection to `hostname` in the background."""
        from gymbuild.executors.connection import Connection  # late: as in ahead

        if self.used:
            return
        conn = Connection(hostname)
        failed: list[BaseException] = []

        def open_it() -> None:
            try:
                conn.open()
            except BaseException as err:  # handed to the main thread in get()
                failed.append(err)

        thread = threading.Thread(target=open_it, name="gymbuild-connect", daemon=True)
        thread.start()
        self._opening, self._guess = (conn, thread, failed), hostname if guess else None
        atexit.register(self.close)  # a run that ends before its owner closes it leaves no master behind

    def _opened_early(self, *, abort: bool = False) -> None:
        """The connection started in the background, once it is open (`abort`: its handshake cut short)."""
        opening, self._opening = self._opening, None
        if opening is None:
            return
        conn, thread, failed = opening
        if abort:
            conn.abort()
        thread.join()
        if failed:
            conn.close()
            raise failed[0]
        self._conn = conn

    def get(self, hostname: str | None) -> Connection:
        """The connection, opened to `hostname` now if it is not open yet (the first caller's host)."""
        if self.guessing:
            self._check_guess(hostname)
        self._opened_early()
        if self._conn is None:
            from gymbuild.executors.connection import Connection  # late: as in ahead

            conn = Connection(hostname)
            conn.open()
            self._conn = conn
        return self._conn

    def _check_guess(self, hostname: str | None) -> None:
        """The guessed host is `hostname`'s: adopted. Another: closed, whether it opened or not."""
        from gymbuild.executors.connection import is_this_machine  # late: as in ahead

        assert self._opening is not None
        guess, self._guess = self._guess, None
        if hostname == guess:
            return
        wanted = None if is_this_machine(hostname) else hostname
        if wanted != self._opening[0].hostname:
            self.close()

    def close(self) -> None:
        with contextlib.suppress(UserError):
            self._opened_early(abort=True)  # opened for nothing (a render failed): closed all the same
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        atexit.unregister(self.close)
