"""The command line of one gymbuild run: reserved `name=value` arguments and Hydra overrides."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from gymbuild.errors import UsageError, UserError
from gymbuild.request.arguments import ARGUMENTS
from gymbuild.request.verbs import VERBS, mistake_status, reserved

RESERVED = reserved()  # the arguments gymbuild's verbs read (verbs.ARGUMENTS); the rest are overrides
# Verbs that only read the workspace (outcome files are written atomically) and write nothing in it.
READ_ONLY_VERBS = frozenset(v.name for v in VERBS if v.reads_only)
# doit's commands that only look at the task graph and its database: they must change nothing.
INSPECTING_COMMANDS = frozenset({"list", "info", "dumpdb", "help", "tabcompletion", "strace"})
# Verbs whose work ends at the staged tree: nothing is copied, queued or recorded.
STAGE_ONLY_VERBS = frozenset(v.name for v in VERBS if v.writes == "draft")
# doit's commands that change only doit's own database or the staged files: they start no submission.
BOOKKEEPING_COMMANDS = frozenset({"clean", "forget", "ignore", "reset-dep"})
# Verbs that queue jobs, and so read the secrets of `host:` variables.
QUEUING_VERBS = frozenset(v.name for v in VERBS if v.queues)
# Verbs that start the SSH handshake before doit is imported (cli._connect_ahead): with the host of
# the config's current submission, or (a submit) the host its config names.
AHEAD_OF_SUBMISSION = frozenset(v.name for v in VERBS if v.connects_ahead == "submission")
AHEAD_OF_CONFIG = frozenset(v.name for v in VERBS if v.connects_ahead == "config")


def command_verbs(argv: Sequence[str]) -> list[str]:
    """The verbs of a command line (what is neither `name=value` nor an option)."""
    return [a for a in argv if "=" not in a and not a.startswith("-")]


# A sweep's gate's arguments (results, report, export: sweep/gated.py): a value of theirs refused is
# a usage error, exit 64, as every argument of compare's.
GATE_ARGUMENTS = frozenset({"baseline", "max_drop", "policy"})


def _gate_refused(variables: Mapping[str, str]) -> bool:
    """Whether a gate argument's own value is what the command line's readers refuse."""
    for a in ARGUMENTS:
        if a.name in GATE_ARGUMENTS and a.name in variables:
            try:
                a.parse(variables[a.name])
            except UserError:
                return True
    return False


def command_variables(argv: Sequence[str]) -> dict[str, str]:
    """The `name=value` arguments of a command line, before doit has parsed it."""
    return dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith("-"))


DEFAULT_CONFIG = "submit.yaml"


def default_workspace() -> Path:
    """Where gymbuild remembers submissions unless `workspace=` says: the user's state directory
    (`$XDG_STATE_HOME/gymbuild/workspaces`, else `~/.local/state/gymbuild/workspaces`), in which each
    config has its own corner keyed by its real path (workspace.Workspace). So the state follows the
    config file, not the directory a command runs in: every verb, from anywhere, finds the same
    submission, and a submit from another directory never queues the evaluation a second time."""
    from gymbuild.resources import user_state_home  # late: measured, json off the help path (House rules)

    return user_state_home() / "gymbuild" / "workspaces"


@dataclass(frozen=True)
class Invocation:
    """The command line, read: each reserved argument (arguments.ARGUMENTS) is the field of its name,
    of the type its argument reads (`limit=3` is 3; not given: the default here), and the rest of the
    `name=value` words are the config's overrides, in command-line order."""

    config: Path = Path(DEFAULT_CONFIG)
    overrides: tuple[str, ...] = ()
    json: bool = False
    new: bool = False
    follow: bool = False
    watch: bool = False
    only: tuple[str, ...] = ()
    run: str | None = None
    workspace: Path = field(default_factory=default_workspace)
    format: str | None = None  # results: table (the default), csv or markdown; compare: compact or markdown
    verbs: tuple[str, ...] = ()  # the verbs (and doit commands or task names) the command line names
    multirun: bool = False  # the overrides' sweep syntax makes a sweep (sweep/expand.py)
    sweep: str | None = None  # a sweep by its id, for the day-two verbs
    config_given: bool = False  # config= was on the command line (`runs config=F` filters by it)
    max_drop: float | None = None  # compare: exit 1 when a benchmark dropped by more (compare_read.py)
    metric: str | None = None  # compare: the metric the gate reads (None: the benchmark's key metric)
    policy: Path | None = None  # compare: the gate's policy file across benchmarks (results/policy.py)
    series: bool = False  # results of a sweep: a row per combination and metric (series.py)
    step: str | None = None  # the regular expression that finds the training step in a swept value
    baseline: str | None = None  # a sweep's gate: the run each checkpoint is gated against (choose.py)
    dry_run: bool = False  # cancel, resubmit: say what it would do, do nothing (NeMo Gym's --dry-run)
    every: float | None = None  # submit follow=1: seconds between polls (None: follow.DEFAULT_EVERY)
    ready: tuple[str, ...] | None = None  # a sweep over paths(): marker files (None: the default ones)
    retries: int | None = None  # submit follow=1: re-queues of a failed checkpoint (None: the default)
    to: str | None = None  # export: the tracker
    experiment: str | None = None  # export: the experiment or project
    out: Path | None = None  # report: the HTML file
    limit: int | None = None  # runs: the N newest
    state: str | None = None  # runs: only runs in this state (in capitals)
    prune: float | None = None  # runs: remove index entries older than this many days

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> Invocation:
        """The command line after the program name, parsed once for the whole run: doit sees the same
        `name=value` arguments (it splits them the same way) but gymbuild never asks doit for them."""
        verbs = tuple(command_verbs(argv))
        variables = command_variables(argv)
        try:
            return replace(cls.from_vars(variables), verbs=verbs)
        except UserError as err:  # a gate's refused argument has its own exit status (verbs.Verb)
            if mistake_status(verbs) == UsageError.status or _gate_refused(variables):
                raise UsageError(str(err)) from None
            raise

    @property
    def read_only(self) -> bool:
        """Only verbs that read the workspace: the run holds no lock and builds no pipeline tasks. A
        dry run of a verb that queues (resubmit dry_run=1) only reads too: it answers while a submit
        holds the workspace."""
        named = set(self.verbs) - (QUEUING_VERBS if self.dry_run else frozenset())
        return bool(self.verbs) and named <= READ_ONLY_VERBS

    @property
    def inspects(self) -> bool:
        """`gymbuild list --status`, `gymbuild info submit`: the graph is shown as it would run, and no
        submission is started, no workspace locked, no record written (nothing changes by looking)."""
        return bool(self.verbs) and self.verbs[0] in INSPECTING_COMMANDS

    @property
    def stage_only(self) -> bool:
        """The run's verbs stop at the staged tree (none named: the default, render): no sync, queue
        or record task is built (a thousand queue tasks nobody runs cost a dry run a tenth of a second)."""
        return set(self.verbs) <= READ_ONLY_VERBS | STAGE_ONLY_VERBS

    @property
    def drafts(self) -> bool:
        """render, resolve (bare `gymbuild` too) and doit's `clean` of what they staged: they work in
        the config's draft (workspace.Workspace.as_draft) and leave its submission as it was."""
        looks = self.stage_only and not self.read_only and not self.inspects
        return looks or (bool(self.verbs) and self.verbs[0] == "clean")

    @property
    def starts_submissions(self) -> bool:
        """Only a run that may queue makes a fresh submission current: its id and submitted_at are
        the submit's, and no dry run (`resubmit --dry-run new=1` included), look or bookkeeping
        command leaves one behind."""
        bookkeeping = bool(self.verbs) and self.verbs[0] in BOOKKEEPING_COMMANDS
        return not self.stage_only and not self.inspects and not bookkeeping and not self.dry_run

    @property
    def submits(self) -> bool:
        return "submit" in self.verbs

    @property
    def queues(self) -> bool:
        """The run may queue jobs (submit, or resubmit but its dry run): only then are the values of
        `host:` variables needed. A dry run shows them masked, so an unset one stops nothing there."""
        return bool(QUEUING_VERBS & set(self.verbs)) and not self.dry_run

    @classmethod
    def from_vars(cls, variables: Mapping[str, str]) -> Invocation:
        """doit keeps `name=value` arguments in command-line order; all but the reserved are overrides.
        Each reserved one is read by its argument (arguments.py): a mistake in a value raises the
        UserError that names it and the fix."""
        given = {a.name: a.parse(variables[a.name]) for a in ARGUMENTS if a.name in variables}
        return cls(
            overrides=tuple(f"{k}={v}" for k, v in variables.items() if k not in RESERVED),
            config_given="config" in variables,
            **given,
        )

    @property
    def is_sweep(self) -> bool:
        """A run on a sweep: multirun=1, or a sweep named by its id."""
        return self.multirun or self.sweep is not None
