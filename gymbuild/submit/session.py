"""The run context: what one gymbuild run shares (its invocation, workspace, loaded config,
submission and its one connection), and what the run's steps remember between them.

The steps themselves are functions in gymbuild/submit/ that take what the run settled (`settled`,
settled.py), never this context; gymbuild/submit/pipeline.py runs them in order, and the doit tasks
in cli/graph.py are made from the same steps. The run owns its link (link.py: its one connection,
perhaps started early) and its hold on the workspace (the lock, let go at close). State that
decides what is up to date lives in the workspace (outcome files and stamps), so a killed run loses
nothing and the next one carries on from what really happened.
"""

from __future__ import annotations

import contextlib
import getpass
import sys
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from gymbuild.config import load_config
from gymbuild.errors import UserError, printable
from gymbuild.executors.base import Executor, executor_for, planning_traits
from gymbuild.progress import Progress, on_a_terminal
from gymbuild.request.invocation import Invocation
from gymbuild.resources import user_cache_home
from gymbuild.state.config_cache import ValidatedConfigs
from gymbuild.state.provenance import new_gym_job_id, utc_now, utc_timestamp
from gymbuild.state.workspace import Submission, Workspace, locked
from gymbuild.submit.link import Link
from gymbuild.submit.live import live_submissions
from gymbuild.submit.plans import RunPlans
from gymbuild.submit.settled import Memory, Settled

if TYPE_CHECKING:
    from gymbuild.config import Resolved
    from gymbuild.config.model import Config
    from gymbuild.executors.connection import Connection


def _where(sub: Submission) -> tuple[str, str, str, str | None]:
    """Where a submission goes: its output path, cluster, executor and host."""
    return (str(Path(sub.run_dir).parent), sub.cluster, sub.executor, sub.hostname)


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Session:
    """The run context of one gymbuild run; built lazily so `doit list` touches nothing remote, and
    `status`, `logs` and `cancel`, which read the workspace, never load the config at all."""

    def __init__(
        self,
        inv: Invocation,
        *,
        workspace: Workspace | None = None,
        link: Link | None = None,
        early: Link | None = None,
    ) -> None:
        """`link`: a lent one (a sweep's cell: its owner closes it); `early`: the run's own, already
        opening (the console script starts it before importing doit: Link.ahead)."""
        self.inv = inv
        self.workspace = workspace or Workspace(inv.workspace, inv.config)
        if inv.drafts:  # render and resolve stage into the draft: looking changes no submission
            self.workspace = self.workspace.as_draft()
        self.link = link or early or Link()
        self._owns_link = link is None
        self._held = contextlib.ExitStack()  # the workspace's lock, while this run holds it
        # User errors of the steps between the config and the verb (stage, sync, queue, record): kept
        # for the verb to report, so doit sees no failed dependency (it would exit 2, not the user's 1).
        self.held: list[UserError] = []
        self.progress = Progress(on_a_terminal(json=inv.json))  # "queued 350/1000", on a terminal only
        self.memory = Memory(self.progress)  # what the steps write down (gymbuild/submit/settled.py)
        self._submission: Submission | None = None
        self.sweep_values: tuple[str, ...] = ()  # a sweep's combination: its swept key=values (sweep.py)

    # --- the config, loaded on first need ---------------------------------------------------------

    @cached_property
    def _loaded(self) -> tuple[Resolved | None, UserError | None]:
        """The config, or why it did not load. Composing and validating a thousand benchmarks costs
        seconds, so only the verbs that use the config pay for it."""
        cache = ValidatedConfigs(user_cache_home() / "gymbuild" / "configs")
        try:
            resolved = load_config(
                self.inv.config, self.inv.overrides, cache=cache, secrets_needed=self.inv.queues
            )
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
    def config(self) -> Config:
        assert self.resolved is not None
        return self.resolved.config

    def _check_only(self, config: Config) -> None:
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
            _err(printable(f"warning: {warning}"))

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
        """job.output_path. For the local executor a relative path is taken from the config file's
        directory, as the submission's state is (invocation.default_workspace): the example's `gym-runs`
        works from a fresh clone without setup, and the same config submitted from another directory
        is the same submission. On a cluster it would mean the login shell's home, so it is left to
        the remote shell there."""
        path = Path(self.config.job.output_path).expanduser()
        if self.executor.RUNS_HERE and not path.is_absolute():
            path = self.inv.config.resolve().parent / path
        return str(path)

    def adopt_submission(self, submission: Submission) -> None:
        """Work on `submission` as it was submitted (day two: its host and run dir, even if the config
        has been edited since), without settling the config's own."""
        self._submission = submission

    def submission(self) -> Submission:
        """The current submission of this config, allocated on first need (or fresh with new=1)."""
        if self._submission is not None:
            return self._submission
        from gymbuild.executors.connection import is_this_machine  # late: measured, off resolve, list

        compute = self.config.compute
        hostname = None if is_this_machine(compute.hostname) else compute.hostname
        current = self.workspace.submission()
        where = (self.output_path, compute.name, self.executor_name, hostname)
        if current is not None and not self.inv.new:
            was = _where(current)
            if was == where:
                self._submission = current
                return current
            if any(o.job_id for o in self.workspace.outcomes().values()):
                raise UserError(
                    f"error: {self.inv.config}: the config now submits to {where[1]}:{where[0]}, but its "
                    f"current submission {current.gym_job_id} went to {was[1]}:{was[0]}\n"
                    "    fix: pass new=1 to start a fresh submission"
                )
        if current is None and not self.inv.new:
            elsewhere = self.workspace.claimed_elsewhere()
            if elsewhere is not None:
                raise UserError(
                    f"error: {self.inv.config}: its submission {elsewhere[1]} was queued from the "
                    f"workspace {elsewhere[0]}, not this one ({self.workspace.dir})\n"
                    "    fix: drop workspace= (or give that one) to carry on with it, or pass new=1 "
                    "for a fresh submission"
                )
            if self.inv.starts_submissions:
                self._refuse_live_in_index()
        if self.inv.drafts:
            draft = self.workspace.draft_submission()
            if draft is None or _where(draft) != where:
                draft = self._mint(hostname)
            self.workspace.begin_draft(draft)
            self._submission = draft
            return draft
        fresh = self._mint(hostname)
        if self.inv.starts_submissions:  # `status`, `list --status` and `info` look: they start nothing
            self.workspace.start(fresh)
        self._submission = fresh
        return fresh

    def _mint(self, hostname: str | None) -> Submission:
        """A fresh submission of the config, stamped now."""
        now = utc_now()
        gym_job_id = new_gym_job_id(now)
        return Submission(
            gym_job_id=gym_job_id,
            run_dir=str(Path(self.output_path) / gym_job_id),
            cluster=self.config.compute.name,
            executor=self.executor_name,
            hostname=hostname,
            submitted_at=utc_timestamp(now),
            submitted_by=getpass.getuser(),
        )

    def _refuse_live_in_index(self) -> None:
        """The local index as a second guard: a submission of this config (its real path, and a
        sweep's combination) that this workspace does not know, and whose jobs still run or wait,
        is never queued again silently (its workspace was deleted, or is on another machine)."""
        known = {sub.gym_job_id for sub in self.workspace.history()}
        live = live_submissions(self.inv.config, self.sweep_values, known)
        if live:
            gym_job_id, state = live[0]
            raise UserError(
                f"error: {self.inv.config}: its submission {gym_job_id} is {state} (`gymbuild runs` "
                f"shows it) but the workspace {self.workspace.dir} does not know it\n"
                f"    fix: `gymbuild status run={gym_job_id}` (or cancel, logs) to carry on with it, or "
                "pass new=1 to queue a fresh submission beside it"
            )

    # --- what the steps are handed -------------------------------------------------------------------

    @property
    def queued_now(self) -> list[str]:
        """The benchmarks whose outcome this run wrote, in that order (the verb's report)."""
        return self.memory.queued_now

    @cached_property
    def settled(self) -> Settled:
        """The run's settled values, made once, when the first step needs them: the submission (settled
        first), its executor and plans, and the run's link; the steps take them as arguments."""
        submission = self.submission()
        return Settled(
            submission=submission,
            executor=self.executor,
            plans=self.plans,
            workspace=self.workspace,
            link=self.link,
            hostname=self.config.compute.hostname,
            config_file=self.inv.config,
            selected=tuple(self.selected()),
            sweep_values=self.sweep_values,
            memory=self.memory,
        )

    # --- the plans ----------------------------------------------------------------------------------

    @cached_property
    def plans(self) -> RunPlans:
        """The submission's plans (planning.py), made once its submission is settled."""
        assert self.resolved is not None
        return RunPlans(self.resolved, self.submission(), planning_traits(self.config), self.inv.config)

    # --- the connection ------------------------------------------------------------------------

    def connect_early(self) -> None:
        """Start opening the run's connection in the background when this run will queue something.

        The SSH handshake and the remote shell's start take about half a second of waiting, which
        the stage tasks' rendering can fill; a run with nothing to queue opens nothing. A failure is
        raised where the connection is first used, as if it had been opened there.
        """
        if self.link.used:
            return
        try:
            if not self.to_queue():
                return
        except UserError:  # e.g. the config now submits elsewhere: the step that needs it says so
            return
        self.link.start(self.config.compute.hostname)

    def connection(self, hostname: str | None = None, *, use_config: bool = True) -> Connection:
        """The run's one connection (its link's), opened on first use and closed by the tasks'
        teardown. It goes to the config's compute host, or to `hostname` for a record found by `run=`."""
        if self.link.used and not self.link.guessing:  # where to is settled; the config is not loaded
            return self.link.get(hostname)
        return self.link.get(self.config.compute.hostname if use_config else hostname)

    # --- the run's hold on its workspace ------------------------------------------------------------

    def hold_workspace(self) -> None:
        """Hold the workspace's lock (its config's, or its draft's) until this run closes: doit saves
        its database before the tasks' teardown closes the run, so the save is under the lock too."""
        inv = self.inv
        label = f"gymbuild {' '.join(inv.verbs) or 'render'} config={inv.config}"
        self._held.enter_context(locked(self.workspace.lock_dir, printable(label)))

    def close(self) -> None:
        """Save what the steps stamped; close the connection unless it is lent (a sweep's cell); let
        go of the workspace. Safe to call again (each task that ran closes the run at its teardown)."""
        try:
            self.workspace.save_stage_stamps()
            if self._owns_link:
                self.link.close()
        finally:
            self._held.close()

    # --- what the submission still needs -------------------------------------------------------

    def to_queue(self) -> list[str]:
        self.submission()
        outcomes = self.workspace.outcomes()
        return [b for b in self.selected() if not (b in outcomes and outcomes[b].job_id)]
