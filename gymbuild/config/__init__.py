"""The config layer: a submit.yaml (plus overrides) in, a validated, typed, immutable config out.

load (Hydra + OmegaConf) -> validate (JSON Schema fills defaults, Python rules check what crosses
fields) -> secrets (host: values read from the environment, kept apart) -> build (model's typed
Config). Every problem found on the way is collected and raised at once as one ConfigError.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gymbuild.config.build import build_config
from gymbuild.config.model import Config, Resolved, freeze
from gymbuild.config.secrets import host_secrets, otel_token, stand_ins
from gymbuild.config.tree import JsonObject
from gymbuild.errors import ConfigError, Problem

__all__ = ["Checked", "Config", "ConfigCache", "Resolved", "load_config"]


@dataclass(frozen=True)
class Checked:
    """A config file's tree and its validated, default-filled copy, with the validation's warnings:
    what a ConfigCache keeps for a file whose tree depends on its bytes alone."""

    tree: JsonObject
    filled: JsonObject
    warnings: list[str]


class ConfigCache(Protocol):
    """Where load_config may keep Checked trees between runs (the edge gives one: state.config_cache)."""

    def get(self, source: Path, overrides: Sequence[str]) -> Checked | None: ...

    def put(self, source: Path, overrides: Sequence[str], checked: Checked) -> None: ...


_OC_ENV = re.compile(r"oc\.env\s*:\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)")
_GROUP_FILES_READ = 500  # the files of the config's directory searched for `${oc.env:NAME}`


def _env_read(source: Path, overrides: Sequence[str]) -> set[str]:
    """The variables `${oc.env:NAME}` may read for this config: named in its file, its overrides or
    the YAML files of the config groups beside it (two levels: where Hydra composes from)."""
    texts = list(overrides)
    paths = itertools.chain([source], source.parent.glob("*/*.yaml"), source.parent.glob("*/*/*.yaml"))
    for path in itertools.islice(paths, _GROUP_FILES_READ):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            texts.append(path.read_text(encoding="utf-8"))
    return {name for text in texts for name in _OC_ENV.findall(text)}


def _masked(problems: Sequence[Problem], names: set[str]) -> list[Problem]:
    """`problems` with the value of each variable in `names` (which `${oc.env:..}` read into the tree,
    a token as much as a path) replaced by a placeholder: a message never prints one."""
    values = {os.environ.get(name, "") for name in names}
    hidden = sorted((v for v in values if len(v) >= 3), key=len, reverse=True)

    def mask(text: str) -> str:
        for value in hidden:
            if value in text:
                text = text.replace(value, "<a value from the environment>")
        return text

    return [dataclasses.replace(p, message=mask(p.message), fix=mask(p.fix)) for p in problems]


def load_config(
    path: str | os.PathLike[str],
    overrides: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
    *,
    cache: ConfigCache | None = None,
    secrets_needed: bool = True,
) -> Resolved:
    """Load, validate and type a config; raise ConfigError listing every problem found.

    Without `secrets_needed` (a run that queues nothing: resolve, render, a dry run), a secret the
    shell does not set is a warning and a stand-in value: what is printed masks it anyway.

    With a `cache`, a file whose tree depends on its bytes alone, and that validated cleanly, is
    validated once: importing jsonschema and validating is a fixed cost of every command otherwise,
    growing with the number of benchmarks. Secrets and the environment are read afresh every time.
    """
    source = Path(path)
    env = os.environ if environ is None else environ
    checked = cache.get(source, overrides) if cache is not None else None
    problems: list[Problem] = []
    if checked is None:  # PyYAML, OmegaConf and jsonschema are imported only here: a cached tree needs none
        from gymbuild.config.load import read_tree  # late: PyYAML, OmegaConf (House rules)
        from gymbuild.config.validate import validate  # late: jsonschema

        try:
            tree, plain = read_tree(source, overrides)
        except ConfigError as err:  # Hydra's or OmegaConf's words may quote an interpolated value
            raise ConfigError(err.source, _masked(err.problems, _env_read(source, overrides))) from None
        validation = validate(tree)
        checked = Checked(tree, validation.tree, list(validation.warnings))
        problems = list(validation.problems)
        if not plain and problems:
            problems = _masked(problems, _env_read(source, overrides))
        if cache is not None and plain and not problems:
            cache.put(source, overrides, checked)
    secrets, unset = host_secrets(checked.tree, env)
    # The token check needs a well-formed otel section, not a flawless config: report it alongside.
    if not any(p.path == "otel" or p.path.startswith(("otel.", "otel[")) for p in problems):
        token, token_problems = otel_token(checked.filled, env)
        secrets.update(token)
        unset += token_problems
    if secrets_needed:
        problems += unset
    if problems:
        from gymbuild.config.validate import unique_sorted  # late: jsonschema (House rules)

        raise ConfigError(str(source), unique_sorted(problems))
    warnings = list(checked.warnings)
    if unset and not secrets_needed:
        secrets.update(stand_ins(checked.tree, checked.filled, secrets))
        warnings += [f"{p.path}: {p.message}: `submit` refuses it ({p.fix})" for p in unset]
    return Resolved(
        source=str(source),
        config=build_config(checked.filled),
        tree=freeze(checked.filled),
        secrets=freeze(secrets),
        warnings=tuple(warnings),
    )
