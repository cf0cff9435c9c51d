"""NeMo Gym's command line, read as gymbuild's: `gym eval submit -c F --dry-run --json` works here.

`gym eval submit` (nemo-gym 0.7.0) takes `-c/--config PATH`, `--dry-run`, `--resolve-only`, `--json`
and `-v`. A user who knows that line types it at gymbuild too, and doit would refuse each flag with
its own error (exit 3). So the command line is rewritten into gymbuild's words before anything else
reads it: `--config F` is `config=F`, `--dry-run` the verb `render`, `--resolve-only` the verb
`resolve`, `--json` `json=1`; a lone path to a YAML file is `config=`. What is left that gymbuild
cannot read (an unknown option, a config key without its `=`) is one message with the fix here,
never doit's. Pure: no I/O but asking whether a word names an existing file.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass

from gymbuild import ids, verbs

# doit's own commands, passed to doit as they are (tests/test_cli.py checks this against doit's list).
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
# NeMo Gym's flags without a value, and what each is in gymbuild's words.
NEMO_GYM_FLAGS = {
    "--dry-run": "render",
    "--resolve-only": "resolve",
    "--json": "json=1",
    "-v": "",
    "--verbose": "",
}


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

    Help and version flags stay (cli.py answers them); doit's own commands keep their options; a
    verb's command line holds only words gymbuild reads, or the result carries the error.
    """
    args = list(argv)
    if any(a in HELP_FLAGS or a in VERSION_FLAGS for a in args):
        return Parsed(tuple(args))
    if any(a in DOIT_COMMANDS for a in args if not a.startswith("-") and "=" not in a):
        return Parsed(tuple(args))  # doit's own command line: its options are doit's
    out: list[str] = []
    rewritten_verbs: list[str] = []
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
        elif word in NEMO_GYM_FLAGS:
            mapped = NEMO_GYM_FLAGS[word]
            if mapped and "=" not in mapped:
                rewritten_verbs.append(mapped)
            elif mapped:
                out.append(mapped)
        elif word.startswith("-"):
            flags = ", ".join(sorted({*CONFIG_FLAGS, *NEMO_GYM_FLAGS, "--help", "--version"}))
            return _fail(
                f"{word!r} is not an option gymbuild knows",
                f"use NAME=VALUE arguments (`gymbuild --help` lists them) or one of {flags}",
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
            out.append(word)  # an unknown verb: cli.py names the nearest
        i += 1
    if rewritten_verbs:
        # `submit --dry-run` is the dry run, `submit --resolve-only` the resolve: the flag wins.
        out = [w for w in out if w not in ("submit",)]
        chosen = "resolve" if "resolve" in rewritten_verbs else "render"
        out = [chosen, *(w for w in out if w != chosen)]
    return Parsed(tuple(out))


def nearest_verb(word: str) -> str | None:
    near = difflib.get_close_matches(word, [v.name for v in verbs.VERBS], n=1)
    return near[0] if near else None
