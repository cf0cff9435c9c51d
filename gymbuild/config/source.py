"""A config file as it is before Hydra sees it: does it exist, is it YAML, is its top a mapping,
and what does it hold.

Apart from composition because these are the checks Hydra words badly (its messages lose the line
and column) and because what the read finds (a plain tree, its interpolations) decides whether Hydra
is needed at all: the common file is read here once and never composed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gymbuild.config.fastyaml import YamlLimitError, omegaconf_load
from gymbuild.errors import ConfigError, Problem


def _file_problem(path: Path, message: str, fix: str) -> ConfigError:
    return ConfigError(str(path), [Problem("", message, fix)])


LIMIT_FIX = "write the values out (a config is a few hundred values, a few levels deep), or split the file"


def _parse_yaml(text: str) -> object:
    """libyaml when present (ten times faster: a thousand benchmarks took half a second in pure Python);
    on any error the pure-Python parser runs again, so messages stay word for word the same."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is not None:
        try:
            return yaml.load(text, Loader=loader)
        except yaml.YAMLError:
            pass
    return yaml.safe_load(text)


def _check_path(path: Path) -> None:
    """Refuse a missing file, a directory or a name Hydra would not find."""
    if not path.exists():
        raise _file_problem(
            path, "no such config file", "pass config=<path to your submit.yaml> (default: ./submit.yaml)"
        )
    if path.is_dir():
        raise _file_problem(path, "is a directory, not a config file", "pass config=<dir>/submit.yaml")
    if path.suffix != ".yaml":
        raise _file_problem(path, "config files must end in .yaml (Hydra finds no other)", "rename it")


def _check_yaml(path: Path) -> None:
    """Refuse malformed YAML, or a top level that is not a mapping, with PyYAML's safe loader.

    Hydra's own messages for these lose the line and column; PyYAML keeps them.
    """
    try:
        data = _parse_yaml(path.read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise _file_problem(
            path, f"{where}invalid YAML: {err.problem}", "fix the YAML syntax at that position"
        ) from None
    except RecursionError:  # the pure-Python parser recurses per level (limits() words it first)
        raise _file_problem(path, "the YAML nests too deep to read", LIMIT_FIX) from None
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as err:
        raise _file_problem(path, f"cannot read the config: {err}", "fix the file") from None
    except (ValueError, TypeError, AttributeError, OverflowError) as err:
        # PyYAML's constructors fail this way on a malformed explicitly tagged value (`!!timestamp x`)
        raise _file_problem(
            path, f"a tagged YAML value cannot be read ({type(err).__name__}: {err})", "remove the !!tag"
        ) from None
    if data is None:
        raise _file_problem(
            path, "the file is empty (or only comments)", "start with `services:` (see examples/minimal.yaml)"
        )
    if not isinstance(data, dict):
        names: dict[type, str] = {list: "a list", str: "a single string"}
        kind = names.get(type(data), f"a {type(data).__name__}")
        raise _file_problem(path, f"the top level is {kind}, not a mapping of keys", "start with `services:`")


# SafeLoader reads an unquoted `2001-12-14` as a date (and fails on `2001-13-45`); OmegaConf's loader
# keeps it a string. Where a string of the tree matches, the safe loader has the last word.
_TIMESTAMP = next(
    regexp
    for resolvers in yaml.SafeLoader.yaml_implicit_resolvers.values()
    for tag, regexp in resolvers
    if tag == "tag:yaml.org,2002:timestamp"
)
_SCALARS = (int, float, bool, type(None))


@dataclass
class Source:
    """A config file read once with OmegaConf's YAML rules, and what the walk over it found.

    `tree` is None when OmegaConf's loader could not read the file although PyYAML's safe loader
    could (a duplicate key, say): only Hydra then says what is wrong, in its own words.
    """

    text: str
    tree: dict[str, Any] | None = None
    plain: bool = False  # str keys, and only str/int/float/bool/None/list/dict below them
    interpolated: list[str] = field(default_factory=list)  # strings containing `${`
    missing: bool = False  # some value is `???`


def _scan(source: Source) -> bool:
    """Fill in what the tree holds; True when some key or value may be a date to the safe loader."""
    source.plain = True
    maybe_date = False
    stack: list[object] = [source.tree]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if type(node) in (dict, list):
            # A YAML alias shares one object between places (or nests it in itself); OmegaConf copies
            # it apart. Rather than copy, such a file goes to Hydra.
            if id(node) in seen:
                source.plain = False
                continue
            seen.add(id(node))
        if type(node) is dict:
            for key, value in node.items():
                if type(key) is not str:
                    source.plain = False
                elif key[:1].isdigit() and _TIMESTAMP.match(key):
                    maybe_date = True
                stack.append(value)
        elif type(node) is list:
            stack.extend(node)
        elif type(node) is str:
            if "${" in node:
                source.interpolated.append(node)
            elif node == "???":
                source.missing = True
            if node[:1].isdigit() and _TIMESTAMP.match(node):
                maybe_date = True
        elif type(node) not in _SCALARS:
            source.plain = False
    return maybe_date or not source.plain


def check_source(path: Path) -> Source:
    """Refuse a missing file, a directory or malformed YAML before Hydra sees it; read it once.

    The file is parsed with OmegaConf's rules (what Hydra would load). Whenever that read fails, or
    finds anything the safe loader might read differently (a date-like string, a tagged value), the
    safe loader reads the file again, so the messages are the ones it always gave.
    """
    _check_path(path)
    try:
        text = path.read_text(encoding="utf-8")
        loaded = omegaconf_load(text)
        source = Source(text, loaded if type(loaded) is dict else None)
    except YamlLimitError as err:
        raise _file_problem(path, str(err), LIMIT_FIX) from None
    except Exception:  # any failure: the safe loader explains it, or Hydra does
        _check_yaml(path)
        return Source("")
    if type(source.tree) is not dict or _scan(source):
        _check_yaml(path)
    if type(source.tree) is not dict:  # the safe loader refused it above, unless it saw a mapping
        return Source("")
    return source
