"""Reading a submit config the way NeMo Gym does: Hydra composition, then OmegaConf interpolation.

Hydra does the work it is good at (the `defaults:` list, config groups, the override grammar `a.b=v`,
`+a.b=v`, `++a.b=v`) whenever a file gives it some; this module decides that, and reads a plain file
that gives it none without Hydra, to the same tree. The checks of the file itself are in source.py;
composition, interpolation and the messages made of their exceptions in compose.py. The only I/O is
reading the config files and (through `${oc.env:...}`) the environment.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from gymbuild.config.compose import OVERRIDE_KEY, check_overrides, compose, drop_scratch, interpolate
from gymbuild.config.fastyaml import limits
from gymbuild.config.source import Source, check_source
from gymbuild.config.tree import JsonValue

if TYPE_CHECKING:  # OmegaConf is imported only where a file needs it
    from omegaconf import DictConfig, ListConfig


# Hydra's own ConfigStore holds a root config of this name: a file so named is matched against it.
_HYDRA_STORE_NAMES = ("_dummy_empty_config_",)
# A `# @package` (or any `# @key value`) header line: Hydra moves or rejects the config by it.
_HEADER = re.compile(r"^\s*#\s*@", re.MULTILINE)
# OmegaConf's resolvers whose results depend only on the config and the environment's plain strings.
# `oc.decode`/`oc.create` can turn a string from outside (an environment variable) into a new
# interpolation, which could name a resolver only Hydra registers (`hydra:`, `now:`), so they go to Hydra.
_PLAIN_RESOLVERS = frozenset({"oc.env", "oc.select", "oc.dict.keys", "oc.dict.values"})


def _plain_interpolations(strings: Sequence[str]) -> bool:
    """Whether every `${...}` in `strings` parses and calls no resolver outside _PLAIN_RESOLVERS."""
    from omegaconf import grammar_parser
    from omegaconf.errors import GrammarParseError
    from omegaconf.grammar.gen.OmegaConfGrammarParser import OmegaConfGrammarParser

    for text in strings:
        try:
            stack: list[object] = [grammar_parser.parse(text)]
        except GrammarParseError:
            return False
        while stack:
            node = stack.pop()
            resolver = OmegaConfGrammarParser.InterpolationResolverContext
            if isinstance(node, resolver) and node.resolverName().getText() not in _PLAIN_RESOLVERS:
                return False
            stack.extend(getattr(node, "children", None) or ())
    return True


def _without_hydra(path: Path, source: Source) -> dict[str, Any] | DictConfig | ListConfig | None:
    """The tree Hydra's compose would give for a file it has nothing to do with, or None.

    For a primary config without a defaults list, Hydra merges the file into an empty config after
    its own `hydra` node, sets the struct flag and deletes `hydra` again: the file's tree, unchanged,
    in struct mode. So: a plain tree with no `${`/`???` is the answer as it stands; one with them
    becomes the same OmegaConf config Hydra would hand back, resolved by the same call. Anything
    Hydra could act on (a defaults list, a `hydra` node, a header, a resolver Hydra registers) is
    left to Hydra.
    """
    tree = source.tree
    if (
        tree is None
        or not source.plain
        or "defaults" in tree
        or "hydra" in tree
        or path.stem in _HYDRA_STORE_NAMES
        or _HEADER.search(source.text)
    ):
        return None
    if not source.interpolated and not source.missing:
        return tree
    if not _plain_interpolations(source.interpolated):
        return None
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        cfg = OmegaConf.create(tree)
    except OmegaConfBaseException:  # Hydra would fail the same way: let it word the message
        return None
    OmegaConf.set_struct(cfg, True)
    return cfg


def load_tree(path: Path, overrides: Sequence[str] = (), *, hydra: bool = False) -> dict[str, Any]:
    """The composed, interpolated, scratch-free tree of a config file: the input to validation.

    A file with nothing for Hydra to do (no overrides, no defaults list, ...) is read without Hydra,
    which took most of the time of every command; `hydra=True` forces composition (the tests compare).
    """
    return read_tree(path, overrides, hydra=hydra)[0]


def read_tree(
    path: Path, overrides: Sequence[str] = (), *, hydra: bool = False
) -> tuple[dict[str, Any], bool]:
    """load_tree's tree, and whether it came from the file's bytes alone: no overrides, no other file,
    no interpolation (so no environment variable) went into it, which makes it safe to cache."""
    source = check_source(path)
    check_overrides(overrides, str(path))
    plain = None if hydra or overrides else _without_hydra(path, source)
    if plain is None:
        return interpolate(compose(path, overrides), str(path)), False
    if isinstance(plain, dict):
        return drop_scratch(plain), True
    return interpolate(plain, str(path)), False


def escape_interpolations(value: JsonValue) -> JsonValue:
    """`${` written back as `\\${`, so a resolved tree fed back in resolves to itself."""
    if isinstance(value, dict):
        return {k: escape_interpolations(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escape_interpolations(v) for v in value]
    if isinstance(value, str):
        return value.replace("${", "\\${")
    return value


_PLAIN_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]*$")


def host_hint(path: Path, overrides: Sequence[str]) -> str | None:
    """The compute hostname the config will resolve to, when that is plain to see without composing
    or validating it (None whenever it is not: a defaults list, an interpolation, an override that
    replaces a compute, more than one compute). Only a hint, for starting the SSH handshake while the
    rest loads; the resolved config decides where the run goes.
    """
    host: str | None = None
    for text in overrides:
        match = OVERRIDE_KEY.match(text)
        deleting = text.startswith("~")  # the op group matches its empty `+` first
        parts = (match["key"] if match else "").lstrip("~").split(".")
        if parts[0] != "compute":
            continue
        if match is None or len(parts) < 3 or (parts[2] == "hostname" and deleting):
            return None
        if parts[2] == "hostname":
            host = (match["value"] or "").strip("'\"")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        text = path.read_text(encoding="utf-8")
        limits(text)  # the hint reads the file before check_source does: not a bomb, not too deep
        tree = yaml.load(text, Loader=loader)
    except (OSError, ValueError, yaml.YAMLError):
        return None
    if not isinstance(tree, dict) or "defaults" in tree or not isinstance(tree.get("compute"), dict):
        return None
    computes = list(tree["compute"].values())
    if len(computes) != 1 or not isinstance(computes[0], dict):
        return None
    if host is None:
        host = computes[0].get("hostname")
    return host if isinstance(host, str) and _PLAIN_HOST.match(host) else None
