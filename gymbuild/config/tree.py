"""The types of the plain trees gymbuild reads and writes: a config as YAML or JSON gives it, a
record's JSON, a schema.

One recursive union instead of `Any`, so a reader of a tree narrows (with isinstance) before it
trusts a value's type, as the validating code does anyway; `JsonObject` is a mapping at the top, the
shape every config, record and schema has. Frozen copies (model.freeze) are read through `Mapping`
and `Sequence` instead and typed where they are made.
"""

from __future__ import annotations

from typing import TypeAlias

JsonScalar: TypeAlias = str | int | float | bool | None
JsonValue: TypeAlias = JsonScalar | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject: TypeAlias = dict[str, JsonValue]
# A place in a tree: keys of mappings and indexes of lists, from the root (jsonschema's absolute_path).
TreePath: TypeAlias = tuple[str | int, ...]
