"""The `gymbuild` console script: the project's doit tasks, runnable from any directory.

gymbuild's own help, version and unknown-verb message are answered here, from the registry in
verbs.py, before doit is imported: doit's help would list its commands and none of the verbs
(doit's own help is `gymbuild help doit`; `doit` in the project root is doit, unchanged).

doit reads DOIT_CONFIG when it loads the tasks, so the command line is parsed here first
(graph.namespace) and the namespace handed to doit carries a DOIT_CONFIG and a run context made for it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any, NoReturn

from gymbuild import __version__, interrupts

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import TextIO

    from doit.cmd_base import Command
    from doit.doit_cmd import DoitMain
    from doit.plugin import PluginDict

    from gymbuild.request import verbs
    from gymbuild.submit.link import Link

# Nothing here changes the process when imported. Ctrl-C (SIGTERM, SIGHUP) while gymbuild starts is
# answered by interrupts' handler, which main() installs first thing; so what answers a command line
# (gymbuild.request.verbs, .cli.argv, .errors: about 20 ms of imports, docs/architecture.md "House rules") is
# imported by the functions below, which run after it, not up here, where a signal would be a traceback.
# Such an import says `# late: start-up` (tests/cli/test_startup_signals.py).


def _table(rows: Sequence[tuple[str, str]], indent: str = "  ") -> list[str]:
    width = max(len(left) for left, _ in rows)
    return [f"{indent}{left.ljust(width)}  {right}".rstrip() for left, right in rows]


def usage() -> str:
    """`gymbuild --help`: what gymbuild is, its verbs, the reserved arguments, the override syntax,
    examples, and where doit's own commands went."""
    from gymbuild.request import verbs  # late: start-up

    readers = {a.name: [v.name for v in verbs.VERBS if a.name in dict(v.arguments)] for a in verbs.ARGUMENTS}

    def who(name: str) -> str:
        return f"{', '.join(readers[name])}: " if len(readers[name]) <= 3 else ""

    lines = [
        "gymbuild: NeMo Gym evaluations sent to Slurm the way make builds: one job per benchmark,",
        "and run again it queues only what is missing.",
        "",
        "usage: gymbuild VERB [NAME=VALUE ...] [OVERRIDE ...]",
        "",
        "verbs:",
        *_table([(v.name, v.does) for v in verbs.VERBS]),
        "",
        "arguments (NAME=VALUE; these names are reserved, any other key=value overrides the config):",
        *_table([(a.usage, who(a.name) + a.does) for a in verbs.ARGUMENTS]),
        "",
        "overrides (Hydra's grammar, applied in command-line order):",
        *_table([(form, f"{does}: {example}") for form, does, example in verbs.OVERRIDES]),
        "",
        "examples:",
        *(f"  {example}" for example in verbs.EXAMPLES),
        "",
        "`gymbuild` alone is the dry run (render) of ./submit.yaml, or this help when there is none.",
        "`gymbuild help VERB`: that verb's arguments and examples. `gymbuild --version`: the versions.",
        "doit's own commands (list, info, forget, clean, ...) work as `gymbuild COMMAND`;",
        "their help is `gymbuild help doit`. In the project root, `doit VERB` runs the same verbs.",
    ]
    return "\n".join(lines) + "\n"


def verb_usage(verb: verbs.Verb) -> str:
    """`gymbuild help VERB`: its line, each argument it reads with what it does there, examples."""
    from gymbuild.request import verbs  # late: start-up

    rows = [
        (verbs.argument(name).usage_in(verb.name), does or verbs.argument(name).does)
        for name, does in verb.arguments
    ]
    if verb.overrides:
        rows.append(("KEY=VALUE ...", "config overrides: key=value, +key=value, ++key=value (see --help)"))
    flags = [verb.flag(name) for name in (verbs.DRY_RUN, verbs.RESOLVE_ONLY)]
    lines = [
        f"gymbuild {verb.usage}",
        f"  {verb.does}",
        "",
        "arguments:",
        *_table(rows),
        "",
        "NeMo Gym's flags (--json is json=1, -c FILE config=FILE):",
        *_table([(f.name, f.does if f.becomes is not None else f"refused: {f.does}") for f in flags]),
        "",
        "examples:",
        *(f"  {example}" for example in verb.examples),
    ]
    return "\n".join(lines) + "\n"


def version() -> str:
    from importlib.metadata import version as installed  # late: measured, --version only (House rules)

    return f"gymbuild {__version__}\ndoit {installed('doit')}\n"


def _unknown(word: str, out: TextIO) -> int:
    """A word that is no verb: one message (with the nearest verb, if any), then the help; exit 1."""
    from gymbuild.cli.argv import nearest_verb  # late: start-up
    from gymbuild.request import verbs  # late: start-up

    names = [v.name for v in verbs.VERBS]
    near = nearest_verb(word)
    hint = f" (did you mean {near}?)" if near else ""
    out.write(
        f"error: {word!r} is not a gymbuild verb{hint}\n"
        f"    fix: use one of {', '.join(names)}; each is described below\n\n" + usage()
    )
    return 1


def answer_here(args: Sequence[str]) -> int | None:
    """The exit status of a command line answered without doit (help, version, an unknown verb), or
    None for doit to run it. `help doit` and `help <doit command>` are doit's own help."""
    from pathlib import Path  # late: start-up

    from gymbuild.cli.argv import DOIT_COMMANDS, HELP_FLAGS, VERSION_FLAGS, known_word  # late: start-up
    from gymbuild.request import verbs  # late: start-up

    if any(a in VERSION_FLAGS for a in args):
        sys.stdout.write(version())
        return 0
    words = [a for a in args if "=" not in a and not a.startswith("-")]
    if any(a in HELP_FLAGS for a in args):
        named = next((verbs.verb(w) for w in words if verbs.verb(w)), None)
        command = next((w for w in words if w in DOIT_COMMANDS and w != "help"), None)
        if named is None and command is not None:  # `gymbuild list --help`: doit's help of `list`
            return _doit_help([command])
        sys.stdout.write(verb_usage(named) if named else usage())
        return 0
    if not args:
        from gymbuild.request.invocation import DEFAULT_CONFIG  # late: start-up

        if not Path(DEFAULT_CONFIG).exists():  # nothing to dry-run here: say what gymbuild is
            sys.stdout.write(usage())
            return 0
        return None
    if words[:1] == ["help"]:
        topic = words[1] if len(words) > 1 else None
        if topic is None:
            sys.stdout.write(usage())
            return 0
        named = verbs.verb(topic)
        if named is not None:
            sys.stdout.write(verb_usage(named))
            return 0
        if topic == "doit" or topic in DOIT_COMMANDS or topic == "task":
            return _doit_help([] if topic == "doit" else [topic])
        return _unknown(topic, sys.stderr)
    if words[:1] == ["run"] and len(words) == 1:
        # doit's `run` of no task is the default task, the dry run: not what `run` seems to promise.
        sys.stderr.write(
            "error: `gymbuild run` runs doit tasks by name, and names none: it would only do the dry run\n"
            "    fix: `gymbuild submit config=FILE` submits; `gymbuild render config=FILE` is the dry run\n"
        )
        return 1
    for before, word in zip(["", *args], args, strict=False):
        # After a doit option (`-n 2`, `--reporter json`) a word may be its value, not a verb.
        if word in words and not before.startswith("-") and not known_word(word):
            return _unknown(word, sys.stderr)
    return None


def _doit(namespace: dict[str, object]) -> DoitMain:
    """doit on these tasks, calling itself `gymbuild` in what it prints (not `main.py`, whatever ran it)."""
    from doit.cmd_base import ModuleTaskLoader  # late: doit (House rules)
    from doit.doit_cmd import DoitMain  # late: doit

    class Main(DoitMain):
        def get_cmds(self) -> PluginDict:
            # doit's own commands only: the gymbuild verbs that doit_plugin.py adds to doit are
            # tasks here, and a task may not share a command's name.
            from doit.plugin import PluginDict  # late: doit

            commands = PluginDict()
            for command in self.DOIT_CMDS:
                quiet = _quiet_when_unread(command)
                commands[command.get_name()] = _named_task_checked(quiet) if quiet.name == "info" else quiet
            return commands

    main = Main(ModuleTaskLoader(namespace), extra_config={"GLOBAL": {}})
    main.BIN_NAME = "gymbuild"
    return main


def _quiet_when_unread(command: type[Command]) -> type[Command]:
    """doit's command `command`, whose stdout closed by its reader (`gymbuild list | head -1`) ends the
    run as a verb's does (OutputClosed), not as doit's "unexpected error" with a traceback."""
    from gymbuild.errors import OutputClosed, stdout_closed  # late: start-up

    def parse_execute(self: Command, in_args: list[str]) -> object:
        try:
            return command.parse_execute(self, in_args)
        except BrokenPipeError:
            if not stdout_closed():
                raise
            raise OutputClosed from None

    return type(command.__name__, (command,), {"name": command.get_name(), "parse_execute": parse_execute})


def _named_task_checked(command: type[Command]) -> type[Command]:
    """doit's `info`, which looks its one task up without asking whether it exists (a KeyError and a
    traceback for `gymbuild info queue:<a benchmark the config lacks>`), refusing an unknown name as
    doit's `forget` does."""
    from doit.exceptions import InvalidCommand  # late: doit

    from gymbuild.errors import printable  # late: start-up

    # doit passes a command's options by the names of _execute's parameters: info's own, spelled out.
    def _execute(self: Any, pos_args: list[str], hide_status: bool = False) -> object:
        names = {task.name for task in self.task_list}
        unknown = [name for name in pos_args if name not in names]
        if unknown:
            name = printable(unknown[0], lines=False)
            raise InvalidCommand(f"'{name}' is not a task; `gymbuild list` names them.")
        return command._execute(self, pos_args, hide_status=hide_status)

    return type(command.__name__, (command,), {"_execute": _execute})


def _doit_help(topic: list[str]) -> int:
    """doit's own help (its commands; `help task` its task fields), on no workspace and no config."""
    return _doit({"DOIT_CONFIG": {"dep_file": ":memory:", "backend": "sqlite3"}}).run(["help", *topic])


def _connect_ahead(args: Sequence[str]) -> Link | None:
    """The run's connection, started before importing doit, so the SSH handshake and doit's import
    overlap, when the host is known (the run owns it from here: graph.namespace hands it to the session):
    for status, logs and cancel of the config's current submission, the workspace says which; for
    the first submit of a config (or new=1), the config file does, if plainly (config.load.host_hint).
    A later submit may have nothing to queue, and a no-op must open nothing: it connects when needed.
    Which verbs do is each verb's `connects_ahead` (verbs.py). None: nothing started.
    """
    from gymbuild.request.invocation import (  # late: start-up
        AHEAD_OF_CONFIG,
        AHEAD_OF_SUBMISSION,
        Invocation,
        command_variables,
        command_verbs,
    )

    verbs = set(command_verbs(args))
    day_two = bool(verbs) and verbs <= AHEAD_OF_SUBMISSION
    if not day_two and not (len(verbs) == 1 and verbs <= AHEAD_OF_CONFIG):
        return None  # and nothing imported: the other verbs open their connection later, if at all
    from gymbuild.errors import UserError  # late: start-up
    from gymbuild.state.workspace import Workspace  # late: start-up
    from gymbuild.submit.link import Link  # late: start-up

    try:
        inv = Invocation.from_vars(command_variables(args))
    except UserError:  # a mistake in a value: graph.namespace says it, and nothing connects
        return None
    if inv.run or inv.is_sweep:  # a sweep connects once it knows it has something to do (sweep/expand.py)
        return None
    try:
        submission = Workspace(inv.workspace, inv.config).submission()
    except (UserError, OSError):  # a damaged workspace, or not a directory: the verb itself says so
        return None
    if day_two and submission is not None:
        return Link.ahead(submission.hostname)
    if not day_two and (submission is None or inv.new):
        from gymbuild.config.load import host_hint  # late: start-up; PyYAML (House rules)

        return Link.ahead(host_hint(inv.config, inv.overrides))
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: Ctrl-C (or a SIGINT from a script), SIGTERM or SIGHUP at any point ends it
    with one line and status 128 + the signal's number (130, 143, 129), as a shell reports a killed
    command, never Python's traceback. A submit first finishes reading the jobs it started and
    records them (gymbuild/interrupts.py). One that lands while the handlers are put back is answered
    the same way; after that, the signal's default action ends the process."""
    here = threading.current_thread() is threading.main_thread()
    before = {sig: signal.getsignal(sig) for sig in interrupts.SIGNALS} if here else {}
    process = argv is None and here  # the console script (or -m): the process ends with this run
    interrupts.install()
    try:
        status = _answered(argv)
    finally:
        late = interrupts.hold() if process else interrupts.restore(before)
    if late is not None:
        status = _interrupted(interrupts.Interrupted(late))
    if process:
        _end_process(status, answered=late is not None)
    return status


def _end_process(status: int, *, answered: bool) -> NoReturn:
    """End the console script's process with `status`, now: the exit functions (a link left open,
    logging), the streams flushed, then os._exit, skipping the interpreter's finalization. A signal
    there found Python's handlers reset and killed the process silently: 130 with no line after a
    submit that had queued everything. Signals are only noted meanwhile (interrupts.hold); one noted
    while the exit functions ran is answered like any other, unless one already was."""
    import atexit  # late: start-up
    import contextlib  # late: start-up

    atexit._run_exitfuncs()
    late = interrupts.hold()
    if late is not None and not answered:
        status = _interrupted(interrupts.Interrupted(late))
    code: object = status  # as sys.exit reads it: doit answers some commands (clean) with None
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader gone, a stream closed: nothing to say
            stream.flush()
    os._exit(code)


def _answered(argv: Sequence[str] | None) -> int:
    """_main's status, or the status of the signal or closed stdout that ended it. The signals are
    answered here, around everything else, so one that lands while _flushed imports is answered too."""
    try:
        return _flushed(argv)
    except KeyboardInterrupt as err:
        return _interrupted(err if isinstance(err, interrupts.Interrupted) else None)
    except RuntimeError as err:
        # Python 3.11 wraps what a class's __set_name__ raises in a RuntimeError: a signal that lands
        # while a late import defines a dataclass arrives so. It is still the signal.
        cause = err.__cause__
        if not isinstance(cause, KeyboardInterrupt):
            raise
        return _interrupted(cause if isinstance(cause, interrupts.Interrupted) else None)


def _flushed(argv: Sequence[str] | None) -> int:
    """_main's status with stdout flushed, or a shell's status for a reader that has gone."""
    from gymbuild.errors import OutputClosed, Stopped, stdout_closed  # late: start-up

    try:
        status = _main(argv)
        sys.stdout.flush()  # here, where a reader that has gone is answered, not at exit
        return status
    except Stopped as err:  # a verb's usage error with its own status (errors.UsageError)
        sys.stdout.flush()
        print(err.message, file=sys.stderr)
        return err.status
    except (OutputClosed, BrokenPipeError) as err:
        if isinstance(err, BrokenPipeError) and not stdout_closed():
            raise
        return _reader_gone()


def _interrupted(err: interrupts.Interrupted | None) -> int:
    """One line on stderr for the signal `err` (an Interrupted; None: Python's own Ctrl-C); its status."""
    name, status = (err.args[0], err.status) if err is not None else ("SIGINT", 130)
    try:
        sys.stdout.flush()
        sys.stderr.write(
            f"interrupted ({name}): gymbuild stopped; {_queued_so_far()}every job it started is recorded "
            "and goes on (`gymbuild status` shows them)\n"
        )
        sys.stderr.flush()
    except OSError:  # SIGHUP: the terminal may be gone
        pass
    return status


def _queued_so_far() -> str:
    """`N of M benchmarks queued, K not (...); ` when the run began to queue, else nothing. The line
    is said whatever happens: a summary that cannot be read is left out."""
    summary = interrupts.PROCESS.summary
    if summary is None:
        return ""
    try:
        return f"{summary()}; "
    except Exception as e:  # the line must be said: a damaged workspace only shortens it
        sys.stderr.write(repr(e))
        return ""


def _reader_gone() -> int:
    """stdout's reader has gone: what is left to print goes nowhere, quietly, and the status is a
    shell's for a command SIGPIPE ended (141), as `yes | head -1` gives."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE


def _main(argv: Sequence[str] | None) -> int:
    from gymbuild.cli.argv import normalize  # late: start-up

    given = sys.argv[1:] if argv is None else argv
    parsed = normalize(given)
    if parsed.error is not None:
        from gymbuild.request.verbs import mistake_status  # late: start-up

        print(parsed.error, file=sys.stderr)
        return mistake_status(given)  # 1, or compare's usage error's 64
    args = list(parsed.args)
    answered = answer_here(args)
    if answered is not None:
        return answered
    early = _connect_ahead(args)

    from gymbuild.cli import graph  # late: start-up; doit (House rules)
    from gymbuild.errors import UserError  # late: start-up

    try:
        namespace = graph.namespace(args, early)
    except UserError as err:  # a refused argument, or the workspace held by another run: its message
        print(err, file=sys.stderr)
        return err.status  # 1, or a gate's usage error's own (errors.UsageError)
    return _doit(namespace).run(args)


if __name__ == "__main__":
    sys.exit(main())
