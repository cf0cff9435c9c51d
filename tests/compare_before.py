"""The compare reader and parse as they were before the reader cut rows to their numbers (commit
c26abec), frozen: tests/results/test_compare_reader.py holds today's reader and parse_side to the same
Side on the same files, row for row. Not to be edited: it is the reference, not code in use (what the
change left as it was, key_metrics, is imported). The reader's loop over the files is the same as
today's but for the two files it cuts: a frozen copy, not a second implementation."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

from gymbuild.results.compare import (
    AGGREGATE_FILE,
    FAILURES_FILE,
    MATERIALIZED_FILE,
    ROLLOUTS_FILE,
    Key,
    Side,
    key_metrics,
)

READER = r"""
import json, os, sys
a, out = sys.argv[1:], sys.stdout.buffer
names = {"b": ('artifacts/rollouts.jsonl', 'artifacts/rollouts_materialized_inputs.jsonl',
               'artifacts/rollouts_failures.jsonl', 'artifacts/rollouts_aggregate_metrics.json'),
         "r": ('resolved-config.yaml',)}
def small(line):
    try:
        row = json.loads(line)
    except ValueError:
        return b""
    if not isinstance(row, dict):
        return b""
    keep = {k: v for k, v in row.items() if k.startswith("_ng_") or k == "agent_ref"
            or (isinstance(v, (int, float)) and not isinstance(v, bool))}
    usage = (row.get("response") or {}).get("usage") if isinstance(row.get("response"), dict) else None
    if isinstance(usage, dict):
        keep["response"] = {"usage": usage}
    return json.dumps(keep).encode()
def agent(line):
    try:
        ref = json.loads(line).get("agent_ref")
    except (ValueError, AttributeError):
        ref = None
    return json.dumps({"agent_ref": ref} if isinstance(ref, dict) else {}).encode() + b"\n"
def keys(text):
    try:
        got = json.loads(text)
    except ValueError:
        return b""
    return json.dumps([{"agent_ref": e.get("agent_ref"), "key_metrics": list(e.get("key_metrics") or ())}
                       for e in got if isinstance(e, dict)] if isinstance(got, list) else []).encode()
for i in range(0, len(a) - 1, 2):
    for n in names.get(a[i], ()):
        try:
            f = open(os.path.join(a[i + 1], n), "rb")
        except OSError:
            continue
        with f:
            if n.endswith("rollouts.jsonl"):  # one JSON array: one line to read, one json.loads
                data = b"[" + b",".join(r for r in (small(line) for line in f if line.strip()) if r) + b"]"
            elif n.endswith("materialized_inputs.jsonl"):
                data = b"".join(agent(line) for line in f if line.strip())
            elif n.endswith("aggregate_metrics.json"):
                data = keys(f.read())
            elif n.endswith(".jsonl"):
                data = b"{}\n" * sum(1 for line in f if line.strip())
            else:
                data = f.read()
        out.write(b"%d\0%s\0%s\0" % (i // 2, n.encode(), data.replace(b"\0", b"")))
"""


def _number(value: object) -> float | None:
    if type(value) not in (int, float):  # a bool is no number here
        return None
    return float(value) if math.isfinite(value) else None  # type: ignore[arg-type]


def row_numbers(row: Mapping[str, object]) -> dict[str, float]:
    """A rollout's metrics, named as NeMo Gym's aggregation names their means: `mean/reward`,
    `mean/<any other top-level number>`, `mean/input_tokens` (from response.usage) and so on.
    (The hot loop of a 12,000-task compare: type() and one comprehension, not a call per field.)"""
    out = {
        f"mean/{name}": float(value)  # type: ignore[arg-type]
        for name, value in row.items()
        if type(value) in (int, float) and name[:1] != "_" and math.isfinite(value)  # type: ignore[arg-type]
    }
    response = row.get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    if isinstance(usage, dict):
        for name in ("input_tokens", "output_tokens", "total_tokens"):
            number_ = _number(usage.get(name))
            if number_ is not None and f"mean/{name}" not in out:
                out[f"mean/{name}"] = number_
    return out


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _agent(row: Mapping[str, object]) -> str:
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, dict) else None
    return str(name or row.get("_ng_environment_server") or "-")


def _asked(text: str) -> tuple[int, dict[str, int]]:
    """The materialized inputs: their line count, and per agent named in them its lines."""
    by_agent: dict[str, int] = {}
    lines = _lines(text)
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("agent_ref"), dict) and row["agent_ref"].get("name"):
            by_agent[str(row["agent_ref"]["name"])] = by_agent.get(str(row["agent_ref"]["name"]), 0) + 1
    return len(lines), by_agent


def _rows(text: str) -> Iterator[Any]:
    """The rollouts: a JSON array (compare_read's reader sends them so: one json.loads for all), or
    the file itself, a line each, a line that does not parse left out."""
    if text.startswith("["):
        try:
            rows = json.loads(text)
        except ValueError:
            rows = None
        if isinstance(rows, list):
            yield from rows
            return
    for line in _lines(text):
        try:
            yield json.loads(line)
        except ValueError:
            continue


def parse_side(files: Mapping[str, str]) -> Side | None:
    """A benchmark's files (name -> text) as a Side; None when it wrote no rollouts file at all.

    A line that does not parse (the last one, cut short by a job killed while writing) is skipped:
    NeMo Gym drops such a tail too when it resumes."""
    text = files.get(ROLLOUTS_FILE)
    if text is None:
        return None
    rollouts: dict[str, dict[Key, dict[str, float]]] = {}
    lines: dict[str, int] = {}
    for row in _rows(text):
        try:
            key = (int(row["_ng_task_index"]), int(row.get("_ng_rollout_index", 0)))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        agent = _agent(row)
        rollouts.setdefault(agent, {})[key] = row_numbers(row)
        lines[agent] = lines.get(agent, 0) + 1
    materialized, failures = files.get(MATERIALIZED_FILE), files.get(FAILURES_FILE)
    expected, by_agent = _asked(materialized) if materialized is not None else (None, {})
    return Side(
        rollouts,
        expected=expected,
        failed=None if failures is None else len(_lines(failures)),
        lines=lines,
        expected_by_agent=by_agent,
        key_metrics=key_metrics(files.get(AGGREGATE_FILE)),
    )
