"""Hydra's composition and OmegaConf's interpolation, and their exceptions as problems to act on.

Apart from the file checks and the fast path because this is where Hydra and OmegaConf are run
(imported inside each function: a file that needs no composition never loads them), and most of it
turns their exceptions into a message that names the override or key and the fix. The `_`-prefixed
scratch namespaces are dropped here too, once they have been interpolated.
"""

from __future__ import annotations

import difflib
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from gymbuild.config.new_names import half_entries
from gymbuild.errors import ConfigError, Problem

if TYPE_CHECKING:  # OmegaConf is imported only where a file needs it
    from omegaconf import DictConfig, ListConfig

OVERRIDE_KEY = re.compile(r"^(?P<op>\+{0,2}|~)(?P<key>[^=]*)(=(?P<value>.*))?$", re.DOTALL)


def _leaves_config_dir(config_dir: Path, key: str, value: str) -> bool:
    """Whether an override of a config group (a key naming a directory beside the config) names an
    option outside the config's directory: an absolute path or one that climbs with `..`. Hydra joins
    the group's directory and the value, so `compute=../../../etc/x` composed any YAML file."""
    group = key.split("@")[0].replace(".", "/").lstrip("/")
    if not group or not (config_dir / group).is_dir():
        return False
    options = [v.strip().strip("'\"") for v in value.strip("[]").split(",")]  # `g=a,b` sweeps options
    return any(v.startswith("/") or ".." in v.split("/") for v in options)


def check_overrides(overrides: Sequence[str], source: str) -> None:
    """Overrides may not add keys under a scratch namespace: those exist only to be interpolated."""
    problems = []
    for text in overrides:
        match = OVERRIDE_KEY.match(text)
        if match and _leaves_config_dir(Path(source).parent, match["key"], match["value"] or ""):
            problems.append(
                Problem(
                    match["key"],
                    f"override {text!r} picks a config file outside the config's directory",
                    "pick an option of the group by its name (a file in the group's directory)",
                )
            )
        elif match and match["op"] in ("+", "++") and match["key"].startswith("_"):
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
    match = OVERRIDE_KEY.match(override)
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

    from gymbuild.config import hydra_source  # late: it imports Hydra (House rules)

    GlobalHydra.instance().clear()
    try:
        with warnings.catch_warnings(), hydra_source.libyaml():
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
        composed = _hydra_compose(path, overrides)
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
    half = half_entries(overrides, composed, lambda: _hydra_compose(path, []), _op_and_key)
    if half:
        raise ConfigError(str(path), half)
    return composed


def _op_and_key(override: str) -> tuple[str, str] | None:
    match = OVERRIDE_KEY.match(override)
    return (match["op"], match["key"]) if match else None


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
    return drop_scratch(tree)


def drop_scratch(tree: dict[Any, Any]) -> dict[str, Any]:
    """The tree without its `_`-prefixed top-level keys: scratch space that exists to be referenced."""
    return {k: v for k, v in tree.items() if not (isinstance(k, str) and k.startswith("_"))}
