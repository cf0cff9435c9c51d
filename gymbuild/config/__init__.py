"""The config layer: a submit.yaml (plus overrides) in, a validated, typed, immutable config out.

load (Hydra + OmegaConf) -> validate (JSON Schema fills defaults, Python rules check what crosses
fields) -> secrets (host: values read from the environment, kept apart) -> model (typed Config).
Every problem found on the way is collected and raised at once as one ConfigError.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from gymbuild.config.load import load_tree
from gymbuild.config.model import Config, Resolved, build_config, freeze
from gymbuild.config.secrets import host_secrets, otel_token
from gymbuild.errors import ConfigError

__all__ = ["Config", "Resolved", "load_config"]


def load_config(
    path: str | os.PathLike[str],
    overrides: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> Resolved:
    """Load, validate and type a config; raise ConfigError listing every problem found."""
    from gymbuild.config.validate import unique_sorted, validate

    source = Path(path)
    env = os.environ if environ is None else environ
    tree = load_tree(source, overrides)
    checked = validate(tree)
    secrets, problems = host_secrets(tree, env)
    problems = [*checked.problems, *problems]
    # The token check needs a well-formed otel section, not a flawless config: report it alongside.
    if not any(p.path == "otel" or p.path.startswith(("otel.", "otel[")) for p in checked.problems):
        token, token_problems = otel_token(checked.tree, env)
        secrets.update(token)
        problems += token_problems
    if problems:
        raise ConfigError(str(source), unique_sorted(problems))
    return Resolved(
        source=str(source),
        config=build_config(checked.tree),
        tree=freeze(checked.tree),
        secrets=freeze(secrets),
        warnings=tuple(checked.warnings),
    )
