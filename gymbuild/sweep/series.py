"""A sweep's results as a series: one row per (combination, benchmark, agent, metric). Pure: no I/O.

`results multirun=1` puts the combinations side by side, which is what two models need and not what
forty checkpoints of one training run need: there the swept value is the x axis, so it must be a
column of its own, and the training step (parsed from the checkpoint's path) the number to plot
against. The rows here are what `results series=1` prints and what a report or an exporter reads.

The step comes from the first swept value that names one: `step_1200`, `global_step1200`,
`iter_0001200`, `checkpoint-1200`, `ckpt_1200` (the last such component of a path), or the user's
regular expression (`step=REGEX`, its first group, or the group named `step`).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from gymbuild.errors import printable
from gymbuild.request.arguments import argument
from gymbuild.results.choose import Choice
from gymbuild.results.table import RunResult, Value, clean, number
from gymbuild.state.rollouts import Progress
from gymbuild.sweep.expand import unescaped

# The spellings training frameworks give a checkpoint: Megatron's iter_0001200, NeMo's and DeepSpeed's
# step_1200 / global_step1200, Hugging Face Trainer's checkpoint-1200.
DEFAULT_STEP = re.compile(r"(?:global_step|step|iter|iteration|checkpoint|ckpt)[_\-=]?(\d+)", re.IGNORECASE)


def step_pattern(text: str | None) -> re.Pattern[str]:
    """The step= regular expression, compiled (DEFAULT_STEP when none is given); a mistake in it is
    one message with the fix (its argument reads it, arguments.py)."""
    if not text:
        return DEFAULT_STEP
    argument("step").parse(text)  # a mistake: one message with the fix
    return re.compile(text)


def step_of(value: str, pattern: re.Pattern[str] = DEFAULT_STEP) -> int | None:
    """The training step a swept value names, or None. The last path component that names one wins
    (`/ckpts/run_3/iter_0001200/hf` is 1200, not 3)."""
    for part in reversed([p for p in value.split("/") if p]):
        found = list(pattern.finditer(part)) if pattern is DEFAULT_STEP else [pattern.search(part)]
        for match in reversed([m for m in found if m is not None]):
            text = match.group("step") if "step" in pattern.groupindex else match.group(1)
            if text is not None and text.isdigit():
                return int(text)
    return None


def short(values: Sequence[str]) -> list[str]:
    """Each value without what every one shares at its start and end, cut at a `/` so a name stays
    whole (`/lustre/ckpts/iter_20/hf`, `/lustre/ckpts/iter_100/hf` are `iter_20`, `iter_100`). One
    value, or values that would become empty or clash, stay as they are."""
    if len(values) < 2:
        return list(values)
    split = [v.split("/") for v in values]
    head = 0
    while all(len(p) > head + 1 for p in split) and len({p[head] for p in split}) == 1:
        head += 1
    tail = 0
    while all(len(p) > head + tail + 1 for p in split) and len({p[-1 - tail] for p in split}) == 1:
        tail += 1
    out = ["/".join(p[head : len(p) - tail]) for p in split]
    return out if all(out) and len(set(out)) == len(set(values)) else list(values)


@dataclass(frozen=True)
class Point:
    """One row: a combination's metric. `swept` holds the swept keys (short names) and their values
    as given; `label` is the combination's short name; `value` is None for a benchmark with no metric
    (then `why` says why). `coverage` is what the value covers, rollouts scored of those gym set out
    to run (None for a command benchmark, which writes no rollouts): a checkpoint whose job stopped
    short has a score over part of the benchmark, and a curve must not pass it off as a whole one."""

    label: str
    step: int | None
    swept: dict[str, str]
    gym_job_id: str
    benchmark: str
    agent: str | None
    metric: str | None
    value: Value | None
    state: str
    model: str | None
    why: str | None = None
    coverage: Progress | None = None

    @property
    def partial(self) -> bool:
        return self.coverage is not None and self.coverage.partial

    def scored(self) -> str:
        """`5/5`, `3/5 partial`, or `-` where nothing was counted."""
        return self.coverage.scored() if self.coverage else "-"


def swept_columns(cells_values: Sequence[Sequence[str]]) -> list[tuple[str, str]]:
    """(key as typed, column name) of every swept key: the key's last dotted part where that is
    unambiguous (sweep.labels' rule)."""
    keys = list(dict.fromkeys(v.split("=", 1)[0].lstrip("+~") for vals in cells_values for v in vals))
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return [(k, s if last.count(s) == 1 else k) for k, s in zip(keys, last, strict=True)]


def points(
    cells_values: Sequence[Sequence[str]], runs: Sequence[RunResult], pattern: re.Pattern[str] = DEFAULT_STEP
) -> list[Point]:
    """The rows of the runs (one per submitted combination, `cells_values[i]` its swept `key=value`s),
    ordered by step where every combination names one, else in the sweep's order."""
    columns = swept_columns(cells_values)
    given = [
        {
            name: unescaped(v.split("=", 1)[1])
            for v in vals
            for key, name in columns
            if v.split("=", 1)[0].lstrip("+~") == key
        }
        for vals in cells_values
    ]
    shorts = {name: short([g.get(name, "") for g in given]) for _, name in columns}
    labels = [
        " ".join(shorts[name][i] for _, name in columns if name in g) or run.gym_job_id
        for i, (g, run) in enumerate(zip(given, runs, strict=True))
    ]
    steps = [
        next((s for s in (step_of(v, pattern) for v in g.values()) if s is not None), None) for g in given
    ]
    order = list(range(len(runs)))
    if all(s is not None for s in steps):
        order.sort(key=lambda i: steps[i] or 0)
    out: list[Point] = []
    for i in order:
        run = runs[i]
        lead = {"label": labels[i], "step": steps[i], "swept": given[i], "gym_job_id": run.gym_job_id}
        for b in run.benchmarks:
            common = {**lead, "benchmark": b.benchmark, "state": b.state, "model": run.policy_model}
            if not b.agents:
                out.append(Point(**common, agent=None, metric=None, value=None, why=b.why))  # type: ignore[arg-type]
            for a in b.agents:
                for metric, value in a.metrics:
                    out.append(
                        Point(**common, agent=a.agent, metric=metric, value=clean(value), coverage=b.coverage)  # type: ignore[arg-type]
                    )
    return out


# --- formatting ----------------------------------------------------------------------------------


def _fields(rows: Sequence[Point], choice: Choice | None = None) -> list[str]:
    swept = list(dict.fromkeys(k for r in rows for k in r.swept))
    gated = ("gate", "gate_benchmark", "non_inferior", "chosen") if choice else ()
    return [
        *("label", "step", *swept, "benchmark", "agent", "metric", "value"),
        *("scored", "expected", "state", *gated, "gym_job_id", "why"),
    ]


def _gate(row: Point, choice: Choice | None) -> dict[str, object]:
    """A row's gate, where one was asked for: its checkpoint's outcome (BASELINE for the baseline),
    its benchmark's outcome, whether the checkpoint is non-inferior and whether it is the chosen one."""
    if choice is None:
        return {}
    judged = choice.of(row.gym_job_id)
    bench = judged.benchmarks.get(row.benchmark) if judged else None
    return {
        "gate": choice.mark(row.gym_job_id).rstrip("*"),
        "gate_benchmark": bench.value if bench else None,
        "non_inferior": judged.non_inferior if judged else None,
        "chosen": judged.chosen if judged else None,
    }


def _as_dict(row: Point, choice: Choice | None = None) -> dict[str, object]:
    """The row as JSON carries it: its coverage as `results json=1` shows one (scored, expected,
    failed, partial), and its gate where one was asked for."""
    return {**asdict(row), "coverage": row.coverage.as_json() if row.coverage else None, **_gate(row, choice)}


def _flat(row: Point, choice: Choice | None = None) -> dict[str, object]:
    flat = {k: v for k, v in asdict(row).items() if k not in ("swept", "coverage")}
    cover = row.coverage
    counts = {"scored": cover.done, "expected": cover.expected} if cover else {}
    return {**flat, **counts, **_gate(row, choice), **row.swept}


def to_csv(rows: Sequence[Point], choice: Choice | None = None) -> str:
    """The long form a spreadsheet or pandas reads: a column per swept key, the step, the value (and
    with a gate its columns: the choice line itself goes to stderr, render_gated)."""
    out = io.StringIO()
    fields = _fields(rows, choice)
    writer = csv.DictWriter(out, fields, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in _flat(row, choice).items()})
    return out.getvalue()


def to_json(ident: str, rows: Sequence[Point], choice: Choice | None = None) -> str:
    doc: dict[str, object] = {"sweep_id": ident, "rows": [_as_dict(r, choice) for r in rows]}
    if choice is not None:
        doc["choice"] = choice.as_json()
    return json.dumps(doc, indent=2) + "\n"


def _grid(rows: Sequence[Point], choice: Choice | None = None) -> tuple[list[str], list[list[str]]]:
    head = ["STEP", "LABEL", "BENCHMARK", "AGENT", "METRIC", "VALUE", "SCORED", *(["GATE"] if choice else [])]
    body = []
    for r in rows:
        value = number(r.value) if r.metric is not None else f"({r.state})"
        step = "-" if r.step is None else str(r.step)
        gate = [choice.mark(r.gym_job_id)] if choice else []
        body.append([step, r.label, r.benchmark, r.agent or "-", r.metric or "-", value, r.scored(), *gate])
    return head, body


def _choice_lines(choice: Choice | None) -> list[str]:
    if choice is None:
        return []
    # The line names labels (swept values): a control character in one is escaped, not sent to a terminal.
    line = printable(choice.line(), lines=False)
    return ["", line, f"(score: {choice.rule}; * the chosen one; results is not a gate: exit 0)"]


def to_table(ident: str, rows: Sequence[Point], choice: Choice | None = None) -> str:
    head, body = _grid(rows, choice)
    table = [head, *body]
    widths = [max(len(line[i]) for line in table) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in table]
    why = [f"  {r.label} {r.benchmark}: {r.why}" for r in rows if r.why]
    return (
        "\n".join(
            [
                f"sweep {ident} as a series",
                *lines,
                *(["", "no metrics:", *why] if why else []),
                *_choice_lines(choice),
            ]
        )
        + "\n"
    )


def to_markdown(ident: str, rows: Sequence[Point], choice: Choice | None = None) -> str:
    head, body = _grid(rows, choice)

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    rule = ["---:" if i in (0, 5) else "---" for i in range(len(head))]
    table = [f"**sweep {ident} as a series**", "", line(head), line(rule), *map(line, body)]
    return "\n".join([*table, *_choice_lines(choice)]) + "\n"


def render(
    ident: str, rows: Sequence[Point], *, as_json: bool, fmt: str, choice: Choice | None = None
) -> str:
    if as_json:
        return to_json(ident, rows, choice)
    if fmt == "csv":
        return to_csv(rows, choice)
    if fmt == "markdown":
        return to_markdown(ident, rows, choice)
    return to_table(ident, rows, choice)
