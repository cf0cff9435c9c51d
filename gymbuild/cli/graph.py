"""The doit task graph: file-targeted steps with their dependencies, and the verbs on top of them.

Both entry points load it: the `gymbuild` console script, and `doit VERB` through it (doit_plugin.py),
through doit's ModuleTaskLoader, each with the namespace `namespace(argv)` makes from the command
line, parsed once: one run context (session.Session) per run, no module state.

    resolve          -> resolved-config.yaml                     (file_dep: none; the config itself)
    script_code      -> script-code                              (rewritten when the code that makes
                                                                  scripts changes: templates, modules)
    stage:<bench>    -> <bench>/job.sh [otel/collector.yaml]     (file_dep: resolved config, script-code)
    sync             -> stamps/sync                              (file_dep: every staged file)
    queue:<bench>    -> outcomes/<bench>.json                    (file_dep: its job.sh, stamps/sync)
    record           -> the workspace's copy of gym-job.json     (file_dep: every outcome)
    render <- stage; submit <- record; the day-two verbs stand alone

The order of the steps is the pipeline's (submit/pipeline.py STEPS), not written here: each step's
task depends on the tasks of the step before it there (Graph._creator), and its action is that
step's, for this run.

Whether a step is up to date is decided from the workspace (stamps and outcome files) by its
`uptodate` check, never from doit's database alone (doit saves that only when a run ends); file_dep
and targets say what the step reads and writes, so `doit info`, `doit list --status` and `doit
clean` tell the truth. Every step's action is idempotent against the workspace, so running it when
doit's database is stale does nothing twice. Each step is batched: the first stage:<bench> task
stages every stale benchmark, the first queue:<bench> task queues every benchmark the run queues,
and the tasks after them find theirs done. `doit clean` removes staged files of benchmarks not
queued yet, never an outcome.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import TypedDict

from doit.dependency import TimestampChecker
from doit.exceptions import TaskFailed

from gymbuild.cli.reporter import GymReporter
from gymbuild.cli.task_kinds import TaskDict, TaskMaker, TaskResult, fail_with, verb_doc
from gymbuild.day_two import act, logs, status
from gymbuild.errors import UserError
from gymbuild.plan import shard_units
from gymbuild.plan.job import job_dir_of
from gymbuild.request.invocation import Invocation
from gymbuild.request.verb_args import (
    CancelArgs,
    CompareArgs,
    ExportArgs,
    LogsArgs,
    RenderArgs,
    ReportArgs,
    ResolveArgs,
    ResubmitArgs,
    ResultsArgs,
    RunsArgs,
    StatusArgs,
    SubmitArgs,
)
from gymbuild.resources import script_code_digest
from gymbuild.state.workspace import atomic_write
from gymbuild.submit import pipeline, queue, record, show, stage, sync
from gymbuild.submit.link import Link
from gymbuild.submit.session import Session


def namespace(argv: Sequence[str], early: Link | None = None) -> dict[str, object]:
    """What doit loads for the command line `argv` (after the program name): DOIT_CONFIG and the task
    creators of one run context, which owns `early` (its connection, already opening: Link.ahead).
    Raises UserError when another run holds the workspace (and closes `early`)."""
    inv = Invocation.from_argv(argv)
    session = Session(inv, early=early)
    try:
        config = doit_config(session)
    except BaseException:
        session.close()
        raise
    return {"DOIT_CONFIG": config, **Graph(session).creators()}


# DOIT_CONFIG as doit_config makes it (the functional form: one of doit's option names is `continue`).
DoitConfig = TypedDict(
    "DoitConfig",
    {
        "default_tasks": list[str],
        "dep_file": str,
        "backend": str,
        "check_file_uptodate": type[TimestampChecker],
        "continue": bool,
        "verbosity": int,
        "reporter": type[GymReporter],
    },
)


def _check_workspace(root: Path) -> None:
    """`workspace=` must name a directory, or a place one can be made: not a file, nor under one."""
    for path in (root, *root.parents):
        if path.exists():
            if not path.is_dir():
                raise UserError(
                    f"error: workspace={root}: {path} is a file, not a directory\n"
                    "    fix: pass workspace=<a directory> (it is made if missing), or leave it out"
                )
            return


def doit_config(session: Session) -> DoitConfig:
    """DOIT_CONFIG for this run: doit's database in the workspace, json backend, `continue` on.

    `continue` because one benchmark's failure must never stop the others; the json backend because
    doit's default (dbm) falls back to dbm.dumb here and corrupts under concurrent runs (saved
    through a rename, doit_backend.py: a signal during doit's own save truncated it); file_dep by
    timestamp (WorkspaceFiles).

    A run of read-only verbs holds no lock and keeps doit's database in memory: `status` must answer
    while a long submit holds the workspace, and `status run=<id>` or `runs` must leave no
    workspace behind. The lock and doit's database are the config's own (`config_dir`), so two
    configs never wait for each other; `list` and `info` only look, and take no lock. The run holds
    the lock (Session.hold_workspace) until it closes.
    """
    inv = session.inv
    _check_workspace(inv.workspace)
    if not inv.read_only and not inv.inspects:
        session.hold_workspace()
    config_dir = session.workspace.lock_dir
    return {
        "default_tasks": ["render"],  # bare `gymbuild` is the dry run, never a submit
        "dep_file": ":memory:" if inv.read_only else str(config_dir / "doit-db.json"),
        "backend": "sqlite3" if inv.read_only else "gymjson",  # json, saved atomically (doit_backend.py)
        "check_file_uptodate": WorkspaceFiles,
        "continue": True,
        "verbosity": 2,
        "reporter": GymReporter,
    }


class WorkspaceFiles(TimestampChecker):
    """doit's file_dep check: by timestamp, because the steps' own uptodate checks already know what
    changed (an md5 of the resolved config per stage task would cost seconds for a thousand
    benchmarks); and a file that is not there yet, because a step held its error before writing it
    (no sync stamp after an unreachable host), is "changed", never doit's own error: the held error
    stays the verb's one message and exit 1."""

    def info(self, file_path: str) -> os.stat_result | None:
        try:
            return os.stat(file_path)
        except FileNotFoundError:
            return None

    def check_modified(self, file_path: str, file_stat: os.stat_result | None, state: object) -> bool:
        return file_stat is None or file_stat.st_mtime != state

    def get_state(self, dep: str, current_state: object) -> float | None:
        try:
            return os.path.getmtime(dep)
        except FileNotFoundError:
            return None  # nothing saved: the file counts as changed once it appears


class Graph(TaskMaker):
    """The task creators of one run, bound to its run context. The steps' tasks are made from the
    pipeline's STEPS, in their order (each depends on the step before it); what doit needs to know of
    each (what it reads and writes, when it is up to date) is the `doit_<step>` method of its name."""

    def creators(self) -> dict[str, Callable[[], TaskResult]]:
        made = {name: getattr(self, name) for name in dir(type(self)) if name.startswith("task_")}
        for step in pipeline.STEPS:
            made[f"task_{step.name}"] = self._creator(step)
        return made

    def _creator(self, step: pipeline.Step) -> Callable[[], TaskResult]:
        """doit's creator of `step`'s task(s): its `doit_<name>` method's, each depending on the tasks
        of the step before it."""
        describe: Callable[[pipeline.Step], TaskResult] = getattr(self, f"doit_{step.name}")
        previous = pipeline.before(step.name)
        after = [previous.name] if previous else []

        def creator() -> TaskResult:
            made = describe(step)
            if made is None:
                return None
            if isinstance(made, dict):
                return {**made, "task_dep": [*after, *made.get("task_dep", [])]}
            return ({**task, "task_dep": [*after, *task.get("task_dep", [])]} for task in made)

        creator.__doc__ = describe.__doc__
        return creator

    @cached_property
    def batch(self) -> pipeline.Batch:
        """The run as the pipeline's steps take it (settled on first need: an uptodate check, or an
        action), with its one connection, asked for once."""
        return pipeline.Batch([pipeline.Work.of(self.ctx.settled)])

    @property
    def work(self) -> pipeline.Work:
        return self.batch.works[0]

    def _pipeline_ready(self) -> bool:
        """The run builds its pipeline tasks: not for read-only verbs (doit calls every task_*
        generator before it runs anything, and `status` of a thousand jobs must not compose and
        validate a thousand benchmarks), not for a sweep (its verbs hand the run to sweep/batch.py), nor
        when the config did not load (the verb says why)."""
        inv = self.ctx.inv
        return not inv.read_only and not inv.is_sweep and self.ctx.error is None

    def _stops_at_stage(self) -> bool:
        """No sync, queue or record task: the run's verbs stop at the staged tree, or it is a sweep."""
        return self.ctx.inv.stage_only or self.ctx.inv.is_sweep

    # --- the steps (pipeline.STEPS), as doit sees them ------------------------------------------------

    def doit_resolve(self, step: pipeline.Step) -> TaskDict:
        """Validate the config and print it resolved (YAML; json=1 for JSON). host: values stay
        references. As a step it writes resolved-config.yaml into the staged tree, which every stage
        task reads; printing is for a run that names the verb."""
        ctx = self.ctx
        printing = "resolve" in ctx.inv.verbs
        if not printing:
            if not self._pipeline_ready():
                return {"doc": verb_doc("resolve"), "actions": []}
            target = stage.resolved_path(ctx.workspace)
            return {
                "doc": verb_doc("resolve"),
                **self.step(
                    lambda: step.run(self.batch),
                    lambda: stage.resolved_written(ctx.settled),
                    file_dep=[],
                    targets=[target],
                    clean=[lambda: target.unlink(missing_ok=True)],
                    teardown=False,
                ),
            }
        # The verb: `gymbuild resolve` alone leaves no submission behind; with other verbs it also
        # writes the file they read.
        writes = any(v != "resolve" for v in ctx.inv.verbs)

        def action() -> None:
            if writes:
                stage.write_resolved(ctx.settled)
            show.print_resolved(ctx, ResolveArgs.of(ctx.inv))

        task = self.verb("resolve", action)
        if not ctx.inv.is_sweep and writes and ctx.error is None:
            task["targets"] = [str(stage.resolved_path(ctx.workspace))]
        return task

    def stage_targets(self, bench: str) -> list[str]:
        """The files stage:<bench> writes (render.render_job: job.sh, and the collector's config when
        the config turns the collector on), known without planning anything."""
        config, stage_dir = self.ctx.config, self.ctx.workspace.stage  # a sharded one's: its shards'
        count = config.driver.benchmarks[bench].shards if bench in config.driver.benchmarks else 1
        names = ["job.sh", *(["otel/collector.yaml"] if config.otel.enabled else [])]
        return [f"{stage_dir}/{job_dir_of((u,))}/{n}" for u in shard_units(bench, count) for n in names]

    def script_code_path(self) -> Path:
        """Beside the stamps, not among them: a new submission empties stamps/, and this file is about
        gymbuild's code, not the submission."""
        return self.ctx.workspace.scratch / "script-code"

    def task_script_code(self) -> TaskDict:
        """The digest of the code that makes job scripts (templates and modules), as one file that is
        rewritten only when that code changes: every stage task reads it, so doit checks one file per
        benchmark for them, not each of the templates."""
        if not self._pipeline_ready():
            return {"actions": []}
        path = self.script_code_path()

        def write() -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, script_code_digest(), durable=False)

        def current() -> bool:
            try:
                return path.read_text() == script_code_digest()
            except OSError:
                return False

        return self.step(write, current, file_dep=[], targets=[path], clean=[], teardown=False)

    def doit_stage(self, step: pipeline.Step) -> Iterator[TaskDict]:
        """Render each benchmark's job script into the staged tree (only what changed).

        The first stage task of a run stages every stale benchmark; the tasks after it find theirs
        done."""
        if not self._pipeline_ready():
            return
        ctx = self.ctx
        inputs = [str(stage.resolved_path(ctx.workspace)), str(self.script_code_path())]

        def staged(bench: str) -> bool:
            return stage.staged(self.work.run, self.work.packing, bench)

        def action(bench: str) -> None:
            if not staged(bench):
                step.run(self.batch)

        for bench in ctx.selected():
            targets = self.stage_targets(bench)
            task = self.step(
                functools.partial(action, bench),
                functools.partial(staged, bench),
                file_dep=inputs,
                targets=targets,
                clean=[functools.partial(stage.unstage, ctx.workspace, bench, targets)],
                teardown=False,
            )
            yield {"name": bench, **task}

    def task_render(self) -> TaskDict:
        """The dry run: print the remote run dir and every job script (secrets masked); queue nothing."""
        return self.verb(
            "render",
            self.verb_action(lambda: show.print_dry_run(self.ctx, RenderArgs.of(self.ctx.inv))),
            ["stage"],
        )

    def doit_sync(self, step: pipeline.Step) -> TaskDict:
        """Check mounts and copy the staged tree to the run directory (only when something will be queued)."""
        ctx = self.ctx
        if self._stops_at_stage():
            return {"actions": []}
        if ctx.error is not None:
            return {"actions": [fail_with(ctx.error)]}
        if ctx.inv.submits:
            ctx.connect_early()  # the SSH handshake overlaps the rendering (nothing opens on a no-op)
        staged = [p for b in ctx.selected() for p in self.stage_targets(b)]
        return self.step(
            lambda: step.run(self.batch),
            lambda: self.work.synced(),
            file_dep=[stage.resolved_path(ctx.workspace), *staged],
            targets=[ctx.workspace.stamps_dir / sync.SYNC_STAMP],
            clean=[],  # the stamp says what the run directory holds: it outlives the staged files
        )

    def doit_queue(self, step: pipeline.Step) -> Iterator[TaskDict]:
        """Queue each benchmark that has no job id yet (one sbatch each, in the run's shell session).

        The first queue task of a run queues every benchmark the run queues (one pipelined pass), the
        tasks after it find theirs done (a queued benchmark is never queued again)."""
        ctx = self.ctx
        if self._stops_at_stage() or ctx.error is not None:
            return
        synced, outcomes = f"{ctx.workspace.stamps_dir}/{sync.SYNC_STAMP}", ctx.workspace.outcomes_dir

        def queued(bench: str) -> bool:
            return queue.queued(ctx.settled, bench)

        def action(bench: str) -> None:
            # A benchmark this run wrote down as waiting for room waits for a later pass (watch=1's).
            if bench in ctx.memory.queue_done or bench in ctx.memory.waiting or queued(bench):
                return
            try:
                step.run(self.batch)
            except UserError:
                if bench not in ctx.memory.queue_done:
                    raise  # else the task of the benchmark it stopped at reports it when doit gets there

        for bench in ctx.selected():
            task = self.step(
                functools.partial(action, bench),
                functools.partial(queued, bench),
                file_dep=[*(p for p in self.stage_targets(bench) if p.endswith("/job.sh")), synced],
                targets=[f"{outcomes}/{bench}.json"],  # Workspace.outcome_path
                clean=[],  # an outcome holds the job id of a queued job: never removed
            )
            yield {"name": bench, **task}

    def doit_record(self, step: pipeline.Step) -> TaskDict:
        """Write the record: the local index first (best-effort), then gym-job.json in the run directory."""
        ctx = self.ctx
        if self._stops_at_stage():
            return {"actions": []}
        if ctx.error is not None:
            return {"actions": [fail_with(ctx.error)]}
        outcomes = [ctx.workspace.outcome_path(b) for b in ctx.selected()]

        def up_to_date() -> bool:
            # A benchmark never queued has no outcome file yet: the record is not up to date (and
            # doit must not look for a file_dep that is not there).
            run = ctx.settled
            return record.recorded(run.submission, run.workspace) and all(p.exists() for p in outcomes)

        return self.step(
            lambda: step.run(self.batch),
            up_to_date,
            file_dep=outcomes,
            targets=[record.manifest_copy(ctx.workspace)],
            clean=[],  # the copy of a submission's manifest: never removed
            after_failure=True,
        )

    def task_submit(self) -> TaskDict:
        """Submit every benchmark not queued yet; print the run dir and each job id (json=1: the manifest)."""

        def report() -> TaskFailed | None:
            args = SubmitArgs.of(self.ctx.inv)
            failure = show.report_submit(self.ctx, args)
            if failure or not args.watch:
                return TaskFailed(failure) if failure else None
            from gymbuild.day_two import feed  # late: watch=1 only (House rules)

            feed.feed(self.ctx, args)
            return None

        if self.ctx.inv.follow and not self.ctx.inv.is_sweep:
            refused = UserError(
                "error: follow=1 follows a sweep over paths(GLOB) as checkpoints appear; this is no sweep\n"
                "    fix: add multirun=1 and sweep the checkpoint: 'services.policy.model=paths(/ckpts/*)'"
            )
            return {"doc": verb_doc("submit"), "actions": [fail_with(refused)], "uptodate": [False]}
        if self.ctx.inv.watch and self.ctx.inv.is_sweep:
            refused = UserError(
                "error: watch=1 feeds one submission's waiting benchmarks; a sweep's are fed by follow=1 "
                "(or a later `gymbuild submit multirun=1`)\n    fix: drop watch=1, or add follow=1"
            )
            return {"doc": verb_doc("submit"), "actions": [fail_with(refused)], "uptodate": [False]}
        return self.verb("submit", self.verb_action(report), ["record"])

    # --- the day-two verbs --------------------------------------------------------------------------

    def task_status(self) -> TaskDict:
        """Per benchmark: job id, state, exit code, elapsed, nodes (one squeue and one sacct per call)."""
        return self.verb(
            "status", lambda: status.print_status(self.ctx, StatusArgs.of(self.ctx.inv)), needs_config=False
        )

    def task_logs(self) -> TaskDict:
        """Print (follow=1: follow) one benchmark's newest service and driver logs: only=<bench>."""
        return self.verb(
            "logs", lambda: logs.print_logs(self.ctx, LogsArgs.of(self.ctx.inv)), needs_config=False
        )

    def task_cancel(self) -> TaskDict:
        """Cancel the submission's pending and running jobs (only= narrows)."""
        return self.verb(
            "cancel", lambda: act.cancel(self.ctx, CancelArgs.of(self.ctx.inv)), needs_config=False
        )

    def task_resubmit(self) -> TaskDict:
        """Re-queue the benchmarks whose job ended FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED
        or BOOT_FAIL, into the same run directory (the submit pipeline, for those benchmarks)."""
        return self.verb("resubmit", lambda: act.resubmit(self.ctx, ResubmitArgs.of(self.ctx.inv)))

    def task_results(self) -> TaskDict:
        """The score table (read.py); what the user sees is in request/verbs.py."""

        def action() -> None:
            from gymbuild.results import read  # late: measured, off every other verb (House rules)

            read.print_results(self.ctx, ResultsArgs.of(self.ctx.inv))

        return self.verb("results", action, needs_config=False)

    def task_compare(self) -> TaskDict:
        """Two runs paired by task and repeat (results/compare_read.py); its help: request/verbs.py."""

        def action() -> None:
            from gymbuild.results import compare_read  # late: measured, as read

            compare_read.print_compare(self.ctx, CompareArgs.of(self.ctx.inv))

        return self.verb("compare", action, needs_config=False)

    def task_export(self) -> TaskDict:
        """A sweep's series to MLflow (export.py); what the user sees is in request/verbs.py."""

        def action() -> None:
            from gymbuild.sweep import export  # late: measured, as read

            export.export(self.ctx, ExportArgs.of(self.ctx.inv))

        return self.verb("export", action, needs_config=False)

    def task_report(self) -> TaskDict:
        """A sweep's series as one HTML page (report.py); what the user sees is in request/verbs.py."""

        def action() -> None:
            from gymbuild.sweep import report  # late: measured, as read

            report.report(self.ctx, ReportArgs.of(self.ctx.inv))

        return self.verb("report", action, needs_config=False)

    def task_runs(self) -> TaskDict:
        """List this machine's submissions from the local index, newest first (json=1 for scripts)."""

        def action() -> None:
            from gymbuild.day_two import runs  # late: measured, about 1 ms off every other verb

            runs.print_runs(RunsArgs.of(self.ctx.inv))

        return self.verb("runs", action, needs_config=False)
