"""The reserved `name=value` arguments: each one's shape, what it does, and how its value is read.

Part of the registry of what the user can type (verbs.py names, per verb, which of these it reads).
Each argument is read here, once, into the type the verbs use (invocation.Invocation has a field of
that name and type): `limit=3` is the int 3, `json=1` True, `only=a,b` ("a", "b"). A value an
argument cannot read is the user's mistake, said in one message naming the argument and the fix
before anything runs (`runs limit=abc`, `json=maybe`), never a traceback nor a value read later,
halfway through a verb. Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gymbuild.errors import UserError, printable


class Refused(ValueError):
    """A value its argument cannot read: what is wrong with it (the words after `name=value`, with
    their separator: ": not a positive number") and, when it depends on the value, the fix."""

    def __init__(self, problem: str, fix: str | None = None) -> None:
        super().__init__(problem)
        self.problem, self.fix = problem, fix


def flag(text: str) -> bool:
    """`json=1`: 1, true, yes, on (any case) are yes; 0, false, no, off and nothing are no."""
    word = text.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("", "0", "false", "no", "off"):
        return False
    raise Refused(": not 1 or 0")


def optional(text: str) -> str | None:
    """A name or id: nothing given (`run=`) is none given."""
    return text or None


def path(text: str) -> Path:
    return Path(text).expanduser()


def optional_path(text: str) -> Path | None:
    return Path(text).expanduser() if text else None


def names(text: str) -> tuple[str, ...]:
    """`only=a,b`: the comma-separated names, empty ones dropped."""
    return tuple(name for name in text.split(",") if name)


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise Refused(": not a positive number")
    return int(text)


def _number(text: str, kind: Callable[[str], Any], ok: Callable[[Any], bool], problem: str) -> Any:
    """`text` read by `kind` (int, float) and checked by `ok` (NaN fails every comparison), or Refused."""
    try:
        value = kind(text)
    except ValueError:
        raise Refused(problem) from None
    if not ok(value):
        raise Refused(problem)
    return value


def days(text: str) -> float:
    return float(_number(text, float, lambda v: v >= 0, ": not a number of days"))


def seconds(text: str) -> float:
    return float(_number(text, float, lambda v: 0 < v < math.inf, " is not a number of seconds"))


def count(text: str) -> int:
    return int(_number(text, int, lambda v: v >= 0, " is not a count"))


def difference(text: str) -> float | None:
    """compare's max_drop=: a difference of the metric's own unit, 0 or more."""
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise Refused(" is not a difference compare can gate on")
    return value


def metric(text: str) -> str | None:
    """`metric=`: a metric's name (`accuracy`, `mean/accuracy`); nothing given is none given."""
    if text and (text.strip() != text or any(not c.isprintable() for c in text)):
        raise Refused(" is not a metric name")
    return text or None


def ready_markers(text: str) -> tuple[str, ...]:
    """`ready=`: marker file names (`none` or nothing: no marker, every match is taken)."""
    if text.strip().lower() in ("", "none"):
        return ()
    ready = tuple(name.strip() for name in text.split(",") if name.strip())
    bad = [name for name in ready if "/" in name or name in (".", "..")]
    if bad:
        raise Refused(f": a marker is a file name in the checkpoint, not {printable(bad[0], lines=False)}")
    return ready


def step_regex(text: str) -> re.Pattern[str]:
    """`step=`: a regular expression whose first group is the training step."""
    try:
        pattern = re.compile(text)
    except re.error as err:
        raise Refused(f" is not a regular expression Python reads ({err})") from None
    if pattern.groups < 1:
        raise Refused(
            " has no group: gymbuild cannot tell which part is the step",
            rf"put the number in a group, e.g. step='{printable(text, lines=False)}(\d+)' or "
            r"step='(?P<step>\d+)'",
        )
    return pattern


def step(text: str) -> str | None:
    """`step=` checked (step_regex), kept as text: series.step_pattern compiles it where it is used."""
    if not text:
        return None
    step_regex(text)
    return text


def choice(*choices: str, problem: str, upper: bool = False) -> Callable[[str], str | None]:
    """One of `choices` (nothing given: none given); `upper`: in any case, read in capitals."""

    def read(text: str) -> str | None:
        word = text.upper() if upper else text
        if not word:
            return None
        if word not in choices:
            raise Refused(problem)
        return word

    return read


FORMATS = ("table", "csv", "markdown")  # results' format= (table is the default)
GATE_FORMATS = ("table", "compact", "markdown")  # compare's format= (gate_text.py)
RUN_STATES = ("RUNNING", "PENDING", "COMPLETED", "FAILED", "UNKNOWN")  # runs' state=
TRACKERS = ("mlflow", "wandb")  # export's to=


@dataclass(frozen=True)
class Argument:
    """A reserved `name=value` argument: its value's shape and what it does (one line), how its
    value is read (`read` raises Refused for a mistake) and the fix a mistake's message gives."""

    name: str
    value: str
    does: str
    read: Callable[[str], Any] = optional
    fix: str = ""  # default: `name=<example>`
    example: str = "1"  # a value it reads (the fix's, and the tests')
    # A verb that reads only some of the values: what its help shows instead of `value`.
    value_of: Mapping[str, str] = field(default_factory=dict)

    @property
    def usage(self) -> str:
        return f"{self.name}={self.value}"

    def usage_in(self, verb: str) -> str:
        """The argument as `gymbuild help VERB` shows it: only the values that verb reads."""
        return f"{self.name}={self.value_of.get(verb, self.value)}"

    def parse(self, text: str) -> Any:
        """The value as the verbs use it, or the UserError that says what is wrong and the fix."""
        try:
            return self.read(text)
        except Refused as err:
            fix = err.fix or self.fix or f"{self.name}={self.example}"
            shown = printable(text, lines=False)  # one value, one line: its newlines escaped too
            raise UserError(f"error: {self.name}={shown}{err.problem}\n    fix: {fix}") from None


def _flag(name: str, does: str) -> Argument:
    return Argument(name, "1", does, flag, f"{name}=1 (or leave {name}= out)")


# The reserved arguments, in the order the help lists them.
ARGUMENTS: tuple[Argument, ...] = (
    Argument(
        "config",
        "FILE",
        "the evaluation config (default: submit.yaml in this directory)",
        path,
        example="eval.yaml",
    ),
    Argument(
        "workspace",
        "DIR",
        "where gymbuild remembers each config's submission (default: gymbuild/workspaces in the state "
        "directory, $XDG_STATE_HOME or ~/.local/state)",
        path,
        example="ws",
    ),
    Argument("only", "a,b", "these benchmarks only (comma-separated)", names, example="gpqa,mmlu"),
    _flag("json", "print one JSON document on stdout, and nothing else there (--json too)"),
    _flag(
        "dry_run",
        "say what it would do and do nothing (NeMo Gym's --dry-run; `help VERB` says what it means there)",
    ),
    _flag("new", "a fresh submission: new gym_job_id, new run directory, every benchmark"),
    Argument(
        "run",
        "ID",
        "a submission by its gym_job_id (`gymbuild runs` lists them), not the config's current one",
        example="gym-job-20260101T120000Z-a1b2c3",
    ),
    _flag("follow", "keep following the logs as they grow (Ctrl-C stops)"),
    Argument(
        "every",
        "SECONDS",
        "submit follow=1: seconds between two looks for new checkpoints (default 300)",
        seconds,
        "e.g. every=300",
        "300",
    ),
    Argument(
        "ready",
        "FILE,FILE",
        "a sweep over paths() (with or without follow=1): a checkpoint is taken once one of these "
        "files is in it, the others are named as waiting (default config.json,metadata.json; "
        "ready=none: every match)",
        ready_markers,
        "e.g. ready=config.json or ready=metadata.json,DONE (ready=none: every match)",
        "config.json",
    ),
    Argument(
        "retries",
        "N",
        "submit follow=1: re-queues of a checkpoint whose jobs failed (default 2)",
        count,
        "e.g. retries=2",
        "2",
    ),
    _flag("watch", "redraw until every job has ended; exit 0 only when every benchmark completed"),
    Argument(
        "format",
        "csv|markdown|compact",
        "results: the table as CSV (a line per metric) or as a Markdown table; compare: compact (a few "
        "lines for a CI log) or markdown (a pull request's comment)",
        choice(
            *dict.fromkeys(FORMATS + GATE_FORMATS), problem=" is not a format results prints, nor compare"
        ),
        f"use one of {', '.join(FORMATS)} (results) or {', '.join(GATE_FORMATS)} (compare)",
        "csv",
        {
            "results": "|".join(f for f in FORMATS if f != "table"),
            "compare": "|".join(f for f in GATE_FORMATS if f != "table"),
        },
    ),
    _flag(
        "multirun",
        "a sweep: key=a,b  range(..)  choice(..)  paths(GLOB) in the overrides give one submission "
        "per combination (their product)",
    ),
    Argument(
        "sweep",
        "ID",
        "a sweep by its id (`submit multirun=1` prints it), not the config's latest",
        example="sweep-3f9c1a2b7d",
    ),
    Argument(
        "max_drop",
        "X",
        "a CI gate, non-inferiority: exit 0 (PASS) when the 95% interval of each benchmark's difference "
        "rules out a drop of more than X, 1 (DROP) when it shows one, 2 (INCONCLUSIVE) when it can do "
        "neither or a benchmark was not compared in full; 64 for an argument it cannot use",
        difference,
        "a number of the metric's own unit, 0 or more: max_drop=0.02 passes when a drop of more than "
        "0.02 is ruled out with 95% confidence",
        "0.02",
    ),
    Argument(
        "policy",
        "FILE",
        "compare: a gate across benchmarks from a YAML policy (per benchmark its tier: critical, supporting "
        "or advisory; its max_drop or relative_drop; its metric): exit 0 PASS, 1 DROP, 2 INCONCLUSIVE, "
        "64 for a policy or argument it cannot use (docs/compare.md)",
        optional_path,
        "policy=<a gate policy YAML file>, e.g. policy=gate.yaml",
        "gate.yaml",
    ),
    Argument(
        "metric",
        "NAME",
        "compare: the metric a max_drop= gate reads (accuracy or mean/accuracy; default: the benchmark's "
        "key metric as NeMo Gym's aggregate names it, else mean/reward)",
        metric,
        "metric=<a number every rollout carries>, e.g. metric=accuracy",
        "accuracy",
    ),
    _flag(
        "series",
        "a sweep's results as a series: a row per combination and metric, the swept values and "
        "the training step (from step_1200, iter_0001200, checkpoint-1200) as columns",
    ),
    Argument(
        "step",
        "REGEX",
        "where the training step is in a swept value: its first group, e.g. 'ep(\\d+)'",
        step,
        r"give one with a group around the number, e.g. step='ep(\d+)'",
        r"ep(\d+)",
    ),
    Argument(
        "baseline",
        "ID",
        "a sweep's gate: the run every checkpoint is gated against, by its gym_job_id, or a combination "
        "of the sweep by its label or swept value (e.g. step_0); with max_drop= (or a policy)",
        optional,
        "baseline=<gym_job_id> (`gymbuild runs` lists them) or baseline=<a combination's label>",
        "gym-job-20260101T120000Z-a1b2c3",
    ),
    Argument(
        "to",
        "mlflow",
        "export: the tracker (MLflow, at MLFLOW_TRACKING_URI; its token from its own variables)",
        choice(*TRACKERS, problem=" is not a tracker gymbuild exports to"),
        f"to={' or to='.join(TRACKERS)}",
        "mlflow",
    ),
    Argument(
        "experiment",
        "NAME",
        "export: the MLflow experiment or W&B project (default gymbuild-<config name>)",
        example="qwen-sft",
    ),
    Argument(
        "out",
        "FILE",
        "report: the HTML file to write (default <config name>-report.html here)",
        optional_path,
        example="report.html",
    ),
    Argument("limit", "N", "the N newest only", positive_int, "limit=10 (the ten newest)", "10"),
    Argument(
        "state",
        "STATE",
        "only runs in this state: RUNNING, PENDING, COMPLETED, FAILED or UNKNOWN",
        choice(*RUN_STATES, problem=": not a run state", upper=True),
        f"one of {', '.join(RUN_STATES)}",
        "FAILED",
    ),
    Argument(
        "prune",
        "DAYS",
        "remove gymbuild's local index entries of submissions older than DAYS days",
        days,
        "prune=30 (entries older than 30 days)",
        "30",
    ),
)


def argument(name: str) -> Argument:
    return next(a for a in ARGUMENTS if a.name == name)
