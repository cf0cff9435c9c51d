"""NeMo Gym's command line, read as gymbuild's: `gym eval submit -c F --dry-run --json` works here.

`gym eval submit` (nemo-gym 0.7.0) takes `-c/--config PATH`, `--dry-run`, `--resolve-only`, `--json`
and `-v`. A user who knows that line types it at gymbuild too, and doit would refuse each flag with
its own error (exit 3). So the command line is rewritten into gymbuild's words before anything else
reads it: `--config F` is `config=F`, `--json` `json=1`, a lone path to a YAML file is `config=`, and
--dry-run and --resolve-only mean what verbs.py says they mean for the verb they are given to:
`submit --dry-run` is `render`, `cancel --dry-run` is `cancel dry_run=1`, `export --dry-run` is
refused. A command line names one verb: doit would run every task it names (`render cancel` renders,
then cancels), so a flag that promises a dry run must never leave an acting verb beside it. What is
left that gymbuild cannot read (an unknown option, a config key without its `=`, two verbs, a
reserved argument the verb does not read) is one message with the fix here, never doit's. Pure: no
I/O but asking whether a word names an existing file.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass

from gymbuild.errors import printable
from gymbuild.request import verbs
from gymbuild.state import ids

# doit's own commands, passed to doit as they are (tests/cli/test_main.py checks this against doit's list).
DOIT_COMMANDS = frozenset(
    {
        "help",
        "run",
        "list",
        "info",
        "clean",
        "forget",
        "ignore",
        "dumpdb",
        "strace",
        "tabcompletion",
        "reset-dep",
    }
)
HELP_FLAGS = frozenset({"-h", "--help"})
VERSION_FLAGS = frozenset({"-V", "--version"})
CONFIG_FLAGS = frozenset({"-c", "--config"})
# NeMo Gym's flags without a value that mean the same for every verb, in gymbuild's words.
NEMO_GYM_FLAGS = {"--json": "json=1", "-v": "", "--verbose": ""}
# ... and those whose meaning is the verb's own (verbs.Verb.flags).
VERB_FLAGS = (verbs.DRY_RUN, verbs.RESOLVE_ONLY)
# Read by every verb's run, whether its help lists them or not: the config, where its workspace is, JSON.
GENERIC_ARGUMENTS = frozenset({"config", "workspace", "json"})
# With no verb, the command line is NeMo Gym's `gym eval submit`: `gymbuild -c F --dry-run`.
FLAGS_DEFAULT_VERB = "submit"


@dataclass(frozen=True)
class Parsed:
    """The command line in gymbuild's words, or the one message that says what is wrong with it."""

    args: tuple[str, ...]
    error: str | None = None


def _fail(text: str, fix: str) -> Parsed:
    return Parsed((), f"error: {text}\n    fix: {fix}")


def _is_yaml_path(word: str) -> bool:
    return word.endswith((".yaml", ".yml")) or (os.sep in word and os.path.isfile(word))


def known_word(word: str) -> bool:
    """A verb, a doit command, or a task doit knows (a pipeline step, `stage:<bench>`...)."""
    return verbs.verb(word) is not None or word in DOIT_COMMANDS or word.split(":", 1)[0] in verbs.STEPS


def _looks_like_override(word: str) -> bool:
    """`compute.cluster.walltime`, `+driver.x`: a config key typed without its `=value`."""
    return word.startswith("+") or ("." in word and not _is_yaml_path(word) and " " not in word)


def normalize(argv: Sequence[str]) -> Parsed:
    """NeMo Gym's flags and a positional config rewritten into gymbuild's `name=value` words.

    Help and version flags stay (cli/main.py answers them); doit's own commands keep their options; a
    verb's command line holds only words gymbuild reads, or the result carries the error.
    """
    args = list(argv)
    if any(a in HELP_FLAGS or a in VERSION_FLAGS for a in args):
        return Parsed(tuple(args))
    if any(a in DOIT_COMMANDS for a in args if not a.startswith("-") and "=" not in a):
        # doit's own command line: its options are doit's; a verb it names (`gymbuild run status
        # limit=3`) reads only its arguments, as on its own line
        named = [v for a in args if (v := verbs.verb(a)) is not None]
        unread = _unread(named[0], [a for a in args if "=" in a]) if len(named) == 1 else None
        return unread or Parsed(tuple(args))
    out: list[str] = []
    flags: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        name, eq, value = word.partition("=")
        if name in CONFIG_FLAGS and eq:  # --config=F
            out.append(f"config={value}")
        elif word in CONFIG_FLAGS:
            if i + 1 >= len(args) or args[i + 1].startswith("-"):
                return _fail(
                    f"{word} needs the config file after it", f"{word} eval.yaml (or config=eval.yaml)"
                )
            out.append(f"config={args[i + 1]}")
            i += 1
        elif word.startswith("-c") and len(word) > 2 and not word.startswith("--"):  # -cF
            out.append(f"config={word[2:]}")
        elif word in VERB_FLAGS:
            flags.append(word)
        elif word in NEMO_GYM_FLAGS:
            if NEMO_GYM_FLAGS[word]:
                out.append(NEMO_GYM_FLAGS[word])
        elif word.startswith("-"):
            known = ", ".join(sorted({*CONFIG_FLAGS, *NEMO_GYM_FLAGS, *VERB_FLAGS, "--help", "--version"}))
            return _fail(
                f"{word!r} is not an option gymbuild knows",
                f"use NAME=VALUE arguments (`gymbuild --help` lists them) or one of {known}",
            )
        elif name == "run" and eq and (problem := ids.run_argument_problem(value)):
            return Parsed((), problem)  # an id that is a path reaches no verb (ids.py)
        elif eq or known_word(word):
            out.append(word)
        elif _is_yaml_path(word) or os.path.isfile(word):
            out.append(f"config={word}")
        elif _looks_like_override(word):
            after = args[i + 1] if i + 1 < len(args) else None
            value = after if after is not None and "=" not in after and not known_word(after) else "VALUE"
            return _fail(
                f"{word!r} is a config key without a value (an override is KEY=VALUE)",
                f"did you mean {word}={value}?",
            )
        else:
            out.append(word)  # an unknown verb: cli/main.py names the nearest
        i += 1
    return _one_verb(out, flags)


def _one_verb(words: list[str], flags: Sequence[str]) -> Parsed:
    """The command line with its one verb, the flags given to it read as that verb reads them
    (verbs.Verb.flags), or the message that refuses it: two verbs, a flag the verb refuses, or
    dry_run= on a verb that has no dry run of its own."""
    named = list(dict.fromkeys(w for w in words if verbs.verb(w) is not None))
    if len(named) > 1:
        return _fail(
            f"a command line names one verb, and this one names {len(named)}: {', '.join(named)}",
            "run them one after the other: " + "; ".join(f"gymbuild {v} ..." for v in named),
        )
    verb = verbs.verb(named[0] if named else FLAGS_DEFAULT_VERB)
    assert verb is not None
    instead = verb.name
    for name in dict.fromkeys(flags):
        flag = verb.flag(name)
        if flag.becomes is None:
            return _fail(f"`gymbuild {verb.name} {name}`: {flag.does}", f"drop {name}")
        if verbs.verb(flag.becomes) is not None:
            # --resolve-only wins over --dry-run: NeMo Gym prints the resolved config then, too.
            instead = flag.becomes if instead == verb.name or name == verbs.RESOLVE_ONLY else instead
        elif flag.becomes:
            words.append(flag.becomes)  # last: it wins over the same name=value typed before it
    if instead != verb.name:
        words = [instead, *(w for w in words if w != verb.name)]
    chosen = verbs.verb(instead) if named or instead != verb.name else None
    given = [w for w in words if w.partition("=")[0] == "dry_run"]
    if given and (chosen is None or "dry_run" not in dict(chosen.arguments)):
        name = chosen.name if chosen else "render"
        return _fail(
            f"`gymbuild {name}` has no dry_run= (cancel and resubmit do): {_its_dry_run(name)}",
            f"drop {given[0]}",
        )
    bare = not any("=" not in w for w in words)  # only name=value words: the default verb, render
    return _unread(chosen or (verbs.verb("render") if bare else None), words) or Parsed(tuple(words))


def _unread(verb: verbs.Verb | None, words: Sequence[str]) -> Parsed | None:
    """The refusal of a reserved argument `verb` does not read (`gymbuild status limit=3`): silently
    ignored, it would let the user believe it did something. config=, workspace= and json= are read
    by every verb's run (GENERIC_ARGUMENTS); an override (any other name) is the config's."""
    if verb is None:
        return None
    reads = [name for name, _ in verb.arguments]
    for word in words:
        name = word.partition("=")[0]
        if name in verbs.reserved() and name not in reads and name not in GENERIC_ARGUMENTS:
            listed = ", ".join(f"{n}=" for n in reads)
            return _fail(
                f"`gymbuild {verb.name}` does not read {name}= (it reads {listed})",
                f"drop {printable(word, lines=False)}; `gymbuild help {verb.name}` says what each "
                "argument does there",
            )
    return None


def _its_dry_run(name: str) -> str:
    """What --dry-run means for verb `name`, in a sentence: where dry_run= has no place, the fix."""
    verb = verbs.verb(name)
    assert verb is not None
    flag = verb.flag(verbs.DRY_RUN)
    if flag.becomes:
        return f"its dry run is `gymbuild {flag.becomes}`"
    return flag.does


def nearest_verb(word: str) -> str | None:
    near = difflib.get_close_matches(word, [v.name for v in verbs.VERBS], n=1)
    return near[0] if near else None
