"""The gate's policy across benchmarks: which benchmarks must not drop, by how much, on which metric.

`compare run=A,B policy=gate.yaml` reads a small YAML file (schemas/gate-policy.schema.json):

    default: {tier: advisory, max_drop: 0.02}          # a benchmark the file does not name
    benchmarks:
      mmlu: {tier: critical, max_drop: 0.02}           # an absolute margin, the metric's own unit
      gpqa: {tier: critical, relative_drop: 0.05}      # 5% of the baseline's mean of the metric
      aime: {tier: supporting, max_drop: 0.05, metric: accuracy}

A field a benchmark's rule leaves out is the default's (absent default: advisory, max_drop 0). One rule
gives max_drop OR relative_drop, never both: which would win is a question the file would have to
answer in a way a reader can miss, so it is refused (one margin per benchmark, stated once). A
relative drop becomes an absolute margin from the BASELINE's mean of the gated metric over the paired
tasks (the candidate's would move the bar with the thing it judges); each verdict's reason says so:
"max_drop = 5% of 0.62 = 0.031".

Each benchmark's agents are judged as gate.py judges them (non-inferiority on the 95% interval); the
benchmark's verdict is the worst of its agents'. The overall verdict, and why (after NEL's `gate`):

- a critical benchmark's DROP -> DROP; a critical INCONCLUSIVE -> INCONCLUSIVE: a benchmark the team
  said must not drop decides alone;
- supporting benchmarks are evidence, not vetoes: one supporting DROP -> INCONCLUSIVE ("a human
  looks"), two or more -> DROP (a pattern, not one noisy benchmark); a supporting INCONCLUSIVE alone
  changes nothing (too few tasks on a side benchmark should not block a release);
- advisory benchmarks are judged and shown but never change the outcome;
- no critical benchmark compared -> INCONCLUSIVE at best, never PASS: a gate that looked at nothing
  that matters has not passed anything.

The rule is monotone: making any benchmark's verdict worse never makes the overall better
(tests/results/test_policy.py searches for a counterexample). `Policy.of_max_drop` is today's
`max_drop=` gate as a policy: every benchmark critical with one margin. Pure: no I/O but `load`.
"""

from __future__ import annotations

import difflib
import enum
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gymbuild.errors import Problem, UsageError, dotted, printable
from gymbuild.results import compare, gate

SCHEMA_NAME = "gate-policy.schema.json"
_RANK = {gate.Outcome.PASS: 0, gate.Outcome.INCONCLUSIVE: 1, gate.Outcome.DROP: 2}


class Tier(enum.StrEnum):
    CRITICAL = "critical"
    SUPPORTING = "supporting"
    ADVISORY = "advisory"


@dataclass(frozen=True)
class Rule:
    """What the policy says about one benchmark: its tier, its margin (one of the two) and metric."""

    tier: Tier
    max_drop: float | None  # absolute margin on the metric, e.g. 0.02
    relative_drop: float | None  # a fraction of the baseline's mean, e.g. 0.05 = 5% of it
    metric: str | None  # the metric to gate (None: the benchmark's primary, as compare chooses it)

    def margin(self, baseline_mean: float | None) -> tuple[float | None, str]:
        """The absolute margin for a benchmark whose baseline mean of the gated metric is
        `baseline_mean`, and how it was reached (empty for an absolute one); None: it cannot be
        (a relative drop with no baseline mean to take it of)."""
        if self.relative_drop is None:
            return (self.max_drop or 0.0), ""
        if baseline_mean is None or not math.isfinite(baseline_mean):
            return None, f"max_drop = {self.relative_drop:.4g} of the baseline's mean, which is unknown"
        margin = self.relative_drop * abs(baseline_mean)
        pct = f"{self.relative_drop * 100:.4g}%"
        return margin, f"max_drop = {pct} of {baseline_mean:.4g} = {margin:.4g}"

    def describe(self) -> str:
        """The margin as the policy file says it: `max_drop 0.02` or `relative_drop 5%`."""
        if self.relative_drop is not None:
            return f"relative_drop {self.relative_drop * 100:.4g}%"
        return f"max_drop {self.max_drop or 0.0:g}"


_NO_DEFAULT = Rule(Tier.ADVISORY, 0.0, None, None)


@dataclass(frozen=True)
class Policy:
    """The policy file, read: a rule per benchmark it names, and one for every other."""

    default: Rule  # for a benchmark the file does not name
    benchmarks: Mapping[str, Rule]
    source: str  # the file it came from ("max_drop=" for the one-margin policy)

    def rule(self, benchmark: str) -> Rule:
        return self.benchmarks.get(benchmark, self.default)

    @classmethod
    def of_max_drop(cls, max_drop: float, metric: str | None = None) -> Policy:
        """Today's `max_drop=` gate as a policy: every benchmark critical, one margin, one metric."""
        return cls(Rule(Tier.CRITICAL, max_drop, None, metric), {}, "max_drop=")

    def to_json(self) -> dict[str, Any]:
        def one(r: Rule) -> dict[str, Any]:
            return {
                "tier": r.tier.value,
                "max_drop": r.max_drop,
                "relative_drop": r.relative_drop,
                "metric": r.metric,
            }

        return {
            "source": self.source,
            "default": one(self.default),
            "benchmarks": {b: one(r) for b, r in self.benchmarks.items()},
        }


def _refuse(source: str, path: Sequence[object], message: str, fix: str) -> UsageError:
    problem = Problem(dotted(path), message, fix).render()
    return UsageError(f"error: {printable(source, lines=False)}: {problem}")


def _schema_problem(source: str, err: Any) -> UsageError:
    """jsonschema's error as one message naming the key path and the fix."""
    path = list(err.absolute_path)
    kind = err.validator
    if kind == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        unknown = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
        where = [*path, unknown[0]] if unknown else path
        return _refuse(source, where, "is not a key of a gate policy", f"use one of {', '.join(allowed)}")
    if kind == "enum":
        return _refuse(
            source, path, f"{err.instance!r} is not a tier", f"use one of {', '.join(t.value for t in Tier)}"
        )
    if kind == "not":
        return _refuse(
            source,
            path,
            "gives both max_drop and relative_drop",
            "keep one: one margin a benchmark (max_drop: absolute; relative_drop: of the baseline's mean)",
        )
    if kind in ("minimum", "maximum"):
        bound = "a fraction from 0 to 1 (0.05 = 5%)" if path and path[-1] == "relative_drop" else "0 or more"
        return _refuse(source, path, f"{err.instance!r} is not a margin", f"give a number, {bound}")
    if kind == "type" and path and path[-1] in ("max_drop", "relative_drop"):
        return _refuse(source, path, f"{err.instance!r} is not a number", "give a number, e.g. 0.02")
    if kind == "type" and not path:
        return _refuse(source, path, "is not a mapping", "write `benchmarks:` with a rule per benchmark")
    if kind == "type" and path and path[-1] == "benchmarks":
        return _refuse(source, path, "is not a mapping", "write `name: {tier: critical, max_drop: 0.02}`")
    if kind == "type" and len(path) <= 2:
        return _refuse(source, path, "is not a rule", "write {tier: critical, max_drop: 0.02}")
    return _refuse(source, path, err.message, "see schemas/gate-policy.schema.json and docs/compare.md")


def _validate(tree: object, source: str) -> None:
    from jsonschema import Draft202012Validator  # late: jsonschema (House rules)

    from gymbuild.resources import load_schema

    validator = Draft202012Validator(load_schema(SCHEMA_NAME))
    errors = sorted(
        validator.iter_errors(tree), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path)))
    )
    if errors:
        raise _schema_problem(source, errors[0])


def _rule(raw: Mapping[str, Any], base: Rule, source: str, path: Sequence[object]) -> Rule:
    for key in ("max_drop", "relative_drop"):
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not math.isfinite(float(value))):
            raise _refuse(
                source, [*path, key], f"{value!r} is not a margin", "give a finite number, 0 or more"
            )
    metric = raw.get("metric", base.metric)
    if metric is not None and (metric.strip() != metric or any(not c.isprintable() for c in metric)):
        raise _refuse(source, [*path, "metric"], "is not a metric name", "e.g. metric: accuracy")
    tier = Tier(raw["tier"]) if "tier" in raw else base.tier
    if "max_drop" in raw or "relative_drop" in raw:  # one margin: the rule's own replaces the default's
        max_drop, relative = raw.get("max_drop"), raw.get("relative_drop")
        return Rule(
            tier,
            None if max_drop is None else float(max_drop),
            None if relative is None else float(relative),
            metric,
        )
    return Rule(tier, base.max_drop, base.relative_drop, metric)


def parse(text: str, source: str) -> Policy:
    """The policy a file's text says, or a UsageError naming `source`, the key path and the fix.
    Pure (what `load` calls); a YAML syntax error names its line."""
    import yaml  # late: PyYAML (House rules)

    from gymbuild.config.fastyaml import strict_safe_loader

    try:
        tree = yaml.load(text, Loader=strict_safe_loader())  # a safe loader, duplicate keys refused
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None)
        why = f" ({problem})" if problem else ""
        fix = (
            "write each key once"
            if problem and "duplicate key" in problem
            else "a mapping with `default:` and `benchmarks:` (docs/compare.md)"
        )
        raise UsageError(
            f"error: {printable(source, lines=False)}: is not YAML{where}{printable(why, lines=False)}\n"
            f"    fix: {fix}"
        ) from None
    if tree is None:
        tree = {}
    _validate(tree, source)
    default = _rule(tree.get("default") or {}, _NO_DEFAULT, source, ["default"])
    if default.max_drop is None and default.relative_drop is None:
        default = replace(default, max_drop=0.0)
    rules = {
        str(name): _rule(raw or {}, default, source, ["benchmarks", str(name)])
        for name, raw in (tree.get("benchmarks") or {}).items()
    }
    return Policy(default, rules, source)


def load(path: Path) -> Policy:
    """The policy file at `path`; one it cannot read is a usage error (exit 64) like a bad argument."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        why = err.strerror if isinstance(err, OSError) and err.strerror else type(err).__name__
        raise UsageError(
            f"error: policy={printable(str(path), lines=False)}: cannot be read ({why})\n"
            "    fix: give the path of a gate policy YAML file (docs/compare.md)"
        ) from None
    return parse(text, str(path))


def metric_of(policy: Policy) -> Callable[[str], str | None]:
    """benchmark -> the metric its rule gates (None: compare's own choice), for building the Comparison."""
    return lambda benchmark: policy.rule(benchmark).metric


def unknown_benchmarks(policy: Policy, benchmarks: Sequence[str]) -> tuple[str, ...]:
    """The notes on the benchmarks the policy names that the runs do not have: a policy written for
    many benchmarks gating a run of fewer is normal, so each is a note; but a name close to one of the
    runs' benchmarks that the policy does not name is likely a typo, which is a usage error naming it."""
    free = [b for b in benchmarks if b not in policy.benchmarks]
    notes = []
    for name in policy.benchmarks:
        if name in benchmarks:
            continue
        close = difflib.get_close_matches(name, free, n=1, cutoff=0.75)
        if close:
            raise _refuse(
                policy.source,
                ["benchmarks", name],
                "names no benchmark of the compared runs",
                f"did you mean {close[0]}? (the runs have {', '.join(benchmarks)})",
            )
        notes.append(f"policy: {name} is not a benchmark of the compared runs (not gated)")
    return tuple(notes)


def _check_metrics(policy: Policy, c: compare.Comparison) -> None:
    """A metric a benchmark's own rule names that none of its compared agents carries is a typo (a
    usage error naming the key), not an undecided gate; the default's, only when no benchmark has it
    (a default metric a few benchmarks lack is theirs to be INCONCLUSIVE about, as metric= is)."""
    default_found, default_missing = False, set()
    for bench in c.benchmarks:
        rule = policy.rule(bench)
        agents = [a for a in c.agents if a.benchmark == bench and a.metrics]
        if rule.metric is None or not agents:
            continue
        own = bench in policy.benchmarks and rule.metric != policy.default.metric
        if any(a.metric(compare.metric_name(rule.metric)) for a in agents):
            default_found = default_found or not own
            continue
        have = sorted({m.metric for a in agents for m in a.metrics})
        if own:
            raise _refuse(
                policy.source,
                ["benchmarks", bench, "metric"],
                f"{bench}'s rollouts carry no {compare.metric_name(rule.metric)}",
                f"pick from {', '.join(have)}",
            )
        default_missing.update(have)
    if default_missing and not default_found:
        raise _refuse(
            policy.source,
            ["default", "metric"],
            "names no metric of the compared rollouts",
            f"pick from {', '.join(sorted(default_missing))}",
        )


@dataclass(frozen=True)
class Decision:
    """The policy's answer on one comparison: every verdict, each benchmark's and the overall."""

    verdicts: tuple[gate.Verdict, ...]  # one per (benchmark, agent), as gate.verdicts gives
    tiers: Mapping[str, Tier]  # benchmark -> its tier
    benchmarks: Mapping[str, gate.Outcome]  # one verdict per benchmark (its agents combined)
    outcome: gate.Outcome  # the overall verdict
    why: tuple[str, ...] = ()  # what made the overall verdict what it is
    notes: tuple[str, ...] = ()  # benchmarks the policy names that the runs do not have
    policy: Policy | None = field(default=None, compare=False)

    def exit_status(self) -> int:
        return gate.EXIT[self.outcome]

    def counts(self) -> dict[gate.Outcome, int]:
        return {o: sum(1 for b in self.benchmarks.values() if b is o) for o in gate.Outcome}


def combine(
    outcomes: Mapping[str, gate.Outcome], tiers: Mapping[str, Tier]
) -> tuple[gate.Outcome, tuple[str, ...]]:
    """The overall rule (the module's docstring): per benchmark its verdict and tier -> the outcome
    and why. Pure and small so the property tests can drive it directly."""
    critical = {b: o for b, o in outcomes.items() if tiers[b] is Tier.CRITICAL}
    supporting_drops = [
        b for b, o in outcomes.items() if tiers[b] is Tier.SUPPORTING and o is gate.Outcome.DROP
    ]
    found: list[tuple[gate.Outcome, str]] = []
    if not critical:
        found.append(
            (gate.Outcome.INCONCLUSIVE, "no critical benchmark was compared: nothing that matters passed")
        )
    for b, o in critical.items():
        if o is not gate.Outcome.PASS:
            found.append((o, f"critical {b}: {o.value}"))
    if len(supporting_drops) >= 2:
        found.append(
            (
                gate.Outcome.DROP,
                f"{len(supporting_drops)} supporting benchmarks dropped: {', '.join(supporting_drops)}",
            )
        )
    elif supporting_drops:
        found.append(
            (gate.Outcome.INCONCLUSIVE, f"supporting {supporting_drops[0]} dropped: one needs a human's look")
        )
    if not found:
        return gate.Outcome.PASS, (f"every critical benchmark passed ({len(critical)})",)
    worst = max((o for o, _ in found), key=_RANK.__getitem__)
    return worst, tuple(why for o, why in found if o is worst)


def decide(comparison: compare.Comparison, policy: Policy) -> Decision:
    """Every (benchmark, agent) judged under its benchmark's rule, each benchmark's verdict (the worst
    of its agents') and the overall one. Pure; a policy naming a benchmark or metric it likely
    misspelled is a UsageError."""
    notes = unknown_benchmarks(policy, comparison.benchmarks)
    _check_metrics(policy, comparison)

    def margin_of(benchmark: str, agent: compare.AgentDiff | None) -> tuple[float, str]:
        rule = policy.rule(benchmark)
        m = agent.metric(agent.primary) if agent is not None else None
        margin, how = rule.margin(m.baseline if m is not None and m.tasks else None)
        return (0.0 if margin is None else margin), how

    verdicts = tuple(gate.verdicts(comparison, policy.default.max_drop or 0.0, margin_of=margin_of))
    tiers = {b: policy.rule(b).tier for b in comparison.benchmarks}
    per_bench = {b: gate.overall(v for v in verdicts if v.benchmark == b) for b in comparison.benchmarks}
    outcome, why = combine(per_bench, tiers)
    return Decision(verdicts, tiers, per_bench, outcome, why, notes, policy)
