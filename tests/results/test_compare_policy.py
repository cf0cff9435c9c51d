"""`gymbuild compare policy=gate.yaml`, end to end with the installed command on two real local runs
(compare_helpers.record): each exit status (0 PASS, 1 DROP, 2 INCONCLUSIVE, 64 a policy or argument
it cannot use), and the compact (CI log), markdown (pull request) and JSON outputs by their structure.

The runs: quiz drops 40% of its tasks (50 tasks, every one passed in the baseline); math and code do
not move (200 tasks each, enough to rule out a drop of 0.02).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from compare_helpers import A, B, record, rollouts
from e2e_helpers import gymbuild, user_env

SAME = {t: [1, 0] for t in range(200)}
QUIZ_BASE = {t: [1, 1] for t in range(50)}
QUIZ_DROP = {t: [0, 0] if t % 5 < 2 else [1, 1] for t in range(50)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("policy")
    record(home, A, "m1", {"quiz": rollouts(QUIZ_BASE), "math": rollouts(SAME), "code": rollouts(SAME)})
    record(home, B, "m2", {"quiz": rollouts(QUIZ_DROP), "math": rollouts(SAME), "code": rollouts(SAME)})
    return home


def compare(home: Path, policy_text: str | None, *args: str) -> tuple[int, str, str]:
    """The installed command on the two runs, with `policy_text` written as the policy file."""
    extra = []
    if policy_text is not None:
        (home / "gate.yaml").write_text(policy_text)
        extra.append("policy=gate.yaml")
    return gymbuild("compare", f"run={A},{B}", *extra, *args, cwd=home, env=user_env(home), timeout=120)


def test_a_critical_benchmarks_drop_is_exit_1_and_the_compact_form_leads_with_it(runs: Path) -> None:
    policy = (
        "benchmarks:\n  quiz: {tier: critical, max_drop: 0.2}\n  math: {tier: critical, max_drop: 0.02}\n"
    )
    rc, out, err = compare(runs, policy, "format=compact")
    assert rc == 1, (out, err)
    lines = out.splitlines()
    assert lines[0].startswith("gate DROP (exit 1), policy gate.yaml: critical quiz: DROP")
    listed = [line.split()[:3] for line in lines[2:-1]]  # tier, verdict, benchmark: not PASS only
    assert ["critical", "DROP", "quiz"] in listed and all(v != "PASS" and b != "math" for _, v, b in listed)
    # code is the default's: advisory on a margin of 0, which a no-change cannot rule out (shown, not counted)
    assert ["advisory", "INCONCLUSIVE", "code"] in listed
    assert lines[-1].startswith("counts: 1 PASS, 1 DROP, 1 INCONCLUSIVE of 3 benchmark(s)")
    assert "critical 2, supporting 0, advisory 1" in lines[-1]  # code: the default's tier
    assert err.startswith("error: DROP under policy gate.yaml") and "Traceback" not in err
    assert "quiz (agent) mean/reward" not in err  # the log has it once, on stdout


def test_an_advisory_drop_is_shown_but_every_critical_passing_is_exit_0(runs: Path) -> None:
    policy = (
        "default: {tier: advisory, max_drop: 0.2}\nbenchmarks:\n  math: {tier: critical, max_drop: 0.02}\n"
    )
    rc, out, err = compare(runs, policy)
    assert rc == 0, (out, err)
    assert "gate PASS (exit 0), policy gate.yaml: every critical benchmark passed (1)" in out
    assert any(line.split()[:3] == ["advisory", "DROP", "quiz"] for line in out.splitlines())
    rc, out, _ = compare(runs, policy, "json=1")
    doc = json.loads(out)
    assert rc == 0 and doc["verdict"] == "pass" and doc["exit_status"] == 0
    assert doc["tiers"] == {"quiz": "advisory", "math": "critical", "code": "advisory"}
    assert doc["benchmark_verdicts"] == {"quiz": "drop", "math": "pass", "code": "pass"}
    assert doc["policy"]["benchmarks"]["math"] == {
        "tier": "critical",
        "max_drop": 0.02,
        "relative_drop": None,
        "metric": None,
    }


def test_one_supporting_drop_needs_a_human_exit_2_and_the_markdown_has_a_row_per_verdict(runs: Path) -> None:
    policy = (
        "benchmarks:\n  quiz: {tier: supporting, relative_drop: 0.05}\n"
        "  math: {tier: critical, max_drop: 0.02}\n  code: {tier: critical, max_drop: 0.02}\n"
    )
    rc, out, err = compare(runs, policy, "format=markdown")
    assert rc == 2, (out, err)
    lines = out.splitlines()
    assert lines[0] == "### gymbuild gate: *INCONCLUSIVE* (exit 2)"
    assert "policy `gate.yaml`: supporting quiz dropped: one needs a human's look" in lines[2]
    table = [line for line in lines if line.startswith("|")]
    head = [c.strip() for c in table[0].strip("|").split("|")]
    assert head == [
        "benchmark",
        "tier",
        "metric",
        "baseline",
        "candidate",
        "delta [95% CI]",
        "margin",
        "verdict",
    ]
    rows = {r[0]: r for r in ([c.strip() for c in line.strip("|").split("|")] for line in table[2:])}
    assert set(rows) == {"quiz (agent)", "math (agent)", "code (agent)"}
    assert all(len(r) == len(head) for r in rows.values())
    assert rows["quiz (agent)"][1:5] == ["supporting", "mean/reward", "1", "0.6"]
    assert rows["quiz (agent)"][6] == "0.05 (5% of baseline)" and rows["quiz (agent)"][7] == "**DROP**"
    assert rows["math (agent)"][7] == "PASS"
    reasons = lines[lines.index("**Reasons**") :]
    assert any(
        r.startswith("- quiz (agent) (supporting), DROP: max_drop = 5% of 1 = 0.05; ") for r in reasons
    )
    assert err.startswith("INCONCLUSIVE under policy gate.yaml") and "fix:" in err


def test_no_critical_benchmark_is_inconclusive_never_pass(runs: Path) -> None:
    rc, out, err = compare(
        runs, "default: {tier: supporting, max_drop: 0.02}\n", "only=math", "format=compact"
    )
    assert rc == 2, (out, err)
    assert out.splitlines()[0].startswith("gate INCONCLUSIVE (exit 2)") and "no critical benchmark" in out


def test_a_policy_naming_a_benchmark_the_runs_lack_notes_it_but_a_likely_typo_is_exit_64(runs: Path) -> None:
    fine = "benchmarks:\n  math: {tier: critical, max_drop: 0.02}\n  swe_bench: {tier: critical}\n"
    rc, out, err = compare(runs, fine, "format=compact")
    assert rc == 0, (out, err)
    assert "note: policy: swe_bench is not a benchmark of the compared runs (not gated)" in out
    rc, out, err = compare(runs, "benchmarks:\n  qiuz: {tier: critical, max_drop: 0.02}\n")
    assert rc == 64 and out == "" and "Traceback" not in err
    assert (
        err.startswith("error: gate.yaml: benchmarks.qiuz: names no benchmark")
        and "did you mean quiz?" in err
    )


@pytest.mark.parametrize(
    ("policy", "args", "said"),
    [
        (
            "benchmarks:\n  quiz: {tier: blocker}\n",
            (),
            "gate.yaml: benchmarks.quiz.tier: 'blocker' is not a tier",
        ),
        ("benchmarks:\n  quiz: {max_drop: -1}\n", (), "benchmarks.quiz.max_drop: -1 is not a margin"),
        (
            "benchmarks:\n  quiz: {tier: critical, metric: acc}\n",
            (),
            "benchmarks.quiz.metric: quiz's rollouts",
        ),
        ("{}\n", ("max_drop=0.02",), "max_drop= and policy= both say what the gate reads"),
        ("{}\n", ("format=csv",), "format=csv is not a format compare prints"),
        (None, ("format=compact",), "format=compact prints a gate's verdicts, and there is no gate"),
        (None, ("policy=missing.yaml",), "policy=missing.yaml: cannot be read"),
    ],
)
def test_what_the_gate_cannot_use_is_one_message_exit_64_nothing_printed(
    runs: Path, policy: str | None, args: tuple[str, ...], said: str
) -> None:
    rc, out, err = compare(runs, policy, *args)
    assert rc == 64, (out, err)
    assert out == "" and said in err and "fix: " in err and "Traceback" not in err


def test_max_drop_has_the_compact_form_too_as_the_every_benchmark_critical_policy(runs: Path) -> None:
    rc, out, err = compare(runs, None, "max_drop=0.2", "format=compact")
    assert rc == 1, (out, err)
    assert out.splitlines()[0].startswith("gate DROP (exit 1), policy max_drop=: critical quiz: DROP")
    assert "critical 3, supporting 0, advisory 0" in out.splitlines()[-1]


def test_results_refuses_compares_compact_format_naming_its_own(runs: Path) -> None:
    """format= is one argument for both verbs; compact is compare's alone."""
    rc, out, err = gymbuild(
        "results", f"run={A}", "format=compact", cwd=runs, env=user_env(runs), timeout=120
    )
    assert rc == 1 and out == "" and "Traceback" not in err
    assert "format=compact is compare's, not a format results prints" in err and "table, csv, markdown" in err
