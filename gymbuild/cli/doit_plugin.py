"""gymbuild's verbs as doit commands: `doit submit config=F` in any directory, with no dodo.py.

doit reads commands from the `doit.COMMAND` entry points of every installed package (pyproject.toml
registers one per verb), so installing gymbuild is the whole set-up: the design card's
`doit submit config=F` and `doit render config=F` work wherever the user evaluates from, and both
`doit` and `gymbuild` import the one installed copy of the package (a dodo.py in the checkout made
`doit` import the source tree and `gymbuild` site-packages, whose template paths then differed).
Each command hands its command line to the console script's main (main.py), so both spell the same
verbs, arguments and messages. The price: in a project of its own, a dodo.py task named as one of
these verbs clashes with the command (doit refuses such a dodo.py), as a task named `list` would.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, ClassVar

from doit import get_var
from doit.cmd_base import Command

from gymbuild.request import verbs


def command_line_variables(argv: Sequence[str]) -> list[str]:
    """The `name=value` words of doit's command line `argv` (after the program name), in order.

    doit takes them out of the line before a command sees it (every word that holds `=` and does not
    start with `-`, wherever it stands) and offers them only one by one, by name (`doit.get_var`,
    its public way): a config override's name is the user's, so the words are read from the
    command line itself, and each is checked against what doit read. A line doit was not given
    (DoitMain.run called from Python with other words) is an error, not a silent other run."""
    words = [a for a in argv if "=" in a and not a.startswith("-")]
    last = dict(w.split("=", 1) for w in words)
    differ = [name for name in (*last, *sorted(verbs.reserved())) if get_var(name) != last.get(name)]
    if differ:
        raise LookupError(
            f"error: doit's command-line variable {differ[0]}= is not the one on this process's command "
            "line\n    fix: run gymbuild's verbs as `doit VERB NAME=VALUE ...` or `gymbuild VERB ...`"
        )
    return words


class _Verb(Command):
    """One gymbuild verb as a doit command; what it does is gymbuild's main. A subclass names its
    verb (`name`); its doit help line is the verb's line in verbs.py."""

    name: ClassVar[str]
    doc_usage = "[NAME=VALUE ...] [OVERRIDE ...]"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        verb = verbs.verb(cls.name)
        if verb is None:
            raise TypeError(f"{cls.__name__}: {cls.name!r} is no verb of gymbuild/request/verbs.py")
        cls.doc_purpose = f"gymbuild: {verb.does}"

    def parse_execute(self, in_args: list[str]) -> int:
        from gymbuild.cli import main  # late: measured, off doit's start-up (it loads every command)

        # doit took the `name=value` words into its variables; the verb's main parses the whole
        # line itself (main.py), NeMo Gym's flags included.
        try:
            variables = command_line_variables(sys.argv[1:])
        except LookupError as err:
            print(err, file=sys.stderr)
            return 3  # doit's status for an error before any task ran
        return main.main([self.get_name(), *in_args, *variables])


# One class per verb of verbs.VERBS, named as pyproject.toml's entry points name them
# (tests/cli/test_main.py and tests/cli/test_verbs.py check the three agree).
class Resolve(_Verb):
    name = "resolve"


class Render(_Verb):
    name = "render"


class Submit(_Verb):
    name = "submit"


class Status(_Verb):
    name = "status"


class Resubmit(_Verb):
    name = "resubmit"


class Logs(_Verb):
    name = "logs"


class Cancel(_Verb):
    name = "cancel"


class Results(_Verb):
    name = "results"


class Compare(_Verb):
    name = "compare"


class Export(_Verb):
    name = "export"


class Report(_Verb):
    name = "report"


class Runs(_Verb):
    name = "runs"
