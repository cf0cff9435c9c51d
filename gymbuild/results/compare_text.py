"""`gymbuild compare`'s output: the table a person reads, the JSON a script reads, the gate's lines.

Pure: no I/O. The numbers are compare.py's; the verdicts gate.py's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from gymbuild.results import compare, gate
from gymbuild.results.table import _aligned, number, signed


def _coverage(scored: int, expected: int | None) -> str:
    return f"{scored}/{expected}" if expected is not None else str(scored)


def p_shown(m: compare.MetricDiff) -> tuple[str, str]:
    """The p-value that leads and its test: McNemar's where every task has one pass/fail repeat,
    Wilcoxon's signed-rank where the task deltas are far from normal, else the paired t-test's."""
    if m.mcnemar is not None:
        return f"{m.mcnemar:.3g}", "mcnemar"
    if not m.normal and m.p_robust is not None:
        return f"{m.p_robust:.3g}", "wilcoxon"
    return ("-", "-") if m.p_value is None else (f"{m.p_value:.3g}", "t")


def _row(a: compare.AgentDiff, m: compare.MetricDiff, first: bool) -> list[str]:
    flips = f"{m.pass_to_fail}/{m.fail_to_pass}" if m.binary else "-"
    lead = [a.benchmark, a.agent] if first else ["", ""]
    scored = " ".join(
        (
            _coverage(a.baseline_scored, a.baseline_expected),
            _coverage(a.candidate_scored, a.candidate_expected),
        )
    )
    coverage = f"{scored}{' PARTIAL' if a.partial else ''}" if first else ""
    ci = "-" if m.ci is None else f"[{signed(m.ci[0])}, {signed(m.ci[1])}]"
    return [
        *lead,
        f"{m.metric}{'*' if m.metric == a.primary else ''}",
        number(m.baseline),
        number(m.candidate),
        signed(m.delta),
        ci,
        *p_shown(m),
        str(m.tasks),
        number(m.detectable),
        flips,
        coverage,
    ]


HEAD = [
    "BENCHMARK",
    "AGENT",
    "METRIC",
    "BASELINE",
    "CANDIDATE",
    "DELTA",
    "95% CI",
    "P",
    "TEST",
    "TASKS",
    "MDE",
    "FLIPS -/+",
    "SCORED",
]


def format_table(
    c: compare.Comparison, verdicts: Sequence[gate.Verdict] | None = None, gate_lines: Sequence[str] = ()
) -> str:
    """The table; with max_drop= its verdicts, with a policy the gate's lines (gate_text.table_lines)."""
    body = [_row(a, m, i == 0) for a in c.agents for i, m in enumerate(a.metrics)]
    lines = [f"compare {c.baseline} (baseline) -> {c.candidate} (candidate)", *_aligned(HEAD, body)]
    notes = [f"  {a.benchmark} ({a.agent}): {n}" for a in c.agents for n in a.notes] + [
        f"  {s}" for s in c.skipped if s not in c.inconclusive
    ]
    if c.inconclusive:
        head = "not compared in full (a max_drop= gate is INCONCLUSIVE):"
        lines += ["", head, *(f"  {s}" for s in c.inconclusive)]
    if notes:
        lines += ["", "notes:", *notes]
    if verdicts is not None:
        outcome = gate.overall(verdicts)
        lines += [
            "",
            f"gate: {outcome.value} (exit {gate.EXIT[outcome]})",
            *(f"  {v.line()}" for v in verdicts),
        ]
    if gate_lines:
        lines += ["", *gate_lines]
    lines += [
        "",
        "METRIC*: the one a max_drop= gate reads. DELTA: candidate - baseline, the mean over tasks of each",
        "task's paired repeats; 95% CI: t on those task deltas (widened to a task bootstrap's from 30 tasks)",
        "P, TEST: the p-value of no change by the paired t-test on task deltas (wilcoxon: signed-rank,",
        "deltas far from normal; mcnemar: one repeat a task); MDE: the change these tasks detect with 80%",
        "power; FLIPS -/+: pairs pass->fail / fail->pass; SCORED: rollout lines/asked for, baseline then",
        "candidate (PARTIAL: a side is short)",
        f"baseline {c.baseline_id}, candidate {c.candidate_id}",
    ]
    return "\n".join(lines) + "\n"


def dropped(verdicts: Sequence[gate.Verdict]) -> list[str]:
    return [v.line() for v in verdicts if v.outcome is gate.Outcome.DROP]


def to_json(
    c: compare.Comparison,
    verdicts: Sequence[gate.Verdict] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Everything; with a gate (max_drop=) its `verdicts`, the overall `verdict` (pass, drop or
    inconclusive), its `exit_status`, and `dropped` (the DROP verdicts' lines); `extra`: a policy's
    keys (gate_text.json_keys), which replace the one-margin gate's verdict and exit status."""
    data = asdict(c)
    data["verdicts"] = [asdict(v) for v in verdicts] if verdicts is not None else None
    outcome = gate.overall(verdicts) if verdicts is not None else None
    data["verdict"] = outcome.value.lower() if outcome is not None else None
    data["exit_status"] = gate.EXIT[outcome] if outcome is not None else None
    data["dropped"] = dropped(verdicts or ())
    data.update(extra or {})
    return json.dumps(data, indent=2) + "\n"
