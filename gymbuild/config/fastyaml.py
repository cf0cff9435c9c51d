"""OmegaConf's YAML rules on libyaml: OmegaConf parses config files with PyYAML's pure-Python
scanner, the largest part of reading a large config (docs/performance.md, "Why the code is shaped so").

The loader here parses with libyaml (PyYAML's CSafeLoader) under OmegaConf's rules: its implicit
resolvers and constructors, taken from OmegaConf's own loader class, and a refusal of duplicate keys.
The plain path reads a file with it; `hydra_source` gives it to Hydra's composition. Without libyaml,
or if OmegaConf's loader is not where it is looked for, OmegaConf's own parsing is used.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Hashable
from dataclasses import dataclass

import yaml


@functools.cache
def _omegaconf_loader() -> type[yaml.SafeLoader] | None:
    """OmegaConf's loader class, read (never replaced) so the resolution rules are its own rather than
    a copy of them; None if a later OmegaConf moves it, and then OmegaConf.load does the parsing.
    `_utils.get_yaml_loader` is private, but OmegaConf (2.3) has no public way to the class: its API
    gives DictConfigs, never the rules (its float forms, no timestamps, Path tags, no duplicate keys).
    A copy of the rules would drift unseen on an upgrade; this read falls back to the public load."""
    from omegaconf import _utils

    factory = getattr(_utils, "get_yaml_loader", None)
    return factory() if callable(factory) else None


def _no_duplicate_keys(
    self: yaml.CSafeLoader, node: yaml.MappingNode, deep: bool = False
) -> dict[Hashable, object]:
    seen: set[str] = set()
    for key_node, _ in node.value:
        if key_node.tag != yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG:
            continue
        if key_node.value in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key_node.value}",
                key_node.start_mark,
            )
        seen.add(key_node.value)
    return yaml.constructor.SafeConstructor.construct_mapping(self, node, deep=deep)  # C or pure loader


@functools.cache
def _c_loader() -> type | None:
    """A CSafeLoader resolving and constructing as OmegaConf's loader class does, built once per
    process; None without libyaml or without that class."""
    pure = _omegaconf_loader()
    if pure is None or not hasattr(yaml, "CSafeLoader"):
        return None
    return type(
        "OmegaConfCLoader",
        (yaml.CSafeLoader,),
        {
            "construct_mapping": _no_duplicate_keys,
            "yaml_implicit_resolvers": pure.yaml_implicit_resolvers,
            "yaml_constructors": pure.yaml_constructors,
        },
    )


@functools.cache
def strict_safe_loader() -> type[yaml.SafeLoader]:
    """PyYAML's safe loader (libyaml's where there is one) refusing duplicate keys, for gymbuild's own
    small YAML files (a gate policy): a key written twice is a mistake, not "the last one wins"."""
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return type("StrictSafeLoader", (base,), {"construct_mapping": _no_duplicate_keys})


MAX_NODES = 200_000  # values of the tree as aliases expand it (a thousand benchmarks: ~20 000)
MAX_DEPTH = 64  # nesting, aliases expanded (a config is about 8 deep)
MAX_SCALAR = 1 << 20  # characters of one scalar as read (validation bounds a value far lower)


@dataclass
class _Open:
    """A collection `limits` is inside: its anchor, the values counted in it, its depth below."""

    anchor: str | None
    values: int = 0
    depth: int = 0


class YamlLimitError(ValueError):
    """A YAML text over the bounds of `limits`: a message and where in the text."""


def limits(text: str) -> None:
    """Refuse, before anything is built, a text that expands past MAX_NODES values (an alias bomb:
    nine levels of nine aliases are 700 bytes and 400 million values), nests past MAX_DEPTH (the
    loaders recurse per level), holds a scalar over MAX_SCALAR, or an alias to a collection it sits
    in (a tree that contains itself). One pass over libyaml's events, iterative, with each anchor's
    expanded size and depth remembered: a bomb is refused in milliseconds.

    Malformed YAML is left to the parsers, whose messages say what is wrong.
    """
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (expanded values, depth below it)
    open_: list[_Open] = []  # each open collection, outermost first
    total = 0

    def add(values: int, depth: int, line: int) -> None:
        nonlocal total
        total += values
        where = f"line {line}: " if line else ""
        if total > MAX_NODES:
            raise YamlLimitError(f"{where}the YAML expands to more than {MAX_NODES} values (aliases)")
        if len(open_) + depth > MAX_DEPTH:
            raise YamlLimitError(f"{where}the YAML nests more than {MAX_DEPTH} levels deep")
        if open_:
            open_[-1].values += values
            open_[-1].depth = max(open_[-1].depth, depth + 1)

    try:
        for event in yaml.parse(text, Loader=loader):
            mark = event.start_mark
            line = mark.line + 1 if mark is not None else 0
            if isinstance(event, yaml.AliasEvent):
                if event.anchor in anchors:
                    add(*anchors[event.anchor], line)
                elif any(entry.anchor == event.anchor for entry in open_):
                    raise YamlLimitError(
                        f"line {line}: alias *{event.anchor} refers to a collection it is inside"
                    )
            elif isinstance(event, yaml.ScalarEvent):
                if len(event.value) > MAX_SCALAR:
                    raise YamlLimitError(f"line {line}: a value longer than {MAX_SCALAR} characters")
                add(1, 0, line)
                if event.anchor:
                    anchors[event.anchor] = (1, 0)
            elif isinstance(event, yaml.CollectionStartEvent):
                add(1, 0, line)
                open_.append(_Open(event.anchor))
            elif isinstance(event, yaml.CollectionEndEvent):
                done = open_.pop()
                if done.anchor:
                    anchors[done.anchor] = (done.values + 1, done.depth)
                if open_:  # the collection itself was counted at its start
                    open_[-1].values += done.values
                    open_[-1].depth = max(open_[-1].depth, done.depth + 1)
    except yaml.YAMLError as err:  # malformed: the parsers say what is wrong, unless it is the depth
        if "nesting depth" in str(err):  # libyaml's own bound (1000 levels), met while it looks ahead
            raise YamlLimitError(f"the YAML nests more than {MAX_DEPTH} levels deep") from None


def omegaconf_load(text: str) -> object:
    """`text` parsed as OmegaConf.load parses a file (its resolvers, constructors and duplicate-key
    refusal), without building a DictConfig: the fast path reads a plain config with this alone.

    libyaml when present, else OmegaConf's own loader. Errors propagate unchanged; the caller reports
    them through the pure-Python parsers, whose messages are the ones users see. A text over the
    bounds of `limits` raises YamlLimitError before anything is built.
    """
    limits(text)
    pure = _omegaconf_loader()
    if pure is None:
        from omegaconf import OmegaConf

        return OmegaConf.to_container(OmegaConf.load(io.StringIO(text)))
    return yaml.load(text, Loader=_c_loader() or pure)


def libyaml_rules() -> bool:
    """Whether omegaconf_load parses with libyaml under OmegaConf's own rules."""
    return hasattr(yaml, "CSafeLoader") and _omegaconf_loader() is not None
