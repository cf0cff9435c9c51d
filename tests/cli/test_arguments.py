"""Each reserved argument is read once, into its type (gymbuild/request/arguments.py), and a verb reads only
the arguments verbs.py says it reads (gymbuild/cli/argv.py).

Searched: any value an argument cannot read, given to a verb that reads it, is one message naming
the argument and the fix on stderr, exit 1 (a gate's, compare's: 64), nothing on stdout, no
traceback; any value of the shapes the help promises reads as what it says. Any reserved argument
a verb does not read is refused the same way, naming the verb and the argument, not ignored.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from e2e_helpers import user_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gymbuild.cli import argv, main
from gymbuild.errors import UsageError, UserError
from gymbuild.request import arguments, verbs
from gymbuild.request.arguments import ARGUMENTS, Refused
from gymbuild.request.invocation import GATE_ARGUMENTS, Invocation

SEARCH = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# The verb a search gives each argument to: one that reads it.
READER = {a.name: next(v.name for v in verbs.VERBS if a.name in dict(v.arguments)) for a in ARGUMENTS}


def _refuses(read: object, text: str) -> bool:
    try:
        read(text)  # type: ignore[operator]
    except Refused:
        return True
    return False


# Every argument whose value can be wrong (the others are names, ids and paths: any text is one).
CHECKED = [a for a in ARGUMENTS if any(_refuses(a.read, t) for t in ("", "x", "-1", "0", "a/b", "("))]


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main.main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def _one_message(rc: int, out: str, err: str, *said: str, status: int = 1) -> None:
    assert (rc, out) == (status, ""), (rc, out, err)
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("    fix: "), err
    for text in said:
        assert text in lines[0], (text, err)


def test_every_argument_is_a_field_of_the_invocation_of_its_type() -> None:
    """Invocation.from_vars hands each argument's value to the field of its name: an argument
    without one would raise a TypeError at every use, and its example reads."""
    fields = set(Invocation.__dataclass_fields__)
    for a in ARGUMENTS:
        assert a.name in fields, a.name
        a.parse(a.example)  # the example the fix and the tests use reads
    assert {a.name for a in CHECKED} >= {"json", "limit", "state", "prune", "every", "retries", "format"}


@SEARCH
@given(data=st.data())
def test_a_value_an_argument_cannot_read_is_one_message_and_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data: st.DataObject
) -> None:
    argument = data.draw(st.sampled_from(CHECKED), label="argument")
    texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
    near = st.sampled_from(["", "x", "-1", "0", "nan", "inf", "1e400", "a/b", ".", "..", "(", "ep", "2"])
    text = data.draw(
        st.one_of(texts, near, st.tuples(texts, near).map("".join)).filter(
            lambda t: _refuses(argument.read, t)
        ),
        label="value",
    )
    verb = READER[argument.name]
    config = tmp_path / "eval.yaml"  # no such file: a value's mistake is said before the config's
    rc, out, err = _main(capsys, verb, f"config={config}", f"{argument.name}={text}")
    # A gate's (compare's) refused argument has its own status, 64, never a verdict's 0, 1 or 2; so
    # has a sweep's gate's argument, whichever verb reads it (results, report, export).
    gated = verbs.verb(verb).usage_error or argument.name in GATE_ARGUMENTS  # type: ignore[union-attr]
    status = UsageError.status if gated else 1
    _one_message(rc, out, err, f"error: {argument.name}=", status=status)
    assert not (tmp_path / "eval.yaml").exists() and list(tmp_path.iterdir()) == []


@SEARCH
@given(
    n=st.integers(1, 10**6),
    days=st.floats(0, 1e9),
    every=st.floats(1e-3, 1e6),
    markers=st.lists(
        st.from_regex(r"[A-Za-z0-9_.-]{1,8}", fullmatch=True).filter(
            lambda m: m not in (".", "..") and m.lower() != "none"
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_the_values_the_help_promises_read_as_what_they_say(
    n: int, days: float, every: float, markers: list[str]
) -> None:
    inv = Invocation.from_vars(
        {
            "limit": str(n),
            "retries": str(n - 1),
            "prune": repr(days),
            "every": repr(every),
            "max_drop": repr(days),
            "ready": ",".join(markers),
            "only": ",".join(markers),
        }
    )
    assert (inv.limit, inv.retries, inv.prune, inv.every, inv.max_drop) == (n, n - 1, days, every, days)
    assert inv.ready == inv.only == tuple(markers)
    assert inv.overrides == ()


@pytest.mark.parametrize("word", ["1", "true", "YES", "on", "0", "false", "No", "off", ""])
def test_a_flag_reads_yes_or_no(word: str) -> None:
    for name in ("json", "new", "follow", "watch", "multirun", "series", "dry_run"):
        assert getattr(Invocation.from_vars({name: word}), name) is (
            word.lower() in ("1", "true", "yes", "on")
        )


def test_the_choices_read_in_their_spelling() -> None:
    inv = Invocation.from_vars({"state": "failed", "format": "markdown", "to": "wandb", "step": r"ep(\d+)"})
    assert (inv.state, inv.format, inv.to, inv.step) == ("FAILED", "markdown", "wandb", r"ep(\d+)")
    assert Invocation.from_vars({"ready": "none"}).ready == ()
    assert Invocation.from_vars({}).ready is None  # not given: the default markers (expand.DEFAULT_READY)
    for name, text in (("to", "tensorboard"), ("format", "xlsx"), ("step", "ep"), ("max_drop", "nan")):
        with pytest.raises(UserError, match=re.escape(f"error: {name}={text}")):
            Invocation.from_vars({name: text})
    assert math.isinf(arguments.days("inf"))  # prune=inf: nothing is that old, nothing removed


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["runs", "limit=abc"], "error: limit=abc: not a positive number"),
        (["runs", "json=maybe"], "error: json=maybe: not 1 or 0"),
        (["runs", "state=DONE"], "error: state=DONE: not a run state"),
        (["runs", "limit=\x1b[31m"], "error: limit=\\e[31m: not a positive number"),  # escaped
        (["submit", "follow=1", "multirun=1", "every=soon"], "error: every=soon is not a number of seconds"),
    ],
)
def test_the_reproductions_are_one_message(
    capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    _one_message(*_main(capsys, *args), says)


# Every pair of a verb and a reserved argument it does not read (config=, workspace=, json=: all do).
UNREAD = [
    (v.name, a.name)
    for v in verbs.VERBS
    for a in ARGUMENTS
    if a.name not in dict(v.arguments) and a.name not in argv.GENERIC_ARGUMENTS
]


@SEARCH
@given(pair=st.sampled_from(UNREAD), through=st.sampled_from([(), ("run",)]))
def test_an_argument_the_verb_does_not_read_is_refused_naming_both(
    capsys: pytest.CaptureFixture[str], pair: tuple[str, str], through: tuple[str, ...]
) -> None:
    """Alone, or named by doit's own `run` command (`gymbuild run status limit=3`)."""
    verb, name = pair
    example = verbs.argument(name).example
    rc, out, err = _main(capsys, *through, verb, f"{name}={example}")
    status = UsageError.status if verbs.verb(verb).usage_error else 1  # type: ignore[union-attr]
    _one_message(rc, out, err, f"gymbuild {verb}", f"{name}=", status=status)
    if name != "dry_run":  # dry_run= keeps its own message: where the verb's dry run is
        assert f"`gymbuild help {verb}`" in err.splitlines()[1]


def test_the_reproduction_status_limit_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    _one_message(*_main(capsys, "status", "limit=3"), "`gymbuild status` does not read limit=", "run=")
    # and the verbs' arguments each verb does read stay accepted: the run goes on to the config
    rc, _, err = _main(capsys, "runs", "limit=3", "state=failed", "json=1")
    assert rc == 0, err


@pytest.mark.parametrize("program", ["gymbuild", "doit"])
def test_both_programs_refuse_a_mistake_before_anything_runs(program: str, tmp_path: Path) -> None:
    """The console script and `doit VERB` (doit_plugin.py: the words doit took as its variables,
    handed back) read the same arguments the same way."""
    exe = shutil.which(program)
    assert exe, f"{program} is not on PATH"
    for args, says in (
        (["status", "limit=3"], "error: `gymbuild status` does not read limit="),
        (["runs", "limit=abc"], "error: limit=abc: not a positive number"),
    ):
        done = subprocess.run(
            [exe, *args], cwd=tmp_path, env=user_env(tmp_path), capture_output=True, text=True, timeout=120
        )
        assert (done.returncode, done.stdout) == (1, ""), done
        assert done.stderr.startswith(says) and len(done.stderr.splitlines()) == 2, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_every_argument_a_verb_lists_is_accepted_with_its_example() -> None:
    """The other half of the refusal: what `gymbuild help VERB` lists, the command line takes (and
    reads into its type), alone or all together."""
    for v in verbs.VERBS:
        words = [f"{name}={verbs.argument(name).example}" for name, _ in v.arguments]
        for word in words:
            parsed = argv.normalize([v.name, word])
            assert parsed.error is None, (v.name, word, parsed.error)
            Invocation.from_argv(parsed.args)  # raises for a value its argument cannot read
        assert argv.normalize([v.name, *words]).error is None, v.name
