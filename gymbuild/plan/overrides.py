"""Hydra override quoting: a config value as a `gym eval run` / `gym eval prepare` override."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from gymbuild.errors import UserError

_HYDRA_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
# A dotted `run` key (`server.timeout: 5`) is a path, as NeMo Gym writes it (`+server.timeout=5`).
_HYDRA_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_][A-Za-z0-9_-]*)*")
# Characters Hydra reads bare as one primitive: a string made only of them parses exactly as the bare
# text NeMo Gym writes (`5` -> 5, `true` -> True, `1e-5` -> 1e-05, `007` -> '007', `a/b:c` -> 'a/b:c').
_HYDRA_BARE = re.compile(r"[A-Za-z0-9_./@%+:*?|-]+")


def hydra_value(value: object, where: str = "") -> str:
    """A value as a `gym eval run` override, parsed by Hydra to what NeMo Gym 0.7.0's override gives.

    NeMo Gym writes `+key=<str(value)>`, so Hydra re-types a string: `limit: ${oc.env:LIMIT}` reaching
    the config as "5" arrives in gym as the int 5, and "true" as a bool. A string made of Hydra's bare
    characters is therefore written bare, and parses exactly like NeMo Gym's text. Any other string
    (spaces, commas, quotes, brackets, `${...}`, non-ASCII) is single-quoted with Hydra's escapes: NeMo
    Gym's bare text there either stops the job at start (`it's`, `a=b`, `#`), becomes a sweep (`a,b`)
    or parses as the same string, so the quoted form keeps the job running with what the user wrote.
    `None` is `null` (NeMo Gym writes `None`, which Hydra reads as the string 'None'; null is what the
    YAML means). `${...}` is left alone on purpose: a user who wrote `\\${x}` wants gym to see `${x}`.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        if _HYDRA_BARE.fullmatch(value):
            return value
        # Backslashes only need doubling where they precede a quote or end the string.
        escaped = re.sub(r"(\\+)(?='|\Z)", lambda m: m.group(1) * 2, value)
        return "'" + escaped.replace("'", "\\'") + "'"
    if isinstance(value, Mapping):
        items = []
        for key, item in value.items():
            if not isinstance(key, str) or not _HYDRA_KEY.fullmatch(key):
                raise UserError(f"{where}: key {key!r} cannot be written as a Hydra dict key")
            items.append(f"{key}:{hydra_value(item, f'{where}.{key}')}")
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(hydra_value(v, where) for v in value) + "]"
    raise UserError(f"{where}: {type(value).__name__} values cannot be passed to gym")


def flatten_overrides(tree: Mapping[str, object], where: str) -> tuple[str, ...]:
    """`{a: {b: 1}, c: [x, y], d.e: 2}` -> `+a.b=1`, `+c=[x,y]`, `+d.e=2`, as NeMo Gym flattens `run`.

    Nested keys are dotted and lists kept whole; an empty mapping gives no override at all (NeMo Gym
    writes nothing for it, and `+k={}` would add a key gym's config never had).
    """
    out: list[str] = []

    def walk(prefix: str, node: Mapping[str, object], path: str) -> None:
        for key, value in node.items():
            if not isinstance(key, str) or not _HYDRA_PATH.fullmatch(key):
                raise UserError(
                    f"{path}: key {key!r} is not a Hydra key (letters, digits, _ and -, not first a digit; "
                    "dots separate nested keys)"
                )
            dotted = f"{prefix}{key}"
            if isinstance(value, Mapping):
                walk(f"{dotted}.", value, f"{path}.{key}")
            else:
                out.append(f"+{dotted}={hydra_value(value, f'{path}.{key}')}")

    walk("", tree, where)
    return tuple(out)
