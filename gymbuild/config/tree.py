"""The types of the plain trees gymbuild reads and writes: a config as YAML or JSON gives it, a
record's JSON, a schema.

One recursive union instead of an untyped value, so a reader of a tree narrows (with isinstance)
before it trusts a value's type, as the validating code does anyway; `JsonObject` is a mapping at
the top, the shape every config, record and schema has. `JsonView` is the read-only reading of
either a plain tree or a frozen copy (model.freeze: mapping proxies and tuples), for code that only
reads.

A tree straight from YAML may have keys that are not str (`1: x`): the loaders (load.py,
compose.py) keep the library's untyped values there, and validation reports such a key as unknown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

JsonScalar: TypeAlias = str | int | float | bool | None
JsonValue: TypeAlias = JsonScalar | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject: TypeAlias = dict[str, JsonValue]
JsonView: TypeAlias = JsonScalar | Sequence["JsonView"] | Mapping[str, "JsonView"]
# A place in a tree: keys of mappings and indexes of lists, from the root (jsonschema's absolute_path).
TreePath: TypeAlias = tuple[str | int, ...]


def at(node: JsonView, *keys: str) -> JsonView:
    """The value under `keys`, each a key of the mapping the one before it gives: KeyError when one is
    missing, TypeError when a value on the way is not a mapping (as indexing would say)."""
    for key in keys:
        if not isinstance(node, Mapping):
            raise TypeError(f"{key!r} looked up in a {type(node).__name__}, not a mapping")
        node = node[key]
    return node


def mapping_at(node: JsonView, *keys: str) -> Mapping[str, JsonView]:
    """`at`, for a value that is a mapping (TypeError otherwise)."""
    found = at(node, *keys)
    if not isinstance(found, Mapping):
        raise TypeError(f"{'.'.join(keys)} is a {type(found).__name__}, not a mapping")
    return found
