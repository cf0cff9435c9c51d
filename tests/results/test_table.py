"""The score table, from files NeMo Gym 0.7.0 wrote (tests/data/nemo-gym-0.7.0-aggregate, made by its
own aggregation: see tests/results/test_oracle.py): one run with a failed, an unfinished, a silent and
a two-agent benchmark; two runs side by side; and each output form a user asks for."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from gymbuild.results import table as tables
from gymbuild.results.table import AGGREGATE_FILE, COMMAND_FILE, RunResult, bench_result
from gymbuild.state.rollouts import Progress

DATA = Path(__file__).resolve().parents[1] / "data" / "nemo-gym-0.7.0-aggregate"


def aggregate(run: str, bench: str) -> dict[str, str]:
    return {AGGREGATE_FILE: (DATA / run / bench / "artifacts" / AGGREGATE_FILE).read_text()}


def run_a() -> RunResult:
    return RunResult(
        gym_job_id="gym-job-20260101T000000Z-aaaaaa",
        run_dir="/runs/gym-job-20260101T000000Z-aaaaaa",
        executor="slurm",
        cluster="cluster",
        policy_model="Qwen/Qwen3-8B",
        benchmarks=(
            bench_result("mcqa", "COMPLETED", aggregate("run-a", "mcqa"), job_id="11", exit_code="0:0"),
            bench_result("weather", "COMPLETED", aggregate("run-a", "weather"), job_id="12"),
            bench_result("broken", "FAILED", {}, job_id="13", exit_code="3:0"),
            bench_result("slow", "RUNNING", {}, job_id="14"),
            bench_result("silent", "COMPLETED", {}, job_id="15"),
            bench_result(
                "demo", "COMPLETED", {COMMAND_FILE: '{"accuracy": 1.0, "answered": 3}'}, job_id="16"
            ),
            bench_result("never", "NOT QUEUED", {}, error="sbatch: error: invalid account"),
        ),
    )


def run_b(model: str | None = "Qwen/Qwen3-32B") -> RunResult:
    return RunResult(
        gym_job_id="gym-job-20260102T000000Z-bbbbbb",
        run_dir="/runs/gym-job-20260102T000000Z-bbbbbb",
        executor="slurm",
        cluster="cluster",
        policy_model=model,
        benchmarks=(
            bench_result("weather", "COMPLETED", aggregate("run-b", "weather"), job_id="21"),
            bench_result("broken", "COMPLETED", {COMMAND_FILE: '{"accuracy": 0.5}'}, job_id="22"),
            bench_result("extra", "PENDING", {}, job_id="23"),
        ),
    )


def test_each_agent_of_a_nemo_gym_aggregate_is_read_with_its_own_key_metrics() -> None:
    agents = tables.parse_aggregate(aggregate("run-a", "weather")[AGGREGATE_FILE])
    raw = {
        e["agent_ref"]["name"]: e["key_metrics"]
        for e in json.loads(aggregate("run-a", "weather")[AGGREGATE_FILE])
    }
    assert [a.agent for a in agents] == sorted(raw)  # NeMo Gym's order is the servers' answering order
    assert {a.agent: dict(a.metrics) for a in agents} == raw
    mcqa = tables.parse_aggregate(aggregate("run-a", "mcqa")[AGGREGATE_FILE])
    assert [name for name, _ in mcqa[0].metrics][:3] == [
        "mean/reward",
        "pass@1[avg-of-2]/accuracy",
        "pass@1[avg-of-2]/no_answer",
    ]


def test_one_run_shows_every_benchmark_with_its_state_and_metrics_or_why_not() -> None:
    text = tables.format_table([run_a()])
    lines = text.splitlines()
    run = "gym-job-20260101T000000Z-aaaaaa"
    assert lines[0] == f"{run}  slurm on cluster  policy Qwen/Qwen3-8B  /runs/{run}"
    assert lines[1].split() == ["BENCHMARK", "AGENT", "STATE", "METRIC", "VALUE"]
    assert lines[2].split() == ["mcqa", "mcqa_simple_agent", "COMPLETED", "mean/reward", "0.5"]
    assert lines[3].split() == ["pass@1[avg-of-2]/accuracy", "50"]
    # Two agents: a block each, the benchmark named once.
    weather = [line.split() for line in lines if "weather_agent" in line]
    assert weather == [
        ["weather", "weather_agent_large", "COMPLETED", "mean/reward", "0.6667"],
        ["weather_agent_small", "COMPLETED", "mean/reward", "0.3333"],
    ]
    assert ["demo", "-", "COMPLETED", "accuracy", "1"] in [line.split() for line in lines]
    assert ["broken", "-", "FAILED", "-", "-"] in [line.split() for line in lines]
    notes = text.split("no metrics:\n", 1)[1].splitlines()
    assert notes == [
        "  broken: failed, without writing metrics",
        "  slow: still running",
        "  silent: finished without writing metrics (no artifacts/rollouts_aggregate_metrics.json or"
        " artifacts/metrics.json)",
        "  never: never queued: sbatch: error: invalid account",
    ]


def test_a_metrics_file_that_does_not_parse_says_so_instead_of_a_score() -> None:
    bad = bench_result("mcqa", "COMPLETED", {AGGREGATE_FILE: '{"agent_ref": '})
    assert bad.agents == () and bad.why and bad.why.startswith(f"artifacts/{AGGREGATE_FILE}: not JSON")
    wrong = bench_result("demo", "COMPLETED", {COMMAND_FILE: "[1, 2]"})
    assert wrong.why == f"artifacts/{COMMAND_FILE}: the file is not a JSON object of name: number"


def test_two_runs_side_by_side_are_labelled_by_model_and_show_the_difference_from_the_first() -> None:
    text = tables.format_table([run_a(), run_b()])
    lines = [line.split() for line in text.splitlines()]
    assert lines[1] == ["BENCHMARK", "AGENT", "METRIC", "Qwen/Qwen3-8B", "Qwen/Qwen3-32B"]
    # Matched by name: weather's agents in both runs, the delta after the later run's value.
    assert ["weather", "weather_agent_large", "mean/reward", "0.6667", "1", "(+0.3333)"] in lines
    assert ["weather_agent_small", "mean/reward", "0.3333", "0.6667", "(+0.3333)"] in lines
    # A benchmark without metrics in a run shows that run's state; one a run lacks says so.
    assert ["broken", "-", "accuracy", "(FAILED)", "0.5"] in lines
    assert ["mcqa", "mcqa_simple_agent", "mean/reward", "0.5", "(absent)"] in lines
    assert ["extra", "-", "-", "(absent)", "(PENDING)"] in lines
    assert "  extra in Qwen/Qwen3-32B: not started yet" in text.splitlines()
    legend = text.split("runs (differences are from the first):\n", 1)[1].splitlines()
    assert legend == [
        "  Qwen/Qwen3-8B (gym-job-20260101T000000Z-aaaaaa): /runs/gym-job-20260101T000000Z-aaaaaa",
        "  Qwen/Qwen3-32B (gym-job-20260102T000000Z-bbbbbb): /runs/gym-job-20260102T000000Z-bbbbbb",
    ]


@pytest.mark.parametrize("model", [None, "Qwen/Qwen3-8B"])
def test_runs_of_the_same_or_an_unknown_model_are_labelled_by_their_ids(model: str | None) -> None:
    assert tables.labels([run_a(), run_b(model)]) == [run_a().gym_job_id, run_b().gym_job_id]


def test_json_is_what_a_script_reads_with_jq() -> None:
    payload = json.loads(tables.to_json([run_a(), run_b()]))
    first = {b["benchmark"]: b for b in payload["runs"][0]["benchmarks"]}
    raw = json.loads(aggregate("run-a", "weather")[AGGREGATE_FILE])
    assert [a["key_metrics"] for a in first["weather"]["agents"]] == [
        e["key_metrics"] for e in sorted(raw, key=lambda e: e["agent_ref"]["name"])
    ]
    assert first["broken"] == {
        "benchmark": "broken",
        "state": "FAILED",
        "job_id": "13",
        "exit_code": "3:0",
        "source": None,
        "why": "failed, without writing metrics",
        "coverage": None,
        "agents": [],
    }
    assert payload["runs"][1]["label"] == "Qwen/Qwen3-32B"
    large = next(
        d
        for d in payload["differences"]
        if d["agent"] == "weather_agent_large" and d["metric"] == "mean/reward"
    )
    assert large["first"] == pytest.approx(2 / 3) and large["deltas"]["Qwen/Qwen3-32B"] == pytest.approx(
        1 / 3
    )


def test_csv_has_one_filled_line_per_run_benchmark_agent_and_metric() -> None:
    table = list(csv.DictReader(io.StringIO(tables.format_csv([run_a(), run_b()]))))
    assert tuple(table[0]) == tables.CSV_FIELDS
    small = [r for r in table if r["agent"] == "weather_agent_small" and r["metric"] == "mean/reward"]
    assert (small[0]["label"], float(small[0]["value"]), small[0]["delta"]) == (
        "Qwen/Qwen3-8B",
        pytest.approx(1 / 3),
        "",
    )
    assert float(small[1]["delta"]) == pytest.approx(1 / 3)
    broken = [r for r in table if r["benchmark"] == "broken"]
    assert [(r["state"], r["metric"], r["why"]) for r in broken] == [
        ("FAILED", "", "failed, without writing metrics"),
        ("COMPLETED", "accuracy", ""),
    ]


def test_markdown_is_a_table_a_pull_request_renders() -> None:
    text = tables.format_markdown([run_a(), run_b()])
    lines = text.splitlines()
    assert lines[2] == "| BENCHMARK | AGENT | METRIC | Qwen/Qwen3-8B | Qwen/Qwen3-32B |"
    assert lines[3] == "| --- | --- | --- | ---: | ---: |"
    assert "| weather | weather_agent_large | mean/reward | 0.6667 | 1 (+0.3333) |" in lines
    assert "- broken in Qwen/Qwen3-8B: failed, without writing metrics" in lines


def test_numbers_are_shown_to_four_decimals_without_trailing_zeros() -> None:
    assert [tables.number(v) for v in (50.0, 2 / 3, 3, -0.00001, 1234.5)] == [
        "50",
        "0.6667",
        "3",
        "0",
        "1234.5",
    ]
    assert tables.signed(-0.25) == "-0.25" and tables.signed(0.0) == "+0"


def test_the_file_a_real_gym_eval_run_wrote_reads_as_its_key_metrics() -> None:
    """tests/data/nemo-gym-0.7.0-artifacts: written by the real `gym eval run` (the driver's e2e)."""
    real = (
        Path(__file__).resolve().parents[1]
        / "data"
        / "nemo-gym-0.7.0-artifacts"
        / "realgym_echo"
        / "artifacts"
    )
    text = (real / AGGREGATE_FILE).read_text()
    (entry,) = json.loads(text)
    bench = bench_result("realgym_echo", "COMPLETED", {AGGREGATE_FILE: text})
    assert bench.source == AGGREGATE_FILE and bench.why is None
    assert [(a.agent, dict(a.metrics)) for a in bench.agents] == [
        (entry["agent_ref"]["name"], entry["key_metrics"])
    ]
    rows = [
        line.split()
        for line in tables.format_table(
            [RunResult("gym-job-x", "/r", "slurm", "c", None, (bench,))]
        ).splitlines()
    ]
    assert rows[2] == [
        "realgym_echo",
        entry["agent_ref"]["name"],
        "COMPLETED",
        "mean/reward",
        tables.number(entry["key_metrics"]["mean/reward"]),
    ]
    # The aggregation that made the committed fixtures writes entries of the same layout.
    ours = json.loads(aggregate("run-a", "mcqa")[AGGREGATE_FILE])[0]
    assert set(ours) <= set(entry) and set(entry) - set(ours) <= {"perf_summary"}


def covered(run: RunResult, **coverage: Progress) -> RunResult:
    """The run with gym's rollout counts for the named benchmarks, as status read them."""
    benches = tuple(
        bench_result(
            b.benchmark,
            b.state,
            aggregate("run-a" if "aaaaaa" in run.gym_job_id else "run-b", b.benchmark),
            job_id=b.job_id,
            exit_code=b.exit_code,
            coverage=coverage[b.benchmark],
        )
        for b in run.benchmarks
        if b.benchmark in coverage
    )
    return replace(run, benchmarks=benches)


def test_one_run_shows_what_each_score_covers_and_marks_a_partial_one() -> None:
    """A job that ended with gym's `EVAL FAILED: 2/3` still left its aggregate: its score is shown, with
    2/3 partial beside it and said below, never as the benchmark's whole score."""
    run = covered(run_a(), mcqa=Progress(4, 4), weather=Progress(2, 3, 1))
    run = replace(run, benchmarks=(run.benchmarks[0], replace(run.benchmarks[1], state="FAILED")))
    text = tables.format_table([run])
    lines = [line.split() for line in text.splitlines()]
    assert lines[1] == ["BENCHMARK", "AGENT", "STATE", "SCORED", "METRIC", "VALUE"]
    assert lines[2][:5] == ["mcqa", "mcqa_simple_agent", "COMPLETED", "4/4", "mean/reward"]
    (weather,) = [line for line in lines if line[:1] == ["weather"]]
    assert weather[2:5] == ["FAILED", "2/3", "partial"]
    assert "partial scores (not the whole benchmark):" in text
    assert "  weather: 2 of 3 rollouts scored (FAILED); the score is over those" in text.splitlines()
    doc = json.loads(tables.to_json([run]))
    by_name = {b["benchmark"]: b for b in doc["runs"][0]["benchmarks"]}
    assert by_name["weather"]["coverage"] == {"scored": 2, "expected": 3, "failed": 1, "partial": True}
    assert by_name["mcqa"]["coverage"] == {"scored": 4, "expected": 4, "failed": 0, "partial": False}
    table = list(csv.reader(io.StringIO(tables.format_csv([run]))))
    assert {(r[2], r[9], r[10]) for r in table[1:]} == {("mcqa", "4", "4"), ("weather", "2", "3")}


def test_a_partial_score_beside_a_complete_one_says_so() -> None:
    a = covered(run_a(), weather=Progress(3, 3))
    b = covered(run_b(), weather=Progress(1, 3))
    lines = [line.split() for line in tables.format_table([a, b]).splitlines()]
    assert ["weather_agent_small", "mean/reward", "0.3333", "0.6667", "(+0.3333)", "[1/3]"] in lines
    assert ["weather_agent_small", "mean/reward", "0.3333", "0.6667", "(+0.3333)"] not in lines
