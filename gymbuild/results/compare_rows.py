"""One rollout line as `gymbuild compare` reads it, written once for both places it is read.

compare.parse_side reads rows here (the files as they come from a target without python3), and this
module's source is also the head of compare_read's reader program, which python3 runs on the target
to cut each rollouts file down to what the comparison needs before it travels. One definition, so
what the target sends is what this side would have made of the whole file. Hence the constraints:
the standard library only, and nothing a python3 older than gymbuild's own cannot run (type
comments, no annotations, no walrus: the reader gives the same bytes on python3 3.6 to 3.13).
"""

import json
import math

_NUMBERS = (int, float)  # type() in it: a bool is no number here
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # json.loads' own scanner (C where CPython has it)
USAGE = ("input_tokens", "output_tokens", "total_tokens")  # what gym's aggregation reads of response.usage


def number(value):  # type: (object) -> float | None
    """A finite number as a float, else None: a bool, inf, NaN and an int past float's range are not."""
    if type(value) not in _NUMBERS:
        return None
    try:
        as_float = float(value)  # type: ignore[arg-type]
    except OverflowError:
        return None
    return as_float if math.isfinite(as_float) else None


def numbers(row):  # type: (dict[str, object]) -> dict[str, float]
    """A rollout's metrics, named as NeMo Gym's aggregation names their means: `mean/reward`,
    `mean/<any other top-level number>`, `mean/input_tokens` (from response.usage) and so on.
    (The hot loop of a 12,000-task compare: type() and one comprehension, not a call per field; the
    call per field only for a row with an int too large for a float.)"""
    try:
        out = {
            "mean/" + name: float(value)  # type: ignore[arg-type]
            for name, value in row.items()
            if type(value) in _NUMBERS and name[:1] != "_" and math.isfinite(value)  # type: ignore[arg-type]
        }
    except OverflowError:
        out = {
            "mean/" + k: v
            for k, v in ((k, number(v)) for k, v in row.items() if k[:1] != "_")
            if v is not None
        }
    response = row.get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    if isinstance(usage, dict):
        for name in USAGE:
            got = number(usage.get(name))
            if got is not None and "mean/" + name not in out:
                out["mean/" + name] = got
    return out


def agent(row):  # type: (dict[str, object]) -> str
    """The agent a row (a rollout, or gym's aggregate entry) belongs to: its agent_ref's name, else its
    environment server, else "-"."""
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, dict) else None
    return str(name or row.get("_ng_environment_server") or "-")


def rollout(row):  # type: (object) -> tuple[str, int, int, dict[str, float]] | None
    """A rollouts line's (agent, task, repeat, metrics), or None for a line compare leaves out (not an
    object, or no task index and repeat that are numbers)."""
    if not isinstance(row, dict):
        return None
    try:
        task, repeat = int(row["_ng_task_index"]), int(row.get("_ng_rollout_index", 0))
    except (ValueError, KeyError, TypeError, OverflowError):
        return None
    return agent(row), task, repeat, numbers(row)


def asked_agent(row):  # type: (object) -> str | None
    """The agent a materialized input names (its agent_ref's name), None when it names none."""
    ref = row.get("agent_ref") if isinstance(row, dict) else None
    name = ref.get("name") if isinstance(ref, dict) else None
    return str(name) if name else None


def parsed(line):  # type: (str | bytes) -> object
    """A line's JSON value as json.loads gives it, None for a line that does not parse (a tail cut short
    by a killed job). A line holding an object, as every rollout does, goes straight to json's C
    scanner: json.loads spends as long again per line around it (the encoding sniffed, the leading
    whitespace matched), nearly half a 96,000-line read."""
    try:
        if isinstance(line, bytes) and line[:1] == b"{" and line[1:2] != b"\x00":  # else utf-16/32
            line = line.decode("utf-8", "surrogatepass")  # as json.loads decodes utf-8
        if isinstance(line, str) and line[:1] == "{":
            value, end = _SCAN(line, 0)
            return None if line[end:].strip(" \t\n\r") else value  # anything after it: "Extra data"
        return json.loads(line)
    except (ValueError, StopIteration, RecursionError):  # RecursionError: nested past json's depth
        return None
