"""Run by the oracle's interpreter (never imported by pytest): NeMo Gym 0.7.0's config models as JSON.

For every pydantic model in nemo_gym/orchestration/api.py, every field with its annotation, default,
whether it is required, its constraints and the validators that read it; and for every scalar kind a
field can have, which values pydantic's lax mode accepts and what it turns them into. The parity test
compares both with gymbuild's schema and its own lax coercion.
"""

from __future__ import annotations

import inspect
import json
import sys
import types
import typing

import pydantic
from nemo_gym.orchestration import api
from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticUndefined


def _jsonable(value):
    try:
        json.dumps(value)
        return value
    except TypeError:
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json")
        return repr(value)


def _annotation(tp) -> str:
    """The annotation spelt one way whatever Python prints (`int | None`, `dict[str, str]`)."""
    origin = typing.get_origin(tp)
    if tp is type(None):
        return "None"
    if origin is typing.Annotated:
        return _annotation(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_annotation(a) for a in typing.get_args(tp))
    if origin is typing.Literal:
        return "Literal[" + ", ".join(repr(a) for a in typing.get_args(tp)) + "]"
    if origin is not None:
        return f"{origin.__name__}[{', '.join(_annotation(a) for a in typing.get_args(tp))}]"
    if tp is typing.Any:
        return "Any"
    return tp.__name__


def models() -> dict:
    out = {}
    for name, cls in inspect.getmembers(api, inspect.isclass):
        if not (issubclass(cls, BaseModel) and cls.__module__ == api.__name__):
            continue
        decorators = cls.__pydantic_decorators__
        field_validators = {}
        for dec_name, dec in decorators.field_validators.items():
            for field in dec.info.fields:
                field_validators.setdefault(field, []).append(dec_name)
        fields = {}
        for fname, info in cls.model_fields.items():
            default = None if info.default is PydanticUndefined else _jsonable(info.default)
            if info.default_factory is not None:
                default = _jsonable(info.default_factory())
            fields[fname] = {
                "annotation": _annotation(info.annotation),
                "required": info.is_required(),
                "default": default,
                "constraints": [repr(m) for m in info.metadata],
                "validators": field_validators.get(fname, []),
            }
        out[name] = {
            "bases": [b.__name__ for b in cls.__mro__[1:] if issubclass(b, BaseModel) and b is not BaseModel],
            "extra": cls.model_config.get("extra"),
            "fields": fields,
            "model_validators": sorted(decorators.model_validators),
        }
    return out


# Values a YAML file (read by OmegaConf, perhaps through ${oc.env:...}) can put in a scalar field.
PROBES = [
    0,
    1,
    2,
    -1,
    8001,
    True,
    False,
    8001.0,
    1.5,
    0.0,
    1.0,
    "8001",
    " 8001 ",
    "8001.0",
    "1.5",
    "-1",
    "+3",
    "1_000",
    "0x10",
    "1e3",
    "",
    "abc",
    "true",
    "false",
    "True",
    "FALSE",
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "t",
    "f",
    "1",
    "0",
    "2",
    "null",
    "None",
    None,
    [],
    {},
    ["a"],
    {"a": 1},
]
KINDS = {
    "int": int,
    "bool": bool,
    "float": float,
    "str": str,
    "int | None": int | None,
    "str | None": str | None,
    "bool | ResumeConfig": bool | api.ResumeConfig,
}


def lax() -> dict:
    out = {}
    for kind, tp in KINDS.items():
        adapter = TypeAdapter(tp)
        rows = []
        for value in PROBES:
            try:
                got = adapter.validate_python(value)
                rows.append({"value": value, "ok": True, "result": _jsonable(got)})
            except pydantic.ValidationError:
                rows.append({"value": value, "ok": False})
        out[kind] = rows
    return out


if __name__ == "__main__":
    json.dump({"pydantic": pydantic.VERSION, "models": models(), "lax": lax()}, sys.stdout, indent=1)
