"""The gate's verdict on one benchmark (and agent): PASS, DROP or INCONCLUSIVE, as a non-inferiority test.

The question a CI step asks is not "did anything change?" but "can we rule out a drop larger than
max_drop?". So the 95% interval of the candidate - baseline difference of the gated metric decides:

- PASS when its lower end is above -max_drop (a drop that large is ruled out);
- DROP when its upper end is below -max_drop (a drop that large is shown);
- INCONCLUSIVE otherwise (the interval straddles -max_drop: too few tasks, or too much spread, to
  tell), with the smallest change these tasks would detect and roughly how many tasks would settle it;
  and INCONCLUSIVE, never PASS, whenever the benchmark was not compared in full (a side without rows,
  partial, whose job did not complete, nothing paired) or on fewer than MIN_TASKS tasks: the reasons
  say which.

A `Verdict` is a plain value, one per (benchmark, agent), so a policy across benchmarks (tiers, a
margin per benchmark, relative drops) can be built on a list of them: `overall` is the simplest such
policy (every benchmark critical, one max_drop). Pure: no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from gymbuild.errors import UsageError
from gymbuild.results import compare, stats


class Outcome(enum.StrEnum):
    PASS = "PASS"
    DROP = "DROP"
    INCONCLUSIVE = "INCONCLUSIVE"


# The exit statuses of `compare max_drop=`: documented in docs/compare.md and the verb's help.
EXIT = {Outcome.PASS: 0, Outcome.DROP: 1, Outcome.INCONCLUSIVE: 2}
# Fewer tasks than this never decide: a t interval on 3 tasks rests on a normality nobody can check
# (in simulation, 3 pass/fail tasks passed a true drop of twice max_drop 1% of the time).
MIN_TASKS = 10
USAGE_STATUS = UsageError.status  # 64: an argument the gate cannot use (neither a verdict nor a drop)


@dataclass(frozen=True)
class Verdict:
    """The gate on one benchmark's agent: what was gated, the outcome and why.

    `estimate` and `interval` are the candidate - baseline difference of `metric` over `tasks` tasks
    and its 95% interval (None: not compared); `detectable` the smallest change these tasks detect
    with 80% power; `tasks_needed` roughly how many tasks would settle an INCONCLUSIVE one (None: not
    inconclusive on the numbers, or no number of tasks is sure to)."""

    benchmark: str
    agent: str | None
    metric: str | None
    outcome: Outcome
    max_drop: float
    estimate: float | None = None
    interval: tuple[float, float] | None = None
    tasks: int = 0
    detectable: float | None = None
    tasks_needed: int | None = None
    reason: str = ""

    @property
    def name(self) -> str:
        return f"{self.benchmark} ({self.agent})" if self.agent else self.benchmark

    def line(self) -> str:
        """One line for a CI log: `PASS quiz (agent) mean/reward -0.004 [-0.02, +0.01] 200 tasks: why`."""
        numbers = ""
        if self.estimate is not None and self.interval is not None:
            low, high = self.interval
            numbers = f" {self.estimate:+.4g} [{low:+.4g}, {high:+.4g}] {self.tasks} tasks"
        metric = f" {self.metric}" if self.metric else ""
        return f"{self.outcome.value} {self.name}{metric}{numbers}: {self.reason}"


def judge(
    benchmark: str,
    agent: str | None,
    metric: str | None,
    evidence: stats.Evidence | None,
    max_drop: float,
    problems: Sequence[str] = (),
) -> Verdict:
    """The verdict on one (benchmark, agent) from the evidence of its gated metric. `problems`: why
    it was not compared in full (each makes it INCONCLUSIVE, whatever the numbers say: a drop on the
    half of a benchmark a crash left is not the benchmark's drop, nor is its pass)."""
    margin = -max_drop
    tasks = evidence.tasks if evidence else 0
    found = Verdict(
        benchmark,
        agent,
        metric,
        Outcome.INCONCLUSIVE,
        max_drop,
        estimate=evidence.estimate if evidence and tasks else None,
        interval=evidence.interval if evidence else None,
        tasks=tasks,
        detectable=evidence.detectable if evidence else None,
    )
    if problems:
        return replace(found, reason="; ".join(problems))
    if evidence is None or evidence.interval is None or tasks < MIN_TASKS:
        return replace(
            found,
            tasks_needed=MIN_TASKS,
            reason=f"{tasks} task(s) paired: a verdict needs {MIN_TASKS} or more",
        )
    low, high = evidence.interval
    if low > margin:
        why = f"the interval's lower end {low:+.4g} is above -max_drop ({margin:+.4g})"
        return replace(found, outcome=Outcome.PASS, reason=why)
    if high < margin:
        why = f"the interval's upper end {high:+.4g} is below -max_drop ({margin:+.4g})"
        return replace(found, outcome=Outcome.DROP, reason=why)
    needed = stats.tasks_to_settle(evidence.spread, abs(evidence.estimate - margin), tasks)
    mde = f"{evidence.detectable:.3g}" if evidence.detectable is not None else "unknown"
    settle = f"about {needed} tasks would settle it" if needed else "no number of tasks is sure to settle it"
    why = (
        f"the interval straddles -max_drop ({margin:+.4g}); {tasks} tasks detect a change of "
        f"{mde} with 80% power; {settle}"
    )
    return replace(found, tasks_needed=needed, reason=why)


def overall(verdicts: Iterable[Verdict]) -> Outcome:
    """Every benchmark critical: DROP when any dropped, else INCONCLUSIVE when any is (or there is
    none: nothing compared never passes), else PASS."""
    outcomes = {v.outcome for v in verdicts}
    if Outcome.DROP in outcomes:
        return Outcome.DROP
    if Outcome.INCONCLUSIVE in outcomes or not outcomes:
        return Outcome.INCONCLUSIVE
    return Outcome.PASS


def verdicts(
    c: compare.Comparison,
    max_drop: float,
    margin_of: Callable[[str, compare.AgentDiff | None], tuple[float, str]] | None = None,
) -> list[Verdict]:
    """One verdict per (benchmark, agent) compared, and one per benchmark asked for that compared no
    agent; each carries its benchmark's shortfalls (those of another agent of it left out).
    `margin_of` (policy.py): per benchmark and agent its own margin and how it was reached (a relative
    drop's arithmetic, put before the reason); without it every one is judged on `max_drop`."""

    def judged(bench: str, a: compare.AgentDiff | None, problems: Sequence[str]) -> Verdict:
        margin, how = margin_of(bench, a) if margin_of is not None else (max_drop, "")
        m = a.metric(a.primary) if a is not None else None
        agent, metric = (a.agent, a.primary) if a is not None else (None, None)
        found = judge(bench, agent, metric, m.evidence if m else None, margin, problems)
        return replace(found, reason=f"{how}; {found.reason}") if how else found

    out = []
    for bench in c.benchmarks:
        problems = c.short.get(bench, ())
        agents = [a for a in c.agents if a.benchmark == bench]
        if not agents:
            out.append(
                judged(bench, None, problems or (f"{bench}: no agent of one run has rollouts in the other",))
            )
        for a in agents:
            others = [f"{bench} ({x.agent})" for x in agents if x.agent != a.agent]
            out.append(judged(bench, a, [p for p in problems if not any(p.startswith(o) for o in others)]))
    return out
