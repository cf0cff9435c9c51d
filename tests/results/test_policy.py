"""policy.py, pure: the policy file read (and refused with the key path and the fix), and the overall
rule searched: monotone, advisory never counts, no critical benchmark never passes."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from compare_helpers import agent_diff, comparison_of
from hypothesis import given
from hypothesis import strategies as st

from gymbuild.errors import UsageError
from gymbuild.results import compare, gate, policy
from gymbuild.results.policy import Rule, Tier

Outcome = gate.Outcome
RANK = {Outcome.PASS: 0, Outcome.INCONCLUSIVE: 1, Outcome.DROP: 2}

EXAMPLE = """
default: {tier: advisory, max_drop: 0.05}
benchmarks:
  mmlu: {tier: critical, max_drop: 0.02}
  gpqa: {tier: critical, relative_drop: 0.05, metric: accuracy}
  aime: {tier: supporting}
"""


def test_the_example_file_reads_as_written_and_a_rule_inherits_the_defaults_fields() -> None:
    p = policy.parse(EXAMPLE, "gate.yaml")
    assert p.rule("mmlu") == Rule(Tier.CRITICAL, 0.02, None, None)
    assert p.rule("gpqa") == Rule(Tier.CRITICAL, None, 0.05, "accuracy")
    assert p.rule("aime") == Rule(Tier.SUPPORTING, 0.05, None, None)  # the default's margin
    assert p.rule("unnamed") == p.default == Rule(Tier.ADVISORY, 0.05, None, None)
    assert policy.metric_of(p)("gpqa") == "accuracy" and policy.metric_of(p)("mmlu") is None
    assert p.source == "gate.yaml"


def test_an_empty_file_gates_every_benchmark_advisory_so_nothing_ever_passes() -> None:
    p = policy.parse("", "empty.yaml")
    assert p.rule("any") == Rule(Tier.ADVISORY, 0.0, None, None)
    assert policy.combine({"any": Outcome.PASS}, {"any": Tier.ADVISORY})[0] is Outcome.INCONCLUSIVE


def test_of_max_drop_is_todays_gate_every_benchmark_critical() -> None:
    p = policy.Policy.of_max_drop(0.02, "accuracy")
    assert p.rule("x") == Rule(Tier.CRITICAL, 0.02, None, "accuracy") and p.source == "max_drop="


def test_load_reads_a_file_and_an_unreadable_one_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "gate.yaml").write_text(EXAMPLE)
    assert policy.load(tmp_path / "gate.yaml").rule("mmlu").max_drop == 0.02
    with pytest.raises(UsageError) as err:
        policy.load(tmp_path / "missing.yaml")
    assert err.value.status == 64 and "missing.yaml" in str(err.value) and "fix:" in str(err.value)


@pytest.mark.parametrize(
    ("text", "where", "fix"),
    [
        ("benchmarks:\n  mmlu: {tier: citical}\n", "benchmarks.mmlu.tier", "critical, supporting, advisory"),
        ("benchmarks:\n  mmlu: {tier: critical, max_dorp: 0.1}\n", "benchmarks.mmlu.max_dorp", "max_drop"),
        ("tiers: {}\n", "tiers", "benchmarks"),
        ("benchmarks:\n  mmlu: {max_drop: -0.1}\n", "benchmarks.mmlu.max_drop", "0 or more"),
        ("benchmarks:\n  mmlu: {max_drop: .nan}\n", "benchmarks.mmlu.max_drop", "number"),
        ("default: {max_drop: .inf}\n", "default.max_drop", "finite"),
        ("benchmarks:\n  mmlu: {relative_drop: 5}\n", "benchmarks.mmlu.relative_drop", "from 0 to 1"),
        ("benchmarks:\n  mmlu: {max_drop: 0.1, relative_drop: 0.1}\n", "benchmarks.mmlu", "keep one"),
        ("benchmarks:\n  mmlu: {max_drop: lots}\n", "benchmarks.mmlu.max_drop", "a number"),
        ("benchmarks: [mmlu]\n", "benchmarks", "name:"),
        ("- mmlu\n", "is not a mapping", "benchmarks:"),
        ("benchmarks: {mmlu: {max_drop: 0.1}\n", "is not YAML at line", "docs/compare.md"),
        (
            "benchmarks:\n  mmlu: {tier: advisory}\n  mmlu: {tier: critical}\n",
            "found duplicate key mmlu",
            "write each key once",
        ),
        ('benchmarks:\n  mmlu: {metric: "acc\\e"}\n', "benchmarks.mmlu.metric", "metric: accuracy"),
    ],
)
def test_a_bad_policy_is_one_usage_error_naming_the_file_the_key_and_the_fix(
    text: str, where: str, fix: str
) -> None:
    with pytest.raises(UsageError) as err:
        policy.parse(text, "ci/gate.yaml")
    message = str(err.value)
    assert err.value.status == 64
    assert message.startswith("error: ci/gate.yaml: ") and where in message
    assert "\n    fix: " in message and fix in message.split("fix:")[1]
    assert "\x1b" not in message


def test_a_benchmark_the_runs_lack_is_a_note_but_a_likely_misspelling_names_the_closest() -> None:
    p = policy.parse("benchmarks:\n  mmlu: {tier: critical}\n  swe_bench: {tier: critical}\n", "g.yaml")
    assert policy.unknown_benchmarks(p, ["mmlu", "gpqa"]) == (
        "policy: swe_bench is not a benchmark of the compared runs (not gated)",
    )
    typo = policy.parse("benchmarks:\n  mmlu_pr: {tier: critical}\n", "g.yaml")
    with pytest.raises(UsageError) as err:
        policy.unknown_benchmarks(typo, ["mmlu_pro", "gpqa"])
    assert "benchmarks.mmlu_pr" in str(err.value) and "did you mean mmlu_pro?" in str(err.value)


def test_a_relative_drop_is_a_margin_of_the_baselines_mean_and_says_its_arithmetic() -> None:
    margin, how = Rule(Tier.CRITICAL, None, 0.05, None).margin(0.62)
    assert margin == pytest.approx(0.031) and how == "max_drop = 5% of 0.62 = 0.031"
    assert Rule(Tier.CRITICAL, None, 0.05, None).margin(None)[0] is None
    assert Rule(Tier.CRITICAL, 0.02, None, None).margin(0.62) == (0.02, "")


# The overall rule, searched over verdict sets.
tiers_st = st.sampled_from(list(Tier))
outcome_st = st.sampled_from(list(Outcome))
bench_set = st.dictionaries(
    st.sampled_from([f"b{i}" for i in range(7)]), st.tuples(tiers_st, outcome_st), max_size=7
)


def _split(found: dict[str, tuple[Tier, Outcome]]) -> tuple[dict[str, Outcome], dict[str, Tier]]:
    return {b: o for b, (_, o) in found.items()}, {b: t for b, (t, _) in found.items()}


@given(bench_set, st.data())
def test_the_overall_outcome_is_monotone_in_every_benchmarks_verdict(
    found: dict[str, tuple[Tier, Outcome]], data: st.DataObject
) -> None:
    outcomes, tiers = _split(found)
    before, why = policy.combine(outcomes, tiers)
    assert why
    if not found:
        return
    bench = data.draw(st.sampled_from(sorted(found)))
    worse = data.draw(st.sampled_from([o for o in Outcome if RANK[o] >= RANK[outcomes[bench]]]))
    after, _ = policy.combine({**outcomes, bench: worse}, tiers)
    assert RANK[after] >= RANK[before], (found, bench, worse)


@given(bench_set, outcome_st)
def test_an_advisory_benchmark_never_changes_the_outcome(
    found: dict[str, tuple[Tier, Outcome]], o: Outcome
) -> None:
    outcomes, tiers = _split(found)
    with_it = policy.combine({**outcomes, "adv": o}, {**tiers, "adv": Tier.ADVISORY})[0]
    assert with_it is policy.combine(outcomes, tiers)[0]


@given(bench_set)
def test_the_overall_rule_is_the_documented_one(found: dict[str, tuple[Tier, Outcome]]) -> None:
    outcomes, tiers = _split(found)
    got, _ = policy.combine(outcomes, tiers)
    critical = [o for b, o in outcomes.items() if tiers[b] is Tier.CRITICAL]
    drops = sum(1 for b, o in outcomes.items() if tiers[b] is Tier.SUPPORTING and o is Outcome.DROP)
    if Outcome.DROP in critical or drops >= 2:
        assert got is Outcome.DROP
    elif not critical or Outcome.INCONCLUSIVE in critical or drops == 1:
        assert got is Outcome.INCONCLUSIVE
    else:
        assert got is Outcome.PASS
    if not critical:
        assert got is not Outcome.PASS


def test_decide_gates_each_benchmark_on_its_own_margin_and_tier() -> None:
    p = policy.parse(EXAMPLE, "gate.yaml")
    c = comparison_of(
        agent_diff("mmlu", 0.7, -0.001, 0.01),  # PASS on 0.02
        agent_diff(
            "gpqa", 0.62, -0.02, 0.005, metric="mean/accuracy"
        ),  # relative: 5% of 0.62 = 0.031 -> PASS
        agent_diff("aime", 0.3, -0.2, 0.01),  # supporting DROP: one -> INCONCLUSIVE
        agent_diff("other", 0.5, -0.3, 0.01),  # advisory DROP: shown, not counted
    )
    d = policy.decide(c, p)
    assert d.benchmarks == {
        "mmlu": Outcome.PASS,
        "gpqa": Outcome.PASS,
        "aime": Outcome.DROP,
        "other": Outcome.DROP,
    }
    assert d.tiers["other"] is Tier.ADVISORY and d.tiers["gpqa"] is Tier.CRITICAL
    assert d.outcome is Outcome.INCONCLUSIVE and d.exit_status() == 2
    assert any("supporting aime" in w for w in d.why)
    gpqa = next(v for v in d.verdicts if v.benchmark == "gpqa")
    assert gpqa.max_drop == pytest.approx(0.031) and gpqa.reason.startswith("max_drop = 5% of 0.62 = 0.031; ")


def test_decide_a_critical_drop_is_drop_exit_1_and_of_max_drop_matches_todays_gate() -> None:
    c = comparison_of(agent_diff("mmlu", 0.7, -0.1, 0.01), agent_diff("gpqa", 0.6, 0.0, 0.01))
    d = policy.decide(c, policy.Policy.of_max_drop(0.02))
    assert d.outcome is Outcome.DROP and d.exit_status() == 1
    assert d.outcome is gate.overall(gate.verdicts(c, 0.02))
    assert [v.outcome for v in d.verdicts] == [v.outcome for v in gate.verdicts(c, 0.02)]


def test_decide_refuses_a_metric_the_benchmarks_rollouts_lack_naming_the_key() -> None:
    p = policy.parse("benchmarks:\n  mmlu: {tier: critical, metric: acuracy}\n", "g.yaml")
    with pytest.raises(UsageError) as err:
        policy.decide(comparison_of(agent_diff("mmlu", 0.7, 0.0, 0.01)), p)
    assert "benchmarks.mmlu.metric" in str(err.value) and "mean/reward" in str(err.value)


def test_a_relative_drop_on_a_benchmark_never_compared_is_inconclusive_not_a_nan() -> None:
    p = policy.parse("benchmarks:\n  mmlu: {tier: critical, relative_drop: 0.1}\n", "g.yaml")
    c = compare.Comparison("A", "B", "a", "b", (), benchmarks=("mmlu",), short={"mmlu": ("mmlu: no rows",)})
    d = policy.decide(c, p)
    assert d.outcome is Outcome.INCONCLUSIVE and all(math.isfinite(v.max_drop) for v in d.verdicts)


# parse, searched: any policy written as the schema allows reads back as written; any one bad value
# anywhere is a usage error naming exactly its key path.
margin_st = st.floats(0, 1, allow_nan=False)
rule_st = st.fixed_dictionaries(
    {},
    optional={
        "tier": st.sampled_from([t.value for t in Tier]),
        "max_drop": margin_st,
        "metric": st.sampled_from(["accuracy", "mean/reward", "pass@1/accuracy"]),
    },
) | st.fixed_dictionaries(
    {"relative_drop": margin_st}, optional={"tier": st.sampled_from([t.value for t in Tier])}
)
names_st = st.text("abcdefghij_0123456789-", min_size=1, max_size=12)
policy_st = st.fixed_dictionaries(
    {}, optional={"default": rule_st, "benchmarks": st.dictionaries(names_st, rule_st)}
)


@given(policy_st)
def test_any_policy_the_schema_allows_reads_back_as_written(tree: dict) -> None:
    import yaml

    p = policy.parse(yaml.safe_dump(tree), "g.yaml")
    default = tree.get("default", {})
    for name, raw in {**tree.get("benchmarks", {}), "(unnamed)": {}}.items():
        rule = p.rule(name)
        assert rule.tier.value == raw.get("tier", default.get("tier", "advisory"))
        assert rule.metric == raw.get("metric", default.get("metric"))
        own = raw if ("max_drop" in raw or "relative_drop" in raw) else default
        assert rule.relative_drop == own.get("relative_drop")
        if "relative_drop" not in own:
            assert rule.max_drop == own.get("max_drop", 0.0)
        assert (rule.max_drop is None) != (rule.relative_drop is None)  # one margin, always


bad_st = st.sampled_from(
    [
        ("tier", "blocker"),
        ("max_drop", -0.5),
        ("max_drop", "much"),
        ("relative_drop", 2.0),
        ("metric", ""),
        ("maxdrop", 1),
    ]
)


@given(policy_st, bad_st, st.data())
def test_one_bad_value_anywhere_is_a_usage_error_naming_its_key_path(
    tree: dict, bad: tuple[str, object], data: st.DataObject
) -> None:
    import yaml

    key, value = bad
    benches = sorted(tree.get("benchmarks", {}))
    where = data.draw(st.sampled_from(["default", *(f"benchmarks.{b}" for b in benches)]))
    target = (
        tree.setdefault("default", {}) if where == "default" else tree["benchmarks"][where.split(".", 1)[1]]
    )
    target[key] = value
    if key == "max_drop":
        target.pop("relative_drop", None)
    if key == "relative_drop":
        target.pop("max_drop", None)
    with pytest.raises(UsageError) as err:
        policy.parse(yaml.safe_dump(tree), "g.yaml")
    assert err.value.status == 64
    assert f"error: g.yaml: {where}.{key}: " in str(err.value) and "\n    fix: " in str(err.value)


# decide, searched over comparisons: a benchmark's verdict is the worst of its agents', and under
# Policy.of_max_drop the outcome is today's gate.overall.
agent_st = st.tuples(st.floats(-0.3, 0.1, allow_nan=False), st.floats(0, 0.2, allow_nan=False))


@given(
    st.dictionaries(
        st.sampled_from(["quiz", "math", "code"]), st.lists(agent_st, min_size=1, max_size=3), min_size=1
    ),
    st.dictionaries(st.sampled_from(["quiz", "math", "code"]), rule_st),
    st.floats(0, 0.2, allow_nan=False),
)
def test_decide_takes_the_worst_agent_and_of_max_drop_is_todays_gate(
    benches: dict[str, list[tuple[float, float]]], rules: dict, max_drop: float
) -> None:
    import yaml

    agents = tuple(
        replace(agent_diff(b, 0.6, delta, width), agent=f"agent{i}")
        for b, found in benches.items()
        for i, (delta, width) in enumerate(found)
    )
    c = comparison_of(*agents)
    c = replace(c, benchmarks=tuple(dict.fromkeys(c.benchmarks)))
    rules = {b: {k: v for k, v in r.items() if k != "metric"} for b, r in rules.items()}
    d = policy.decide(c, policy.parse(yaml.safe_dump({"benchmarks": rules}), "g.yaml"))
    for b in benches:
        mine = [v.outcome for v in d.verdicts if v.benchmark == b]
        assert len(mine) == len(benches[b]) and d.benchmarks[b] is max(mine, key=RANK.__getitem__)
    today = policy.decide(c, policy.Policy.of_max_drop(max_drop))
    assert today.outcome is gate.overall(gate.verdicts(c, max_drop))
