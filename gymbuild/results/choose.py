"""Choosing a checkpoint: every checkpoint of a sweep gated against one baseline, the non-inferior
ones named, the best of them chosen, and how sure that choice is against the runner-up. Pure: no I/O.

The question after a training run is not "did step N drop?" but "which step do we ship?". The gate
answers the first for each checkpoint (gate.py, or a policy's decision over tiers); this module
answers the second, in a way a team can defend:

- non-inferior: the checkpoint's overall outcome is PASS (a drop beyond the margin ruled out on every
  benchmark the policy makes critical). DROP and INCONCLUSIVE ones are never chosen.
- the score: the mean, over the critical benchmarks' verdicts (every verdict when the policy makes
  none critical), of the gated metric's estimated difference against the baseline. Higher is better;
  a tie goes to the later step (more training for the same score), then to the label, so the choice
  never depends on the order of the cells.
- against the runner-up: the best and the second-best non-inferior checkpoint compared directly,
  paired by task and repeat exactly as `compare` pairs two runs (`versus`), on the same gated metrics.
  With one critical benchmark its interval IS compare's interval; with several, the mean of the
  benchmarks' differences, its half-width the root of the sum of squares of theirs over their count
  (independent benchmarks). When it includes 0 the choice is said to be "best, but not shown better
  than" the runner-up: a coin toss between the two is a choice the team should know it made.
- no non-inferior checkpoint: none is chosen, and the line says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gymbuild.results import compare, gate


@dataclass(frozen=True)
class Checkpoint:
    """What the gate said of one checkpoint against the baseline: its verdicts (one per benchmark
    and agent), its overall outcome, and the benchmarks the policy makes critical."""

    label: str
    step: int | None
    gym_job_id: str
    verdicts: tuple[gate.Verdict, ...]
    outcome: gate.Outcome
    critical: frozenset[str] = frozenset()

    def scored(self) -> tuple[gate.Verdict, ...]:
        """The verdicts the score averages: the critical benchmarks' (all, when none is critical)."""
        mine = tuple(v for v in self.verdicts if v.benchmark in self.critical)
        return mine or self.verdicts


@dataclass(frozen=True)
class Judged:
    """One checkpoint, judged: its overall outcome, each benchmark's, whether it is non-inferior, its
    score (None: no critical verdict has an estimate) and whether it is the one chosen."""

    label: str
    step: int | None
    gym_job_id: str
    outcome: gate.Outcome
    benchmarks: Mapping[str, gate.Outcome]
    score: float | None
    chosen: bool = False
    critical: frozenset[str] = frozenset()

    @property
    def non_inferior(self) -> bool:
        return self.outcome is gate.Outcome.PASS

    def mark(self) -> str:
        """`PASS*` for the chosen one, `PASS` for another non-inferior one, the outcome otherwise."""
        return self.outcome.value + ("*" if self.chosen else "")

    def as_json(self) -> dict[str, object]:
        return {
            "outcome": self.outcome.value,
            "non_inferior": self.non_inferior,
            "chosen": self.chosen,
            "score": self.score,
            "benchmarks": {b: o.value for b, o in self.benchmarks.items()},
            "critical": sorted(self.critical),
        }


@dataclass(frozen=True)
class Versus:
    """The chosen checkpoint against the runner-up: the difference of the gated metric (best -
    runner-up, mean over the critical benchmarks), its 95% interval (None: it could not be paired) and
    the tasks it rests on."""

    estimate: float | None
    interval: tuple[float, float] | None
    tasks: int

    @property
    def shown(self) -> bool:
        """The best is shown better: the interval's lower end is above 0."""
        return self.interval is not None and self.interval[0] > 0


@dataclass(frozen=True)
class Choice:
    """The whole answer: every checkpoint judged (in the order given), the chosen one and the
    runner-up (None: none), and the two compared."""

    baseline: str
    judged: tuple[Judged, ...]
    chosen: Judged | None = None
    runner_up: Judged | None = None
    versus: Versus | None = None
    rule: str = field(default="", compare=False)
    baseline_id: str = ""

    def of(self, gym_job_id: str) -> Judged | None:
        return next((j for j in self.judged if j.gym_job_id == gym_job_id), None)

    def mark(self, gym_job_id: str) -> str:
        """What a table shows for a run: BASELINE, its outcome (`PASS*` chosen), or `-` (not gated)."""
        if gym_job_id == self.baseline_id:
            return "BASELINE"
        found = self.of(gym_job_id)
        return found.mark() if found else "-"

    def line(self) -> str:
        """The choice in one line, as a user reads it under the table."""
        fine = [j for j in self.judged if j.non_inferior]
        head = f"{len(fine)} of {len(self.judged)} checkpoint(s) non-inferior to {self.baseline}"
        if self.chosen is None:
            return f"{head}: none chosen (no checkpoint rules out a drop beyond the margin)"
        points = "" if self.chosen.score is None else f" (score {self.chosen.score:+.4g})"
        best = f"chosen: {_name(self.chosen)}{points}"
        if self.runner_up is None or self.versus is None:
            return f"{head}; {best}, the only non-inferior one"
        v, other = self.versus, _name(self.runner_up)
        if v.estimate is None or v.interval is None:
            return f"{head}; {best}, but not shown better than {other} (the two could not be paired)"
        numbers = f"{v.estimate:+.4g} [{v.interval[0]:+.4g}, {v.interval[1]:+.4g}] over {v.tasks} tasks"
        if v.shown:
            return f"{head}; {best}, better than {other} by {numbers}"
        return f"{head}; {best}, but not shown better than {other}: {numbers}"

    def as_json(self) -> dict[str, object]:
        v = self.versus
        return {
            "baseline": self.baseline,
            "baseline_id": self.baseline_id,
            "rule": self.rule,
            "chosen": self.chosen.gym_job_id if self.chosen else None,
            "runner_up": self.runner_up.gym_job_id if self.runner_up else None,
            "versus_runner_up": None
            if v is None
            else {
                "estimate": v.estimate,
                "interval": list(v.interval) if v.interval else None,
                "tasks": v.tasks,
            }
            | {"shown_better": v.shown},
            "line": self.line(),
        }


def _name(j: Judged) -> str:
    return j.label if j.step is None or str(j.step) in j.label else f"{j.label} (step {j.step})"


SCORE_RULE = (
    "the mean over the critical benchmarks of the gated metric's difference against the baseline; "
    "a tie to the later step"
)


def score(c: Checkpoint) -> float | None:
    """The mean estimate of the verdicts `scored` (None: none has one)."""
    found = [v.estimate for v in c.scored() if v.estimate is not None and math.isfinite(v.estimate)]
    return sum(found) / len(found) if found else None


def _outcomes(c: Checkpoint) -> dict[str, gate.Outcome]:
    """Each benchmark's outcome: gate.overall of its agents' verdicts."""
    by_bench: dict[str, list[gate.Verdict]] = {}
    for v in c.verdicts:
        by_bench.setdefault(v.benchmark, []).append(v)
    return {b: gate.overall(vs) for b, vs in by_bench.items()}


def _rank(j: Judged) -> tuple[float, int, str, str]:
    """Sort key, best first: the higher score, then the later step, then the label and id."""
    points = j.score if j.score is not None else -math.inf
    return (-points, -(j.step if j.step is not None else -1), j.label, j.gym_job_id)


def choose(
    baseline: str,
    checkpoints: Sequence[Checkpoint],
    versus: Callable[[Checkpoint, Checkpoint], compare.Comparison],
    baseline_id: str = "",
) -> Choice:
    """Judge every checkpoint and choose the best non-inferior one. `versus(runner_up, best)`: the
    two compared as compare compares a baseline and a candidate (only called when there are two)."""
    judged = [
        Judged(c.label, c.step, c.gym_job_id, c.outcome, _outcomes(c), score(c), critical=c.critical)
        for c in checkpoints
    ]
    ranked = sorted((j for j in judged if j.non_inferior), key=_rank)
    if not ranked:
        return Choice(baseline, tuple(judged), rule=SCORE_RULE, baseline_id=baseline_id)
    best = ranked[0]
    judged = [replace(j, chosen=True) if j is best else j for j in judged]
    chosen = next(j for j in judged if j.chosen)
    if len(ranked) == 1:
        return Choice(baseline, tuple(judged), chosen, rule=SCORE_RULE, baseline_id=baseline_id)
    runner = ranked[1]
    by_id = {c.gym_job_id: c for c in checkpoints}
    best_c, runner_c = by_id[best.gym_job_id], by_id[runner.gym_job_id]
    gated = {(v.benchmark, v.agent): v.metric for v in best_c.scored()}
    between = pooled(versus(runner_c, best_c), gated)
    return Choice(baseline, tuple(judged), chosen, runner, between, SCORE_RULE, baseline_id)


def pooled(c: compare.Comparison, gated: Mapping[tuple[str, str | None], str | None]) -> Versus:
    """The difference of the gated metrics of the (benchmark, agent)s `gated` (-> its metric) in `c`:
    one is its own paired estimate and interval; several, their mean, the half-widths combined as
    independent ones. Any of them not paired (no interval): not paired as a whole."""
    found = []
    for (bench, agent), metric in gated.items():
        diff = next((a for a in c.agents if a.benchmark == bench and a.agent == agent), None)
        m = diff.metric(metric or diff.primary) if diff else None
        if m is None or m.ci is None or not m.tasks:
            return Versus(None, None, 0)
        found.append(m)
    if not found:
        return Versus(None, None, 0)
    if len(found) == 1:
        m = found[0]
        return Versus(m.delta, m.ci, m.tasks)
    k = len(found)
    estimate = sum(m.delta for m in found) / k
    below = math.sqrt(sum((m.delta - m.ci[0]) ** 2 for m in found if m.ci)) / k
    above = math.sqrt(sum((m.ci[1] - m.delta) ** 2 for m in found if m.ci)) / k
    return Versus(estimate, (estimate - below, estimate + above), sum(m.tasks for m in found))
