"""What `gymbuild compare` counts and which metric its gate reads: coverage per
agent, duplicates and empty files named and counted as written, the benchmark's key metric as NeMo
Gym's aggregate names it (or metric=), and the one-line install hint without numpy and scipy.

The verb runs on real local runs (compare_helpers.record) read through the local connection's reader
script, which cuts the materialized inputs down to their agents and gym's aggregate to its key metric
names; the pure parts on the files' text, and on NeMo Gym 0.7.0's own aggregates (tests/data).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from compare_helpers import A, B, asked, record, rollouts
from e2e_helpers import gymbuild, user_env

from gymbuild.results import compare, gate, stats

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "nemo-gym-0.7.0-aggregate"
ALL = {t: [1, 0] for t in range(200)}  # 200 tasks x 2 repeats, unchanged between the runs


def _gate(home: Path, *args: str) -> tuple[int, dict, str]:
    rc, out, err = gymbuild(
        "compare", f"run={A},{B}", "json=1", *args, cwd=home, env=user_env(home), timeout=120
    )
    return rc, (json.loads(out) if out else {}), err


def test_two_complete_agents_in_one_benchmark_are_each_complete(tmp_path: Path) -> None:
    """The reproduction: each agent's "expected" was the benchmark's, so two complete agents read
    200/400 PARTIAL and the gate could never pass."""
    two = rollouts(ALL, agent="small") + rollouts(ALL, agent="large")
    inputs = {"weather": asked(ALL, agent="small") + asked(ALL, agent="large")}
    record(tmp_path, A, "m1", {"weather": two}, materialized=inputs)
    record(tmp_path, B, "m2", {"weather": two}, materialized=inputs)
    rc, doc, err = _gate(tmp_path, "max_drop=0.05")
    assert rc == 0, err
    agents = {a["agent"]: a for a in doc["agents"]}
    for name in ("small", "large"):
        a = agents[name]
        assert (
            a["baseline_scored"],
            a["baseline_expected"],
            a["candidate_scored"],
            a["candidate_expected"],
        ) == (
            400,
            400,
            400,
            400,
        )
        assert a["partial"] == [] and a["notes"] == []
    assert [(v["agent"], v["outcome"]) for v in doc["verdicts"]] == [("large", "PASS"), ("small", "PASS")]
    # One agent short: that agent is partial, the other is not.
    short = rollouts(ALL, agent="small") + "".join(
        rollouts(ALL, agent="large").splitlines(keepends=True)[:-10]
    )
    record(tmp_path, "gym-job-20260103T000000Z-cccccc", "m3", {"weather": short}, materialized=inputs)
    rc, _, err = gymbuild(
        "compare",
        f"run={A},gym-job-20260103T000000Z-cccccc",
        "max_drop=0.05",
        cwd=tmp_path,
        env=user_env(tmp_path),
    )
    assert rc == 2, err
    assert "  inconclusive: weather (large): the candidate is partial: 390/400 rollouts scored" in err
    assert "weather (small)" not in err


def test_duplicate_lines_are_counted_as_written_and_named(tmp_path: Path) -> None:
    """The reproduction: 110 lines for 100 rollouts read 100/100 in compare, 110/100 in status."""
    scores = {t: [1] for t in range(100)}
    text = rollouts(scores)
    twice = text + "".join(text.splitlines(keepends=True)[:10])
    record(tmp_path, A, "m1", {"quiz": text})
    record(tmp_path, B, "m2", {"quiz": twice}, expected={"quiz": 100})
    rc, out, err = gymbuild("compare", f"run={A},{B}", cwd=tmp_path, env=user_env(tmp_path))
    assert rc == 0, err
    row = next(line.split() for line in out.splitlines() if line.startswith("quiz"))
    assert row[-2:] == ["100/100", "110/100"]  # as status counts them: every line
    assert (
        "quiz (agent): 10 duplicate (task, repeat) line(s) in the candidate: counted as written "
        "(110 lines), the last of each compared" in out
    )


def test_an_empty_candidate_file_is_named_once_not_as_agents_missing(tmp_path: Path) -> None:
    record(tmp_path, A, "m1", {"quiz": rollouts(ALL)})
    record(tmp_path, B, "m2", {"quiz": ""}, expected={"quiz": 400})
    rc, doc, err = _gate(tmp_path, "max_drop=0.05")
    assert rc == 2, err
    assert doc["skipped"] == []  # not "agent agent is only in the baseline"
    assert "quiz: the candidate's rollouts.jsonl is empty: no rollout" in doc["inconclusive"]
    assert [v["outcome"] for v in doc["verdicts"]] == ["INCONCLUSIVE"]


def _accuracy_rows(drop: int, reward: bool) -> str:
    """200 tasks x 1 repeat scored by accuracy; the first `drop` tasks fail in this run; a reward
    that never changes when `reward`."""
    rows = []
    for t in range(200):
        row: dict = {"_ng_task_index": t, "_ng_rollout_index": 0, "agent_ref": {"name": "agent"}}
        row["accuracy"] = 0.0 if t < drop else 1.0
        if reward:
            row["reward"] = 1.0
        rows.append(json.dumps(row) + "\n")
    return "".join(rows)


def test_a_benchmark_scored_by_accuracy_is_gated_on_accuracy_not_passed(tmp_path: Path) -> None:
    """The reproduction: no reward field, and a drop of 0.15 passed."""
    record(tmp_path, A, "m1", {"quiz": _accuracy_rows(0, reward=False)})
    record(tmp_path, B, "m2", {"quiz": _accuracy_rows(30, reward=False)})
    rc, doc, err = _gate(tmp_path, "max_drop=0.05")
    assert rc == 1, err
    (v,) = doc["verdicts"]
    assert (v["metric"], v["outcome"], v["estimate"]) == ("mean/accuracy", "DROP", -0.15)


def test_the_key_metric_of_gyms_aggregate_is_gated_and_metric_overrides_it(tmp_path: Path) -> None:
    """Rows with a reward that never moves and an accuracy that drops: gym's aggregate names
    `pass@1[avg-of-1]/accuracy` its key metric (a benchmark's get_key_metrics), so accuracy is gated."""
    keys = json.dumps([{"agent_ref": {"name": "agent"}, "key_metrics": {"pass@1[avg-of-1]/accuracy": 0.85}}])
    record(tmp_path, A, "m1", {"quiz": _accuracy_rows(0, reward=True)}, aggregates={"quiz": keys})
    record(tmp_path, B, "m2", {"quiz": _accuracy_rows(30, reward=True)}, aggregates={"quiz": keys})
    rc, doc, err = _gate(tmp_path, "max_drop=0.05")
    assert rc == 1, err
    assert [(v["metric"], v["outcome"]) for v in doc["verdicts"]] == [("mean/accuracy", "DROP")]
    rc, doc, err = _gate(tmp_path, "max_drop=0.05", "metric=reward")
    assert rc == 0, err
    assert [(v["metric"], v["outcome"]) for v in doc["verdicts"]] == [("mean/reward", "PASS")]


def test_nemo_gyms_own_aggregates_name_the_metric_compare_gates() -> None:
    """On NeMo Gym 0.7.0's aggregates (tests/data, made by its own aggregation: tests/results/
    test_oracle.py): the default key metrics put mean/reward first; MCQA's own key metrics
    (pass@1[avg-of-2]/accuracy, majority@2/accuracy, ...) keep mean/reward first too."""
    for bench, agents in (
        ("mcqa", {"mcqa_simple_agent"}),
        ("weather", {"weather_agent_small", "weather_agent_large"}),
    ):
        files = {
            name: (FIXTURES / "run-a" / bench / "artifacts" / name).read_text()
            for name in (compare.ROLLOUTS_FILE, compare.AGGREGATE_FILE)
        }
        side = compare.parse_side(files)
        assert side is not None and set(side.key_metrics) == agents
        (a, *others), _ = compare.diff_benchmark(bench, side, side)
        for got in (a, *others):
            assert (got.primary, got.primary_why) == (
                "mean/reward",
                "the benchmark's key metric (gym's aggregate)",
            )


def test_without_numpy_and_scipy_compare_says_how_to_install_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compare extra's absence: one line with the install command (the verb exits 64 with it)."""
    monkeypatch.setitem(sys.modules, "scipy", None)  # what `import scipy` finds where it is not installed
    with pytest.raises(stats.Missing) as caught:
        stats.evidence([0.0, 1.0], bounded=True)
    assert (
        str(caught.value)
        == "compare needs numpy and scipy (scipy is not installed): pip install 'gymbuild[compare]'"
    )
    assert gate.USAGE_STATUS == 64


def test_lines_that_are_not_rollouts_are_left_out_on_the_way(tmp_path: Path) -> None:
    """A line that is JSON but no object (a number, a list), or cut short, is not a rollout: the
    reader on the target skips it, as parse_side does with the file itself."""
    text = rollouts(ALL)
    record(tmp_path, A, "m1", {"quiz": text})
    junk = '42\n[1, 2]\n"text"\n' + text + '{"_ng_task_index": 7, "_ng'
    record(tmp_path, B, "m2", {"quiz": junk}, expected={"quiz": 400})
    rc, doc, err = _gate(tmp_path, "max_drop=0.05")
    assert rc == 0, err
    (a,) = doc["agents"]
    assert (a["candidate_scored"], a["pairs"]) == (400, 400)
    local = compare.parse_side({compare.ROLLOUTS_FILE: '42\n[1, 2]\n"text"\n' + text})
    assert local is not None and local.scored == 400
