"""A sweep's results as a series (issue 29, item 2): the rows a curve is drawn from.

Pure tests of series.py on results built from NeMo Gym 0.7.0's own aggregate files (tests/data), and
one end to end under the local executor: a sweep over checkpoints named as Megatron names them, its
results as CSV with the swept value and the step as columns.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from gymbuild.errors import UserError
from gymbuild.results.table import AGGREGATE_FILE, COMMAND_FILE, RunResult, bench_result
from gymbuild.state.rollouts import Progress
from gymbuild.sweep import series

DATA = Path(__file__).resolve().parents[1] / "data" / "nemo-gym-0.7.0-aggregate"


@pytest.mark.parametrize(
    ("path", "step"),
    [
        ("/lustre/ckpts/step_1200", 1200),
        ("/lustre/ckpts/iter_0001200", 1200),
        ("/lustre/out/checkpoint-1200", 1200),
        ("/lustre/run_3/global_step1200/hf", 1200),
        ("/lustre/run_3/iter_0000800/hf", 800),  # the last component naming a step, not run_3
        ("Qwen/Qwen3-8B", None),
        ("/lustre/ckpts/final", None),
    ],
)
def test_the_step_is_read_from_the_names_training_frameworks_give(path: str, step: int | None) -> None:
    assert series.step_of(path) == step


def test_a_pattern_of_the_users_finds_the_step_and_a_bad_one_is_one_message() -> None:
    pattern = series.step_pattern(r"ep(\d+)")
    assert series.step_of("/ckpts/model-ep7-final", pattern) == 7
    assert series.step_of("/ckpts/model-ep7-final", series.step_pattern(r"(?P<x>m)\w+-ep(?P<step>\d+)")) == 7
    with pytest.raises(UserError) as bad:
        series.step_pattern("ep(")
    assert "step=ep(" in str(bad.value) and "fix:" in str(bad.value)
    with pytest.raises(UserError) as groupless:
        series.step_pattern(r"ep\d+")
    assert "no group" in str(groupless.value) and "fix:" in str(groupless.value)


def test_short_labels_drop_the_shared_start_and_end_at_a_slash() -> None:
    assert series.short(["/l/ckpts/iter_20/hf", "/l/ckpts/iter_100/hf"]) == ["iter_20", "iter_100"]
    assert series.short(["0.5", "1.0"]) == ["0.5", "1.0"]
    assert series.short(["/only/one"]) == ["/only/one"]
    assert series.short(["/a/x", "/a/x/y"]) == ["x", "x/y"]


def run(
    gym_job_id: str, files: dict[str, str], state: str = "COMPLETED", coverage: Progress | None = None
) -> RunResult:
    return RunResult(
        gym_job_id=gym_job_id,
        run_dir=f"/runs/{gym_job_id}",
        executor="slurm",
        cluster="c",
        policy_model="/l/ckpts/x",
        benchmarks=(bench_result("weather", state, files, job_id="1", coverage=coverage),),
    )


def aggregate(name: str) -> dict[str, str]:
    return {AGGREGATE_FILE: (DATA / name / "weather" / "artifacts" / AGGREGATE_FILE).read_text()}


def three_checkpoints() -> list[series.Point]:
    values = [
        ("services.policy.model=/l/ckpts/iter_0000200", "+driver.t=0.5"),
        ("services.policy.model=/l/ckpts/iter_0001000", "+driver.t=0.5"),
        ("services.policy.model=/l/ckpts/iter_0000050", "+driver.t=0.5"),
    ]
    runs = [
        run("gym-a", aggregate("run-a"), coverage=Progress(done=5, expected=5)),
        # its job stopped short (gym's EVAL FAILED: 3/5) and still wrote its aggregate: a partial score
        run("gym-b", aggregate("run-b"), state="FAILED", coverage=Progress(done=3, expected=5, failed=2)),
        run("gym-c", {}, state="FAILED"),
    ]
    return series.points(values, runs)


def test_the_rows_are_in_step_order_with_the_swept_values_as_columns() -> None:
    rows = three_checkpoints()
    assert rows[0].step == 50 and rows[0].why  # the failed one says why, first by step
    steps = [r.step for r in rows]
    assert steps == sorted(steps) and set(steps) == {50, 200, 1000}
    labels = list(dict.fromkeys(r.label for r in rows))
    assert labels == ["iter_0000050 0.5", "iter_0000200 0.5", "iter_0001000 0.5"]
    table = list(csv.DictReader(io.StringIO(series.to_csv(rows))))
    assert list(table[0]) == [
        "label", "step", "model", "t", "benchmark", "agent", "metric", "value", "scored", "expected",
        "state", "gym_job_id", "why"
    ]  # fmt: skip
    assert {r["model"] for r in table} == {
        "/l/ckpts/iter_0000050",
        "/l/ckpts/iter_0000200",
        "/l/ckpts/iter_0001000",
    }
    # One line per (combination, benchmark, agent, metric): the real file's every key metric.
    expected = json.loads(aggregate("run-a")[AGGREGATE_FILE])
    per_run = sum(len(e["key_metrics"]) for e in expected)
    assert sum(r["gym_job_id"] == "gym-a" for r in table) == per_run
    assert all(r["step"] == "200" for r in table if r["gym_job_id"] == "gym-a")
    failed = [r for r in table if r["gym_job_id"] == "gym-c"]
    assert len(failed) == 1 and failed[0]["state"] == "FAILED" and failed[0]["value"] == ""
    # What each point covers: the whole benchmark, part of it, nothing counted
    assert {(r["scored"], r["expected"]) for r in table if r["gym_job_id"] == "gym-a"} == {("5", "5")}
    assert {(r["scored"], r["expected"]) for r in table if r["gym_job_id"] == "gym-b"} == {("3", "5")}
    assert (failed[0]["scored"], failed[0]["expected"]) == ("", "")


def test_json_markdown_and_table_carry_the_same_rows() -> None:
    rows = three_checkpoints()
    doc = json.loads(series.render("sweep-x", rows, as_json=True, fmt="table"))
    assert doc["sweep_id"] == "sweep-x" and len(doc["rows"]) == len(rows)
    assert doc["rows"][1]["swept"] == {"model": "/l/ckpts/iter_0000200", "t": "0.5"}
    md = series.render("sweep-x", rows, as_json=False, fmt="markdown").splitlines()
    assert md[2].startswith("| STEP | LABEL |") and len(md) == 4 + len(rows)
    text = series.render("sweep-x", rows, as_json=False, fmt="table")
    assert max(len(line) for line in text.splitlines() if "ckpts" not in line) < 120
    # what a point covers, the same in each: gym's coverage in JSON, SCORED in the tables
    covers = {r["gym_job_id"]: r["coverage"] for r in doc["rows"]}
    assert covers["gym-b"] == {"scored": 3, "expected": 5, "failed": 2, "partial": True}
    assert covers["gym-a"]["partial"] is False and covers["gym-c"] is None
    assert "SCORED" in md[2] and "3/5 partial" in text and "5/5" in text
    assert "(FAILED)" in text


def test_a_command_benchmark_without_an_agent_and_no_step_keeps_the_sweep_order() -> None:
    values = [("t=1.0",), ("t=0.5",)]
    runs = [run("gym-a", {COMMAND_FILE: '{"score": 3}'}), run("gym-b", {COMMAND_FILE: '{"score": 2}'})]
    rows = series.points(values, runs)
    assert [(r.label, r.step, r.agent, r.value) for r in rows] == [
        ("1.0", None, None, 3),
        ("0.5", None, None, 2),
    ]


# --- end to end, the local executor ----------------------------------------------------------------

SCORE = '"$NEMO_GYM_BENCH_DIR/artifacts/metrics.json"'


def checkpoint(directory: Path, name: str) -> None:
    """A "checkpoint" the local job evaluates: a script scoring itself its step divided by 1000."""
    script = directory / name
    score = f'printf \'{{"score": %s}}\' "$((10#$n))e-3" > {SCORE}'
    script.write_text(f'#!/bin/bash\nn=$(basename "$0" | tr -dc 0-9); {score}\n')
    script.chmod(0o755)


def test_a_local_sweep_over_checkpoints_reads_as_a_series_by_step(tmp_path: Path) -> None:
    import os
    import shutil
    import subprocess
    import time

    from e2e_helpers import local_command_config, write_config

    ckpts = tmp_path / "ckpts"
    ckpts.mkdir()
    for name in ("step_1200", "step_300", "step_20"):
        checkpoint(ckpts, name)
    (ckpts / "config.json").write_text("{}")  # the ready marker a sweep waits for
    write_config(tmp_path, local_command_config(), "eval.yaml")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "state")}
    gym = shutil.which("gymbuild")
    assert gym
    line = ("config=eval.yaml", "multirun=1", f"driver.benchmarks.demo.command=paths({ckpts}/step_*)")

    def run(*args: str) -> str:
        done = subprocess.run(
            [gym, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    run("submit", *line)
    deadline = time.monotonic() + 90
    while True:
        rows = list(csv.DictReader(io.StringIO(run("results", *line, "series=1", "format=csv"))))
        if all(r["state"] == "COMPLETED" and r["value"] for r in rows) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert [(r["label"], r["step"], r["command"], r["metric"], r["value"]) for r in rows] == [
        ("step_20", "20", f"{ckpts}/step_20", "score", "0.02"),
        ("step_300", "300", f"{ckpts}/step_300", "score", "0.3"),
        ("step_1200", "1200", f"{ckpts}/step_1200", "score", "1.2"),
    ]
    text = run("results", *line, "series=1")
    assert [ln.split()[:2] for ln in text.splitlines()[2:]] == [
        ["20", "step_20"],
        ["300", "step_300"],
        ["1200", "step_1200"],
    ]
    # A pattern of the user's: the digits after "_" read as the step.
    doc = json.loads(run("results", *line, "series=1", "json=1", r"step=_(\d+)$"))
    assert [r["step"] for r in doc["rows"]] == [20, 300, 1200]
    # series=1 on one submission, and a bad pattern: one message each, exit 1.
    for bad, said in (
        (("results", "config=eval.yaml", "series=1"), "add multirun=1"),
        (("results", *line, "series=1", "step=(("), "not a regular expression"),
    ):
        done = subprocess.run([gym, *bad], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 1 and said in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_gated_series_escapes_a_control_character_in_the_choice_line() -> None:
    from gymbuild.results import choose
    from gymbuild.results.gate import Outcome

    rows = three_checkpoints()
    best = choose.Judged(
        "iter_0000200", 200, "gym-a", Outcome.PASS, {"weather": Outcome.PASS}, 0.1, chosen=True
    )
    choice = choose.Choice("base\x1b[31m", (best,), best, baseline_id="gym-c")
    for fmt in ("table", "markdown"):
        text = series.render("sweep-x", rows, as_json=False, fmt=fmt, choice=choice)
        assert "\x1b" not in text and "non-inferior to base\\e[31m; chosen: iter_0000200" in text
    table = series.to_table("sweep-x", rows, choice).splitlines()[2:]
    marks = {
        (ln.split()[1], ln.split()[-1])
        for ln in table
        if ln.split()[1:2] and ln.split()[1].startswith("iter_")
    }
    assert marks == {("iter_0000050", "BASELINE"), ("iter_0000200", "PASS*"), ("iter_0001000", "-")}
