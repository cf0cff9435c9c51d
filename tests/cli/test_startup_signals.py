"""Ctrl-C (SIGTERM, SIGHUP) while gymbuild starts, and imports that change nothing (issue 41, item 4).

Importing gymbuild's modules leaves the process as it was: no signal handler is swapped at import
time. The console script's main() installs gymbuild's handlers first thing and only then imports
what answers the command line, so a signal that lands during any of those imports ends gymbuild as
one anywhere else does: one line on stderr, status 128 + the signal's number, no traceback.

The signal is timed by an event, not a clock: a finder on sys.meta_path (the test's own, in the
child) sends it when the drawn module is about to be imported.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

# An interactive shell's start: Python's Ctrl-C, the defaults for SIGTERM and SIGHUP (this suite may
# run under nohup, which gymbuild would rightly leave ignored).
_ORDINARY_START = """
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
signal.signal(signal.SIGHUP, signal.SIG_DFL)
"""

# The console script's own two steps (import, then main()), with a strike on one module's import.
_STRIKE = (
    _ORDINARY_START
    + """
import os, sys
from gymbuild.cli.main import main

target, signum, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

class Strike:
    def find_spec(self, name, path=None, target_module=None):
        if name == target:
            os.kill(os.getpid(), signum)
        return None

sys.meta_path.insert(0, Strike())
sys.exit(main(argv))
"""
)

COMMANDS = (["--help"], ["help", "submit"], ["--version"], ["no-such-verb"])
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@cache
def _imported_by_main(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The modules main(argv) imports (each through sys.meta_path) after the console script imported
    gymbuild.cli.main."""
    script = (
        _ORDINARY_START
        + """
import contextlib, io, json, sys
from gymbuild.cli.main import main

seen = []

class Record:
    def find_spec(self, name, path=None, target_module=None):
        seen.append(name)
        return None

sys.meta_path.insert(0, Record())
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    main(sys.argv[1:])
print(json.dumps(sorted(set(seen))))
"""
    )
    done = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return tuple(json.loads(done.stdout))


def test_main_imports_what_answers_the_command_line_after_it_starts() -> None:
    """The window this file is about exists: the help's own modules load inside main()."""
    assert "gymbuild.request.verbs" in _imported_by_main(("--help",))


@settings(max_examples=25)
@given(data=st.data(), argv=st.sampled_from(COMMANDS), sig=st.sampled_from(SIGNALS))
def test_a_signal_during_any_import_at_start_up_is_one_line_and_its_status(
    data: st.DataObject, argv: list[str], sig: signal.Signals
) -> None:
    module = data.draw(st.sampled_from(_imported_by_main(tuple(argv))), label="module")
    done = subprocess.run(
        [sys.executable, "-c", _STRIKE, module, str(int(sig)), *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 128 + sig, f"{argv} struck at {module}: {done.returncode}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"interrupted ({sig.name})"), done.stderr


def test_importing_every_gymbuild_module_leaves_every_signal_handler_as_it_was() -> None:
    """No import-time side effect on the process's signals (the console script's used to swap three)."""
    script = (
        _ORDINARY_START
        + """
import importlib, pkgutil, signal, sys
import gymbuild

numbers = [s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)]
before = {s: signal.getsignal(s) for s in numbers}
changed = {}

class Watch:  # looks at the handlers at every import, so a swap undone before the end is seen too
    def find_spec(self, name, path=None, target_module=None):
        now = [int(s) for s in numbers if signal.getsignal(s) != before[s]]
        if now:
            changed.setdefault(name, now)
        return None

sys.meta_path.insert(0, Watch())
names = [m.name for m in pkgutil.walk_packages(gymbuild.__path__, "gymbuild.")]
# The console script's module first, as it is imported first, with none of its imports loaded yet.
for name in ["gymbuild.cli.main", *names]:
    if name.endswith("__main__") or ".templates" in name:
        continue
    importlib.import_module(name)
    Watch().find_spec(name)
assert not changed, f"handlers changed while importing (module: signals): {changed}"
"""
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
