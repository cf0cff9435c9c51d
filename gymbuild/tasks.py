"""The doit task graph. Each action is a call into the modules that do the work; no logic lives here.

Both entry points load this module: `doit` through the project's dodo.py, and the `gymbuild` console
script through doit's ModuleTaskLoader, so `doit VERB` and `gymbuild VERB` are the same command.

    resolve                      print the resolved config
    stage:<bench> ... -> render  render each job script into the staged tree; print the dry run
    stage:<bench> ... -> sync -> queue:<bench> ... -> record -> submit

Whether a task is up to date is decided from the workspace (stamps and outcome files, see
workspace.py), never from doit's own database alone: doit saves that only when a run ends.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from doit import doit_cmd
from doit.exceptions import TaskFailed

from gymbuild import verbs
from gymbuild.errors import UserError
from gymbuild.invocation import (
    READ_ONLY_VERBS,
    STAGE_ONLY_VERBS,
    Invocation,
    command_variables,
    command_verbs,
)
from gymbuild.reporter import GymReporter
from gymbuild.session import Session, hold_workspace

# Set by doit_config for a run of read-only verbs only. doit calls every task_* generator before it
# runs anything, and the pipeline's generators ask the config for its benchmarks: in such a run they
# yield nothing, so `status` of a thousand jobs does not compose and validate a thousand benchmarks.
_READ_ONLY_RUN = False
# Set by doit_config: the run's verbs stop at the staged tree (render, resolve), so it builds no sync,
# queue or record task (a thousand queue tasks nobody runs cost a dry run a tenth of a second).
_STAGE_ONLY_RUN = False
# Set by doit_config: the run submits, so the connection may be opened while the stage tasks render.
_SUBMIT_RUN = False
# Set by doit_config: multirun=1 or sweep=ID. The verbs hand the whole run to sweep.py, which drives
# one submission per combination; the per-benchmark steps of the one config are not built.
_SWEEP_RUN = False


def doit_config(workspace: Path | None = None, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """DOIT_CONFIG for this run: doit's database in the workspace, json backend, `continue` on.

    `continue` because one benchmark's failure must never stop the others; the json backend because
    doit's default (dbm) falls back to dbm.dumb here and corrupts under concurrent runs.

    A run of read-only verbs (`argv`: the command line after the program name) holds no lock and
    keeps doit's database in memory: `status` must answer while a long submit holds the workspace,
    and `status run=<id>` or `runs` must leave no `.gymbuild/` in whatever directory it is run from.
    """
    global _READ_ONLY_RUN, _STAGE_ONLY_RUN, _SUBMIT_RUN, _SWEEP_RUN
    ws = workspace or Invocation.from_vars(doit_cmd._CMDLINE_VARS or {}).workspace
    args = sys.argv[1:] if argv is None else argv
    verbs = command_verbs(args)
    _SWEEP_RUN = Invocation.from_vars(command_variables(args)).is_sweep
    read_only = _READ_ONLY_RUN = bool(verbs) and set(verbs) <= READ_ONLY_VERBS
    _STAGE_ONLY_RUN = set(verbs) <= READ_ONLY_VERBS | STAGE_ONLY_VERBS  # none: the default, render
    _SUBMIT_RUN = "submit" in verbs
    if not read_only:
        hold_workspace(ws)
    return {
        "default_tasks": ["render"],  # bare `gymbuild` is the dry run, never a submit
        "dep_file": ":memory:" if read_only else str(ws / "doit-db.json"),
        "backend": "sqlite3" if read_only else "json",
        "continue": True,
        "verbosity": 2,
        "reporter": GymReporter,
    }


_SESSION: tuple[dict[str, str], Session] | None = None
_NO_VARIABLES: dict[str, str] = {}


def session() -> Session:
    """The Session of the current doit run: one per set of command-line variables.

    doit makes a new variables dict each time it parses a command line, so its identity marks the run
    (tests run several in one process).
    """
    global _SESSION
    # Not `or {}`: a command line without variables gives an empty (falsy) dict, and a fresh `{}` per
    # call would make a new Session per task, losing what the queue tasks did before `submit` reports.
    variables = doit_cmd._CMDLINE_VARS if doit_cmd._CMDLINE_VARS is not None else _NO_VARIABLES
    if _SESSION is None or _SESSION[0] is not variables:
        if _SESSION is not None:
            _SESSION[1].close()
        _SESSION = (variables, Session(Invocation.from_vars(variables)))
    return _SESSION[1]


def user_action(func: Callable[..., Any]) -> Callable[..., Any]:
    """A task action whose UserError becomes doit's TaskFailed: the message, exit 1, no traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except UserError as err:
            return TaskFailed(str(err))

    return wrapper


def user_check(func: Callable[[], bool]) -> Callable[[], bool]:
    """An uptodate check that a user error leaves "not up to date": doit would print a traceback for
    an exception raised here, while the task's action raises the same error again as a clean message.

    Not functools.wraps, here and in step_action: doit inspects the signature of every check and
    action it runs, and following `__wrapped__` into a partial cost ~0.1 s per 1000 benchmarks."""

    def wrapper() -> bool:
        try:
            return func()
        except UserError:
            return False

    return wrapper


def step_action(func: Callable[[], None], *, after_failure: bool = False) -> Callable[[], None]:
    """An intermediate step (stage, sync, queue, record) whose user error is held for the verb.

    Failing the step itself would make doit skip its dependants with an "unmet dependency" and exit 2;
    holding the error lets the verb task report it (and what was queued) and exit 1. Once an error
    is held the later steps do nothing, so nothing is half-queued, except the record
    (`after_failure`), which must still write down whatever was queued before the failure.
    """

    def wrapper() -> None:
        s = session()
        if s.held and not (after_failure and s.queued_now):
            return
        try:
            func()
        except UserError as err:
            s.held.append(err)

    return wrapper


def _verb_action(func: Callable[[], Any]) -> Callable[[], Any]:
    """The verb's action: what the steps held is the verb's failure, after its own report."""

    def action() -> Any:
        s = session()
        result = func() if not s.held or s.queued_now else None
        if s.held:
            return TaskFailed("\n".join(dict.fromkeys(str(err) for err in s.held)))
        return result

    return action


def _fail_with(error: UserError) -> Callable[[], TaskFailed]:
    return lambda: TaskFailed(str(error))


def _verb(
    name: str, action: Callable[[], Any], task_dep: list[str] | None = None, *, needs_config: bool = True
) -> dict[str, Any]:
    """A top-level command; when the config did not load it fails with the config's errors instead.

    Its doc (what `doit list` shows) is its line in verbs.py, the registry `gymbuild --help` reads.
    """
    entry = verbs.verb(name)
    doc = entry.does if entry else ""
    s = session()
    if _SWEEP_RUN and name in verbs.SWEEP_VERBS:
        from gymbuild import sweep

        action, task_dep, needs_config = sweep.verb_action(name, s), [], False
    if needs_config and not _READ_ONLY_RUN and s.error is not None:
        return {"doc": doc, "actions": [_fail_with(s.error)], "uptodate": [False]}
    return {
        "doc": doc,
        "actions": [user_action(action)],
        "task_dep": task_dep or [],
        "uptodate": [False],
        "teardown": [s.close],
        # Straight to the terminal: doit would also keep a copy of everything the verb prints, which
        # for the dry run of 1000 benchmarks is 11 MB held twice.
        "io": {"capture": False},
    }


def task_resolve() -> dict[str, Any]:
    """Validate the config and print it resolved (YAML; json=1 for JSON). host: values stay references."""
    return _verb("resolve", lambda: session().print_resolved())


def _step(
    action: Callable[[], None],
    check: Callable[[], bool],
    task_dep: list[str],
    *,
    after_failure: bool = False,
    teardown: bool = True,
) -> dict[str, Any]:
    """A step of the submit pipeline: whether it is up to date is read from the workspace, and its
    user errors are held for the verb (step_action). The session is closed by the teardown of the
    tasks that follow a stage task (sync, render), not by a thousand stage tasks each."""
    return {
        "actions": [step_action(action, after_failure=after_failure)],
        "task_dep": task_dep,
        "uptodate": [user_check(check)],
        "teardown": [session().close] if teardown else [],
    }


def task_stage() -> Any:
    """Render each benchmark's job script into the staged tree (only what changed)."""
    if _READ_ONLY_RUN or _SWEEP_RUN:
        return
    s = session()
    if s.error is not None:
        return
    for bench in s.selected():
        stage, staged = functools.partial(s.stage, bench), functools.partial(s.staged, bench)
        step = _step(stage, staged, [], teardown=False)
        yield {"name": bench, **step}


def task_render() -> dict[str, Any]:
    """The dry run: print the remote run dir and every job script (secrets masked); queue nothing."""
    return _verb("render", _verb_action(lambda: session().print_dry_run()), ["stage"])


def task_sync() -> dict[str, Any]:
    """Check mounts and copy the staged tree to the run directory (only when something will be queued)."""
    if _STAGE_ONLY_RUN or _SWEEP_RUN:
        return {"actions": []}
    s = session()
    if s.error is not None:
        return {"actions": [_fail_with(s.error)]}
    if _SUBMIT_RUN:
        s.connect_early()  # the SSH handshake overlaps the rendering (nothing opens on a no-op)
    return _step(s.sync, s.synced, [f"stage:{b}" for b in s.selected()])


def task_queue() -> Any:
    """Queue each benchmark that has no job id yet (one sbatch each, in the run's shell session)."""
    if _STAGE_ONLY_RUN or _SWEEP_RUN:
        return
    s = session()
    if s.error is not None:
        return
    for bench in s.selected():
        step = _step(functools.partial(s.queue, bench), functools.partial(s.queued, bench), ["sync"])
        yield {"name": bench, **step}


def task_record() -> dict[str, Any]:
    """Write the record: the local index first (best-effort), then gym-job.json in the run directory."""
    if _STAGE_ONLY_RUN or _SWEEP_RUN:
        return {"actions": []}
    s = session()
    if s.error is not None:
        return {"actions": [_fail_with(s.error)]}
    return _step(s.record, s.recorded, [f"queue:{b}" for b in s.selected()], after_failure=True)


def task_submit() -> dict[str, Any]:
    """Submit every benchmark not queued yet; print the run dir and each job id (json=1: the manifest)."""
    return _verb("submit", _verb_action(lambda: session().report_submit()), ["record"])


def _day_two() -> Any:
    """gymbuild.day_two, imported when a day-two verb runs, not by every render and submit."""
    from gymbuild import day_two

    return day_two


def task_status() -> dict[str, Any]:
    """Per benchmark: job id, state, exit code, elapsed, nodes (one squeue and one sacct per call)."""
    return _verb("status", lambda: _day_two().print_status(session()), needs_config=False)


def task_logs() -> dict[str, Any]:
    """Print (follow=1: follow) one benchmark's newest service and driver logs: only=<bench>."""
    return _verb("logs", lambda: _day_two().print_logs(session()), needs_config=False)


def task_cancel() -> dict[str, Any]:
    """Cancel the submission's pending and running jobs (only= narrows)."""
    return _verb("cancel", lambda: _day_two().cancel(session()), needs_config=False)


def task_resubmit() -> dict[str, Any]:
    """Re-queue the benchmarks whose job ended FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED or
    BOOT_FAIL, into the same run directory."""
    return _verb("resubmit", lambda: _day_two().resubmit(session()))


def task_results() -> dict[str, Any]:
    """The score table (results_read.py); what the user sees is in verbs.py."""

    def action() -> None:
        from gymbuild import results_read

        results_read.print_results(session())

    return _verb("results", action, needs_config=False)


def task_runs() -> dict[str, Any]:
    """List this machine's submissions from the local index, newest first (json=1 for scripts)."""
    return _verb("runs", lambda: _day_two().print_runs(session()), needs_config=False)
