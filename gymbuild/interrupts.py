"""SIGINT, SIGTERM and SIGHUP: one exception wherever they strike, held back while jobs are started.

The console script installs `handle` for the three (cli.main); each then raises `Interrupted`, a
KeyboardInterrupt that knows its signal, so the process ends with 128 + the signal's number (130, 143,
129) and one line, as a shell reports a killed command. Python's default SIGTERM and SIGHUP end the
process on the spot, skipping every `finally`: a submit killed so kept none of the job ids it had.

While a run starts jobs (`deferred()`: submit/queue.py's pass, and the record after it) a signal is
only noted: the queue sends no further job, reads the answers of those in flight (each already
started), writes their outcomes and the record, and only then raises. A second signal while one is
pending raises at once (the user insists); the next submit recovers what was left in flight from the
run dir's queue log (executors/attempts.py), as after a SIGKILL.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
Handler = Callable[[int, FrameType | None], object] | int | None  # what signal.getsignal answers


class Interrupted(KeyboardInterrupt):
    """A signal that stops gymbuild; `status` is what a shell reports for it (128 + its number)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def status(self) -> int:
        return 128 + self.signum


def by_the_user(err: KeyboardInterrupt) -> bool:
    """Ctrl-C (SIGINT, or Python's own KeyboardInterrupt): how a user stops following logs or a watch,
    which those verbs answer as their normal end. SIGTERM and SIGHUP (a service manager, a closed
    terminal) are not: they go on to cli.main and end the process with 143 or 129."""
    return not isinstance(err, Interrupted) or err.signum == signal.SIGINT


class Deferral:
    """The process's signal state: how deep `deferred()` blocks nest and the signal noted meanwhile.
    Signal handlers are process-wide, so the process holds one (`PROCESS`) and installs its `handle`;
    the functions below are that instance's methods. Main thread only: signal handlers run there."""

    def __init__(self) -> None:
        self.depth = 0  # nesting depth of `deferred()` blocks
        self.noted: int | None = None  # the signal noted while deferring
        self.hook_before: Callable[[sys.UnraisableHookArgs], object] | None = None
        # What the run has queued and what not, for the line a signal ends it with (set by a queue
        # pass, submit/pipeline.py; None where nothing is queued)
        self.summary: Callable[[], str] | None = None

    def handle(self, signum: int, frame: object) -> None:
        """The handler: raise Interrupted, or while deferring, note the first signal and go on."""
        if self.depth and self.noted is None:
            self.noted = signum
            return
        raise Interrupted(signum)

    def install(self) -> None:
        """`handle` for SIGINT, SIGTERM and SIGHUP (from the main thread only, signal.signal's rule).
        A signal ignored when gymbuild started (`nohup`) stays ignored."""
        if threading.current_thread() is not threading.main_thread():
            return
        self.summary = None  # a run of its own: an earlier run's queue (in this process) is not its
        if self.hook_before is None:
            self.hook_before = sys.unraisablehook
            sys.unraisablehook = self.unraisable
        for sig in SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                signal.signal(sig, self.handle)

    def unraisable(self, args: sys.UnraisableHookArgs) -> None:
        """sys.unraisablehook while installed. A handler's Interrupted raised where Python cannot raise
        (a finalizer, a weakref callback: the import system runs one when a module lock goes) would be
        printed as "Exception ignored ... Traceback" and lost, the run going on. The signal is sent
        again instead, from a thread that waits until this hook lets it go, so the handler runs
        again once the main thread is back in ordinary code and the run ends as it would have.
        Anything else goes to the hook before."""
        if not isinstance(args.exc_value, Interrupted):
            (self.hook_before or sys.__unraisablehook__)(args)
            return
        held = threading.Lock()  # released last: its release runs no Python code to land in
        held.acquire()
        self.depth += 1  # a signal while here is noted, not raised: a hook is no place to raise either
        try:
            again = threading.Thread(target=_send_again, args=(held, args.exc_value.signum), daemon=True)
            again.start()
        finally:
            self.depth -= 1
            held.release()

    def restore(self, before: Mapping[signal.Signals, Handler]) -> int | None:
        """Put back the handlers `before` (install() replaced them); the number of a signal that came
        meanwhile, or None. CPython runs a pending handler before signal.signal changes one, so a
        signal that lands as gymbuild ends would raise out of main()'s `finally`, a traceback; here it
        is only noted, for main() to answer like any other. (A handler of None was set outside
        Python: kept.)"""
        self.depth += 1
        try:
            for sig, handler in before.items():
                if handler is not None:
                    signal.signal(sig, handler)
            if self.hook_before is not None:
                sys.unraisablehook, self.hook_before = self.hook_before, None
        finally:
            self.depth -= 1
            signum, self.noted = self.noted, None
        return signum

    def hold(self) -> int | None:
        """For a process that ends with its run (the console script): from now on a signal is only
        noted, never raised, and the handlers stay. Put back, Python's own would raise a traceback, and
        once the interpreter finalizes (a few hundred ms of module teardown) the default action would
        kill the process with no line, a shell seeing 130. The signal noted so far, or None."""
        self.depth += 1
        signum, self.noted = self.noted, None
        return signum

    def pending(self) -> bool:
        """A signal arrived while deferring: start nothing more."""
        return self.noted is not None

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Hold back a signal's exception until the block ends, then raise it (also over an exception
        the block raised: the signal decides the exit status). Nests: the outermost block raises."""
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if not self.depth and self.noted is not None:
                signum, self.noted = self.noted, None
                raise Interrupted(signum)


def _send_again(held: threading.Lock, signum: int) -> None:
    with held:  # until the hook that started this thread has ended
        os.kill(os.getpid(), signum)


PROCESS = Deferral()  # the one the console script installs (cli.main)
handle = PROCESS.handle
install = PROCESS.install
restore = PROCESS.restore
hold = PROCESS.hold
pending = PROCESS.pending
deferred = PROCESS.deferred
