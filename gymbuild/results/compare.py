"""`gymbuild compare run=A,B`: is B different from A, benchmark by benchmark, beyond noise? Pure: no I/O.

The two runs' rollouts (`artifacts/rollouts.jsonl`, one line per finished rollout) are paired by
agent, task (`_ng_task_index`) and repeat (`_ng_rollout_index`): the same question asked the same
time, once of each model. Pairing removes the spread between easy and hard tasks from the
difference. The unit of evidence is the task (stats.py): per metric (`mean/<field>`, as NeMo Gym's
aggregation names it) each task gives the mean over its paired repeats of candidate - baseline, and
the difference, its interval, tests and detectable effect are computed on those task deltas. NeMo
Gym's own numbers on the same files (its Welch interval over per-repeat means, its per-task flips)
are reported beside them (`gym_*`), so the two tools can be checked against each other.

Coverage comes with every row, per agent: how many rollout lines each side wrote (duplicates
counted, as `status` counts them) of how many it was given (`rollouts_materialized_inputs.jsonl`,
one line per rollout asked for, with its agent), duplicates and empty files named. The metric a gate
reads (`primary`) is `metric=`, else the benchmark's key metric as NeMo Gym's aggregate names it
(`rollouts_aggregate_metrics.json`), else `mean/reward`. results/compare_read.py fetches the files;
results/compare_cover.py says what was not compared in full; results/compare_text.py prints;
results/gate.py judges.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter, methodcaller
from typing import Any

from gymbuild.results import compare_rows, stats

ROLLOUTS_FILE = "rollouts.jsonl"
MATERIALIZED_FILE = "rollouts_materialized_inputs.jsonl"  # one line per rollout asked for
FAILURES_FILE = "rollouts_failures.jsonl"  # one line per failed attempt of a rollout
AGGREGATE_FILE = "rollouts_aggregate_metrics.json"  # gym's aggregate: per agent, its key_metrics
CUT = ".cut"  # a file's name + CUT: compare_read's reader cut it down to what compare reads
REWARD = "mean/reward"  # every NeMo Gym verifier returns a reward: the key metric when none is named
USAGE_METRICS = tuple(f"mean/{n}" for n in compare_rows.USAGE)

Key = tuple[int, int]  # (task index, repeat index)


@dataclass(frozen=True)
class Side:
    """One benchmark of one run as its files tell: per agent, per (task, repeat), its numbers (the
    last line of a duplicated (task, repeat)); per agent its rollout lines (duplicates counted) and the
    rollouts it was asked for; gym's key metrics per agent where its aggregate was written."""

    rollouts: Mapping[str, Mapping[Key, Mapping[str, float]]]
    expected: int | None  # rollouts asked for (None: no materialized inputs: not a gym eval run)
    failed: int | None  # lines of the failures file (None: no such file)
    lines: Mapping[str, int] = field(default_factory=dict)  # per agent: rollout lines written
    expected_by_agent: Mapping[str, int] = field(default_factory=dict)  # from materialized agent_ref
    key_metrics: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # per agent, gym's order

    @property
    def scored(self) -> int:
        """Rollout lines, as `status` counts them (a duplicated (task, repeat) counts twice)."""
        return sum(self.lines_of(a) for a in self.rollouts)

    @property
    def distinct(self) -> int:
        return sum(len(rows) for rows in self.rollouts.values())

    @property
    def partial(self) -> bool:
        return self.expected is not None and self.distinct < self.expected

    def lines_of(self, agent: str) -> int:
        return self.lines.get(agent, len(self.rollouts.get(agent, {})))

    def duplicates(self, agent: str) -> int:
        return self.lines_of(agent) - len(self.rollouts.get(agent, {}))

    def expected_of(self, agent: str) -> int | None:
        """The rollouts `agent` was asked for: its materialized inputs' lines; the whole file's when
        they name no agent and the benchmark has one; None when that cannot be told."""
        if self.expected_by_agent:
            return self.expected_by_agent.get(agent, 0)
        agents = set(self.rollouts)
        return self.expected if self.expected is not None and agents <= {agent} else None


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _asked(text: str) -> tuple[int, dict[str, int]]:
    """The materialized inputs: their line count, and per agent named in them its lines."""
    by_agent: dict[str, int] = {}
    lines = _lines(text)
    for line in lines:
        name = compare_rows.asked_agent(compare_rows.parsed(line))
        if name is not None:
            by_agent[name] = by_agent.get(name, 0) + 1
    return len(lines), by_agent


def key_metrics(text: str | None) -> dict[str, tuple[str, ...]]:
    """Per agent, the key metrics NeMo Gym's aggregate names (its `get_key_metrics`, in its order)."""
    try:
        entries = json.loads(text) if text else []
    except ValueError:
        return {}
    out = {}
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("key_metrics"), dict | list):
            out[compare_rows.agent(entry)] = tuple(str(k) for k in entry["key_metrics"])
    return out


def _rows(text: str) -> Iterator[Any]:
    """The rollouts file as it comes from a target without python3: a line each, a line that does not
    parse left out."""
    for line in _lines(text):
        yield compare_rows.parsed(line)


def _read_rows(text: str) -> tuple[dict[str, dict[Key, dict[str, float]]], dict[str, int]]:
    """Per agent its rows by (task, repeat), the last of a duplicate kept; per agent its lines."""
    rollouts: dict[str, dict[Key, dict[str, float]]] = {}
    lines: dict[str, int] = {}
    for row in _rows(text):
        got = compare_rows.rollout(row)
        if got is not None:
            agent, task, repeat, numbers = got
            rollouts.setdefault(agent, {})[task, repeat] = numbers
            lines[agent] = lines.get(agent, 0) + 1
    return rollouts, lines


def _read_cut(text: str) -> tuple[dict[str, dict[Key, dict[str, float]]], dict[str, int]]:
    """The same from the reader's cut of the file (compare_read): one JSON document, per agent its
    lines and its distinct rows (the last of a duplicate, where the first stood), each row as
    [shape, task, repeat, value...], where a shape is the row's metric names (a benchmark's rows share
    one or two), so a row travels as its numbers alone."""
    doc = json.loads(text)
    shapes = [tuple(names) for names in doc["shapes"]]
    rollouts = {
        agent: {(row[1], row[2]): dict(zip(shapes[row[0]], row[3:], strict=True)) for row in rows}
        for agent, _, rows in doc["agents"]
    }
    return rollouts, {agent: lines for agent, lines, _ in doc["agents"]}


def parse_side(files: Mapping[str, str]) -> Side | None:
    """A benchmark's files (name -> text) as a Side; None when it wrote no rollouts file at all. A
    file comes whole (the target has no python3) or cut by compare_read's reader (its name + CUT).

    A line that does not parse (the last one, cut short by a job killed while writing) is skipped:
    NeMo Gym drops such a tail too when it resumes."""
    cut = files.get(ROLLOUTS_FILE + CUT)
    text = files.get(ROLLOUTS_FILE)
    if cut is not None:
        rollouts, lines = _read_cut(cut)
    elif text is not None:
        rollouts, lines = _read_rows(text)
    else:
        return None
    failures = files.get(FAILURES_FILE)
    asked_cut, materialized = files.get(MATERIALIZED_FILE + CUT), files.get(MATERIALIZED_FILE)
    if asked_cut is not None:
        expected, by_agent = json.loads(asked_cut)
    else:
        expected, by_agent = _asked(materialized) if materialized is not None else (None, {})
    return Side(
        rollouts,
        expected=expected,
        failed=None if failures is None else len(_lines(failures)),
        lines=lines,
        expected_by_agent=by_agent,
        key_metrics=key_metrics(files.get(AGGREGATE_FILE)),
    )


def metric_name(text: str) -> str:
    """`metric=accuracy` or `metric=mean/accuracy`: the aggregate's name, `mean/accuracy`."""
    return text if "/" in text else f"mean/{text}"


def _as_mean(key: str) -> str:
    """A key metric as the per-rollout mean it is: `pass@1[avg-of-4]/accuracy` and `pass@1/accuracy`
    (one attempt's chance, averaged over the repeats) are `mean/accuracy`; others stay as named."""
    head, _, field_ = key.partition("/")
    return f"mean/{field_}" if field_ and (head == "pass@1" or head.startswith("pass@1[avg-of-")) else key


def primary(names: Sequence[str], keys: Sequence[str], wanted: str | None) -> tuple[str | None, str]:
    """The metric the gate reads among `names` (the metrics both sides' pairs have), and how it was
    chosen, or (None, why none could be). `wanted`: metric=; `keys`: gym's key metrics for the agent,
    in its order (the first it can pair: gym's default puts mean/reward first)."""
    if wanted is not None:
        name = metric_name(wanted)
        return (name, "metric=") if name in names else (None, f"no {name} (metric=) in both runs' rollouts")
    keyed = [k for k in map(_as_mean, keys) if k in names and k not in USAGE_METRICS]
    if keyed:
        return keyed[0], "the benchmark's key metric (gym's aggregate)"
    if REWARD in names:
        return REWARD, "the reward"
    scores = [n for n in names if n not in USAGE_METRICS]
    if len(scores) == 1:
        return scores[0], "the one score the rollouts carry"
    listed = ", ".join(scores) or "none"
    return None, f"no {REWARD} and no key metric to gate on (metrics: {listed}): name one with metric="


@dataclass(frozen=True)
class MetricDiff:
    """One metric of one (benchmark, agent): the task-clustered paired difference and what backs it."""

    metric: str
    pairs: int
    tasks: int
    baseline: float  # means over the paired tasks (each task its repeats' mean)
    candidate: float
    delta: float  # the mean task delta
    ci: tuple[float, float] | None  # 95%: t on task deltas (widened to the task bootstrap's, gated metric)
    binary: bool
    p_value: float | None = None  # paired t-test on task deltas
    p_robust: float | None = None  # Wilcoxon signed-rank on task deltas
    normal: bool = True  # False: the deltas are far from normal, p_robust leads
    detectable: float | None = None  # minimum detectable effect, 80% power
    spread: float = 0.0  # standard deviation of the task deltas
    pass_to_fail: int | None = None  # pairs, for a pass/fail metric
    fail_to_pass: int | None = None
    mcnemar: float | None = None  # exact McNemar: only when every task has one repeat
    gym_delta: float | None = None  # NeMo Gym's: mean of per-repeat means, candidate - baseline
    gym_ci: tuple[float, float] | None = None  # NeMo Gym's Welch interval over per-repeat means
    gym_task_flips: tuple[int, int] | None = None  # NeMo Gym's (fail_to_pass, pass_to_fail) per task

    @property
    def evidence(self) -> stats.Evidence:
        return stats.Evidence(
            self.tasks,
            self.delta,
            self.ci,
            self.spread,
            self.p_value,
            self.p_robust,
            self.normal,
            self.detectable,
        )


@dataclass(frozen=True)
class AgentDiff:
    benchmark: str
    agent: str
    baseline_scored: int  # rollout lines, duplicates counted
    candidate_scored: int
    baseline_expected: int | None  # this agent's rollouts asked for
    candidate_expected: int | None
    pairs: int
    metrics: tuple[MetricDiff, ...]
    notes: tuple[str, ...] = ()
    primary: str | None = None  # the metric a gate reads (None: none could be chosen)
    primary_why: str = ""
    partial: tuple[str, ...] = ()  # the sides (baseline, candidate) short of what they were asked

    def metric(self, name: str | None) -> MetricDiff | None:
        return next((m for m in self.metrics if m.metric == name), None)


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
    benchmarks: tuple[str, ...] = field(default_factory=tuple)  # the benchmarks asked for, in order
    short: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # per benchmark, its shortfalls


class _Columns:
    """One side's rows of one agent as arrays: task and repeat per row, and per metric its values
    (NaN where a row lacks it), so the per-task and per-repeat means are numpy's sums, not loops.
    The rows are looked up once, and each metric read off them by C calls (map, methodcaller): a
    generator per metric was a fifth of a 12,000-task comparison's own time."""

    def __init__(self, rows: Mapping[Key, Mapping[str, float]], keys: Sequence[Key]) -> None:
        np_ = stats.numpy()
        self.rows = list(map(rows.__getitem__, keys))
        count = len(keys)
        self.task = np_.fromiter(map(itemgetter(0), keys), dtype=np_.int64, count=count)
        self.repeat = np_.fromiter(map(itemgetter(1), keys), dtype=np_.int64, count=count)
        self._values: dict[str, stats.Floats] = {}

    def values(self, metric: str) -> stats.Floats:
        if metric not in self._values:
            got = map(methodcaller("get", metric, math.nan), self.rows)
            self._values[metric] = stats.numpy().fromiter(got, dtype=float, count=len(self.rows))
        return self._values[metric]


def _group_means(groups: stats.Floats, values: stats.Floats) -> tuple[stats.Floats, stats.Floats]:
    """(the distinct groups, sorted; each one's mean of `values`)."""
    np_ = stats.numpy()
    uniq, inverse, counts = np_.unique(groups, return_inverse=True, return_counts=True)
    return uniq, np_.bincount(inverse, weights=values, minlength=len(uniq)) / counts


def _gym(b: _Columns, c: _Columns, metric: str, binary: bool) -> dict[str, object]:
    """NeMo Gym 0.7.0's numbers on each side's own rows: the difference of the means of per-repeat
    means, its Welch interval over them, and per-task flips (a task passes above a mean of 0.5)."""
    np_ = stats.numpy()
    sides = []
    for col in (b, c):
        v = col.values(metric)
        ok = ~np_.isnan(v)
        sides.append((col.repeat[ok], col.task[ok], v[ok]))
    (b_rep, b_task, b_v), (c_rep, c_task, c_v) = sides
    b_means, c_means = _group_means(b_rep, b_v)[1], _group_means(c_rep, c_v)[1]
    out: dict[str, object] = {
        "gym_delta": float(c_means.mean() - b_means.mean()) if len(b_means) and len(c_means) else None,
        "gym_ci": stats.welch(c_means.tolist(), b_means.tolist()),
    }
    if binary:
        (bt, bm), (ct, cm) = _group_means(b_task, b_v), _group_means(c_task, c_v)
        _, bi, ci = np_.intersect1d(bt, ct, assume_unique=True, return_indices=True)
        bm, cm = bm[bi], cm[ci]
        out["gym_task_flips"] = (int(((bm < 0.5) & (cm > 0.5)).sum()), int(((cm < 0.5) & (bm > 0.5)).sum()))
    return out


def _metric(name: str, b: _Columns, c: _Columns, gated: bool) -> MetricDiff:
    np_ = stats.numpy()
    bv, cv = b.values(name), c.values(name)
    ok = ~(np_.isnan(bv) | np_.isnan(cv))
    bv, cv, task = bv[ok], cv[ok], b.task[ok]
    uniq, inverse, counts = np_.unique(task, return_inverse=True, return_counts=True)
    per_task = [np_.bincount(inverse, weights=v, minlength=len(uniq)) / counts for v in (bv, cv, cv - bv)]
    binary = bool(np_.isin(bv, (0.0, 1.0)).all() and np_.isin(cv, (0.0, 1.0)).all())
    bounded = bool(len(bv)) and min(bv.min(), cv.min()) >= 0 and max(bv.max(), cv.max()) <= 1
    ev = stats.evidence(per_task[2], bounded=bounded, bootstrap=gated)
    down = int(((bv == 1) & (cv == 0)).sum()) if binary else None
    up = int(((bv == 0) & (cv == 1)).sum()) if binary else None
    one_repeat = bool(len(counts)) and int(counts.max()) == 1
    return MetricDiff(
        metric=name,
        pairs=len(bv),
        tasks=ev.tasks,
        baseline=float(per_task[0].mean()) if ev.tasks else math.nan,
        candidate=float(per_task[1].mean()) if ev.tasks else math.nan,
        delta=ev.estimate,
        ci=ev.interval,
        binary=binary,
        p_value=ev.p_value,
        p_robust=ev.p_robust,
        normal=ev.normal,
        detectable=ev.detectable,
        spread=ev.spread,
        pass_to_fail=down,
        fail_to_pass=up,
        mcnemar=stats.mcnemar(down, up) if down is not None and up is not None and one_repeat else None,
        **_gym(b, c, name, binary),  # type: ignore[arg-type]
    )


def diff_agent(benchmark: str, agent: str, base: Side, cand: Side, wanted: str | None = None) -> AgentDiff:
    """The paired comparison of one agent of one benchmark: every metric both sides' pairs carry,
    the gated one (`primary`: metric=, gym's key metric, the reward) first."""
    b_rows, c_rows = base.rollouts.get(agent, {}), cand.rollouts.get(agent, {})
    common = sorted(b_rows.keys() & c_rows.keys())
    found: set[str] = set()
    for key in common:
        found.update(b_rows[key].keys() & c_rows[key].keys())
    keys = base.key_metrics.get(agent) or cand.key_metrics.get(agent) or ()
    gated, why = primary(sorted(found), keys, wanted)
    names = sorted(found, key=lambda m: (m != gated, m != REWARD, m in USAGE_METRICS, m))
    b_cols, c_cols = _Columns(b_rows, common), _Columns(c_rows, common)
    metrics = tuple(_metric(m, b_cols, c_cols, m == gated) for m in names) if common else ()
    notes, partial = [], []
    for side, name, rows, other in (("baseline", base, b_rows, c_rows), ("candidate", cand, c_rows, b_rows)):
        asked = name.expected_of(agent)
        if asked is not None and len(rows) < asked:
            partial.append(side)
            notes.append(f"{side} is partial: {len(rows)}/{asked} rollouts scored")
        twice = name.duplicates(agent)
        if twice:
            notes.append(
                f"{twice} duplicate (task, repeat) line(s) in the {side}: counted as written "
                f"({name.lines_of(agent)} lines), the last of each compared"
            )
        unpaired = len(rows.keys() - other.keys())
        if unpaired:
            notes.append(f"{unpaired} {side} rollout(s) have no partner in the other run and are left out")
    return AgentDiff(
        benchmark,
        agent,
        base.lines_of(agent),
        cand.lines_of(agent),
        base.expected_of(agent),
        cand.expected_of(agent),
        len(common),
        metrics,
        tuple(notes),
        gated,
        why,
        tuple(partial),
    )


def diff_benchmark(
    benchmark: str, base: Side, cand: Side, wanted: str | None = None
) -> tuple[list[AgentDiff], list[str]]:
    """Every agent both runs have; an agent only one has is named, not compared (unless the other
    side has no rollout at all: that is said once, as an empty side, not once per agent)."""
    agents = sorted(set(base.rollouts) & set(cand.rollouts))
    skipped = [
        f"{benchmark}: agent {a} is only in the {side}"
        for side, mine, other in (("baseline", base, cand), ("candidate", cand, base))
        if other.rollouts
        for a in sorted(set(mine.rollouts) - set(other.rollouts))
    ]
    return [diff_agent(benchmark, a, base, cand, wanted) for a in agents], skipped
