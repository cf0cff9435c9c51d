"""libyaml under Hydra: OmegaConf parses config files with PyYAML's pure-Python scanner, the largest
part of composing a large config (docs/performance.md, "Why the code is shaped so").

While `libyaml_for_omegaconf()` is active, `OmegaConf.load` gets a loader that parses with libyaml
(PyYAML's CSafeLoader) and keeps OmegaConf's rules: its implicit resolvers (taken from OmegaConf's own
loader class) and a refusal of duplicate keys. On any YAML error the text is parsed again with
OmegaConf's own loader, so every message is word for word what Hydra would have said. Without
libyaml, nothing changes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import yaml

_PURE: Any = None  # OmegaConf's get_yaml_loader while ours is installed


class _Loader:
    """Stands where yaml.load expects a Loader class: built with the stream, asked for one document."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def get_single_data(self) -> Any:
        pure = _PURE()
        rewind = self._stream.tell() if hasattr(self._stream, "seek") else None
        try:
            return yaml.load(self._stream, Loader=_c_loader(pure))
        except yaml.YAMLError:
            if rewind is not None:
                self._stream.seek(rewind)
            return yaml.load(self._stream, Loader=pure)

    def dispose(self) -> None:
        """Nothing held: yaml.load calls this after get_single_data."""


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
    from omegaconf import _utils

    pure = _PURE or _utils.get_yaml_loader
    if hasattr(yaml, "CSafeLoader"):
        return yaml.load(text, Loader=_c_loader(pure()))
    return yaml.load(text, Loader=pure())


@contextlib.contextmanager
def libyaml_for_omegaconf() -> Iterator[None]:
    """OmegaConf.load parses with libyaml inside this block (a no-op without libyaml, or nested)."""
    global _PURE
    from omegaconf import _utils

    if not hasattr(yaml, "CSafeLoader") or _PURE is not None:
        yield
        return
    _PURE = _utils.get_yaml_loader
    _utils.get_yaml_loader = lambda: _Loader
    try:
        yield
    finally:
        _utils.get_yaml_loader = _PURE
        _PURE = None
