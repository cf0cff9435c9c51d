"""`gymbuild report` (issue 29, item 3): one self-contained HTML page of a sweep's series, opened in
a real headless Chromium (Debian's `chromium`) with every network request sent nowhere: the page
loads with no console message and each plot has one marker per checkpoint that has its metric.
Skipped, with the reason, where matplotlib (the `report` extra) or Chromium is not installed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from e2e_helpers import gymbuild_argv, kill_local_jobs, local_command_config, user_env, write_config

from tests.sweep.test_series import three_checkpoints

pytest.importorskip("matplotlib", reason="the report extra is not installed: pip install matplotlib")

from gymbuild.sweep import report

SCORE = '"$NEMO_GYM_BENCH_DIR/artifacts/metrics.json"'


class Markers(HTMLParser):
    """Per plot line (`<g id="plotN-lineM">`) and hollow overlay (`plotN-partialM`), how many
    markers (`<use>`) it draws."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: dict[str, int] = {}
        self.stack: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        gid = dict(attrs).get("id") or ""
        self.stack.append(gid if re.fullmatch(r"plot\d+-(line|partial)\d+", gid) else None)
        current = next((g for g in reversed(self.stack) if g), None)
        if current and tag == "g" and self.stack[-1] == current:
            self.lines.setdefault(current, 0)
        if current and tag == "use":
            self.lines[current] = self.lines.get(current, 0) + 1

    def handle_endtag(self, tag: str) -> None:
        if self.stack:
            self.stack.pop()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self.handle_endtag(tag)


def markers(page: str) -> dict[str, int]:
    parser = Markers()
    parser.feed(page)
    return parser.lines


def test_the_page_has_a_plot_per_benchmark_and_metric_and_says_its_coverage() -> None:
    rows = three_checkpoints()  # two of three checkpoints have metrics; the third failed
    page = report.page("sweep-x", "eval.yaml: sweep-x", rows)
    plots = {(r.benchmark, r.metric) for r in rows if r.metric is not None}
    assert page.count('<section class="plot"') == len(plots)
    assert page.count("2 of 3 checkpoint(s) have this metric") == len(plots)
    drawn = markers(page)
    lines = {g: n for g, n in drawn.items() if "-line" in g}
    assert lines and all(n == 2 for n in lines.values()), lines  # one marker per checkpoint with the metric
    assert "(FAILED)" not in page and "FAILED" in page  # the failed one is a row of the table
    # iter_0001000's job scored 3 of 5 rollouts: hollow in every plot and named under it
    rings = {g: n for g, n in drawn.items() if "-partial" in g}
    assert rings.keys() == {g.replace("-line", "-partial") for g in lines} and set(rings.values()) == {1}
    assert page.count("scored over part of the rollouts (hollow): iter_0001000 0.5 (3/5 partial)</p>") == len(
        plots
    )
    assert "<td>3/5 partial</td>" in page and "<td>5/5</td>" in page
    # Nothing to fetch: no script, style sheet, image or font from anywhere.
    assert not re.search(r"""(src|href)=["'](https?:)?//""", page) and "<script" not in page
    assert report.page("sweep-x", "eval.yaml: sweep-x", rows) == page  # the same rows, the same page


def checkpoint(directory: Path, step: int) -> None:
    script = directory / f"step_{step}"
    metrics = f'{{"accuracy": {step / 1000}, "answered": {step // 10}}}'
    script.write_text(f"#!/bin/bash\nprintf '%s' '{metrics}' > {SCORE}\n")
    script.chmod(0o755)


def test_a_report_opens_in_chromium_without_error_with_a_point_per_checkpoint(tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed: apt-get install chromium")
    ckpts = tmp_path / "ckpts"
    ckpts.mkdir()
    for step in (20, 300, 1200, 40):
        checkpoint(ckpts, step)
    (ckpts / "config.json").write_text("{}")  # the ready marker a sweep waits for
    write_config(tmp_path, local_command_config(), "eval.yaml")
    env = user_env(tmp_path, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    line = ("config=eval.yaml", "multirun=1", f"driver.benchmarks.demo.command=paths({ckpts}/step_*)")

    def run(*args: str) -> str:
        done = subprocess.run(
            gymbuild_argv(*args), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    try:
        run("submit", *line)
        deadline = time.monotonic() + 120
        while "(COMPLETED)" in (table := run("results", *line, "series=1")) or "(RUNNING)" in table:
            if time.monotonic() > deadline:
                pytest.fail(f"the jobs did not end:\n{table}")
            time.sleep(0.5)
        said = run("report", *line, "out=curve.html")
        assert said.strip() == "wrote curve.html: 2 plot(s) of 4 checkpoint(s)"
        page = tmp_path / "curve.html"
        flags = ["--headless=new", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'chr'}"]
        flags += ["--enable-logging=stderr", "--v=0", "--proxy-server=127.0.0.1:9"]  # nothing reachable
        opened = subprocess.run(
            [chromium, *flags, "--dump-dom", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert opened.returncode == 0, opened.stderr[-3000:]
        console = [ln for ln in opened.stderr.splitlines() if ":CONSOLE" in ln]
        assert console == [], console
        dom = opened.stdout
        assert dom.count('<section class="plot"') == 2 and 'data-metric="accuracy"' in dom
        assert markers(dom) == {"plot0-line0": 4, "plot1-line0": 4}  # one point per checkpoint
        assert "4 of 4 checkpoint(s) have this metric" in dom
        steps = re.findall(r'<td class="num">(\d+)</td><td>step_\d+</td>', dom)
        assert steps == ["20", "20", "40", "40", "300", "300", "1200", "1200"]
    finally:
        kill_local_jobs(tmp_path / "runs")


def test_a_gated_page_marks_the_chosen_checkpoint_and_says_the_choice_escaped() -> None:
    from gymbuild.results import choose
    from gymbuild.results.gate import Outcome

    rows = three_checkpoints()
    best = choose.Judged(
        "iter_0000200", 200, "gym-a", Outcome.PASS, {"weather": Outcome.PASS}, 0.1, chosen=True
    )
    dropped = choose.Judged("iter_0001000", 1000, "gym-b", Outcome.DROP, {"weather": Outcome.DROP}, -0.2)
    choice = choose.Choice("base <x>", (best, dropped), best, rule=choose.SCORE_RULE, baseline_id="gym-c")
    page = report.page("sweep-x", "eval.yaml: sweep-x", rows, choice)
    line = "1 of 2 checkpoint(s) non-inferior to base &lt;x&gt;; chosen: iter_0000200 (score +0.1), the only"
    assert f'<p class="choice">{line} non-inferior one</p>' in page
    marked = [row for row in page.split("<tr")[1:] if row.startswith(' class="chosen"')]
    assert marked and all("<td>gym-a</td><td>PASS*</td>" in row for row in marked)
    assert "<td>gym-b</td><td>DROP</td>" in page and "<td>gym-c</td><td>BASELINE</td>" in page
    assert 'class="choice"' not in report.page("sweep-x", "eval.yaml: sweep-x", rows)  # no gate, no line
