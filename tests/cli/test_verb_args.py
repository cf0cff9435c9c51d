"""Each verb receives its own arguments (gymbuild/request/verb_args.py), and they are exactly the ones
verbs.py lists for it: the registry the help and argv.py's refusals read is also what the verb's code
can read. A verb added to verbs.py without its class, or an argument listed but not in the class (or
in the class but not listed), fails here.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gymbuild.request import verbs
from gymbuild.request.arguments import ARGUMENTS, argument
from gymbuild.request.invocation import Invocation
from gymbuild.request.verb_args import ARGS, RunsArgs, args_of
from gymbuild.sweep import day_two as sweep_day_two

INVOCATION_TYPES = {f.name: f.type for f in dataclasses.fields(Invocation)}


@pytest.mark.parametrize("verb", verbs.VERBS, ids=lambda v: v.name)
def test_each_verbs_class_has_exactly_the_arguments_verbs_py_lists(verb: verbs.Verb) -> None:
    cls = ARGS[verb.name]
    assert cls.verb == verb.name
    listed = [name for name, _ in verb.arguments]
    fields = [f.name for f in dataclasses.fields(cls)]
    assert sorted(fields) == sorted(listed)  # and each once
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_every_verb_has_a_class_and_every_class_a_verb() -> None:
    assert set(ARGS) == {v.name for v in verbs.VERBS}


@pytest.mark.parametrize("verb", verbs.VERBS, ids=lambda v: v.name)
def test_each_field_has_the_type_its_argument_reads(verb: verbs.Verb) -> None:
    """The type of the Invocation field its reader (arguments.py) fills; runs' config alone is
    optional (not given: every config's submissions)."""
    for f in dataclasses.fields(ARGS[verb.name]):
        expected = INVOCATION_TYPES[f.name]
        if (verb.name, f.name) == ("runs", "config"):
            expected = f"{expected} | None"
        assert f.type == expected, (verb.name, f.name)
        returns = argument(f.name).read.__annotations__["return"]
        assert f.type in (returns, f"{returns} | None"), (verb.name, f.name, returns)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_verbs_arguments_are_the_command_lines_values(data: st.DataObject) -> None:
    """Searched: any verb, given any of the arguments it reads (each a value its reader takes),
    sees each as the Invocation read it."""
    verb = data.draw(st.sampled_from(verbs.VERBS))
    names = data.draw(st.lists(st.sampled_from([n for n, _ in verb.arguments]), unique=True))
    examples = {a.name: a.example for a in ARGUMENTS}
    argv = [verb.name, *(f"{n}={examples[n]}" for n in names)]
    inv = Invocation.from_argv(argv)
    got = args_of(verb.name, inv)
    for f in dataclasses.fields(got):
        if (verb.name, f.name) == ("runs", "config"):
            assert got.config == (inv.config if "config" in names else None)  # type: ignore[attr-defined]
        else:
            assert getattr(got, f.name) == getattr(inv, f.name), f.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.json = True  # type: ignore[misc]


def test_runs_config_is_none_unless_given() -> None:
    assert RunsArgs.of(Invocation.from_argv(["runs"])).config is None
    assert str(RunsArgs.of(Invocation.from_argv(["runs", "config=eval.yaml"])).config) == "eval.yaml"


@pytest.mark.parametrize("name", sorted(sweep_day_two.VERBS))
def test_each_sweep_verb_takes_its_own_verbs_arguments(name: str) -> None:
    """verb_action hands a sweep verb `args_of(name, ...)`: its function must take that class."""
    (_, args) = inspect.signature(sweep_day_two.VERBS[name]).parameters.values()
    assert args.annotation == ARGS[name].__name__
