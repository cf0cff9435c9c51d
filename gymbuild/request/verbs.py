"""What the user can type: every verb, its one line, its arguments and examples, as data.

This is the one place the command line is described. `gymbuild --help` and `gymbuild help VERB`
(cli/main.py), the tasks' docs that `doit list` shows (cli/graph.py), README's command table and the set of
reserved argument names (invocation.RESERVED: every name of arguments.py, where each argument's
type is; any other `key=value` is a config override; one a verb does not list is refused, argv.py)
are all read from it, so a verb or an argument added here is documented everywhere at
once. So are the facts the run is shaped by: what a verb writes (invocation's read-only and
stage-only sets: the lock, the pipeline), whether it connects ahead (cli._connect_ahead), whether it
works on a sweep (task_kinds, multirun.VERBS) and whether it queues. A new verb is a `task_<verb>`
in cli/graph.py, an entry in VERBS, its arguments' class in verb_args.py, a command class in
cli/doit_plugin.py and an entry point in pyproject.toml: tests/cli/test_main.py,
tests/cli/test_verbs.py and tests/cli/test_verb_args.py fail for a verb missing from any.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from gymbuild.errors import UsageError, UserError
from gymbuild.request.arguments import ARGUMENTS, Argument, argument

__all__ = ["ARGUMENTS", "VERBS", "Argument", "Verb", "argument", "verb"]


DRY_RUN, RESOLVE_ONLY = "--dry-run", "--resolve-only"


@dataclass(frozen=True)
class Flag:
    """What one of NeMo Gym's flags (`gym eval submit --dry-run`) means for a verb: the word the
    command line gets for it (a verb, which takes this verb's place; a `name=value`; "" for nothing)
    and the line `gymbuild help VERB` shows. `becomes=None`: the verb refuses it (argv.py), and
    `does` says why: a flag that promises a dry run never reaches a verb that would act."""

    name: str
    becomes: str | None
    does: str


# What a verb writes in the config's workspace. "nothing": it holds no lock, answers while a submit
# runs, builds no pipeline (it may act elsewhere: cancel, export, runs prune=). "draft": it stops at
# the staged tree, in the config's draft. "submission": it may copy, queue and record.
Writes = Literal["nothing", "draft", "submission"]
# Whose host it starts the SSH handshake with before doit is imported (cli._connect_ahead): the
# config's current submission's, or (the config's first submit, or new=1) the config file's.
ConnectsAhead = Literal["submission", "config"]


@dataclass(frozen=True)
class Verb:
    """A verb: its one line, the reserved arguments it reads (with what each does for this verb, or
    "" for the argument's general line), examples a user can copy, and what NeMo Gym's
    --dry-run and --resolve-only mean for it (a flag it does not list, it refuses). What it
    writes has no default: a wrong guess would skip the lock, or start a submission."""

    name: str
    usage: str  # after `gymbuild`, as README's table shows it
    does: str
    arguments: tuple[tuple[str, str], ...]
    examples: tuple[str, ...]
    overrides: bool = False  # takes config overrides (it loads the config)
    flags: tuple[Flag, ...] = ()
    queues: bool = False  # it queues jobs: the only verbs that need the values of host: variables
    connects_ahead: ConnectsAhead | None = None
    sweeps: bool = False  # with multirun=1 or sweep=ID it works on every cell (multirun.VERBS)
    writes: Writes = field(kw_only=True)
    # A refused argument's exit status: 1, or a gate's own (compare: errors.UsageError's 64), so a
    # CI step reads a typo neither as a drop nor as an undecided gate.
    usage_error: bool = field(default=False, kw_only=True)

    @property
    def reads_only(self) -> bool:  # invocation.READ_ONLY_VERBS
        return self.writes == "nothing"

    def flag(self, name: str) -> Flag:
        """What `name` (--dry-run, --resolve-only) means here; refused unless the verb lists it."""
        found = next((f for f in self.flags if f.name == name), None)
        if found is not None:
            return found
        if name == RESOLVE_ONLY:
            return Flag(name, None, "only submit reads it: `gymbuild resolve` prints the resolved config")
        return Flag(name, None, f"{self.name} has no dry run")


def _only_reads(verb: str) -> tuple[Flag, ...]:
    """A verb that changes nothing anywhere takes --dry-run as it is: its run is dry already."""
    return (Flag(DRY_RUN, "", f"accepted, changes nothing: {verb} only reads"),)


def _own_dry_run(what: str) -> tuple[Flag, ...]:
    return (Flag(DRY_RUN, "dry_run=1", f"the same as dry_run=1: {what}"),)


# What a sweep's day-two verbs read: the same config and overrides with multirun=1, or its id.
_SWEEP = ("multirun", "the sweep of these overrides (none: the config's latest sweep)"), ("sweep", "")

_SUBMISSION = ("config", ""), ("workspace", ""), ("run", "")

VERBS: tuple[Verb, ...] = (
    Verb(
        "resolve",
        "resolve config=FILE",
        "validate the config and print it resolved (json=1: JSON); host: values stay references",
        (
            ("config", ""),
            ("workspace", "where it stages the config's draft"),
            ("only", "checked: each must name a benchmark of the config (the config is resolved whole)"),
            ("json", "the resolved config as JSON"),
            ("multirun", "each combination resolved"),
        ),
        (
            "gymbuild resolve config=eval.yaml",
            "gymbuild resolve config=eval.yaml json=1 compute.cluster.walltime=01:00:00",
        ),
        overrides=True,
        flags=(
            Flag(DRY_RUN, "", "accepted, changes nothing: resolve queues nothing"),
            Flag(RESOLVE_ONLY, "", "accepted, changes nothing: this is resolve"),
        ),
        writes="draft",
        sweeps=True,
    ),
    Verb(
        "render",
        "render config=FILE",
        "the dry run: the remote run dir and every job script, secrets masked; queues nothing",
        (
            ("config", ""),
            ("workspace", ""),
            ("only", ""),
            ("new", "the dry run of a fresh submission: its own new run directory"),
            ("json", "run_dir and every script as JSON"),
            ("multirun", "the dry run of each combination"),
        ),
        ("gymbuild render config=eval.yaml", "gymbuild render config=eval.yaml only=gpqa"),
        overrides=True,
        flags=(Flag(DRY_RUN, "", "accepted, changes nothing: render is the dry run"),),
        writes="draft",
        sweeps=True,
    ),
    Verb(
        "submit",
        "submit config=FILE",
        "submit; again: queue only what has no job id yet; new=1 a fresh submission",
        (
            ("config", ""),
            ("workspace", ""),
            ("only", "queue these benchmarks only (the others can follow later)"),
            ("new", ""),
            ("json", "print the manifest (gym-job.json) and nothing else"),
            ("multirun", "one submission per combination; again: queue only the new or unqueued"),
            (
                "follow",
                "with multirun=1 and paths(GLOB): keep submitting each checkpoint as it is complete, "
                "once, until SIGINT or SIGTERM",
            ),
            ("every", ""),
            ("ready", ""),
            ("retries", ""),
            (
                "watch",
                "go on feeding what waits for room under the cluster's quota as jobs end (one "
                "squeue and sacct look per poll, as status watch=1) until every job has ended; exit 0 "
                "only when every benchmark completed",
            ),
        ),
        (
            "gymbuild submit config=eval.yaml",
            "gymbuild submit config=eval.yaml watch=1              # more jobs than the quota allows",
            "gymbuild submit config=eval.yaml only=gpqa,mmlu compute.cluster.walltime=01:00:00",
            "gymbuild submit config=eval.yaml new=1",
            "gymbuild submit config=eval.yaml multirun=1 services.policy.model=Qwen/Qwen3-8B,Qwen/Qwen3-32B",
            "gymbuild submit config=eval.yaml multirun=1 follow=1 every=600 "
            "'services.policy.model=paths(/c*)'",
        ),
        overrides=True,
        flags=(
            Flag(DRY_RUN, "render", "the dry run instead: `gymbuild render` (queues nothing)"),
            Flag(RESOLVE_ONLY, "resolve", "the resolved config instead: `gymbuild resolve` (queues nothing)"),
        ),
        queues=True,
        writes="submission",
        connects_ahead="config",
        sweeps=True,
    ),
    Verb(
        "status",
        "status config=FILE",
        "per benchmark: job id, state, exit code, elapsed, rollouts done/expected, nodes; "
        "watch=1 until every job has ended",
        (
            *_SUBMISSION,
            ("only", "show these benchmarks only"),
            (
                "watch",
                "look again after 5, 10, 20, 40, then every 60 s (GYMBUILD_WATCH_INTERVALS) until "
                "every job has ended; exit 0 only when every benchmark completed",
            ),
            ("json", "one JSON document (with watch=1: at the end)"),
            *_SWEEP,
        ),
        (
            "gymbuild status config=eval.yaml",
            "gymbuild status config=eval.yaml watch=1",
            "gymbuild status run=gym-job-20260101T120000Z-a1b2c3 json=1",
            "gymbuild status config=eval.yaml multirun=1            # the config's latest sweep",
        ),
        flags=_only_reads("status"),
        writes="nothing",
        connects_ahead="submission",
        sweeps=True,
    ),
    Verb(
        "resubmit",
        "resubmit config=FILE",
        "print its plan, then re-queue what ended FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED or "
        "BOOT_FAIL with rows left to score",
        (
            ("config", ""),
            ("workspace", ""),
            ("run", "the config's current submission only: run= may name it, as a check"),
            ("only", "these benchmarks only (a CANCELLED one is re-queued only when named)"),
            ("json", "print the manifest and nothing else (dry_run=1: the plan, as data)"),
            (
                "dry_run",
                "print the plan (per benchmark: state, rows scored/expected/failed, continue, fresh or "
                "nothing and why, a GPU-hour bound); queue nothing",
            ),
            *_SWEEP,
        ),
        (
            "gymbuild resubmit config=eval.yaml",
            "gymbuild resubmit config=eval.yaml only=gpqa",
            "gymbuild resubmit config=eval.yaml dry_run=1",
            "gymbuild resubmit config=eval.yaml sweep=sweep-3f9c1a2b7d",
        ),
        overrides=True,
        flags=_own_dry_run("the plan: what it would re-queue and why; queues nothing"),
        queues=True,
        writes="submission",
        sweeps=True,
    ),
    Verb(
        "logs",
        "logs config=FILE only=BENCH",
        "that benchmark's newest service and driver logs (follow=1 to follow)",
        (
            *_SUBMISSION,
            ("only", "the one benchmark whose logs to show"),
            ("follow", ""),
            ("json", "the logs as one JSON document (not with follow=1)"),
            ("multirun", "name the sweep's submissions (their logs are one run= each)"),
            ("sweep", ""),
        ),
        ("gymbuild logs config=eval.yaml only=gpqa", "gymbuild logs config=eval.yaml only=gpqa follow=1"),
        flags=_only_reads("logs"),
        writes="nothing",
        connects_ahead="submission",
        sweeps=True,
    ),
    Verb(
        "cancel",
        "cancel config=FILE",
        "cancel the submission's pending and running jobs (only= narrows)",
        (
            *_SUBMISSION,
            ("only", "cancel these benchmarks' jobs only"),
            ("json", "what it cancelled (dry_run=1: would cancel), as JSON"),
            ("dry_run", "list the jobs it would cancel; cancel nothing"),
            *_SWEEP,
        ),
        (
            "gymbuild cancel config=eval.yaml",
            "gymbuild cancel config=eval.yaml dry_run=1",
            "gymbuild cancel run=gym-job-20260101T120000Z-a1b2c3 only=gpqa",
        ),
        flags=_own_dry_run("the jobs it would cancel; cancels nothing"),
        writes="nothing",
        connects_ahead="submission",
        sweeps=True,
    ),
    Verb(
        "results",
        "results config=FILE",
        "the score table: per benchmark (and agent) its state and key metrics; several runs side by side",
        (
            ("config", ""),
            ("workspace", ""),
            (
                "run",
                "one run by its gym_job_id, or several, comma-separated, side by side; "
                "run=all: every submission of the config",
            ),
            ("only", "these benchmarks only"),
            ("json", "one JSON document"),
            ("format", "the table as CSV (a line per metric) or as a Markdown table"),
            ("multirun", "one column per combination of the sweep of these overrides"),
            ("sweep", ""),
            ("series", ""),
            ("step", ""),
            ("baseline", ""),
            (
                "max_drop",
                "with baseline=: each checkpoint of the sweep gated against it (non-inferiority, as "
                "compare's), the best non-inferior one chosen; information, not a gate: exit 0",
            ),
            (
                "policy",
                "with baseline=: the gate across benchmarks (tiers, margins, metrics) instead of max_drop=",
            ),
        ),
        (
            "gymbuild results config=eval.yaml",
            "gymbuild results config=eval.yaml multirun=1",
            "gymbuild results run=gym-job-20260101T120000Z-a1b2c3,gym-job-20260102T090000Z-d4e5f6",
            "gymbuild results config=eval.yaml run=all",
            "gymbuild results config=eval.yaml format=markdown",
            "gymbuild results config=eval.yaml multirun=1 series=1 format=csv",
            "gymbuild results config=eval.yaml multirun=1 series=1 baseline=step_0 max_drop=0.02",
        ),
        flags=_only_reads("results"),
        writes="nothing",
        sweeps=True,
    ),
    Verb(
        "compare",
        "compare run=A,B",
        "B against A, paired by task and repeat: each metric's difference, its 95% CI, flips, coverage",
        (
            ("config", ""),
            ("workspace", ""),
            ("run", "the baseline's gym_job_id, then the candidate's; run=all: a config's two submissions"),
            ("only", "these benchmarks only (one neither run has: a usage error, exit 64, no output)"),
            ("max_drop", ""),
            ("metric", ""),
            ("policy", ""),
            (
                "format",
                "with a gate: compact (a few lines for a CI log) or markdown (a pull request's comment)",
            ),
            ("json", "one JSON document"),
        ),
        (
            "gymbuild compare run=gym-job-20260101T120000Z-a1b2c3,gym-job-20260102T090000Z-d4e5f6",
            "gymbuild compare run=$BASELINE,$CANDIDATE policy=gate.yaml format=compact   # a CI gate",
            "gymbuild compare run=$BASELINE,$CANDIDATE max_drop=0.02 json=1   # a CI gate",
            "gymbuild compare run=$BASELINE,$CANDIDATE max_drop=0.02 metric=accuracy",
        ),
        flags=_only_reads("compare"),
        writes="nothing",
        usage_error=True,
    ),
    Verb(
        "export",
        "export to=TRACKER",
        "a sweep's series to a tracker: a run per checkpoint, its metrics at its training step",
        (
            ("config", ""),
            ("workspace", ""),
            ("to", ""),
            ("experiment", ""),
            ("multirun", "the sweep of these overrides (none: the config's latest sweep)"),
            ("sweep", ""),
            ("only", "these benchmarks only"),
            ("step", ""),
            ("baseline", ""),
            (
                "max_drop",
                "with baseline=: each checkpoint of the sweep gated against it (non-inferiority, as "
                "compare's), the best non-inferior one chosen; information, not a gate: exit 0",
            ),
            (
                "policy",
                "with baseline=: the gate across benchmarks (tiers, margins, metrics) instead of max_drop=",
            ),
            ("json", "what it exported, as one JSON document"),
        ),
        (
            "gymbuild export config=eval.yaml multirun=1 to=mlflow",
            "gymbuild export config=eval.yaml sweep=sweep-3f9c1a2b7d to=wandb experiment=qwen-sft",
        ),
        flags=(
            Flag(
                DRY_RUN,
                None,
                "export has no dry run: `gymbuild results multirun=1 series=1` shows what it would send",
            ),
        ),
        writes="nothing",
    ),
    Verb(
        "report",
        "report config=FILE",
        "a sweep's series as one self-contained HTML page: the table, a plot per benchmark and metric",
        (
            ("config", ""),
            ("workspace", ""),
            ("out", ""),
            ("multirun", "the sweep of these overrides (none: the config's latest sweep)"),
            ("sweep", ""),
            ("only", "these benchmarks only"),
            ("step", ""),
            ("baseline", ""),
            (
                "max_drop",
                "with baseline=: each checkpoint of the sweep gated against it (non-inferiority, as "
                "compare's), the best non-inferior one chosen; information, not a gate: exit 0",
            ),
            (
                "policy",
                "with baseline=: the gate across benchmarks (tiers, margins, metrics) instead of max_drop=",
            ),
            ("json", "the file it wrote, as one JSON document"),
        ),
        (
            "gymbuild report config=eval.yaml multirun=1",
            "gymbuild report config=eval.yaml multirun=1 out=/tmp/sft-curve.html",
        ),
        flags=(Flag(DRY_RUN, None, "report writes its HTML file and nothing else; it has no dry run"),),
        writes="nothing",
    ),
    Verb(
        "runs",
        "runs",
        "this machine's submissions, newest first, each with its state from the scheduler",
        (
            ("config", "only the submissions of this config"),
            ("limit", ""),
            ("state", ""),
            ("prune", "(never NeMo Gym's own records, run directories or jobs)"),
            ("json", "one JSON list"),
        ),
        (
            "gymbuild runs",
            "gymbuild runs config=eval.yaml limit=5",
            "gymbuild runs state=FAILED json=1",
            "gymbuild runs prune=90",
        ),
        flags=(
            Flag(DRY_RUN, None, "runs only reads, but runs prune= removes index entries and has no dry run"),
        ),
        writes="nothing",
    ),
)

# The verbs that act on a whole sweep with multirun=1 or sweep=ID (sweep/expand.py); `runs` lists every
# submission as it is, and `logs` names the sweep's submissions, one of which run= shows.
SWEEP_VERBS = frozenset(v.name for v in VERBS if v.sweeps)

# Steps of the submit pipeline: doit tasks, but no verb (submit and resubmit run them).
STEPS = frozenset({"script_code", "stage", "sync", "queue", "record"})

# The top-level help's examples: the three things a user does first.
EXAMPLES = (
    "gymbuild render config=eval.yaml                      # look before you submit",
    "gymbuild submit config=eval.yaml only=gpqa +driver.benchmarks.gpqa.run.limit=10",
    "gymbuild status config=eval.yaml watch=1              # until every job has ended",
)

# Hydra's override grammar, as the help shows it: (form, what it does, example).
OVERRIDES = (
    ("key=value", "set a key the config has", "compute.cluster.walltime=01:00:00"),
    ("+key=value", "add a key it does not have", "+driver.benchmarks.gpqa.run.limit=10"),
    ("++key=value", "set it, whether it is there or not", "++job.output_path=/lustre/me/runs"),
)


def verb(name: str) -> Verb | None:
    return next((v for v in VERBS if v.name == name), None)


def mistake_status(words: Sequence[str]) -> int:
    """The exit status of a refused command line naming `words`: 1, or a gate's usage error's own
    (errors.UsageError: 64) when its one verb is a gate (Verb.usage_error: compare)."""
    named = {v for w in words if (v := verb(w)) is not None}
    return UsageError.status if len(named) == 1 and named.pop().usage_error else UserError.status


def reserved() -> frozenset[str]:
    """Every argument name a verb reads: these never become config overrides. (A verb names only
    arguments of ARGUMENTS; a test checks it.)"""
    return frozenset(a.name for a in ARGUMENTS)
