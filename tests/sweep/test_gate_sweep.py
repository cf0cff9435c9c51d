"""A sweep's gate end to end on the local executor (issue "Decisions a team can defend", item 4):
four checkpoints whose rollouts the test wrote (gate_sweep_helpers), gated against step_0 or against
another run, as `results series=1`, `report` and their arguments' mistakes show them to a user."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_helpers import kill_local_jobs
from gate_sweep_helpers import GatedSweep
from results_helpers import Sessions

GATE = ("series=1", "baseline=step_0", "max_drop=0.1")
CHOICE = (
    "2 of 3 checkpoint(s) non-inferior to step_0; chosen: step_300 (score +0.05), "
    "but not shown better than step_100: +0.05 ["
)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatedSweep]:
    home = tmp_path_factory.mktemp("gated")
    (home / "lenient.yaml").write_text("benchmarks:\n  demo: {tier: critical, max_drop: 0.5}\n")
    (home / "advisory.yaml").write_text("default: {tier: advisory, max_drop: 0.5}\n")
    (home / "broken.yaml").write_text("benchmarks:\n  demo: {tier: vital}\n")
    try:
        yield GatedSweep(home)
    finally:
        kill_local_jobs(home / "runs")


def test_the_series_gates_every_checkpoint_marks_the_chosen_one_and_exits_0(
    sweep: GatedSweep, tmp_path: Path
) -> None:
    shell = Sessions(tmp_path, "bash")  # records what is sent to the local connection
    done = sweep.run("results", *sweep.line, *GATE, path_first=shell.bin)
    assert done.returncode == 0, done.stderr
    # Every checkpoint's rollouts and the baseline's in one read, not one per checkpoint.
    reads = [c for c in shell.commands() if "rollouts.jsonl" in c]
    assert len(reads) == 1 and all(f"/{sweep.ids[s]}/demo" in reads[0] for s in sweep.ids)
    lines = done.stdout.splitlines()
    table = [ln.split() for ln in lines[1:6]]
    assert table[0][-1] == "GATE" and [row[1] for row in table[1:]] == [
        f"step_{s}" for s in (0, 100, 200, 300)
    ]
    assert [row[-1] for row in table[1:]] == ["BASELINE", "PASS", "DROP", "PASS*"]
    assert lines[7].startswith(CHOICE) and lines[7].endswith("over 40 tasks")
    assert "results is not a gate: exit 0" in lines[8]
    assert done.stderr == ""


def test_csv_and_json_carry_each_checkpoints_verdict_and_the_choice(sweep: GatedSweep) -> None:
    done = sweep.ok("results", *sweep.line, *GATE, "format=csv")
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    got = [(r["label"], r["gate"], r["gate_benchmark"], r["non_inferior"], r["chosen"]) for r in rows]
    assert got == [
        ("step_0", "BASELINE", "", "", ""),
        ("step_100", "PASS", "PASS", "True", "False"),
        ("step_200", "DROP", "DROP", "False", "False"),
        ("step_300", "PASS", "PASS", "True", "True"),
    ]
    assert done.stderr.startswith(CHOICE)  # the CSV stays a table: the line is said beside it
    doc = json.loads(sweep.ok("results", *sweep.line, *GATE, "json=1").stdout)
    choice = doc["choice"]
    assert (choice["baseline_id"], choice["chosen"], choice["runner_up"]) == (
        sweep.ids[0],
        sweep.ids[300],
        sweep.ids[100],
    )
    versus = choice["versus_runner_up"]
    assert versus["estimate"] == pytest.approx(0.05) and versus["tasks"] == 40
    low, high = versus["interval"]
    assert low < 0 < high and versus["shown_better"] is False


def test_another_run_as_baseline_gates_every_combination(sweep: GatedSweep) -> None:
    runs = json.loads(sweep.ok("runs", "config=base.yaml", "json=1").stdout)
    (base,) = [r["gym_job_id"] for r in runs]
    doc = json.loads(
        sweep.ok("results", *sweep.line, "series=1", f"baseline={base}", "max_drop=0.1", "json=1").stdout
    )
    assert [(r["label"], r["gate"], r["chosen"]) for r in doc["rows"]] == [
        ("step_0", "PASS", False),
        ("step_100", "PASS", False),
        ("step_200", "DROP", False),
        ("step_300", "PASS", True),
    ]
    # step_0 and step_100 tie (both the baseline's rollouts): the later step is the runner-up.
    assert doc["choice"]["runner_up"] == sweep.ids[100]
    assert doc["choice"]["line"].startswith(f"3 of 4 checkpoint(s) non-inferior to {base}; chosen: step_300")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("series=1", "baseline=step_9", "max_drop=0.1"), "baseline=step_9 is neither a gym_job_id nor"),
        (("series=1", "max_drop=0.1"), "none is named"),
        (("series=1", "baseline=step_0"), "needs the margin"),
        (("series=1", "baseline=gym-job-20260101T000000Z-abcdef", "max_drop=0.1"), "not in this machine's"),
        (("baseline=step_0", "max_drop=0.1"), "add series=1"),
        (("series=1", "baseline=step_0", "max_drop=-1"), "max_drop=-1 is not a difference"),
        (("series=1", "baseline=step_0", "max_drop=0.1", "policy=lenient.yaml"), "both say what the gate"),
        (("series=1", "baseline=step_0", "policy=broken.yaml"), "broken.yaml"),
    ],
)
def test_an_argument_the_gate_cannot_use_is_one_message_exit_64(
    sweep: GatedSweep, args: tuple[str, ...], said: str
) -> None:
    done = sweep.run("results", *sweep.line, *args)
    lines = done.stderr.splitlines()
    assert (done.returncode, done.stdout) == (64, ""), done.stderr
    assert len(lines) == 2 and said in done.stderr and lines[1].startswith("    fix: "), lines


def test_a_gate_on_one_submission_is_one_message_exit_64(sweep: GatedSweep) -> None:
    done = sweep.run("results", "config=base.yaml", "baseline=step_0", "max_drop=0.1")
    assert (done.returncode, done.stdout) == (64, "") and "this is one submission" in done.stderr


def test_the_report_shows_each_checkpoints_verdict_and_the_choice(sweep: GatedSweep) -> None:
    done = sweep.ok("report", *sweep.line, "baseline=step_0", "max_drop=0.1", "out=gated.html")
    assert done.stdout.splitlines()[1].startswith(CHOICE)
    page = (sweep.home / "gated.html").read_text()
    assert f'<p class="choice">{CHOICE}'.replace("'", "&#x27;") in page
    chosen = [row for row in page.split("<tr") if row.startswith(' class="chosen"')]
    assert len(chosen) == 1 and "<td>step_300</td>" in chosen[0] and "<td>PASS*</td>" in chosen[0]
    for step, mark in ((0, "BASELINE"), (100, "PASS"), (200, "DROP")):
        assert f"<td>{sweep.ids[step]}</td><td>{mark}</td>" in page


def test_a_policy_file_gates_the_sweep_as_it_gates_compare(sweep: GatedSweep) -> None:
    """A margin of 0.5 on the critical benchmark lets step_200's drop of 0.3 pass (still not chosen:
    its score is the lowest); a policy with no critical benchmark passes nothing, so chooses none."""
    doc = json.loads(sweep.ok("results", *sweep.line, *GATE[:2], "policy=lenient.yaml", "json=1").stdout)
    assert [(r["label"], r["gate"], r["chosen"]) for r in doc["rows"]] == [
        ("step_0", "BASELINE", None),
        ("step_100", "PASS", False),
        ("step_200", "PASS", False),
        ("step_300", "PASS", True),
    ]
    done = sweep.ok("results", *sweep.line, *GATE[:2], "policy=advisory.yaml")
    assert "0 of 3 checkpoint(s) non-inferior to step_0: none chosen" in done.stdout
    assert [ln.split()[-1] for ln in done.stdout.splitlines()[3:6]] == ["INCONCLUSIVE"] * 3
