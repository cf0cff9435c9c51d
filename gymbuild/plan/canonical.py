"""Canonical JSON: the text the renderer keys the parts it renders once on.

Equal text, equal script: each plan part has one canonical JSON text, kept on the part itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
from typing import Any


def _dataclass_layout(kind: type) -> tuple[tuple[str, str | None], ...]:
    """(`"key":` text, field name) per key of a dataclass's JSON object, in sorted key order; the
    field name is None for `__type__`, whose value is the class name."""
    keys: list[tuple[str, str | None]] = [(f.name, f.name) for f in fields(kind)]
    keys.append(("__type__", None))
    return tuple((json.dumps(key) + ":", name) for key, name in sorted(keys))


_LAYOUTS: dict[type, tuple[tuple[str, str | None], ...]] = {}
_encode_str = json.encoder.encode_basestring_ascii  # what json.dumps does with a str (C)


def _dataclass_json(value: object) -> str:
    kind = type(value)
    layout = _LAYOUTS.get(kind)
    if layout is None:
        layout = _LAYOUTS[kind] = _dataclass_layout(kind)
    type_name = _encode_str(kind.__name__)
    items = [
        key + (type_name if name is None else canonical_json(getattr(value, name))) for key, name in layout
    ]
    return "{" + ",".join(items) + "}"


class _Canonical:
    """Base of the plan's dataclasses: each keeps its canonical JSON text once it is computed.

    A submission's plans share their config-level parts (service steps, pools, ...) as the same
    objects (`planner`), so such a part is encoded once however many benchmarks carry it, not once
    per benchmark.
    Frozen, so the kept text cannot go stale; `replace()` makes a new object with nothing kept.
    """

    @property
    def canonical_json(self) -> str:
        # Kept in the instance's __dict__ by hand: functools.cached_property takes a lock per access
        # in Python 3.11, which costs more than the encoding it saves.
        kept = self.__dict__.get("_canonical_json")
        if kept is None:
            kept = self.__dict__["_canonical_json"] = _dataclass_json(self)
        return kept


def canonical_json(value: object) -> str:
    """The text `json.dumps(form, sort_keys=True, separators=(",", ":"))` gives for the JSON form of a
    plan value: a dataclass as an object of its fields plus `"__type__": <class name>`, tuples and
    lists as arrays, mappings with str keys. Written directly, without building the form first (a
    generic walk is most of a plan's encoding time). Types stay apart (1, 1.0, true and "1" render
    differently, so their texts must differ, or a part rendered once for one would be reused for
    another)."""
    encode = _BY_TYPE.get(type(value))
    if encode is not None:
        return encode(value)
    if isinstance(value, _Canonical):
        return value.canonical_json
    if is_dataclass(value) and not isinstance(value, type):
        return _dataclass_json(value)
    if isinstance(value, Mapping):
        keyed = {str(k): v for k, v in value.items()}
        return "{" + ",".join(f"{_encode_str(k)}:{canonical_json(keyed[k])}" for k in sorted(keyed)) + "}"
    if isinstance(value, tuple | list):
        return _array_json(value)
    if isinstance(value, str | int | float):  # a subclass (an enum member): json.dumps knows how
        return json.dumps(value)
    raise TypeError(f"a plan holds a {type(value).__name__}, which has no canonical JSON form")


def _array_json(value: tuple[object, ...] | list[object]) -> str:
    return "[" + ",".join(map(canonical_json, value)) + "]"


_BY_TYPE: dict[type, Callable[[Any], str]] = {  # the exact types a plan is made of, looked up first
    str: _encode_str,
    tuple: _array_json,
    int: int.__repr__,
    bool: lambda value: "true" if value else "false",
    type(None): lambda _: "null",
    float: json.dumps,  # NaN and Infinity as json.dumps writes them
    list: _array_json,
}
