"""Reading a submit config the way NeMo Gym does: Hydra composition, then OmegaConf interpolation.

Hydra does the work it is good at (the `defaults:` list, config groups, the override grammar `a.b=v`,
`+a.b=v`, `++a.b=v`); this module only turns its exceptions into messages that name the file, the
config path and the fix, and drops the `_`-prefixed scratch namespaces once they have been interpolated.
The only I/O is reading the config files and (through `${oc.env:...}`) the environment.
"""

from __future__ import annotations

import difflib
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from gymbuild.errors import ConfigError, Problem

if TYPE_CHECKING:  # OmegaConf is imported only where a file needs it
    from omegaconf import DictConfig, ListConfig

_OVERRIDE_KEY = re.compile(r"^(?P<op>\+{0,2}|~)(?P<key>[^=]*)(=(?P<value>.*))?$", re.DOTALL)


def _file_problem(path: Path, message: str, fix: str) -> ConfigError:
    return ConfigError(str(path), [Problem("", message, fix)])


def _parse_yaml(text: str) -> Any:
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
    stack: list[Any] = [source.tree]
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
    from gymbuild.config.fastyaml import omegaconf_load

    _check_path(path)
    try:
        text = path.read_text(encoding="utf-8")
        source = Source(text, omegaconf_load(text))
    except Exception:  # any failure: the safe loader explains it, or Hydra does
        _check_yaml(path)
        return Source("")
    if type(source.tree) is not dict or _scan(source):
        _check_yaml(path)
    if type(source.tree) is not dict:  # the safe loader refused it above, unless it saw a mapping
        return Source("")
    return source


def check_overrides(overrides: Sequence[str], source: str) -> None:
    """Overrides may not add keys under a scratch namespace: those exist only to be interpolated."""
    problems = []
    for text in overrides:
        match = _OVERRIDE_KEY.match(text)
        if match and match["op"] in ("+", "++") and match["key"].startswith("_"):
            problems.append(
                Problem(
                    match["key"],
                    f"override {text!r} adds a key under a scratch namespace",
                    "`_`-prefixed keys are scratch space dropped after interpolation; set the real key",
                )
            )
    if problems:
        raise ConfigError(source, problems)


def _override_key(override: str) -> str:
    match = _OVERRIDE_KEY.match(override)
    return match["key"] if match else ""


def _hydra_problem(err: Exception, overrides: Sequence[str]) -> Problem:
    """Hydra's exception as one Problem; the override it names, when it names one, is the path."""
    text = str(err)
    cause = err.__cause__ or err.__context__
    if cause is not None and str(cause) and str(cause) not in text:
        text = f"{text}: {cause}"
    for noise in ("full_key:", "Config search path:", "See https://hydra.cc"):
        text = text.split(noise)[0]
    text = " ".join(text.split())
    unparsed = _unparsable(overrides)
    if unparsed is not None:  # ANTLR's words (LexerNoViableAltException, "no viable alternative")
        key = _override_key(unparsed)
        return Problem(
            key,
            f"the override {unparsed!r} is not in Hydra's override grammar",
            "quote a value that holds spaces, brackets, parentheses, commas or quotes: "
            f"{key}='...'; the forms are key=value, +key=value (add), ++key=value (add or replace)",
        )
    if "Config group override must be a string" in text or "Cannot merge DictConfig with ListConfig" in text:
        named = [o for o in overrides if o in text or f"'{_override_key(o)}'" in text]
        key = _override_key(named[0]) if named else ""
        return Problem(
            key,
            f"`{key}` is a mapping or a config group: a list cannot replace it",
            f"pick one option ({key}=NAME), set one of its keys ({key}.KEY=VALUE), or sweep over "
            f"options with multirun=1 '{key}=a,b'",
        )
    loading = re.search(r"Could not load '([^']+)/([^']+)'", text)
    if loading:  # a config group's option that is not a file beside the config
        group, option = loading.groups()
        return Problem(
            group,
            f"the config group `{group}` has no option `{option}` ({group}/{option}.yaml is not there)",
            f"pick one of the files in {group}/ beside the config: {group}=NAME",
        )
    if not text:  # a bare assert inside Hydra (e.g. for `+=`): name what the user typed
        text = f"Hydra could not apply the overrides {', '.join(repr(o) for o in overrides)}"
    named = [o for o in overrides if o in text or f"'{_override_key(o)}'" in text]
    key = _override_key(named[0]) if named else ""
    if "not in struct" in text or "Could not override" in text:
        fix = f"`{key}` is not in the config: check the spelling, or add it with +{key}=..."
    elif "already at" in text or "Could not append" in text:
        fix = f"`{key}` already exists: set it with {key}=... or replace it with ++{key}=..."
    elif "Ambiguous value" in text:  # Hydra's sweep syntax without multirun
        fix = (
            f"to sweep over the values, pass multirun=1 (gymbuild submit config=FILE multirun=1 "
            f"'{key}=a,b'); for a list write {key}=[a,b]; for a string quote it: {key}='a,b'"
        )
    elif "Could not find" in text:
        fix = "pick one of the available options listed, or add the group file beside the config"
    elif any(
        sign in text
        for sign in ("mismatched input", "no viable alternative", "Error parsing override", "could not apply")
    ):
        fix = "overrides use Hydra's grammar: key=value, +key=value (add), ++key=value (add or replace)"
    else:
        fix = "correct the config or the override named above"
    return Problem(key, text, fix)


def _unparsable(overrides: Sequence[str]) -> str | None:
    """The first override Hydra's grammar cannot read, found by parsing each alone."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    for override in overrides:
        try:
            parser.parse_override(override)
        except HydraException:
            return override
        except Exception:  # ANTLR's own exception types: the same verdict
            return override
    return None


def _hydra_compose(path: Path, overrides: Sequence[str]) -> DictConfig:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from gymbuild.config.fastyaml import libyaml_for_omegaconf

    GlobalHydra.instance().clear()
    try:
        with warnings.catch_warnings(), libyaml_for_omegaconf():
            warnings.simplefilter("ignore")
            with initialize_config_dir(config_dir=str(path.parent.resolve()), version_base=None):
                return hydra_compose(config_name=path.stem, overrides=list(overrides))
    finally:
        GlobalHydra.instance().clear()


def _suggest_key(problem: Problem, path: Path) -> Problem:
    """For an override of a key the file lacks, the same path spelt with the closest keys it has.

    Hydra only says the key is missing; composing once more without the overrides shows what is there.
    """
    from omegaconf import DictConfig

    parts = problem.path.split(".")
    try:
        node = _hydra_compose(path, [])
        for index, part in enumerate(parts[:-1]):
            if not isinstance(node, DictConfig):
                return problem
            if part in node:
                node = node[part]
                continue
            close = difflib.get_close_matches(part, [str(k) for k in node], n=1, cutoff=0.6)
            if not close:
                return problem
            parts[index] = close[0]
            node = node[close[0]]
    except Exception:  # the suggestion is a nicety; the problem stands without it
        return problem
    if isinstance(node, DictConfig) and parts[-1] not in node:
        close = difflib.get_close_matches(parts[-1], [str(k) for k in node], n=1, cutoff=0.6)
        if close:
            parts[-1] = close[0]
    named = ".".join(parts)
    if named == problem.path:
        return problem
    return Problem(problem.path, problem.message, f"did you mean `{named}`? {problem.fix}")


def compose(path: Path, overrides: Sequence[str]) -> DictConfig:
    """Hydra composition of `path` with `overrides`: the raw OmegaConf tree, not yet interpolated."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        return _hydra_compose(path, overrides)
    # AssertionError: Hydra asserts instead of raising for some malformed overrides (`+=`, an empty key);
    # TypeError/AttributeError: PyYAML's constructors on a malformed tagged value in a group file.
    except (
        HydraException,
        OmegaConfBaseException,
        yaml.YAMLError,
        ValueError,
        TypeError,
        AttributeError,
        AssertionError,
    ) as err:
        problem = _hydra_problem(err, overrides)
        if problem.path and "is not in the config" in problem.fix:
            problem = _suggest_key(problem, path)
        raise ConfigError(str(path), [problem]) from None


def interpolate(cfg: DictConfig | ListConfig, source: str) -> dict[str, Any]:
    """Resolve every `${...}`, then drop the scratch namespaces that only existed to be referenced."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        tree = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", "") or ""
        message = str(err).split("\n")[0]
        if "oc.env" in str(err) or "Environment variable" in message:
            fix = "export that variable before submitting, or give ${oc.env:VAR,default} a default"
        elif "MissingMandatoryValue" in type(err).__name__:
            fix = "give this key a value in the file or as an override"
        else:
            fix = "check the ${...} reference: it must name an existing key, e.g. ${_img.vllm}"
        raise ConfigError(source, [Problem(key, f"bad interpolation: {message}", fix)]) from None
    assert isinstance(tree, dict)
    return _drop_scratch(tree)


def _drop_scratch(tree: dict[Any, Any]) -> dict[str, Any]:
    """The tree without its `_`-prefixed top-level keys: scratch space that exists to be referenced."""
    return {k: v for k, v in tree.items() if not (isinstance(k, str) and k.startswith("_"))}


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
            stack: list[Any] = [grammar_parser.parse(text)]
        except GrammarParseError:
            return False
        while stack:
            node = stack.pop()
            resolver = isinstance(node, OmegaConfGrammarParser.InterpolationResolverContext)
            if resolver and node.resolverName().getText() not in _PLAIN_RESOLVERS:
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
        return _drop_scratch(plain), True
    return interpolate(plain, str(path)), False


def escape_interpolations(value: Any) -> Any:
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
        match = _OVERRIDE_KEY.match(text)
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
        tree = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
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
