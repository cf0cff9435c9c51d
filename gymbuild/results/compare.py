"""`gymbuild compare run=A,B`: is B different from A, benchmark by benchmark, beyond noise? Pure: no I/O.

The two runs' rollouts (`artifacts/rollouts.jsonl`, one line per finished rollout) are paired by
agent, task (`_ng_task_index`) and repeat (`_ng_rollout_index`): the same question asked the same
time, once of each model. Pairing removes the spread between easy and hard tasks from the
difference, which is most of the noise of an unpaired comparison, so a paired interval is narrower
for the same data. Per metric (`mean/<field>`: the reward, and every other number a rollout carries,
as NeMo Gym's aggregation names them) this reports:

- the difference of the means over the pairs, and its 95% interval by a paired bootstrap over
  tasks with a fixed seed (stats.paired_bootstrap);
- for a pass/fail metric (every value 0 or 1): the pairs that flipped each way and the exact
  McNemar p-value (stats.mcnemar);
- NeMo Gym's own interval (Welch over per-repeat means, which needs two repeats or more), and its
  per-task flips (a task passes when most of its repeats do), the numbers `gym eval compare` prints
  on the same files.

Coverage comes with every row: how many rollouts each side scored of how many it was given
(`rollouts_materialized_inputs.jsonl` has one line per rollout asked for), and how many pairs the
comparison used. A partial side is said, never silently compared with a complete one.

results/compare_read.py fetches the files; this module turns their text into comparisons and those into a
table or JSON, and says whether a benchmark dropped by more than `max_drop` with confidence, or
whether that cannot be told (`shortfalls`): a gate that is green when nothing was compared would
pass the worst regression of all, a run that crashed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from gymbuild.results import stats
from gymbuild.results.table import _aligned, number, signed

ROLLOUTS_FILE = "rollouts.jsonl"
MATERIALIZED_FILE = "rollouts_materialized_inputs.jsonl"  # one line per rollout asked for
FAILURES_FILE = "rollouts_failures.jsonl"  # one line per failed attempt of a rollout
PRIMARY = "mean/reward"  # what max_drop gates on: every NeMo Gym verifier returns a reward
_USAGE = ("input_tokens", "output_tokens", "total_tokens")  # what gym's aggregation reads of response.usage

Key = tuple[int, int]  # (task index, repeat index)


@dataclass(frozen=True)
class Side:
    """One benchmark of one run as its files tell: per agent, per (task, repeat), its numbers."""

    rollouts: Mapping[str, Mapping[Key, Mapping[str, float]]]
    expected: int | None  # rollouts asked for (None: no materialized inputs: not a gym eval run)
    failed: int | None  # lines of the failures file (None: no such file)

    @property
    def scored(self) -> int:
        return sum(len(rows) for rows in self.rollouts.values())

    @property
    def partial(self) -> bool:
        return self.expected is not None and self.scored < self.expected


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def row_numbers(row: Mapping[str, object]) -> dict[str, float]:
    """A rollout's metrics, named as NeMo Gym's aggregation names their means: `mean/reward`,
    `mean/<any other top-level number>`, `mean/input_tokens` (from response.usage) and so on."""
    out = {}
    for name, value in row.items():
        number_ = _number(value)
        if number_ is not None and not name.startswith("_"):
            out[f"mean/{name}"] = number_
    response = row.get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    if isinstance(usage, dict):
        for name in _USAGE:
            number_ = _number(usage.get(name))
            if number_ is not None and f"mean/{name}" not in out:
                out[f"mean/{name}"] = number_
    return out


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def parse_side(files: Mapping[str, str]) -> Side | None:
    """A benchmark's files (name -> text) as a Side; None when it wrote no rollouts file at all.

    A line that does not parse (the last one, cut short by a job killed while writing) is skipped:
    NeMo Gym drops such a tail too when it resumes."""
    text = files.get(ROLLOUTS_FILE)
    if text is None:
        return None
    rollouts: dict[str, dict[Key, dict[str, float]]] = {}
    for line in _lines(text):
        try:
            row = json.loads(line)
            key = (int(row["_ng_task_index"]), int(row.get("_ng_rollout_index", 0)))
        except (ValueError, KeyError, TypeError):
            continue
        agent = str((row.get("agent_ref") or {}).get("name") or row.get("_ng_environment_server") or "-")
        rollouts.setdefault(agent, {})[key] = row_numbers(row)
    materialized, failures = files.get(MATERIALIZED_FILE), files.get(FAILURES_FILE)
    return Side(
        rollouts,
        expected=None if materialized is None else len(_lines(materialized)),
        failed=None if failures is None else len(_lines(failures)),
    )


@dataclass(frozen=True)
class MetricDiff:
    """One metric of one (benchmark, agent): the paired difference and what backs it."""

    metric: str
    pairs: int
    baseline: float  # means over the pairs
    candidate: float
    delta: float
    ci: tuple[float, float]  # paired bootstrap, 95%
    binary: bool
    pass_to_fail: int | None = None  # pairs, for a pass/fail metric
    fail_to_pass: int | None = None
    p_value: float | None = None  # exact McNemar, for a pass/fail metric
    gym_delta: float | None = None  # NeMo Gym's: mean of per-repeat means, candidate - baseline
    gym_ci: tuple[float, float] | None = None  # NeMo Gym's Welch interval over per-repeat means
    gym_task_flips: tuple[int, int] | None = None  # NeMo Gym's (fail_to_pass, pass_to_fail) per task


@dataclass(frozen=True)
class AgentDiff:
    benchmark: str
    agent: str
    baseline_scored: int
    candidate_scored: int
    baseline_expected: int | None
    candidate_expected: int | None
    pairs: int
    metrics: tuple[MetricDiff, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Comparison:
    """The whole answer: which runs, and per benchmark and agent what changed."""

    baseline: str  # labels (policy model, or gym_job_id)
    candidate: str
    baseline_id: str
    candidate_id: str
    agents: tuple[AgentDiff, ...]
    skipped: tuple[str, ...] = field(default_factory=tuple)  # benchmarks not compared, and why
    inconclusive: tuple[str, ...] = field(default_factory=tuple)  # what keeps the gate from deciding


def _repeat_means(rows: Mapping[Key, Mapping[str, float]], metric: str) -> list[float]:
    """Per repeat (in repeat order), the mean of the metric over that side's tasks: NeMo Gym's
    repeat-level `mean/<field>`."""
    by_repeat: dict[int, list[float]] = {}
    for (_, repeat), values in rows.items():
        if metric in values:
            by_repeat.setdefault(repeat, []).append(values[metric])
    return [stats.mean(by_repeat[r]) for r in sorted(by_repeat)]


def _task_means(rows: Mapping[Key, Mapping[str, float]], metric: str) -> dict[int, float]:
    by_task: dict[int, list[float]] = {}
    for (task, _), values in rows.items():
        if metric in values:
            by_task.setdefault(task, []).append(values[metric])
    return {t: stats.mean(v) for t, v in by_task.items()}


def _gym_task_flips(
    base: Mapping[Key, Mapping[str, float]], cand: Mapping[Key, Mapping[str, float]], metric: str
) -> tuple[int, int]:
    """NeMo Gym's flips: per common task, its mean over repeats passes above 0.5 (a tie flips nothing)."""
    b, c = _task_means(base, metric), _task_means(cand, metric)
    up = down = 0
    for task in set(b) & set(c):
        if 0.5 in (b[task], c[task]):
            continue
        up += b[task] < 0.5 < c[task]
        down += c[task] < 0.5 < b[task]
    return up, down


def diff_agent(benchmark: str, agent: str, base: Side, cand: Side) -> AgentDiff:
    """The paired comparison of one agent of one benchmark."""
    b_rows, c_rows = base.rollouts.get(agent, {}), cand.rollouts.get(agent, {})
    common = sorted(set(b_rows) & set(c_rows))
    names = sorted({m for k in common for m in b_rows[k] if m in c_rows[k]}, key=lambda m: (m != PRIMARY, m))
    by_task: dict[int, list[list[float]]] = {}
    pairs: dict[str, list[tuple[float, float]]] = {m: [] for m in names}
    for key in common:
        diffs = by_task.setdefault(key[0], [[] for _ in names])
        for i, m in enumerate(names):
            if m in b_rows[key] and m in c_rows[key]:
                b, c = b_rows[key][m], c_rows[key][m]
                pairs[m].append((b, c))
                diffs[i].append(c - b)
    intervals = stats.paired_bootstrap([by_task[t] for t in sorted(by_task)])
    metrics = []
    for m, ci in zip(names, intervals, strict=True):
        ps = pairs[m]
        binary = all(v in (0.0, 1.0) for pair in ps for v in pair)
        down = sum(1 for b, c in ps if b > c) if binary else None
        up = sum(1 for b, c in ps if c > b) if binary else None
        b_rep, c_rep = _repeat_means(b_rows, m), _repeat_means(c_rows, m)
        metrics.append(
            MetricDiff(
                metric=m,
                pairs=len(ps),
                baseline=stats.mean([b for b, _ in ps]),
                candidate=stats.mean([c for _, c in ps]),
                delta=stats.mean([c - b for b, c in ps]),
                ci=ci,
                binary=binary,
                pass_to_fail=down,
                fail_to_pass=up,
                p_value=stats.mcnemar(down, up) if down is not None and up is not None else None,
                gym_delta=stats.mean(c_rep) - stats.mean(b_rep) if b_rep and c_rep else None,
                gym_ci=stats.welch(c_rep, b_rep),
                gym_task_flips=_gym_task_flips(b_rows, c_rows, m) if binary else None,
            )
        )
    notes = []
    for side, name, rows in (("baseline", base, b_rows), ("candidate", cand, c_rows)):
        if name.partial:
            notes.append(f"{side} is partial: {name.scored}/{name.expected} rollouts scored")
        unpaired = len(set(rows) - set(common))
        if unpaired:
            notes.append(f"{unpaired} {side} rollout(s) have no partner in the other run and are left out")
    return AgentDiff(
        benchmark,
        agent,
        len(b_rows),
        len(c_rows),
        base.expected,
        cand.expected,
        len(common),
        tuple(metrics),
        tuple(notes),
    )


def diff_benchmark(benchmark: str, base: Side, cand: Side) -> tuple[list[AgentDiff], list[str]]:
    """Every agent both runs have; an agent only one has is named, not compared."""
    agents = sorted(set(base.rollouts) & set(cand.rollouts))
    skipped = [
        f"{benchmark}: agent {a} is only in the {side}"
        for side, mine, other in (("baseline", base, cand), ("candidate", cand, base))
        for a in sorted(set(mine.rollouts) - set(other.rollouts))
    ]
    return [diff_agent(benchmark, a, base, cand) for a in agents], skipped


def drops(comparison: Comparison, max_drop: float) -> list[str]:
    """The (benchmark, agent)s whose primary metric dropped by more than max_drop with 95% confidence:
    the whole interval of the difference lies below -max_drop."""
    out = []
    for a in comparison.agents:
        for m in a.metrics:
            if m.metric == PRIMARY and m.ci[1] < -max_drop:
                out.append(
                    f"{a.benchmark} ({a.agent}): {m.metric} {signed(m.delta)}, "
                    f"95% CI [{signed(m.ci[0])}, {signed(m.ci[1])}] is below -{number(max_drop)}"
                )
    return out


@dataclass(frozen=True)
class Found:
    """One run's side of a benchmark as it was found: whether the run has the benchmark at all, the
    end state of its job (None: not looked at), and its files (None: no rollouts file)."""

    has: bool
    state: str | None
    side: Side | None


COMPLETED = "COMPLETED"


def _side_shortfalls(benchmark: str, name: str, found: Found) -> list[str]:
    if not found.has:
        return [f"{benchmark}: the {name} run has no such benchmark"]
    out = []
    if found.state is not None and found.state != COMPLETED:
        out.append(f"{benchmark}: the {name}'s job is {found.state}, not COMPLETED")
    side = found.side
    if side is None:
        out.append(f"{benchmark}: no {ROLLOUTS_FILE} in the {name}")
    elif side.scored == 0:
        out.append(f"{benchmark}: the {name}'s {ROLLOUTS_FILE} has no rollout")
    elif side.partial:
        out.append(f"{benchmark}: the {name} is partial: {side.scored}/{side.expected} rollouts scored")
    return out


def shortfalls(benchmark: str, base: Found, cand: Found, agents: Sequence[AgentDiff]) -> list[str]:
    """Why `benchmark` was not compared in full, one line each (none: it was): a side without it,
    whose job did not complete, with no rollouts file, an empty one or fewer rollouts than asked for;
    an agent with no pair, or no reward to gate on. (An agent only one side has is diff_benchmark's.)"""
    out = _side_shortfalls(benchmark, "baseline", base) + _side_shortfalls(benchmark, "candidate", cand)
    for a in agents:
        if a.pairs == 0:
            out.append(
                f"{benchmark} ({a.agent}): no rollout of one run has a partner (task, repeat) in the other"
            )
        elif not any(m.metric == PRIMARY for m in a.metrics):
            out.append(f"{benchmark} ({a.agent}): no {PRIMARY} in both runs' rollouts to gate on")
    return list(dict.fromkeys(out))


NOTHING = "nothing was compared: no benchmark has rollouts paired across the two runs"


def verdict(c: Comparison, dropped: Sequence[str]) -> str:
    """`drop` (a drop shown with confidence: exit 1), `inconclusive` (something asked for could not
    be compared in full: exit 2) or `pass`."""
    if dropped:
        return "drop"
    return "inconclusive" if c.inconclusive else "pass"


# --- formatting ------------------------------------------------------------------------------------


def _coverage(scored: int, expected: int | None) -> str:
    return f"{scored}/{expected}" if expected is not None else str(scored)


def _row(a: AgentDiff, m: MetricDiff, first: bool) -> list[str]:
    partial = a.baseline_expected is not None and a.baseline_scored < a.baseline_expected
    partial = partial or (a.candidate_expected is not None and a.candidate_scored < a.candidate_expected)
    flips = f"{m.pass_to_fail}/{m.fail_to_pass}" if m.binary else "-"
    p = "-" if m.p_value is None else f"{m.p_value:.3g}"
    lead = [a.benchmark, a.agent] if first else ["", ""]
    scored = " ".join(
        (
            _coverage(a.baseline_scored, a.baseline_expected),
            _coverage(a.candidate_scored, a.candidate_expected),
        )
    )
    coverage = f"{scored}{' PARTIAL' if partial else ''}" if first else ""
    return [
        *lead,
        m.metric,
        number(m.baseline),
        number(m.candidate),
        signed(m.delta),
        f"[{signed(m.ci[0])}, {signed(m.ci[1])}]",
        flips,
        p,
        str(m.pairs),
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
    "FLIPS -/+",
    "P",
    "PAIRS",
    "SCORED",
]


def format_table(c: Comparison) -> str:
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
    lines += [
        "",
        "DELTA: candidate - baseline over the pairs (same task and repeat); 95% CI: paired task bootstrap",
        "FLIPS -/+: pairs pass->fail / fail->pass; P: exact McNemar test of the flips (pass/fail metrics)",
        "SCORED: rollouts scored/asked for, baseline then candidate (PARTIAL: a side is not complete)",
        f"baseline {c.baseline_id}, candidate {c.candidate_id}",
    ]
    return "\n".join(lines) + "\n"


def to_json(c: Comparison, dropped: Sequence[str] = (), gate: str | None = None) -> str:
    """Everything, with `dropped` and (max_drop= given) the gate's `verdict`: pass, drop or inconclusive."""
    data = asdict(c)
    data["dropped"] = list(dropped)
    data["verdict"] = gate
    return json.dumps(data, indent=2) + "\n"
