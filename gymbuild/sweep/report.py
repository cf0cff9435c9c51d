"""`gymbuild report`: a sweep's series as one self-contained HTML page, the table and a plot per
benchmark and metric of the score over training steps.

Self-contained because a report is mailed, attached to a pull request and opened on a laptop with no
route to the cluster: the plots are matplotlib's SVG inlined in the page, with no script, font or
style sheet fetched from anywhere. One line per agent (and per value of any other swept key, such as
a temperature), one marker per checkpoint that has the metric; each plot says how many of the
sweep's checkpoints that is, a point whose job scored only part of the benchmark's rollouts is drawn
hollow and named under its plot with what it covers, and the table below lists every row with its
state and coverage.

Building the page is computation only (the figures are drawn into memory); the verb writes it.
"""

from __future__ import annotations

import html
import io
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from gymbuild.errors import UserError, printable
from gymbuild.request.verb_args import ReportArgs
from gymbuild.results.table import number
from gymbuild.state.workspace import atomic_write
from gymbuild.sweep import day_two as sweep_day_two
from gymbuild.sweep.series import Point, step_of

if TYPE_CHECKING:
    from gymbuild.results.choose import Choice
    from gymbuild.submit.session import Session

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; }
.plot svg { max-width: 100%; height: auto; }
.coverage { color: #555; font-size: 0.9em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.chosen td { font-weight: bold; background: #eef7ee; }
.choice { font-weight: bold; }
"""


def _line(row: Point) -> str:
    """The line a point belongs to: its agent, and the swept values that are not the checkpoint."""
    others = [f"{k}={v}" for k, v in row.swept.items() if step_of(v) is None]
    return " ".join([row.agent or row.benchmark, *others])


def _figure(rows: Sequence[Point], by_step: bool, gid: str, order: Sequence[str]) -> str:
    """One plot as inline SVG: a line per `_line`, a marker per row; x is the step, or (when the
    checkpoints name no step) the combination's label in the sweep's order."""
    import matplotlib

    matplotlib.rcParams["svg.hashsalt"] = "gymbuild"  # the same page for the same rows
    matplotlib.rcParams["svg.fonttype"] = "none"  # text as text: smaller, and found by a search
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 3.6), layout="constrained")
    ax = figure.subplots()
    lines: dict[str, list[Point]] = {}
    for row in rows:
        lines.setdefault(_line(row), []).append(row)
    for n, (name, points) in enumerate(lines.items()):
        xs = [(p.step or 0) if by_step else order.index(p.label) for p in points]
        ys = [float(p.value) if isinstance(p.value, int | float) else float("nan") for p in points]
        ax.plot(xs, ys, marker="o", label=name, gid=f"{gid}-line{n}")
        partial = [(x, y) for x, y, p in zip(xs, ys, points, strict=True) if p.partial]
        if partial:  # over the line's own marker: a hollow ring where the score covers only part
            px, py = zip(*partial, strict=True)
            ax.plot(px, py, "o", color="white", markersize=4, gid=f"{gid}-partial{n}")
    if not by_step:
        ax.set_xticks(range(len(order)), order, rotation=30, ha="right")
    ax.set_xlabel("training step" if by_step else "checkpoint")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    out = io.StringIO()
    figure.savefig(out, format="svg", metadata={"Date": None})
    svg = out.getvalue()
    return svg[svg.index("<svg") :]  # without the XML declaration and doctype, to sit in HTML


def page(ident: str, title: str, rows: Sequence[Point], choice: Choice | None = None) -> str:
    """The whole HTML page of a sweep's series rows (with a gate: each checkpoint's outcome in the
    table, the chosen one's rows marked, and the choice line under the heading)."""
    numeric = [r for r in rows if r.metric is not None and isinstance(r.value, int | float)]
    checkpoints = list(dict.fromkeys(r.label for r in rows))
    by_step = all(r.step is not None for r in rows)
    plots: dict[tuple[str, str], list[Point]] = {}
    for r in numeric:
        plots.setdefault((r.benchmark, r.metric or ""), []).append(r)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>sweep {html.escape(ident)}: {len(checkpoints)} checkpoint(s), {len(plots)} plot(s)</p>",
    ]
    if choice is not None:
        parts += [
            f'<p class="choice">{html.escape(choice.line())}</p>',
            f'<p class="coverage">score: {html.escape(choice.rule)}; PASS* is the chosen checkpoint</p>',
        ]
    for n, ((bench, metric), points) in enumerate(plots.items()):
        have = len({p.label for p in points})
        partial = ", ".join(dict.fromkeys(f"{p.label} ({p.scored()})" for p in points if p.partial))
        note = f"scored over part of the rollouts (hollow): {partial}"
        parts += [
            f'<section class="plot" data-benchmark="{html.escape(bench)}" data-metric="{html.escape(metric)}"'
            f' data-points="{len(points)}" data-partial="{sum(p.partial for p in points)}">',
            f"<h2>{html.escape(bench)}: {html.escape(metric)}</h2>",
            f'<p class="coverage">{have} of {len(checkpoints)} checkpoint(s) have this metric</p>',
            _figure(points, by_step, f"plot{n}", checkpoints),
            *([f'<p class="coverage">{html.escape(note)}</p>'] if partial else []),
            "</section>",
        ]
    parts += ["<h2>All rows</h2>", _table(rows, choice), "</body></html>"]
    return "\n".join(parts) + "\n"


def _table(rows: Sequence[Point], choice: Choice | None = None) -> str:
    head = ["step", "checkpoint", "benchmark", "agent", "metric", "value", "scored", "state", "gym_job_id"]
    head += ["gate"] if choice else []
    body = []
    for r in rows:
        cells = [
            "-" if r.step is None else str(r.step),
            r.label,
            r.benchmark,
            r.agent or "-",
            r.metric or "-",
            number(r.value) if r.metric is not None else (r.why or "-"),
            r.scored(),
            r.state,
            r.gym_job_id,
            *([choice.mark(r.gym_job_id)] if choice else []),
        ]
        tds = "".join(
            f'<td class="num">{html.escape(c)}</td>' if i in (0, 5) else f"<td>{html.escape(c)}</td>"
            for i, c in enumerate(cells)
        )
        judged = choice.of(r.gym_job_id) if choice else None
        body.append(f'<tr class="chosen">{tds}</tr>' if judged and judged.chosen else f"<tr>{tds}</tr>")
    ths = "".join(f"<th>{h}</th>" for h in head)
    return f"<table><thead><tr>{ths}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _matplotlib() -> ModuleType:
    try:
        import matplotlib
    except ImportError:
        raise UserError(
            "error: report draws its plots with matplotlib, which is not installed here\n"
            "    fix: pip install 'gymbuild[report]' (submitting never needs it)"
        ) from None
    return matplotlib


def report(s: Session, args: ReportArgs) -> None:
    """The verb: the sweep's series (as `results series=1` reads it) written as one HTML file."""
    if not args.is_sweep:
        raise UserError(
            "error: report draws a sweep's series (a point per checkpoint)\n"
            "    fix: add multirun=1 (the config's latest sweep) or sweep=ID"
        )
    _matplotlib()
    record, rows, choice = sweep_day_two.gated_series(s, args)
    out = args.out or Path(f"{args.config.stem}-report.html")
    title = f"{args.config.name}: {record['sweep_id']}"
    text = page(record["sweep_id"], title, rows, choice)
    try:
        atomic_write(out, text)
    except OSError as err:
        raise UserError(
            f"error: out={out}: the report cannot be written there ({err.strerror})\n"
            "    fix: name a file in a directory you can write, e.g. out=report.html"
        ) from None
    plots, checkpoints = len(re.findall(r'<section class="plot"', text)), len({r.label for r in rows})
    said = f"wrote {out}: {plots} plot(s) of {checkpoints} checkpoint(s)"
    if args.json:  # one JSON document on stdout, as every verb's json=1
        doc = {"sweep_id": record["sweep_id"], "out": str(out), "plots": plots, "checkpoints": checkpoints}
        doc |= {"choice": choice.as_json()} if choice else {}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        print(said)
        if choice is not None:
            print(printable(choice.line(), lines=False))
