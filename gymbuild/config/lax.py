"""Pydantic's lax mode, which NeMo Gym validates its config in, for the scalar kinds the schema has.

A value often reaches the config as text: `${oc.env:PORT}` resolves to the string "8001", a Hydra
override or a quoted YAML value to "true". NeMo Gym's pydantic models take those as the port 8001 and
the boolean true; gymbuild must take the same values and no others (tests/parity/test_fields.py runs
the same probes through pydantic itself). Pure functions: each answers (accepted, converted value).
"""

from __future__ import annotations

import math
import re

from gymbuild.config.tree import JsonValue

# Python's int() grammar for ASCII decimal digits (single underscores between digits), optionally
# followed by a fraction of zeros only: pydantic reads "8001.0" as 8001 but refuses "8001." and "1e3".
_INT_TEXT = re.compile(r"^[+-]?[0-9]+(?:_[0-9]+)*(?:\.0+)?$")
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})
# pydantic holds a float-born int in 64 bits
_INT_FROM_FLOAT_LIMIT = 2.0**63

# (accepted, the converted value), or (False, the value unchanged)
Coerced = tuple[bool, JsonValue]


def to_int(value: JsonValue) -> Coerced:
    """An int as pydantic's lax `int` gives it: ints, booleans, integral floats and integer text."""
    if isinstance(value, bool):
        return True, int(value)
    if isinstance(value, int):
        return True, value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < _INT_FROM_FLOAT_LIMIT:
            return True, int(value)
        return False, value
    if isinstance(value, str):
        text = value.strip()
        if _INT_TEXT.match(text):
            return True, int(text.split(".")[0])
    return False, value


def to_float(value: JsonValue) -> Coerced:
    """A float as pydantic's lax `float` gives it: numbers, booleans and Python float text (ASCII)."""
    if isinstance(value, bool | int | float):
        return True, float(value)
    if isinstance(value, str) and value.isascii():
        try:
            return True, float(value.strip())
        except ValueError:
            pass
    return False, value


def to_bool(value: JsonValue) -> Coerced:
    """A bool as pydantic's lax `bool` gives it: booleans, 0/1 (int or float) and the usual words."""
    if isinstance(value, bool):
        return True, value
    if isinstance(value, int | float) and value in (0, 1):
        return True, bool(value)
    if isinstance(value, str):
        word = value.lower()
        if word in _TRUE:
            return True, True
        if word in _FALSE:
            return True, False
    return False, value


# JSON Schema type name -> (is already that type, coercion)
COERCIONS = {
    "integer": to_int,
    "number": to_float,
    "boolean": to_bool,
}


def _is(json_type: str, value: object) -> bool:
    if json_type == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if json_type == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if json_type == "boolean":
        return isinstance(value, bool)
    if json_type == "string":
        return isinstance(value, str)
    if json_type == "null":
        return value is None
    if json_type == "object":
        return isinstance(value, dict)
    if json_type == "array":
        return isinstance(value, list)
    return False


def coerce(types: str | list[str], value: JsonValue) -> JsonValue:
    """`value` as a field of JSON Schema type(s) `types` receives it in lax mode; unchanged when it
    already has one of the types or no lax conversion applies (the schema then reports it)."""
    wanted = [types] if isinstance(types, str) else list(types)
    if (
        "number" in wanted
        and "integer" not in wanted
        and isinstance(value, int)
        and not isinstance(value, bool)
    ):
        return float(value)  # pydantic's float field holds 4 as 4.0
    if any(_is(t, value) for t in wanted):
        return value
    for json_type in ("integer", "number", "boolean"):  # pydantic's order for int | float | bool unions
        if json_type in wanted:
            ok, converted = COERCIONS[json_type](value)
            if ok:
                return converted
    return value
