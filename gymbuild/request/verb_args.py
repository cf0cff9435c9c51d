"""Each verb's own arguments: a frozen value with exactly the reserved arguments that verb reads.

verbs.py says, per verb, which reserved arguments it reads; argv.py refuses any other. These classes
make the same list what the verb's code can read: a verb function takes its `XArgs` and reads
`args.only`, never the whole command line, so reading an argument the registry does not list for it
is a type error (mypy), not a silent surprise. tests/cli/test_verb_args.py checks, for every verb,
that its class's fields are exactly its arguments in verbs.py, each of the type
its reader in arguments.py gives (the Invocation field of that name). The run context
(submit/session.py's Session) keeps what the run itself needs: the loaded config, the overrides, the
workspace, the connection.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Self

from gymbuild.errors import UserError
from gymbuild.request.arguments import FORMATS
from gymbuild.request.invocation import Invocation


@dataclass(frozen=True)
class VerbArgs:
    """The base of every verb's arguments: `of` reads the verb's fields from the parsed command line."""

    verb: ClassVar[str]

    @classmethod
    def of(cls, inv: Invocation) -> Self:
        """This verb's arguments, as the command line gave them (each already read and checked by
        its argument's reader when the Invocation was parsed)."""
        return cls(**{f.name: getattr(inv, f.name) for f in dataclasses.fields(cls)})


# The arguments several verbs read, shared so that each verb's class lists only what is its own.
@dataclass(frozen=True)
class Picked(VerbArgs):
    config: Path
    workspace: Path
    only: tuple[str, ...]
    json: bool


@dataclass(frozen=True)
class OfSubmission(Picked):
    run: str | None


@dataclass(frozen=True)
class OfSweep(VerbArgs):
    multirun: bool
    sweep: str | None

    @property
    def is_sweep(self) -> bool:
        """A run on a sweep: multirun=1, or a sweep named by its id (as Invocation.is_sweep)."""
        return self.multirun or self.sweep is not None


@dataclass(frozen=True)
class Gated(VerbArgs):
    """A sweep's gate (results, report, export): every checkpoint against `baseline` under max_drop=
    or a policy file (sweep/gated.py)."""

    baseline: str | None
    max_drop: float | None
    policy: Path | None


@dataclass(frozen=True)
class DryRunnable(OfSubmission, OfSweep):
    dry_run: bool


@dataclass(frozen=True)
class ResolveArgs(Picked):
    verb: ClassVar[str] = "resolve"
    multirun: bool


@dataclass(frozen=True)
class RenderArgs(Picked):
    verb: ClassVar[str] = "render"
    new: bool
    multirun: bool


@dataclass(frozen=True)
class SubmitArgs(RenderArgs):
    verb: ClassVar[str] = "submit"
    follow: bool
    every: float | None
    ready: tuple[str, ...] | None
    retries: int | None
    watch: bool


@dataclass(frozen=True)
class StatusArgs(OfSubmission, OfSweep):
    verb: ClassVar[str] = "status"
    watch: bool


@dataclass(frozen=True)
class ResubmitArgs(DryRunnable):
    verb: ClassVar[str] = "resubmit"


@dataclass(frozen=True)
class CancelArgs(DryRunnable):
    verb: ClassVar[str] = "cancel"


@dataclass(frozen=True)
class LogsArgs(OfSubmission, OfSweep):
    verb: ClassVar[str] = "logs"
    follow: bool


@dataclass(frozen=True)
class ResultsArgs(OfSubmission, OfSweep, Gated):
    verb: ClassVar[str] = "results"
    format: str | None
    series: bool
    step: str | None

    def __post_init__(self) -> None:
        if self.format is not None and self.format not in FORMATS:  # format= reads compare's too
            raise UserError(
                f"error: format={self.format} is compare's, not a format results prints\n"
                f"    fix: use one of {', '.join(FORMATS)}"
            )


@dataclass(frozen=True)
class CompareArgs(OfSubmission):
    verb: ClassVar[str] = "compare"
    max_drop: float | None
    metric: str | None
    policy: Path | None
    format: str | None


@dataclass(frozen=True)
class ExportArgs(Picked, OfSweep, Gated):
    verb: ClassVar[str] = "export"
    to: str | None
    experiment: str | None
    step: str | None


@dataclass(frozen=True)
class ReportArgs(Picked, OfSweep, Gated):
    verb: ClassVar[str] = "report"
    out: Path | None
    step: str | None


@dataclass(frozen=True)
class RunsArgs(VerbArgs):
    """`config`: only the submissions of this config, None when config= was not given (runs is the
    one verb for which the default config is no config: it lists every submission)."""

    verb: ClassVar[str] = "runs"
    config: Path | None
    limit: int | None
    state: str | None
    prune: float | None
    json: bool

    @classmethod
    def of(cls, inv: Invocation) -> Self:
        return dataclasses.replace(super().of(inv), config=inv.config if inv.config_given else None)


# Every verb's class, by its name (a test checks each verb of verbs.VERBS has one).
ARGS: dict[str, type[VerbArgs]] = {
    c.verb: c
    for c in (
        ResolveArgs,
        RenderArgs,
        SubmitArgs,
        StatusArgs,
        ResubmitArgs,
        LogsArgs,
        CancelArgs,
        ResultsArgs,
        CompareArgs,
        ExportArgs,
        ReportArgs,
        RunsArgs,
    )
}


def args_of(verb: str, inv: Invocation) -> VerbArgs:
    """Verb `verb`'s arguments from the command line (KeyError for a name that is no verb)."""
    return ARGS[verb].of(inv)
