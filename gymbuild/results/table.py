"""`gymbuild results`: the score table of one run, or of several side by side. Pure: no I/O.

The numbers come from the files a benchmark leaves in its `artifacts/`: NeMo Gym's
`rollouts_aggregate_metrics.json` (a list with one entry per agent: `agent_ref.name`, `key_metrics`)
or, for a `command` benchmark, `metrics.json` ({name: number}). read.py fetches them (and the
jobs' states); this module turns what was fetched into rows, and rows into text, JSON or CSV.

Rows are long: one per (benchmark, agent, metric). Benchmarks name their metrics differently, so a
column per metric would leave most cells empty; a line per metric keeps each benchmark's own names,
and one column per run is what a comparison needs.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from gymbuild.executors.chain import Chain
from gymbuild.executors.states import NOT_QUEUED, unqueued_reason, waits_for_room
from gymbuild.state.rollouts import Progress

AGGREGATE_FILE = "rollouts_aggregate_metrics.json"  # NeMo Gym's, beside artifacts/rollouts.jsonl
COMMAND_FILE = "metrics.json"  # what a `command` benchmark writes to report its numbers
from gymbuild.request.arguments import FORMATS  # noqa: E402, F401  (format=: the one list, arguments.py)

Value = float | int | str  # a key metric: a number, as NeMo Gym writes them; anything else shown as text


@dataclass(frozen=True)
class AgentMetrics:
    """One agent's key metrics in one benchmark, in the file's order. `agent` is None for a command
    benchmark's metrics.json, which names no agent."""

    agent: str | None
    metrics: tuple[tuple[str, Value], ...]


@dataclass(frozen=True)
class BenchResult:
    """One benchmark of one run: its job's state and what it reported.

    `why` says why there are no metrics (failed, still running, finished without writing any, a
    file that does not parse); it is None when there are."""

    benchmark: str
    state: str
    job_id: str | None = None
    exit_code: str | None = None
    agents: tuple[AgentMetrics, ...] = ()
    source: str | None = None  # the file the metrics came from
    why: str | None = None
    # What its metrics cover: rollouts scored of those gym set out to run (state/rollouts.py). A run
    # that stopped short (gym's `EVAL FAILED: k/N`) still leaves its aggregate: a partial score.
    coverage: Progress | None = None
    chain: Chain | None = None  # a resume chain: its attempt, attempts and end (executors/chain.py)


@dataclass(frozen=True)
class RunResult:
    """One submission's results: its identity, its policy model (for its label), its benchmarks."""

    gym_job_id: str
    run_dir: str
    executor: str
    cluster: str
    policy_model: str | None
    benchmarks: tuple[BenchResult, ...] = field(default_factory=tuple)
    label: str | None = None  # a sweep's combination (its values), which names the run's column


# --- reading the files (their text in, metrics out) --------------------------------------------


class MetricsFileError(ValueError):
    """A metrics file that is not in the shape its writer promises; the message says what is wrong."""


def _metric_items(raw: object, where: str) -> tuple[tuple[str, Value], ...]:
    if not isinstance(raw, Mapping):
        raise MetricsFileError(f"{where} is not a JSON object of name: number")
    items: list[tuple[str, Value]] = []
    for name, value in raw.items():
        if isinstance(value, bool) or value is None:
            items.append((str(name), json.dumps(value)))
        elif isinstance(value, int | float | str):
            items.append((str(name), value))
        else:  # a nested object or list is no headline number; shown as its JSON, compact
            items.append((str(name), json.dumps(value, separators=(",", ":"))))
    return tuple(items)


def parse_aggregate(text: str) -> tuple[AgentMetrics, ...]:
    """NeMo Gym's rollouts_aggregate_metrics.json: one AgentMetrics per entry, ordered by agent name
    (NeMo Gym writes the entries in the order its servers answered, which varies run to run)."""
    try:
        entries = json.loads(text)
    except ValueError as err:
        raise MetricsFileError(f"not JSON ({err})") from None
    if not isinstance(entries, list):
        raise MetricsFileError("not a JSON list of agents")
    agents = []
    for n, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise MetricsFileError(f"entry {n} is not a JSON object")
        ref = entry.get("agent_ref")
        name = ref.get("name") if isinstance(ref, Mapping) else None
        agent = str(name) if name is not None else f"agent {n}"
        agents.append(
            AgentMetrics(agent, _metric_items(entry.get("key_metrics", {}), f"{agent}'s key_metrics"))
        )
    return tuple(sorted(agents, key=lambda a: a.agent or ""))


def parse_command_metrics(text: str) -> tuple[AgentMetrics, ...]:
    """A command benchmark's metrics.json: {name: number}."""
    try:
        raw = json.loads(text)
    except ValueError as err:
        raise MetricsFileError(f"not JSON ({err})") from None
    return (AgentMetrics(None, _metric_items(raw, "the file")),)


def no_metrics_reason(state: str, error: str | None = None) -> str:
    """Why a benchmark in `state` has no metrics file, as a user would want it said."""
    if state == NOT_QUEUED or waits_for_room(error):  # no job: the words status and logs use
        return unqueued_reason(error)
    if state in ("PENDING", "CONFIGURING", "REQUEUED", "SUSPENDED"):
        return "not started yet"
    if state in ("RUNNING", "COMPLETING", "RESIZING"):
        return "still running"
    if state == "COMPLETED":
        return f"finished without writing metrics (no artifacts/{AGGREGATE_FILE} or artifacts/{COMMAND_FILE})"
    if state == "UNKNOWN":
        return f"state unknown{f' ({error})' if error else ''}; no metrics found"
    return f"{state.lower().replace('_', ' ')}, without writing metrics"


def bench_result(
    benchmark: str,
    state: str,
    files: Mapping[str, str],
    *,
    job_id: str | None = None,
    exit_code: str | None = None,
    error: str | None = None,
    coverage: Progress | None = None,
    chain: Chain | None = None,
) -> BenchResult:
    """A benchmark's result from its state and the metrics files found for it (name -> text).

    NeMo Gym's aggregate wins over metrics.json when both exist: a `gym eval run` benchmark writes
    the first, and a command benchmark only the second."""
    base = BenchResult(benchmark, state, job_id, exit_code, chain=chain)
    for name, parse in ((AGGREGATE_FILE, parse_aggregate), (COMMAND_FILE, parse_command_metrics)):
        if name in files:
            try:
                agents = parse(files[name])
            except MetricsFileError as err:
                return replace(base, why=f"artifacts/{name}: {err}")
            return replace(base, agents=agents, source=name, coverage=coverage)  # only with metrics
    return replace(base, why=no_metrics_reason(state, error))


# --- rows ----------------------------------------------------------------------------------------


def labels(runs: Sequence[RunResult]) -> list[str]:
    """Each run's column heading: what differs between the runs. A sweep's combinations by their
    values; else the policy model when every run has one and no two share it; else the gym_job_id
    (two runs of one model differ by when they ran)."""
    named = [r.label for r in runs]
    if all(named) and len(set(named)) == len(named):
        return [n for n in named if n]
    models = [r.policy_model for r in runs]
    if len(runs) > 1 and all(models) and len(set(models)) == len(models):
        return [m for m in models if m]
    return [r.gym_job_id for r in runs]


@dataclass(frozen=True)
class Row:
    """One (benchmark, agent, metric) line: a cell per run. `metric` is None on the line of a
    benchmark (or agent) that has no metrics in any run."""

    benchmark: str
    agent: str | None
    metric: str | None
    values: tuple[Value | None, ...]  # per run; None: the run has no such metric
    states: tuple[str | None, ...]  # per run: its benchmark's state; None: the run has no such benchmark
    coverages: tuple[Progress | None, ...] = ()  # per run: what its score covers, where gym said


def rows(runs: Sequence[RunResult]) -> list[Row]:
    """Benchmarks matched by name across runs, in the first run's order (then any the others add);
    within a benchmark, agents and metrics likewise."""
    order: dict[str, None] = {}
    for run in runs:
        order.update((b.benchmark, None) for b in run.benchmarks)
    by_run = [{b.benchmark: b for b in run.benchmarks} for run in runs]
    out: list[Row] = []
    for bench in order:
        found = [r.get(bench) for r in by_run]
        states = tuple(b.state if b else None for b in found)
        cover = tuple(b.coverage if b else None for b in found)
        agents: dict[str | None, dict[str, None]] = {}
        for b in found:
            for a in b.agents if b else ():
                agents.setdefault(a.agent, {}).update((name, None) for name, _ in a.metrics)
        if not agents:
            out.append(Row(bench, None, None, tuple(None for _ in runs), states, cover))
            continue
        for agent, names in agents.items():
            tables = [_agent_metrics(b, agent) for b in found]
            if not names:
                out.append(Row(bench, agent, None, tuple(None for _ in runs), states, cover))
            for name in names:
                out.append(Row(bench, agent, name, tuple(t.get(name) for t in tables), states, cover))
    return out


def _agent_metrics(bench: BenchResult | None, agent: str | None) -> dict[str, Value]:
    for a in bench.agents if bench else ():
        if a.agent == agent:
            return dict(a.metrics)
    return {}


def clean(value: Value) -> Value:
    """A float without binary noise: 0.5760000000000001 (a sum's last-bit error) is 0.576. Rounded to
    15 significant digits (all a double holds exactly) only when that leaves a shorter number, so a
    value with real digits there (2/3 is 0.6666666666666666) stays exactly as it was."""
    if not isinstance(value, float):
        return value
    short = f"{value:.15g}"
    digits = len(short.split("e")[0].replace("-", "").replace(".", "").strip("0"))
    return float(short) if digits < 15 else value


def delta(value: Value | None, first: Value | None) -> float | None:
    """value - first, when both are numbers, as the decimal difference of the numbers shown
    (0.61 - 0.52 is 0.09, not 0.08999999999999997)."""
    from decimal import Decimal  # late: measured, about 1 ms that only this needs (House rules)

    numbers = (int, float)
    if isinstance(value, bool) or isinstance(first, bool):
        return None
    if isinstance(value, int) and isinstance(first, int):
        return value - first
    if isinstance(value, numbers) and isinstance(first, numbers):
        return float(Decimal(repr(clean(value))) - Decimal(repr(clean(first))))
    return None


# --- formatting ------------------------------------------------------------------------------------


def number(value: Value | None) -> str:
    """A metric as the table shows it: up to four decimals, no trailing zeros."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def signed(value: float) -> str:
    text = number(value)
    return text if text.startswith("-") else f"+{text}"


def _cell(row: Row, i: int) -> str:
    """One run's cell: the value, with its difference from the first run after the first column; a
    benchmark without metrics shows its state, as `(FAILED)`; a partial score says so, as
    `0.5 [3/5]`, so it is never read beside a complete one as if it were one."""
    value = row.values[i]
    if value is None:
        state = row.states[i]
        if state is None:
            return "(absent)"
        return "-" if state == "COMPLETED" and row.metric is not None else f"({state})"
    text = number(value)
    if i > 0:
        change = delta(value, row.values[0])
        if change is not None:
            text += f" ({signed(change)})"
    cover = row.coverages[i] if row.coverages else None
    if cover is not None and cover.partial:
        text += f" [{cover.done}/{cover.expected}]"
    return text


def _grid(runs: Sequence[RunResult]) -> tuple[list[str], list[list[str]]]:
    """Header and body of the human table. One run: BENCHMARK AGENT STATE METRIC VALUE; several:
    BENCHMARK AGENT METRIC and a column per run. A benchmark's (and agent's) name is shown on its
    first line only, so each reads as one block."""
    single = len(runs) == 1
    counted = any(b.coverage for run in runs for b in run.benchmarks)  # a SCORED column
    head = ["BENCHMARK", "AGENT"] + (["STATE", "METRIC", "VALUE"] if single else ["METRIC", *labels(runs)])
    if single and counted:
        head.insert(3, "SCORED")
    body: list[list[str]] = []
    last_bench: str | None = None
    last_agent: tuple[str, str | None] | None = None
    for row in rows(runs):
        first_line = (row.benchmark, row.agent) != last_agent
        lead = ["", ""]
        if first_line:
            lead = [row.benchmark if row.benchmark != last_bench else "", row.agent or "-"]
        last_bench, last_agent = row.benchmark, (row.benchmark, row.agent)
        if single:
            state = (row.states[0] or "-") if first_line else ""
            value = "-" if row.metric is None else number(row.values[0])
            shown = row.coverages[0].scored() if row.coverages[0] else "-"
            cover = [shown if first_line else ""] if counted else []
            body.append([*lead, state, *cover, row.metric or "-", value])
        else:
            body.append([*lead, row.metric or "-", *(_cell(row, i) for i in range(len(runs)))])
    return head, body


def _notes(runs: Sequence[RunResult]) -> list[str]:
    """Below the table: which scores are partial, why a benchmark has no metrics; with several runs,
    which run each label is."""
    lines: list[str] = []
    partial: list[str] = []
    several = len(runs) > 1
    names = labels(runs)
    for run, name in zip(runs, names, strict=True):
        for b in run.benchmarks:
            where = f"{b.benchmark}{f' in {name}' if several else ''}"
            if b.why:
                lines.append(f"  {where}: {b.why}")
            if b.coverage and b.coverage.partial:
                done, expected = b.coverage.done, b.coverage.expected
                partial.append(
                    f"  {where}: {done} of {expected} rollouts scored ({b.state}); the score is over those"
                )
    out = ["", "partial scores (not the whole benchmark):", *partial] if partial else []
    out += ["", "no metrics:", *lines] if lines else []
    if several:
        out += ["", "runs (differences are from the first):"]
        for run, name in zip(runs, names, strict=True):
            extra = f" ({run.gym_job_id})" if name != run.gym_job_id else ""
            out.append(f"  {name}{extra}: {run.run_dir}")
    return out


def _aligned(head: list[str], body: list[list[str]]) -> list[str]:
    table = [head, *body]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]


def _title(runs: Sequence[RunResult]) -> str:
    if len(runs) == 1:
        r = runs[0]
        model = f"  policy {r.policy_model}" if r.policy_model else ""
        return f"{r.gym_job_id}  {r.executor} on {r.cluster}{model}  {r.run_dir}"
    return f"{len(runs)} runs side by side"


def format_table(runs: Sequence[RunResult]) -> str:
    head, body = _grid(runs)
    return "\n".join([_title(runs), *_aligned(head, body), *_notes(runs)]) + "\n"


def format_markdown(runs: Sequence[RunResult]) -> str:
    """A GitHub table, for a pull request; the same rows and notes as the plain table."""
    head, body = _grid(runs)

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    numeric = (
        3 if len(runs) > 1 else 4 + any(b.coverage for run in runs for b in run.benchmarks)
    )  # the columns from here on hold numbers
    rule = ["---" if i < numeric else "---:" for i in range(len(head))]
    lines = [f"**{_title(runs)}**", "", line(head), line(rule), *(line(r) for r in body)]
    notes = _notes(runs)
    if notes:
        lines += [n if not n.startswith("  ") else f"- {n.strip()}" for n in notes]
    return "\n".join(lines) + "\n"


CSV_FIELDS = (
    *("gym_job_id", "label", "benchmark", "agent", "state", "metric", "value", "delta", "why"),
    *("scored", "expected"),  # gym's coverage: rollouts scored of those it set out to run
)


def format_csv(runs: Sequence[RunResult]) -> str:
    """One line per run, benchmark, agent and metric (a benchmark without metrics: one line, with
    why), every field filled in: the long form a spreadsheet pivots. `delta`: from the first run."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    names = labels(runs)
    firsts = {
        (b.benchmark, a.agent, metric): value
        for b in (runs[0].benchmarks if runs else ())
        for a in b.agents
        for metric, value in a.metrics
    }
    for i, (run, name) in enumerate(zip(runs, names, strict=True)):
        for b in run.benchmarks:
            lead = [run.gym_job_id, name, b.benchmark]
            cover = b.coverage
            tail = (
                ["", ""] if cover is None else [cover.done, "" if cover.expected is None else cover.expected]
            )
            if not b.agents:
                writer.writerow([*lead, "", b.state, "", "", "", b.why or "", *tail])
            for a in b.agents:
                for metric, value in a.metrics:
                    change = delta(value, firsts.get((b.benchmark, a.agent, metric))) if i else None
                    writer.writerow(
                        [
                            *lead,
                            a.agent or "",
                            b.state,
                            metric,
                            clean(value),
                            "" if change is None else change,
                            "",
                            *tail,
                        ]
                    )
    return out.getvalue()


def to_json(runs: Sequence[RunResult]) -> str:
    """For scripts: `jq '.runs[0].benchmarks[] | {benchmark, state, metrics: .agents[0].key_metrics}'`.

    Each run as read; with several runs, `differences` lists each metric of a later run beside the
    first run's value and the delta."""
    names = labels(runs)
    payload: dict[str, object] = {
        "runs": [
            {
                "gym_job_id": run.gym_job_id,
                "label": name,
                "policy_model": run.policy_model,
                "executor": run.executor,
                "cluster": run.cluster,
                "run_dir": run.run_dir,
                "benchmarks": [
                    {
                        "benchmark": b.benchmark,
                        "state": b.state,
                        "job_id": b.job_id,
                        "exit_code": b.exit_code,
                        "source": b.source,
                        "why": b.why,
                        "coverage": b.coverage.as_json() if b.coverage else None,
                        **(b.chain.as_json() if b.chain else {}),
                        "agents": [
                            {"agent": a.agent, "key_metrics": {m: clean(v) for m, v in a.metrics}}
                            for a in b.agents
                        ],
                    }
                    for b in run.benchmarks
                ],
            }
            for run, name in zip(runs, names, strict=True)
        ]
    }
    if len(runs) > 1:
        payload["differences"] = [
            {
                "benchmark": row.benchmark,
                "agent": row.agent,
                "metric": row.metric,
                "first": None if row.values[0] is None else clean(row.values[0]),
                "values": {
                    n: None if v is None else clean(v) for n, v in zip(names, row.values, strict=True)
                },
                "deltas": {
                    n: delta(v, row.values[0]) for n, v in zip(names[1:], row.values[1:], strict=True)
                },
            }
            for row in rows(runs)
            if row.metric is not None
        ]
    return json.dumps(payload, indent=2) + "\n"


def render(runs: Sequence[RunResult], *, as_json: bool, fmt: str) -> str:
    if as_json:
        return to_json(runs)
    return {"table": format_table, "csv": format_csv, "markdown": format_markdown}[fmt](runs)
