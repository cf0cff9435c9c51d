"""The two kinds of doit task the graph is made of, a step and a verb, and how a user error travels
between them.

Apart from graph.py so that the graph reads as the graph (which tasks a run has, what each reads
and writes, what it depends on) while the contract every one of them keeps with doit lives once:
a step holds its user error for the verb instead of failing (doit would skip the rest and exit 2),
a verb reports what was held as one message and exit 1, and no check or action shows a traceback.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import ParamSpec, TypeAlias, TypedDict, TypeVar

from doit.exceptions import TaskFailed

from gymbuild.cli.reporter import Undecided
from gymbuild.errors import Inconclusive, OutputClosed, Stopped, UsageError, UserError, stdout_closed
from gymbuild.request import verbs
from gymbuild.request.verb_args import SubmitArgs
from gymbuild.submit.session import Session

P = ParamSpec("P")
R = TypeVar("R")

# What a task's action returns to doit: None (done), a TaskFailed (the verb's one message), an
# Undecided (exit 2), or (doit allows it) a dict of values; gymbuild's return the first three.
ActionResult: TypeAlias = "TaskFailed | Undecided | None"
Action: TypeAlias = Callable[[], ActionResult]


class TaskIO(TypedDict):
    capture: bool


class TaskDict(TypedDict, total=False):
    """A doit task as gymbuild makes it: the fields of doit's task dict that the graph uses."""

    name: str  # a subtask's name (`stage:<bench>` is yielded as name=<bench>)
    doc: str
    actions: list[Action]
    file_dep: list[str]
    targets: list[str]
    task_dep: list[str]
    uptodate: list[Callable[[], bool] | bool]
    clean: list[Callable[[], None]]
    teardown: list[Callable[[], None]]
    io: TaskIO


# What a task creator returns: one task, a group of them (a generator; none at all is an empty
# group), or nothing.
TaskResult: TypeAlias = TaskDict | Iterator[TaskDict] | None


def user_action(func: Callable[P, R]) -> Callable[P, R | ActionResult]:
    """A task action whose UserError becomes doit's TaskFailed: the message, exit 1, no traceback
    (an Inconclusive gate: the message, exit 2; a UsageError: the message, its own status); and whose
    stdout, closed by its reader, ends the run quietly (OutputClosed)."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R | ActionResult:
        try:
            return func(*args, **kwargs)
        except UsageError as err:  # its own status, which doit has no TaskFailed for: past doit
            raise Stopped(str(err), err.status) from None
        except Inconclusive as err:
            return Undecided(str(err))
        except UserError as err:
            return TaskFailed(str(err))
        except BrokenPipeError:
            if not stdout_closed():  # a pipe of our own (a connection's): a bug, with its traceback
                raise
            raise OutputClosed from None

    return wrapper


def user_check(func: Callable[[], bool]) -> Callable[[], bool]:
    """An uptodate check that a user error leaves "not up to date": doit would print a traceback for
    an exception raised here, while the task's action raises the same error again as a clean message.

    Not functools.wraps, here and in TaskMaker.step_action: doit inspects the signature of every check
    and action it runs, and following `__wrapped__` into a partial cost ~0.1 s per 1000 benchmarks."""

    def wrapper() -> bool:
        try:
            return func()
        except UserError:
            return False

    # What `doit info` names when the check says "not up to date": the workspace check, not a wrapper.
    inner = func.func if isinstance(func, functools.partial) else func
    wrapper.__qualname__ = f"the workspace's {getattr(inner, '__name__', 'check')}"
    return wrapper


def fail_with(error: UserError) -> Callable[[], TaskFailed]:
    """An action that fails with an error known before the task runs (the config's, a refused argument)."""
    return lambda: TaskFailed(str(error))


def verb_doc(name: str) -> str:
    """A verb's doc (what `doit list` shows): its line in verbs.py, the registry `gymbuild --help` reads."""
    entry = verbs.verb(name)
    return entry.does if entry else ""


class TaskMaker:
    """Makes a run's steps and verbs, bound to its run context."""

    def __init__(self, ctx: Session) -> None:
        self.ctx = ctx

    def step_action(self, func: Callable[[], None], *, after_failure: bool = False) -> Action:
        """An intermediate step (stage, sync, queue, record) whose user error is held for the verb.

        Failing the step itself would make doit skip its dependants with an "unmet dependency" and exit
        2; holding the error lets the verb task report it (and what was queued) and exit 1. Once an
        error is held the later steps do nothing, so nothing is half-queued, except the record
        (`after_failure`), which must still write down whatever was queued before the failure.
        """
        ctx = self.ctx

        def wrapper() -> None:
            if ctx.held and not (after_failure and ctx.queued_now):
                return
            try:
                func()
            except UserError as err:
                ctx.held.append(err)

        return wrapper

    def verb_action(self, func: Callable[[], ActionResult]) -> Action:
        """The verb's action: what the steps held is the verb's failure, after its own report."""
        ctx = self.ctx

        def action() -> ActionResult:
            result = func() if not ctx.held or ctx.queued_now else None
            if ctx.held:
                return TaskFailed("\n".join(dict.fromkeys(str(err) for err in ctx.held)))
            return result

        return action

    def verb(
        self,
        name: str,
        action: Callable[[], ActionResult],
        task_dep: list[str] | None = None,
        *,
        needs_config: bool = True,
    ) -> TaskDict:
        """A top-level command; when the config did not load it fails with the config's errors instead."""
        ctx = self.ctx
        doc = verb_doc(name)
        if ctx.inv.is_sweep and name in verbs.SWEEP_VERBS:  # sweep/batch.py: one submission per combination
            from gymbuild.sweep import (
                day_two as sweep_day_two,  # late: measured, off every plain run (House rules)
            )
            from gymbuild.sweep import follow  # late: measured, off every plain run (House rules)

            following = name == "submit" and ctx.inv.follow  # follow.py keeps a sweep submitting
            action = (
                (lambda: follow.follow(ctx, SubmitArgs.of(ctx.inv)))
                if following
                else sweep_day_two.verb_action(name, ctx)
            )
            task_dep, needs_config = [], False
        if needs_config and not ctx.inv.read_only and ctx.error is not None:
            return {
                "doc": doc,
                "actions": [fail_with(ctx.error)],
                "uptodate": [False],
                "teardown": [ctx.close],
            }
        return {
            "doc": doc,
            "actions": [user_action(action)],
            "task_dep": task_dep or [],
            "uptodate": [False],
            "teardown": [ctx.close],
            # Straight to the terminal: doit would also keep a copy of everything the verb prints, which
            # for the dry run of 1000 benchmarks is 11 MB held twice.
            "io": {"capture": False},
        }

    def step(
        self,
        action: Callable[[], None],
        check: Callable[[], bool],
        *,
        file_dep: Sequence[str | Path],
        targets: Sequence[str | Path],
        clean: list[Callable[[], None]],
        after_failure: bool = False,
        teardown: bool = True,
    ) -> TaskDict:
        """A step of the submit pipeline: what it reads (file_dep) and writes (targets), whether it is up
        to date (read from the workspace), its user errors held for the verb (step_action), and what
        `doit clean` removes (explicitly: doit's `clean=True` would remove outcomes of queued jobs). The
        context is closed by the teardown of the steps after the stage tasks, not by a thousand stage
        tasks each."""
        return {
            "actions": [self.step_action(action, after_failure=after_failure)],
            "file_dep": [os.fspath(p) for p in file_dep],
            "targets": [os.fspath(p) for p in targets],
            "uptodate": [user_check(check)],
            "clean": clean,
            "teardown": [self.ctx.close] if teardown else [],
        }
