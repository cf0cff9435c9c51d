"""One gymbuild run: the loaded config, the workspace, the submission and the run's one connection.

The doit tasks in tasks.py call these methods as their actions and uptodate checks. State that
decides what is up to date lives in the workspace (outcome files and stamps), so a killed run loses
nothing and the next one carries on from what really happened.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import getpass
import hashlib
import json
import secrets
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gymbuild.errors import UserError
from gymbuild.executors.base import Answer, Executor, Queued, executor_for
from gymbuild.invocation import Invocation
from gymbuild.progress import Progress, on_a_terminal
from gymbuild.workspace import Outcome, Submission, Workspace, atomic_write, digest, locked

if TYPE_CHECKING:
    from gymbuild.config import Resolved

_HELD: contextlib.ExitStack | None = None
ORDER_STAMP = "benchmark-order"
IO_THREADS = 4  # outcome and stamp writes (each fsynced) at once while sbatch calls are in flight
QUEUE_PIPELINE = 16  # sbatch calls in flight at once in the run's shell (a few KB of pipe either way)


def hold_workspace(root: Path) -> None:
    """Hold the workspace lock until the process ends (or the next run in this process starts)."""
    global _HELD
    if _HELD is not None:
        _HELD.close()
    _HELD = contextlib.ExitStack()
    _HELD.enter_context(locked(root, " ".join(sys.argv[:3])))
    atexit.register(_HELD.close)


@functools.cache
def _render() -> Any:
    """gymbuild.render, with its compiled templates kept in the user's cache between runs."""
    from gymbuild import render
    from gymbuild.resources import user_cache_home

    render.keep_compiled_templates(user_cache_home() / "gymbuild" / "jinja")
    return render


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Session:
    """Everything one doit invocation shares; built lazily so `doit list` touches nothing remote, and
    `status`, `logs` and `cancel`, which read the workspace, never load the config at all."""

    def __init__(self, inv: Invocation) -> None:
        self.inv = inv
        self.workspace = Workspace(inv.workspace, inv.config)
        # User errors of the steps between the config and the verb (stage, sync, queue, record): kept
        # for the verb to report, so doit sees no failed dependency (it would exit 2, not the user's 1).
        self.held: list[UserError] = []
        self.queued_now: list[str] = []
        self._submission: Submission | None = None
        self._connection: Any = None
        self._stage_digests: dict[str, str] = {}
        self._plans: dict[str, Any] = {}
        self._planner: Any = None
        self._rendered: dict[str, Any] = {}  # bench -> RenderedJob of a plan without secrets
        self._queue_total: int | None = None
        self._queue_done: set[str] = set()  # benchmarks this run has queued (or tried to)
        self._queue_locked = False  # the run's shell holds the run dir's queue lock (slurm)
        self._progress_lock = threading.Lock()  # outcomes are written on IO threads
        self.progress = Progress(on_a_terminal(json=inv.json))  # "queued 350/1000", on a terminal only
        self._opening: tuple[Any, threading.Thread, list[BaseException]] | None = None

    # --- the config, loaded on first need ---------------------------------------------------------

    @cached_property
    def _loaded(self) -> tuple[Resolved | None, UserError | None]:
        """The config, or why it did not load. Composing and validating a thousand benchmarks costs
        seconds, so only the verbs that use the config pay for it."""
        from gymbuild.cache import ValidatedConfigs
        from gymbuild.config import load_config
        from gymbuild.resources import user_cache_home

        cache = ValidatedConfigs(user_cache_home() / "gymbuild" / "configs")
        try:
            resolved = load_config(self.inv.config, self.inv.overrides, cache=cache)
            self._check_only(resolved.config)
        except UserError as err:
            return None, err
        return resolved, None

    @property
    def resolved(self) -> Resolved | None:
        return self._loaded[0]

    @property
    def error(self) -> UserError | None:
        return self._loaded[1]

    # --- what the run covers -----------------------------------------------------------------------

    @property
    def config(self) -> Any:
        assert self.resolved is not None
        return self.resolved.config

    def _check_only(self, config: Any) -> None:
        unknown = [b for b in self.inv.only if b not in config.driver.benchmarks]
        if unknown:
            known = ", ".join(config.driver.benchmarks)
            raise UserError(
                f"error: {self.inv.config}: only= names benchmark(s) the config does not have: "
                f"{', '.join(unknown)}\n    fix: pick from {known}"
            )

    def selected(self) -> list[str]:
        """The benchmarks this run acts on: `only=` when given, else every benchmark, in config order."""
        names = list(self.config.driver.benchmarks)
        return [b for b in names if b in self.inv.only] if self.inv.only else names

    def warn(self, *, executor: bool = False) -> None:
        """The config's warnings; with `executor`, also what its executor will not do (render, submit)."""
        assert self.resolved is not None
        extra = self.executor.warnings(self.config) if executor else ()
        for warning in (*self.resolved.warnings, *extra):
            _err(f"warning: {warning}")

    # --- the submission's identity ----------------------------------------------------------------

    @property
    def executor_name(self) -> str:
        return self.config.compute.type

    @property
    def executor(self) -> Executor:
        """The config's executor (executor_for); day two asks the record's instead."""
        return executor_for(self.config)

    @property
    def output_path(self) -> str:
        """job.output_path. For the local executor a relative path is taken from the working directory,
        where the workspace is too, so the example's `gym-runs` works from a fresh clone without setup;
        on a cluster it would mean the login shell's home, so it is left to the remote shell there."""
        path = Path(self.config.job.output_path)
        if self.executor.RUNS_HERE and not path.is_absolute():
            path = Path.cwd() / path
        return str(path)

    def adopt_submission(self, submission: Submission) -> None:
        """Work on `submission` as it was submitted (day two: its host and run dir, even if the config
        has been edited since), without settling the config's own."""
        self._submission = submission

    def submission(self) -> Submission:
        """The current submission of this config, allocated on first need (or fresh with new=1)."""
        if self._submission is not None:
            return self._submission
        from gymbuild.executors.connection import is_this_machine
        from gymbuild.jobs import new_gym_job_id, utc_now, utc_timestamp

        compute = self.config.compute
        hostname = None if is_this_machine(compute.hostname) else compute.hostname
        current = self.workspace.submission()
        where = (self.output_path, compute.name, self.executor_name, hostname)
        if current is not None and not self.inv.new:
            was = (str(Path(current.run_dir).parent), current.cluster, current.executor, current.hostname)
            if was == where:
                self._submission = current
                return current
            if any(o.job_id for o in self.workspace.outcomes().values()):
                raise UserError(
                    f"error: {self.inv.config}: the config now submits to {where[1]}:{where[0]}, but its "
                    f"current submission {current.gym_job_id} went to {was[1]}:{was[0]}\n"
                    "    fix: pass new=1 to start a fresh submission"
                )
        now = utc_now()
        gym_job_id = new_gym_job_id(now)
        fresh = Submission(
            gym_job_id=gym_job_id,
            run_dir=str(Path(self.output_path) / gym_job_id),
            cluster=compute.name,
            executor=self.executor_name,
            hostname=hostname,
            submitted_at=utc_timestamp(now),
            submitted_by=getpass.getuser(),
        )
        self.workspace.start(fresh)
        self._submission = fresh
        return fresh

    # --- plan and render ---------------------------------------------------------------------------

    def plan(self, bench: str) -> Any:
        """`bench`'s plan, made on first need: a no-op submit plans nothing, a re-submit of ten of a
        thousand benchmarks plans ten (whether a script is stale is told by stage_digest, unplanned)."""
        found = self._plans.get(bench)
        if found is None:
            from gymbuild.plan import planner

            try:
                if self._planner is None:
                    sub = self.submission()
                    self._planner = planner(self.config, run_dir=sub.run_dir, gym_job_id=sub.gym_job_id)
                found = self._plans[bench] = self._planner(bench)
            except UserError as err:  # the plan names the config path; the user also needs the file
                fix = "" if "fix:" in str(err) else "\n    fix: correct that value in the config"
                raise UserError(f"error: {self.inv.config}: {err}{fix}") from None
        return found

    @cached_property
    def _stage_basis(self) -> str:
        """What every benchmark's script is made from besides its own entry: the code that makes
        scripts, the secrets, the submission, and the resolved config without driver.benchmarks."""
        from gymbuild.config.model import thaw
        from gymbuild.resources import script_code_digest

        assert self.resolved is not None
        sub = self.submission()
        tree = dict(self.resolved.tree)
        tree["driver"] = {k: v for k, v in tree["driver"].items() if k != "benchmarks"}
        secrets_digest = hashlib.sha256(json.dumps(dict(self.resolved.secrets), sort_keys=True).encode())
        return digest(
            script_code_digest(), secrets_digest.hexdigest(), sub.run_dir, sub.gym_job_id, thaw(tree)
        )

    def stage_digest(self, bench: str) -> str:
        """What `bench`'s script is made from: the shared basis and the benchmark's own config entry.

        A plan depends on nothing else (plan.py is pure and a benchmark's plan reads no other
        benchmark), so equal inputs make an equal script without planning or rendering anything.
        Cached for the run: doit's uptodate checks, stage, queue and the report all ask.
        """
        found = self._stage_digests.get(bench)
        if found is None:
            from gymbuild.config.model import thaw

            assert self.resolved is not None
            entry = thaw(self.resolved.tree["driver"]["benchmarks"][bench])
            found = self._stage_digests[bench] = digest(self._stage_basis, bench, entry)
        return found

    def staged(self, bench: str) -> bool:
        """Up to date when queued already (its script is never touched again) or staged from these
        inputs (stage_digest). The digest first: it settles the submission (new=1 empties the stamps)."""
        wanted = self.stage_digest(bench)
        if self.workspace.stage_stamp(bench) == wanted:
            return True
        outcome = self._current_outcome(bench)
        return outcome is not None and bool(outcome.job_id)

    def stage(self, bench: str) -> None:
        """doit's stage:<bench>. The first call of a run stages every benchmark the run will stage, in
        one pass (stage_many); the tasks after it find theirs staged and doit skips them."""
        self.stage_many([b for b in self.selected() if b == bench or not self.staged(b)])

    def stage_many(self, benches: list[str]) -> None:
        """Render each benchmark's job and write it into the staged tree, in order; the first error (a
        plan the config cannot express) stops the pass, as a held error stops the steps after it."""
        assert self.resolved is not None
        render, secrets = _render(), self.resolved.secrets
        for done, bench in enumerate(benches):
            if done % 25 == 0 and len(benches) >= 100:
                self.progress.show(f"rendering job scripts {done}/{len(benches)}")
            plan = self.plan(bench)
            job = render.render_job(plan, secrets)
            if not plan.secrets:  # the dry run's masked text is the same text: render it once
                self._rendered[bench] = job
            files = {rel: (f.text, f.mode) for rel, f in job.files.items()}
            # No empty dirs: the sync makes logs/ (Slurm opens logs/slurm-<id>.log before the job
            # runs), and the job makes the rest (artifacts/, model-calls/, ...) as it starts.
            self.workspace.write_staged(bench, files)
            self.workspace.set_stage_stamp(bench, self.stage_digest(bench))
        self.progress.done(keep=False)

    def print_resolved(self) -> None:
        from gymbuild.config.output import dump_tree

        assert self.resolved is not None
        self.warn()
        sys.stdout.write(dump_tree(self.resolved.tree, as_json=self.inv.json))

    def print_dry_run(self) -> None:
        """Every selected benchmark's script rendered with secrets masked; nothing is queued or recorded."""
        render = _render()
        assert self.resolved is not None
        self.warn(executor=True)
        mask = render.mask_secrets(self.resolved.secrets)
        jobs = {b: self._rendered.get(b) or render.render_job(self.plan(b), mask) for b in self.selected()}
        run_dir = self.submission().run_dir
        if self.inv.json:
            payload = {
                "run_dir": run_dir,
                "benchmarks": {b: {rel: f.text for rel, f in j.files.items()} for b, j in jobs.items()},
            }
            sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        else:
            for chunk in render.dry_run_chunks(run_dir, jobs):  # doit's stdout Writer has no writelines
                sys.stdout.write(chunk)

    # --- the connection ------------------------------------------------------------------------

    def connect_early(self) -> None:
        """Start opening the run's connection in the background when this run will queue something.

        The SSH handshake and the remote shell's start take about half a second of waiting, which
        the stage tasks' rendering can fill; a run with nothing to queue opens nothing. A failure is
        raised where the connection is first used, as if it had been opened there.
        """
        if self._connection is not None or self._opening is not None:
            return
        try:
            if not self._to_queue():
                return
        except UserError:  # e.g. the config now submits elsewhere: the step that needs it says so
            return
        from gymbuild.executors.connection import Connection

        conn = Connection(self.config.compute.hostname)
        failed: list[BaseException] = []

        def open_it() -> None:
            try:
                conn.open()
            except BaseException as err:  # handed to the main thread in connection()
                failed.append(err)

        thread = threading.Thread(target=open_it, name="gymbuild-connect", daemon=True)
        thread.start()
        self._opening = (conn, thread, failed)

    def _opened_early(self) -> None:
        opening, self._opening = self._opening, None
        if opening is None:
            return
        conn, thread, failed = opening
        thread.join()
        if failed:
            conn.close()
            raise failed[0]
        self._connection = conn

    def connection(self, hostname: str | None = None, *, use_config: bool = True) -> Any:
        """The run's one connection, opened on first use and closed by the tasks' teardown.

        It goes to the config's compute host, or to `hostname` for a record found by `run=`.
        """
        self._opened_early()
        if self._connection is None:
            from gymbuild.executors.connection import Connection

            conn = Connection(self.config.compute.hostname if use_config else hostname)
            conn.open()
            self._connection = conn
        return self._connection

    def close(self) -> None:
        self.workspace.save_stage_stamps()
        with contextlib.suppress(UserError):
            self._opened_early()  # opened for nothing (a render failed): closed all the same
        conn, self._connection = self._connection, None
        self._queue_locked = False  # the lock goes with the shell that held it
        if conn is not None:
            conn.close()

    # --- sync ----------------------------------------------------------------------------------

    def _current_outcome(self, bench: str) -> Outcome | None:
        """The bench's outcome in the current submission. The submission is settled first: with new=1
        that empties the outcomes, which an uptodate check must not read before (it would find the
        old submission's job ids, skip every step, and write a record into a run dir never made)."""
        self.submission()
        return self.workspace.outcome(bench)

    def _to_queue(self) -> list[str]:
        self.submission()
        outcomes = self.workspace.outcomes()
        return [b for b in self.selected() if not (b in outcomes and outcomes[b].job_id)]

    def _tree_digest(self) -> str:
        """What the synced tree was made from: each staged benchmark and the resolved config (as JSON:
        the YAML text is only written when the tree is synced)."""
        from gymbuild.config.model import thaw

        assert self.resolved is not None
        return digest([self.stage_digest(b) for b in self.selected()], thaw(self.resolved.tree))

    @functools.cache  # noqa: B019 (one Session per run; the YAML dump of 1000 benchmarks is ~0.06 s)
    def resolved_text(self) -> str:
        from gymbuild.config.output import dump_tree

        assert self.resolved is not None
        return dump_tree(self.resolved.tree)

    def synced(self) -> bool:
        """Nothing to queue (so nothing to copy), or the run directory already has this staged tree."""
        return not self._to_queue() or self.workspace.stamp("sync") == self._tree_digest()

    def sync(self) -> None:
        from gymbuild.executors import rundir

        self.prepare_sync()
        sub, conn = self.submission(), self.connection()
        self.progress.show(f"copying the run directory to {conn.target}:{sub.run_dir}")
        rundir.sync(conn, str(self.workspace.stage), sub.run_dir)
        self.progress.done(keep=False)
        self.synced_now()

    def prepare_sync(self, *, check_mounts: bool = True) -> None:
        """Everything of the sync before the copy: the mounts checked (unless a sweep checked them
        for all its combinations at once), the run directory made, the resolved config staged."""
        from gymbuild.executors import rundir
        from gymbuild.jobs import RESOLVED_CONFIG_NAME

        sub = self.submission()
        conn = self.connection()
        if check_mounts and self.executor.CHECKS_MOUNTS:
            rundir.check_mounts(conn, rundir.mount_sources(self.config), str(self.inv.config))
        # The intent is stamped before the directory is made: a run killed after the remote mkdir must
        # not find its own run directory "already existing" and refuse to go on (only new=1 would help).
        fresh = self.workspace.stamp("sync") is None and self.workspace.stamp("run-dir") != sub.run_dir
        if fresh:
            self.workspace.set_stamp("run-dir", sub.run_dir)
        try:
            rundir.prepare_run_dir(conn, sub.run_dir, self._to_queue(), fresh=fresh)
        except rundir.RunDirExists:
            (self.workspace.stamps_dir / "run-dir").unlink(missing_ok=True)  # not ours after all
            raise
        atomic_write(self.workspace.stage / RESOLVED_CONFIG_NAME, self.resolved_text())

    def synced_now(self) -> None:
        """The staged tree is in the run directory: say so for the next run's uptodate check."""
        self.workspace.set_stamp("sync", self._tree_digest())

    # --- queue ---------------------------------------------------------------------------------

    def queued(self, bench: str) -> bool:
        outcome = self._current_outcome(bench)
        return outcome is not None and outcome.job_id is not None

    def queue(self, bench: str) -> None:
        """doit's queue:<bench>. The first call of a run queues every benchmark the run will queue, in
        one pipelined pass (queue_many); the calls after it find theirs already done."""
        if bench in self._queue_done:
            return
        try:
            self.queue_many([b for b in self._to_queue() if b not in self._queue_done] or [bench])
        except UserError:
            if bench not in self._queue_done:
                raise  # else the task of the benchmark it stopped at reports it when doit gets there

    def queue_many(self, benches: list[str]) -> None:
        """sbatch each benchmark and write its outcome the moment its answer is read.

        Up to QUEUE_PIPELINE sbatch calls are in flight in the run's shell at once (each still its own
        command, with its own status and output), so writing outcomes and stamps here overlaps sbatch
        there: one at a time, a thousand benchmarks waited for ~10 ms of local work per sbatch. Each
        in-flight stamp is durable before its sbatch is sent, so a run killed with calls in flight
        leaves the next one what it needs to recover them (`recover_lost`); the stamps of the next
        few benchmarks and the outcomes are written (and fsynced) on IO threads, because two fsyncs a
        benchmark in this thread were most of a submit's local time.
        """
        executor = self.executor
        self._keep_benchmark_order()
        if self._queue_total is None:  # once per run: reading every outcome per sbatch was O(N^2)
            self._queue_total = len(self._to_queue())
        run_dir = self.submission().run_dir
        if not self._queue_locked:  # once per session: its shell holds the lock (slurm)
            executor.hold_queue(self.connection(), run_dir)
            self._queue_locked = True
        # Read before any new stamp is written: these are the attempts of a killed run.
        lost = {b: a for b in benches if (a := self.workspace.stamp(f"inflight-{b}")) is not None}
        earlier_outcomes = self.workspace.outcomes()  # once: only this run writes them (it holds the lock)
        fresh = collections.deque(b for b in benches if b not in lost)
        stamped: collections.deque[tuple[str, str, Future[None]]] = collections.deque()
        in_flight: collections.deque[tuple[str, Outcome | None, Answer]] = collections.deque()
        with ThreadPoolExecutor(IO_THREADS, thread_name_prefix="gymbuild-io") as io:
            writes: list[Future[None]] = []

            def stamp(bench: str) -> tuple[str, Future[None]]:
                attempt = secrets.token_hex(6)
                return attempt, io.submit(self.workspace.set_stamp, f"inflight-{bench}", attempt)

            def done(bench: str, earlier: Outcome | None, result: Queued) -> None:
                writes.append(io.submit(self._queued, bench, earlier, result))

            def receive_one() -> None:
                bench, earlier, answer = in_flight.popleft()
                done(bench, earlier, answer())

            try:
                for bench in benches:
                    script = f"{run_dir}/{bench}/job.sh"
                    earlier = earlier_outcomes.get(bench)
                    if bench in lost:
                        while in_flight:  # answers come back in order: read those sent before
                            receive_one()
                        known = frozenset(earlier.previous_job_ids) if earlier else frozenset()
                        conn, plan = self.connection(), self.plan(bench)
                        adopted = executor.recover_lost(conn, script, lost[bench], plan, known)
                        if adopted is not None:
                            done(bench, earlier, adopted)
                            continue
                        attempt, stamp_written = stamp(bench)
                    else:
                        # A few benchmarks ahead are stamped at once, no more: a run killed now
                        # leaves each stamped benchmark one recovery round trip for the next run.
                        while fresh and len(stamped) < QUEUE_PIPELINE:
                            ahead = fresh.popleft()
                            stamped.append((ahead, *stamp(ahead)))
                        _, attempt, stamp_written = stamped.popleft()
                    stamp_written.result()  # durable before the command is sent
                    answer = executor.send(self.connection(), script, self.job_environment(), attempt)
                    in_flight.append((bench, earlier, answer))
                    if len(in_flight) >= QUEUE_PIPELINE:
                        receive_one()
                while in_flight:
                    receive_one()
            finally:
                for write in writes:  # every answer read is on disk before anything else is said
                    write.result()

    def _queued(self, bench: str, earlier: Outcome | None, result: Queued) -> None:
        """Write what queueing `bench` gave (on an IO thread), then drop its in-flight stamp."""
        from gymbuild.jobs import utc_now, utc_timestamp

        self.workspace.save_outcome(
            Outcome(
                benchmark=bench,
                job_id=result.job_id,
                error=result.error,
                script_digest=self.stage_digest(bench),
                at=utc_timestamp(utc_now()),
                previous_job_ids=earlier.previous_job_ids if earlier else (),
            )
        )
        (self.workspace.stamps_dir / f"inflight-{bench}").unlink(missing_ok=True)
        with self._progress_lock:
            self._queue_done.add(bench)
            self.queued_now.append(bench)
            self.progress.show(f"queued {len(self.queued_now)}/{self._queue_total}")

    def job_environment(self) -> dict[str, str]:
        """What the job reads from the environment it is queued with: the collector's ingest token,
        which DESIGN keeps out of every file in the run directory, job.sh included."""
        assert self.resolved is not None
        otel = self.config.otel
        return {otel.token_env: self.resolved.secrets[otel.token_env]} if otel.enabled else {}

    # --- record --------------------------------------------------------------------------------

    def _benchmark_order(self) -> list[str]:
        """The config's benchmark order as of the last queueing, kept in the workspace so that status
        can list a record in config order without loading the config."""
        return json.loads(self.workspace.stamp(ORDER_STAMP) or "[]")

    def _keep_benchmark_order(self) -> None:
        names = list(self.config.driver.benchmarks)
        kept = self._benchmark_order()
        order = [*names, *(b for b in kept if b not in names)]
        if order != kept:
            self.workspace.set_stamp(ORDER_STAMP, json.dumps(order))

    def build_record(self, *, commit: bool = True) -> Any:
        """The submission record from the workspace. `commit=False` leaves gym_commit None for a record
        that is only read here (status, the plain submit report): finding the commit runs git three
        times in a checkout, a tenth of a no-op submit."""
        from gymbuild import __version__
        from gymbuild.jobs import BenchmarkJob, SubmissionRecord, gym_commit

        sub = self.submission()
        outcomes = self.workspace.outcomes()
        order = [b for b in self._benchmark_order() if b in outcomes]
        order += [b for b in outcomes if b not in order]
        return SubmissionRecord(
            gym_job_id=sub.gym_job_id,
            gym_version=__version__,
            gym_commit=gym_commit() if commit else None,
            submitted_at=sub.submitted_at,
            run_dir=sub.run_dir,
            cluster=sub.cluster,
            executor=sub.executor,
            hostname=sub.hostname,
            submitted_by=sub.submitted_by,
            executor_metadata=executor_for(sub.executor).metadata(),
            benchmarks=tuple(
                BenchmarkJob(
                    benchmark=b,
                    job_dir=f"{sub.run_dir}/{b}",
                    job_id=outcomes[b].job_id,
                    error=outcomes[b].error,
                    previous_job_ids=outcomes[b].previous_job_ids,
                )
                for b in order
            ),
        )

    def _record_digest(self) -> str:
        """What the record says of each benchmark (not the outcome files whole: serialising 1000 of
        them again was a tenth of a no-op submit)."""
        sub = self.submission()
        outcomes = self.workspace.outcomes().values()
        said = [(o.benchmark, o.job_id, o.error, o.previous_job_ids) for o in outcomes]
        return digest(sub.gym_job_id, said)

    def recorded(self) -> bool:
        return self.workspace.stamp("record") == self._record_digest()

    def record(self) -> None:
        """Local index first (it cannot fail the submit), then the manifest in the run directory."""
        from gymbuild.jobs import MANIFEST_NAME

        record = self.build_record()
        record.write_local_index()
        sub = self.submission()
        result = self.connection().write_file(f"{sub.run_dir}/{MANIFEST_NAME}", record.dumps().encode())
        if not result.ok:
            queued = " ".join(f"{j.benchmark}={j.job_id}" for j in record.benchmarks if j.job_id)
            raise UserError(
                f"error: the jobs are queued but {sub.run_dir}/{MANIFEST_NAME} could not be written on "
                f"{self.connection().target}: {result.stderr.strip()}\n"
                f"    queued: {queued or 'none'}\n"
                "    fix: note these job ids; run `doit submit` again to rewrite the record"
            )
        self.workspace.set_stamp("record", self._record_digest())

    # --- the report ----------------------------------------------------------------------------

    def _changed_since_queued(self, benches: Iterable[str]) -> Iterator[tuple[str, Outcome]]:
        for bench in benches:
            outcome = self.workspace.outcome(bench)
            if (
                outcome
                and outcome.job_id
                and bench not in self.queued_now
                and outcome.script_digest != self.stage_digest(bench)
            ):
                yield bench, outcome

    def report_submit(self, benches: Sequence[str] | None = None) -> Any:
        from doit.exceptions import TaskFailed

        self.progress.done()
        self.warn(executor=True)
        record = self.build_record(commit=self.inv.json)  # json=1 prints it as the manifest
        # resubmit reports on what it re-queued; a benchmark it was not asked about fails nothing.
        selected = set(self.selected() if benches is None else benches)
        jobs = [j for j in record.benchmarks if j.benchmark in selected]
        label = executor_for(record.executor).JOB_LABEL
        if self.inv.json:
            sys.stdout.write(record.dumps())
        elif not self.queued_now and all(j.job_id for j in jobs):
            print(f"nothing to submit: all {len(jobs)} benchmarks queued ({record.gym_job_id})")
        else:
            print(f"run dir: {record.run_dir}")
            for job in jobs:
                if job.benchmark not in self.queued_now:
                    continue
                if job.job_id:
                    print(f"submitted {job.benchmark} -> {label} {job.job_id}")
                else:
                    print(f"failed {job.benchmark}: {job.error}")
        for bench, outcome in self._changed_since_queued(b for b in self.selected() if b in selected):
            _err(
                f"note: {bench} changed since it was queued as job {outcome.job_id}; it was left alone "
                "(new=1 submits everything again as a fresh submission)"
            )
        failed = [j.benchmark for j in jobs if not j.job_id]
        if failed:
            return TaskFailed(
                f"error: {len(failed)} of {len(jobs)} benchmarks have no job id: {', '.join(failed)}\n"
                "    fix: correct the cause above and run `doit submit` again: it queues only these"
            )
        return None
