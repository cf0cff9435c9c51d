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
from typing import Any

import yaml


@functools.cache
def _omegaconf_loader() -> type[yaml.SafeLoader] | None:
    """OmegaConf's loader class, read (never replaced) so the resolution rules are its own rather than
    a copy of them; None if a later OmegaConf moves it, and then OmegaConf.load does the parsing."""
    from omegaconf import _utils

    factory = getattr(_utils, "get_yaml_loader", None)
    return factory() if callable(factory) else None


def _no_duplicate_keys(self: Any, node: yaml.MappingNode, deep: bool = False) -> Any:
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
    return yaml.CSafeLoader.construct_mapping(self, node, deep=deep)


_C_LOADER: type | None = None


def _c_loader(pure: type[yaml.SafeLoader]) -> type:
    """A CSafeLoader resolving and constructing as `pure` (OmegaConf's loader class) does. OmegaConf
    makes a new, identical class per call, so the first one's tables serve for the process."""
    global _C_LOADER
    if _C_LOADER is None:
        _C_LOADER = type(
            "OmegaConfCLoader",
            (yaml.CSafeLoader,),
            {
                "construct_mapping": _no_duplicate_keys,
                "yaml_implicit_resolvers": pure.yaml_implicit_resolvers,
                "yaml_constructors": pure.yaml_constructors,
            },
        )
    return _C_LOADER


def omegaconf_load(text: str) -> Any:
    """`text` parsed as OmegaConf.load parses a file (its resolvers, constructors and duplicate-key
    refusal), without building a DictConfig: the fast path reads a plain config with this alone.

    libyaml when present, else OmegaConf's own loader. Errors propagate unchanged; the caller reports
    them through the pure-Python parsers, whose messages are the ones users see.
    """
    pure = _omegaconf_loader()
    if pure is None:
        from omegaconf import OmegaConf

        return OmegaConf.to_container(OmegaConf.load(io.StringIO(text)))
    if hasattr(yaml, "CSafeLoader"):
        return yaml.load(text, Loader=_c_loader(pure))
    return yaml.load(text, Loader=pure)


def libyaml_rules() -> bool:
    """Whether omegaconf_load parses with libyaml under OmegaConf's own rules."""
    return hasattr(yaml, "CSafeLoader") and _omegaconf_loader() is not None
