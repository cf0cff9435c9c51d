"""Schema validation of a loaded config tree: fill the defaults, then report every problem at once.

schemas/submit-config.schema.json is the only place the shape and the defaults are written; this module
teaches jsonschema to fill those defaults while it validates (so a default filled inside a `then`
branch is the right type's default) and turns jsonschema's errors into `Problem`s a user can act on.
The checks that cross fields are run by `rules.py` (they live in its `rules_*` modules) on the filled
tree.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache

from jsonschema import Draft202012Validator, TypeChecker, ValidationError, validators
from jsonschema.protocols import Validator

from gymbuild.config.lax import coerce
from gymbuild.config.rules import check
from gymbuild.config.rules_driver import fill_resumable
from gymbuild.config.tree import JsonObject, JsonView, TreePath
from gymbuild.errors import Problem, dotted
from gymbuild.resources import load_schema

SCHEMA_NAME = "submit-config.schema.json"

Path = TreePath


@dataclass
class Validation:
    """The outcome of `validate`: the filled copy, every problem, and advice that does not block."""

    tree: JsonObject
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


# --- the validator ----------------------------------------------------------------------------------


def _root() -> Mapping[str, object]:
    return load_schema(SCHEMA_NAME)


def _resolve_ref(ref: str) -> object:
    defs = _root()["$defs"]
    return defs.get(ref.rsplit("/", 1)[-1], {}) if isinstance(defs, Mapping) else {}


def _deref(schema: object, key: str) -> object:
    """Follow local `$ref`s (`#/$defs/x`, the only kind the config schema uses) until one carries
    `key`: a default or description written beside a `$ref` wins over the referenced schema's own."""
    for _ in range(20):
        if not (isinstance(schema, Mapping) and "$ref" in schema and key not in schema):
            break
        schema = _resolve_ref(schema["$ref"])
    return schema


def _default(subschema: object) -> tuple[bool, object]:
    """(found, value): a default written beside a `$ref` wins over the referenced schema's own."""
    target = _deref(subschema, "default")
    if isinstance(target, Mapping) and "default" in target:
        return True, target["default"]
    return False, None


_check_properties = Draft202012Validator.VALIDATORS["properties"]
_check_additional = Draft202012Validator.VALIDATORS["additionalProperties"]


def _coerce(instance: JsonObject, key: str, subschema: object) -> None:
    """Convert `instance[key]` the way pydantic's lax mode would for its declared type ("8001" is a
    port, "true" a boolean), so the filled tree holds the type NeMo Gym's model would hold."""
    target = _deref(subschema, "type")
    if isinstance(target, Mapping) and "type" in target:
        instance[key] = coerce(target["type"], instance[key])


def _fill_then_check(
    validator: Validator, properties: Mapping[str, object], instance: object, schema: Mapping[str, object]
) -> Iterator[ValidationError]:
    """The `properties` keyword, preceded by filling each absent property that has a default and
    converting each present scalar as lax mode does.

    Filling happens wherever jsonschema descends, so only the branch a `type` selects gets its
    defaults, and a default object (e.g. `otel: {}`) is itself filled as it is checked.
    """
    if isinstance(instance, dict):
        for name, subschema in properties.items():
            if name not in instance:
                found, value = _default(subschema)
                if found:
                    instance[name] = copy.deepcopy(value)
            else:
                _coerce(instance, name, subschema)
    yield from _check_properties(validator, properties, instance, schema)


def _coerce_then_check(
    validator: Validator, additional: object, instance: object, schema: Mapping[str, object]
) -> Iterator[ValidationError]:
    """`additionalProperties`, its values converted as lax mode does (e.g. Ray's resource amounts)."""
    if isinstance(instance, dict) and isinstance(additional, Mapping):
        declared = schema.get("properties", {})
        for name in instance:
            if not isinstance(declared, Mapping) or name not in declared:
                _coerce(instance, name, additional)
    yield from _check_additional(validator, additional, instance, schema)


def _is_integer(_checker: TypeChecker, instance: object) -> bool:
    """YAML `8000.0` is a float, not a port: JSON Schema's integer accepts it, templates would not."""
    return isinstance(instance, int) and not isinstance(instance, bool)


@cache
def _validator() -> Validator:
    """The filling validator, compiled once per process (the schema never changes while we run)."""
    cls = validators.extend(
        Draft202012Validator,
        {"properties": _fill_then_check, "additionalProperties": _coerce_then_check},
        type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
    )
    return cls(_root())


@cache
def _plain() -> Validator:
    """A validator that never fills: used to decide which `if` branch applies when naming valid keys."""
    return Draft202012Validator(_root())


# --- errors as problems ----------------------------------------------------------------------------

_JSON_TYPES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def _shown(path: Path, value: object) -> str:
    """The offending value, unless it may be a secret (env values) or too long to help."""
    if "env" in path[:-1] or isinstance(value, Mapping | list):
        return ""
    text = repr(value)
    return f" ({text})" if len(text) <= 60 else ""


def _known_keys(schema: object, instance: JsonView) -> list[str]:
    """The keys an object may have under `schema`, following the branch its `type` selects."""
    if not isinstance(schema, Mapping):
        return []
    keys: list[str] = list(schema.get("properties", {}))
    if "$ref" in schema:
        keys += _known_keys(_resolve_ref(schema["$ref"]), instance)
    for sub in schema.get("allOf", []):
        keys += _known_keys(sub, instance)
    if "if" in schema:
        chosen = "then" if _plain().evolve(schema=schema["if"]).is_valid(instance) else "else"
        keys += _known_keys(schema.get(chosen), instance)
    return list(dict.fromkeys(keys))


def _unknown_key(path: Path, key: str | int, valid: list[str]) -> Problem:
    close = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.6)
    hint = f"did you mean `{close[0]}`? " if close else ""
    listing = ", ".join(sorted(valid)) if valid else "none"
    return Problem(
        dotted((*path, key)),
        f"unknown key `{key}`",
        f"{hint}valid keys here: {listing}",
    )


def _description(schema: object) -> str:
    target = _deref(schema, "description")
    return str(target.get("description", "")) if isinstance(target, Mapping) else ""


def _problems_of(error: ValidationError) -> list[Problem]:
    """One jsonschema error as the problems a user reads (an unknown-keys error names each key)."""
    path: Path = tuple(error.absolute_path)
    where = dotted(path)
    kind = error.validator
    value = error.instance
    # The failed keyword's value (jsonschema's stubs allow Unset, which a reported error never has).
    keyword: object = error.validator_value
    schema = error.schema if isinstance(error.schema, Mapping) else {}

    if kind in ("additionalProperties", "unevaluatedProperties") and isinstance(value, Mapping):
        valid = _known_keys(schema, value)
        if "additionalProperties" in schema and kind == "additionalProperties":
            valid = list(schema.get("properties", {}))
        return [_unknown_key(path, key, valid) for key in value if key not in valid]
    if kind == "required" and isinstance(value, Mapping):
        props = schema.get("properties", {})
        return [
            Problem(
                dotted((*path, key)),
                f"missing required key `{key}`",
                f"add `{key}:`" + (f" ({_description(props[key])})" if key in props else ""),
            )
            for key in (keyword if isinstance(keyword, list) else [])
            if key not in value
        ]
    if kind == "type":
        wanted: list[str] = keyword if isinstance(keyword, list) else [str(keyword)]
        if wanted == ["null"]:
            return [Problem(where, "must not be set here", _description(schema) or f"remove `{where}`")]
        expected = " or ".join(_JSON_TYPES.get(w, w) for w in wanted)
        examples = schema.get("examples") or []
        desc = _description(schema)
        fix = f"write {expected}" + (f", e.g. {examples[0]}" if examples else "")
        fix += f" ({desc})" if desc else ""
        return [Problem(where, f"expected {expected}, got {_type_name(value)}{_shown(path, value)}", fix)]
    if kind in ("enum", "const"):
        allowed = keyword if kind == "enum" and isinstance(keyword, list) else [keyword]
        names = [str(a) for a in allowed]
        close = difflib.get_close_matches(str(value), names, n=1, cutoff=0.6)
        hint = f"did you mean `{close[0]}`? " if close else ""
        return [
            Problem(
                where,
                f"`{value}` is not allowed here" if _shown(path, value) else "this value is not allowed here",
                f"{hint}allowed: {', '.join(names)}",
            )
        ]
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        bound = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}[kind]
        desc = _description(schema)
        return [
            Problem(
                where,
                f"{value} is out of range: it must be {bound} {error.validator_value}",
                f"use a value {bound} {error.validator_value}" + (f" ({desc})" if desc else ""),
            )
        ]
    if kind in ("minProperties", "maxProperties") and isinstance(value, Mapping):
        listed = ", ".join(map(str, value)) or "none"
        low, high = schema.get("minProperties", 0), schema.get("maxProperties")
        if high == 0:
            return [Problem(where, "must be empty here", _description(schema) or f"remove `{where}`")]
        need = "exactly one entry" if low == high == 1 else f"between {low} and {high} entries"
        return [
            Problem(
                where,
                f"has {len(value)} entries ({listed}); it needs {need}",
                "keep one entry" if low == high == 1 else f"give it {need}",
            )
        ]
    if kind == "minItems":
        return [Problem(where, "is empty; it needs at least one item", _description(schema))]
    if kind == "uniqueItems":
        return [Problem(where, "lists the same item twice", "remove the duplicates")]
    return [Problem(where, error.message, _description(schema) or "see schemas/submit-config.schema.json")]


_UNKNOWN_KEYS = ("additionalProperties", "unevaluatedProperties")


def schema_problems(tree: JsonObject) -> tuple[list[Problem], list[Path]]:
    """Fill `tree` in place and return its problems plus the paths they are about (for the rules).

    An unknown or missing key blames only that key, not the object around it, so the rules still
    check the object's other fields.
    """
    problems: list[Problem] = []
    bad: list[Path] = []
    for error in _validator().iter_errors(tree):
        base: Path = tuple(error.absolute_path)
        problems += _problems_of(error)
        value = error.instance
        schema = error.schema if isinstance(error.schema, Mapping) else {}
        if error.validator in _UNKNOWN_KEYS and isinstance(value, Mapping):
            valid = set(_known_keys(schema, value)) | set(schema.get("properties", {}))
            bad += [(*base, key) for key in value if key not in valid]
        elif error.validator == "required" and isinstance(value, Mapping):
            required = error.validator_value  # jsonschema's stubs allow Unset, never reported
            bad += [
                (*base, key) for key in (required if isinstance(required, list) else []) if key not in value
            ]
        else:
            bad.append(base)
    return problems, bad


def unique_sorted(problems: list[Problem]) -> list[Problem]:
    """Sorted by path so related problems sit together; identical ones reported once."""
    return sorted(dict.fromkeys(problems), key=lambda p: (p.path, p.message))


def validate(tree: JsonObject) -> Validation:
    """Validate a loaded tree: a filled deep copy (the input is untouched), every problem, warnings."""
    filled = copy.deepcopy(tree)
    if not isinstance(filled, dict):
        problem = Problem("", "the config is not a mapping", "start with `services:`")
        return Validation(tree={}, problems=[problem])
    fill_resumable(filled)
    problems, bad = schema_problems(filled)
    rule_problems, warnings = check(filled, bad)
    return Validation(tree=filled, problems=unique_sorted(problems + rule_problems), warnings=warnings)
