"""An override that adds a name to a mapping keyed by the user's names (a benchmark, a service, a
compute entry, a node pool) must add a whole entry, not half of one.

Hydra's `+driver.benchmarks.gqpa.run.limit=5` (a typo of gpqa) silently makes a new benchmark `gqpa`
holding only `run.limit`. NeMo Gym 0.7.0 accepts it and queues a job whose `gym eval run` has no
benchmark to run (tests/parity/test_new_names.py asks the oracle). A new service, compute entry or
node pool without its type or partition is refused by validation anyway, but with messages about
missing keys of an entry the user never meant to create. Here such an override ends in one problem
that names it, the names the config has (closest first) and both ways out: change the existing
entry, or define the new one completely.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gymbuild.errors import Problem


@dataclass(frozen=True)
class _Kind:
    """A mapping whose keys are the user's names, and what makes an entry of it whole."""

    noun: str
    plural: str
    needs: str  # what a whole entry has, as the fix says it
    whole: Callable[[Any], bool]


def _has(entry: Any, key: str) -> bool:
    return hasattr(entry, "get") and entry.get(key) is not None


def _benchmark_whole(entry: Any) -> bool:
    """A benchmark gym can run: its own `command`, or `run.config_paths` naming gym's benchmark."""
    run = entry.get("run") if hasattr(entry, "get") else None
    return _has(entry, "command") or _has(run, "config_paths")


BENCHMARK = _Kind("benchmark", "benchmarks", "`run.config_paths` (or a `command`)", _benchmark_whole)
SERVICE = _Kind("service", "services", "a `type` (and what that type requires)", lambda e: _has(e, "type"))
COMPUTE = _Kind(
    "compute entry", "compute entries", "a `type` (and what that type requires)", lambda e: _has(e, "type")
)
POOL = _Kind("node pool", "node pools", "a `partition`", lambda e: _has(e, "partition"))


def named_entries(key: str) -> list[tuple[str, str, _Kind]]:
    """(the mapping's path, the name, its kind) of each user-keyed entry an override key reaches
    into, outermost first: `compute.c.node_pools.p.x` is compute entry c, then its pool p."""
    parts = key.split("@")[0].split(".")
    if parts[:2] == ["driver", "benchmarks"] and len(parts) > 2:
        return [("driver.benchmarks", parts[2], BENCHMARK)]
    found = []
    if parts[0] in ("services", "compute") and len(parts) > 1:
        found.append((parts[0], parts[1], SERVICE if parts[0] == "services" else COMPUTE))
    if parts[0] == "compute" and len(parts) > 3 and parts[2] == "node_pools":
        found.append((f"compute.{parts[1]}.node_pools", parts[3], POOL))
    return found


def _keys(tree: Any, dotted: str) -> list[str] | None:
    """The keys of the mapping at `dotted` in `tree`, or None where there is no mapping."""
    node = tree
    for part in dotted.split("."):
        if not hasattr(node, "get") or node.get(part) is None:
            return None
        node = node.get(part)
    return [str(k) for k in node] if hasattr(node, "keys") else None


def _entry(tree: Any, dotted: str, name: str) -> Any:
    node = tree
    for part in [*dotted.split("."), name]:
        if not hasattr(node, "get"):
            return None
        node = node.get(part)
    return node


def half_entries(
    overrides: Sequence[str],
    composed: Any,
    base: Callable[[], Any],
    parse: Callable[[str], tuple[str, str] | None],
) -> list[Problem]:
    """One problem per name an add-override (`+`, `++`) puts in a user-keyed mapping of `composed`
    without making its entry whole. `base` gives the tree without the overrides (composed only when
    an override adds to such a mapping); `parse` an override's (operator, key)."""
    problems: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    before = None
    for text in overrides:
        parsed = parse(text)
        if parsed is None or parsed[0] not in ("+", "++"):
            continue
        key = parsed[1]
        for mapping, name, kind in named_entries(key):
            if (mapping, name) in seen:
                break  # this new entry (and what is inside it) was judged by an earlier override
            if before is None:
                before = base()
            had = _keys(before, mapping)
            if had is None or name in had:
                continue  # an entry the file has (or a mapping it lacks: validation's to say)
            seen.add((mapping, name))
            if not kind.whole(_entry(composed, mapping, name)):
                problems.append(_problem(text, key, mapping, name, kind, had))
            break  # a new entry: what is inside it is new as well
    return problems


def _problem(text: str, key: str, mapping: str, name: str, kind: _Kind, had: list[str]) -> Problem:
    ranked = difflib.get_close_matches(name, had, n=len(had), cutoff=0.0)
    ranked += [n for n in had if n not in ranked]
    names = ", ".join(ranked) if ranked else "none"
    rest = key.split("@")[0][len(f"{mapping}.{name}") :]
    value = text.split("=", 1)[1] if "=" in text else ""
    change = ""
    if ranked and rest:
        change = f"to change {kind.noun} {ranked[0]!r}, write `++{mapping}.{ranked[0]}{rest}={value}`; "
    elif ranked:  # the override replaces the entry whole: no `++` form of it keeps the other one
        change = f"to change {kind.noun} {ranked[0]!r}, set its keys with `++{mapping}.{ranked[0]}.KEY=...`; "
    return Problem(
        f"{mapping}.{name}",
        f"override {text!r} adds {kind.noun} {name!r}, which the config does not have "
        f"({kind.plural} it has: {names}), and leaves it incomplete",
        f"{change}to add {kind.noun} {name!r}, define it in the file or give it {kind.needs} in the "
        f"overrides too",
    )
