"""A gate's decision (policy.py) as text: lines for the table, a compact form for CI logs, a markdown
summary for a pull request, and the JSON keys a script reads.

compact is for a log a person scrolls past: the overall verdict first (what a glance needs), then one
line per verdict that is not PASS (what to look at), then the counts (how much was looked at). markdown
is for a pull request's comment: a summary line, one table row per (benchmark, agent) with its tier,
metric, both means, the difference and its interval, the margin and the verdict, the reasons below.
Pure: no I/O. Every value a run or policy file brought is escaped (errors.printable; `|` in a cell).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gymbuild.errors import printable
from gymbuild.results import compare, gate, policy
from gymbuild.results.table import number, signed


def _one(text: str) -> str:
    return printable(text, lines=False)


def _tier(d: policy.Decision, v: gate.Verdict) -> str:
    return d.tiers[v.benchmark].value if v.benchmark in d.tiers else "-"


def _source(d: policy.Decision) -> str:
    return _one(d.policy.source) if d.policy is not None else "-"


def headline(c: compare.Comparison, d: policy.Decision) -> str:
    """`gate DROP (exit 1), policy gate.yaml: critical mmlu: DROP`: the line a CI log shows first."""
    return f"gate {d.outcome.value} (exit {d.exit_status()}), policy {_source(d)}: {_one('; '.join(d.why))}"


def counts(d: policy.Decision) -> str:
    """`counts: 3 PASS, 1 DROP, 0 INCONCLUSIVE of 4 benchmarks (critical 2, supporting 1, advisory 1)`."""
    by_outcome = ", ".join(f"{n} {o.value}" for o, n in d.counts().items())
    tiers = ", ".join(f"{t.value} {sum(1 for x in d.tiers.values() if x is t)}" for t in policy.Tier)
    return f"counts: {by_outcome} of {len(d.benchmarks)} benchmark(s) ({tiers})"


def table_lines(c: compare.Comparison, d: policy.Decision) -> list[str]:
    """The gate's section of compare's table: the overall verdict and why, then each verdict with its
    benchmark's tier (every one, PASS too: the table is the full account)."""
    return [
        headline(c, d),
        *(f"  {_tier(d, v):<10} {_one(v.line())}" for v in d.verdicts),
        *(f"  note: {_one(n)}" for n in d.notes),
        f"  {counts(d)}",
    ]


def compact(c: compare.Comparison, d: policy.Decision) -> str:
    """A few lines for a CI log: the overall verdict, one line per verdict that is not PASS, the counts."""
    lines = [
        headline(c, d),
        f"  baseline {_one(c.baseline_id)} -> candidate {_one(c.candidate_id)}",
        *(f"{_tier(d, v)} {_one(v.line())}" for v in d.verdicts if v.outcome is not gate.Outcome.PASS),
        *(f"note: {_one(n)}" for n in d.notes),
        counts(d),
    ]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """A markdown table cell: one line, its pipes escaped so a name cannot add a column."""
    return _one(text).replace("|", "\\|")


def _numbers(c: compare.Comparison, v: gate.Verdict) -> tuple[str, str]:
    agent = next((a for a in c.agents if a.benchmark == v.benchmark and a.agent == v.agent), None)
    m = agent.metric(v.metric) if agent is not None else None
    return (number(m.baseline), number(m.candidate)) if m is not None and m.tasks else ("-", "-")


def _delta(v: gate.Verdict) -> str:
    if v.estimate is None:
        return "-"
    if v.interval is None:
        return signed(v.estimate)
    return f"{signed(v.estimate)} [{signed(v.interval[0])}, {signed(v.interval[1])}]"


def _margin(d: policy.Decision, v: gate.Verdict) -> str:
    rule = d.policy.rule(v.benchmark) if d.policy is not None else None
    if rule is not None and rule.relative_drop is not None:
        return f"{number(v.max_drop)} ({rule.relative_drop * 100:.4g}% of baseline)"
    return number(v.max_drop)


def markdown(c: compare.Comparison, d: policy.Decision) -> str:
    """A pull request's comment: the summary line, the table, the reasons below it."""
    mark = {
        gate.Outcome.PASS: "PASS",
        gate.Outcome.DROP: "**DROP**",
        gate.Outcome.INCONCLUSIVE: "*INCONCLUSIVE*",
    }
    head = ["benchmark", "tier", "metric", "baseline", "candidate", "delta [95% CI]", "margin", "verdict"]
    rows = [
        [
            _cell(v.name),
            _tier(d, v),
            _cell(v.metric or "-"),
            *_numbers(c, v),
            _delta(v),
            _margin(d, v),
            mark[v.outcome],
        ]
        for v in d.verdicts
    ]
    lines = [
        f"### gymbuild gate: {mark[d.outcome]} (exit {d.exit_status()})",
        "",
        f"{_cell(c.baseline)} (`{_cell(c.baseline_id)}`) -> "
        f"{_cell(c.candidate)} (`{_cell(c.candidate_id)}`), "
        f"policy `{_cell(_source(d))}`: {_cell('; '.join(d.why))}",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---:" if h in ("baseline", "candidate", "margin") else "---" for h in head) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
        "",
        counts(d),
        "",
        "**Reasons**",
        "",
        *(f"- {_cell(v.name)} ({_tier(d, v)}), {v.outcome.value}: {_cell(v.reason)}" for v in d.verdicts),
        *(f"- note: {_cell(n)}" for n in d.notes),
    ]
    return "\n".join(lines) + "\n"


def json_keys(d: policy.Decision) -> dict[str, Any]:
    """What a policy adds to compare's JSON (compare_text.to_json): the policy as read, each
    benchmark's tier and verdict, the overall verdict, why, and the exit status."""
    return {
        "policy": d.policy.to_json() if d.policy is not None else None,
        "tiers": {b: t.value for b, t in d.tiers.items()},
        "benchmark_verdicts": {b: o.value.lower() for b, o in d.benchmarks.items()},
        "verdict": d.outcome.value.lower(),
        "why": list(d.why),
        "policy_notes": list(d.notes),
        "exit_status": d.exit_status(),
    }


def stderr_message(d: policy.Decision, verdicts: Sequence[gate.Verdict]) -> str:
    """The message a DROP or INCONCLUSIVE gate ends with on stderr: the verdict, why, and the
    verdicts that were not PASS, one line each."""
    lines = "".join(
        f"\n  {_tier(d, v)} {_one(v.line())}" for v in verdicts if v.outcome is not gate.Outcome.PASS
    )
    return f"{d.outcome.value} under policy {_source(d)}: {_one('; '.join(d.why))}{lines}"
