"""The rules' reading of the filled tree: what they may trust of it, and where they write findings.

Apart from the rules themselves so that each group of them (services, driver, strings, otel) reads
the tree through one guard: `Rules.ok` and `Rules.get` see only values the schema accepted, which is
what keeps a wrong type reported once, by the schema, and never a rule's crash.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from gymbuild.config.tree import JsonObject, JsonValue, TreePath
from gymbuild.errors import Problem, dotted

Path = TreePath


def _overlaps(a: Path, b: Path) -> bool:
    """One path is the other or lies inside it."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def quoted(items: Iterable[object]) -> str:
    """The names a finding offers to pick from, as `a`, `b` (or none)."""
    return ", ".join(f"`{i}`" for i in items) or "none"


@dataclass
class Rules:
    """The filled tree, the paths the schema refused, and what the rules found."""

    tree: JsonObject
    bad: list[Path]
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def ok(self, *paths: Path) -> bool:
        """True when the schema accepted each of these values whole: nothing above or inside refused."""
        return all(not _overlaps(bad, path) for path in paths for bad in self.bad)

    def reachable(self, path: Path) -> bool:
        """True when nothing above `path` or at it was refused (a container may hold refused entries)."""
        return not any(path[: len(bad)] == bad for bad in self.bad)

    def error(self, path: Path, message: str, fix: str) -> None:
        self.problems.append(Problem(dotted(path), message, fix))

    def get(self, path: Path) -> JsonValue:
        """The value at `path`, or None when it or anything on the way is missing or refused.

        Entries inside a container may still be refused: check those with `ok` before trusting them.
        """
        if not self.reachable(path):
            return None
        node: JsonValue = self.tree
        for part in path:
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node

    def mapping(self, path: Path) -> JsonObject:
        """A mapping the rules may iterate, or {} when the schema refused it."""
        node = self.get(path)
        return node if isinstance(node, dict) else {}

    # --- what several rules share ------------------------------------------------------------------

    @property
    def compute(self) -> tuple[str, JsonObject] | None:
        """(name, entry) of the one compute, when the schema accepted it."""
        entries = self.mapping(("compute",))
        if len(entries) != 1:
            return None
        ((name, entry),) = entries.items()
        # without a valid type no branch of the schema filled the entry's defaults: nothing to trust
        if isinstance(entry, dict) and self.ok(("compute", name, "type")):
            return name, entry
        return None

    @property
    def pools(self) -> JsonObject | None:
        """The compute's node pools by name, or None when they cannot be trusted (each pool may still
        be refused: check it with `ok`)."""
        if self.compute is None:
            return None
        name, _ = self.compute
        pools = self.get(("compute", name, "node_pools"))
        return pools if isinstance(pools, dict) else None

    def services(self) -> Iterator[tuple[tuple[str, str], str, JsonObject]]:
        """(path, type, tree) of each service the schema accepted the type of."""
        for name, svc in self.mapping(("services",)).items():
            path = ("services", name)
            if not isinstance(svc, dict) or not self.ok((*path, "type")):
                continue
            kind = svc.get("type")
            if isinstance(kind, str) and kind in _SERVICE_TYPES:
                yield path, kind, svc

    def deployments(self) -> Iterator[tuple[Path, str, JsonObject]]:
        """Every unit that is placed and started: the services and the prefill/decode tiers."""
        for path, kind, svc in self.services():
            yield path, kind, svc
            if kind == "vllm_pd":
                for tier in ("prefill", "decode"):
                    sub = self.get((*path, tier))
                    if isinstance(sub, dict):
                        yield (*path, tier), "vllm", sub

    def benchmarks(self) -> Iterator[tuple[tuple[str, str, str], JsonObject]]:
        for name, bench in self.mapping(("driver", "benchmarks")).items():
            if isinstance(bench, dict):
                yield ("driver", "benchmarks", name), bench


_SERVICE_TYPES = ("vllm", "vllm_pd", "ray", "command")


Rule = Callable[[Rules], None]
