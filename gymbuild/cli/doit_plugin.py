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

from doit.cmd_base import Command

from gymbuild import verbs


class _Verb(Command):
    """One gymbuild verb as a doit command; what it does is gymbuild's main."""

    doc_usage = "[NAME=VALUE ...] [OVERRIDE ...]"

    def parse_execute(self, in_args: list[str]) -> int:
        from doit import doit_cmd

        from gymbuild.cli import main

        # doit took the `name=value` words into its variables, in command-line order; the verb's main
        # parses the whole line itself (main.py), NeMo Gym's flags included.
        variables: dict[str, object] = dict(doit_cmd._CMDLINE_VARS or {})
        return main.main([self.get_name(), *in_args, *(f"{k}={v}" for k, v in variables.items())])


def _command(verb: verbs.Verb) -> type[_Verb]:
    name = verb.name.capitalize()
    return type(name, (_Verb,), {"name": verb.name, "doc_purpose": f"gymbuild: {verb.does}"})


# `Submit`, `Render`...: one class per verb of verbs.VERBS, named as pyproject.toml's entry points
# name them (tests/test_cli.py checks that every verb has its entry point).
COMMANDS = {v.name.capitalize(): _command(v) for v in verbs.VERBS}
globals().update(COMMANDS)
