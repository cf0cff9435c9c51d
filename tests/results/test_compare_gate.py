"""`gymbuild compare max_drop=` as a CI gate: exit 1 on a drop shown, 2
(INCONCLUSIVE) when anything asked for was not compared in full or the interval cannot tell, 0 only
when every asked benchmark was compared in full and a drop beyond max_drop is ruled out. A gate that
is green when nothing was compared passes the worst regression of all: a run that crashed.

The runs are real local submissions (compare_helpers.record): run directories with gym's files, records
in the local index, jobs whose exit file says COMPLETED, or that are gone without one (FAILED). The
search runs the verb in-process (its exception is its exit status, task_kinds.user_action); the
reproductions run the installed command.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from compare_helpers import A, B, record, rollouts
from e2e_helpers import gymbuild, user_env
from hypothesis import given, settings
from hypothesis import strategies as st

from gymbuild.errors import Inconclusive, UsageError, UserError
from gymbuild.request.invocation import Invocation
from gymbuild.request.verb_args import CompareArgs
from gymbuild.results import compare_read
from gymbuild.submit.session import Session

SAME = {t: [1, 0] for t in range(200)}  # no task moves; 200 rule out a drop of 0.02

# What one run's side of one benchmark can be.
COMPLETE, NO_FILE, EMPTY, PARTIAL, CRASHED, ABSENT = (
    "complete",
    "no file",
    "empty",
    "partial",
    "crashed",
    "absent",
)
KINDS = (COMPLETE, NO_FILE, EMPTY, PARTIAL, CRASHED, ABSENT)


def side_files(kind: str, scores: dict[int, list[int]]) -> tuple[str | None, int | None]:
    """(rollouts.jsonl text or None, rollouts asked for or None: as many as written) of a side."""
    full = rollouts(scores)
    if kind == NO_FILE:
        return None, len(full.splitlines())
    if kind == EMPTY:
        return "", len(full.splitlines())
    if kind == PARTIAL:
        return "".join(full.splitlines(keepends=True)[:-1]), len(full.splitlines())
    return full, None


def make_run(home: Path, ident: str, sides: dict[str, tuple[str, dict[int, list[int]]]]) -> None:
    benches, expected, crashed = {}, {}, []
    for bench, (kind, scores) in sides.items():
        if kind == ABSENT:
            continue
        benches[bench], asked = side_files(kind, scores)
        if asked is not None:
            expected[bench] = asked
        if kind == CRASHED:
            crashed.append(bench)
    record(home, ident, "m", benches, expected=expected, crashed=tuple(crashed))


def gate(home: Path, *args: str) -> tuple[int, str, str]:
    """The verb in this process, on the runs under `home`: (exit status, stdout, the message)."""
    import contextlib
    import io

    before = {k: os.environ.get(k) for k in ("XDG_CACHE_HOME",)}
    os.environ["XDG_CACHE_HOME"] = str(home / "xdg-cache")
    out = io.StringIO()
    s = Session(Invocation.from_argv(["compare", f"run={A},{B}", *args, f"workspace={home / 'ws'}"]))
    try:
        with contextlib.redirect_stdout(out):
            compare_read.print_compare(s, CompareArgs.of(s.inv))
        return 0, out.getvalue(), ""
    except UsageError as err:
        return err.status, out.getvalue(), str(err)
    except Inconclusive as err:
        return 2, out.getvalue(), str(err)
    except UserError as err:
        return 1, out.getvalue(), str(err)
    finally:
        s.close()
        for k, v in before.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


scores = st.dictionaries(
    st.integers(0, 5), st.lists(st.integers(0, 1), min_size=2, max_size=2), min_size=1, max_size=4
)
bench_pair = st.tuples(st.sampled_from(KINDS), st.sampled_from(KINDS), scores, scores)


@settings(max_examples=40)
@given(st.dictionaries(st.sampled_from(["quiz", "math", "code"]), bench_pair, min_size=1, max_size=3))
def test_the_gate_is_green_only_when_every_asked_benchmark_was_compared_in_full(
    tmp_path_factory: pytest.TempPathFactory,
    benches: dict[str, tuple[str, str, dict[int, list[int]], dict[int, list[int]]]],
) -> None:
    home = tmp_path_factory.mktemp("runs")
    make_run(home, A, {b: (kb, sb) for b, (kb, _, sb, _) in benches.items()})
    make_run(home, B, {b: (kc, sc) for b, (_, kc, _, sc) in benches.items()})
    # A benchmark neither run has is not asked for; a side that is whole but pairs nothing with the
    # other (no common task) is not compared either; nor is anything when no benchmark is left.
    asked = {b: v for b, v in benches.items() if not v[0] == v[1] == ABSENT}
    disjoint = any(kb == kc == COMPLETE and not set(sb) & set(sc) for kb, kc, sb, sc in asked.values())
    whole = bool(asked) and all(kb == kc == COMPLETE for kb, kc, _, _ in asked.values()) and not disjoint
    status, out, said = gate(home, "max_drop=0.02", "json=1")
    doc = json.loads(out)
    assert status in (0, 1, 2)
    if status == 0:
        assert whole and doc["verdict"] == "pass" and doc["inconclusive"] == [], doc
    if not whole:
        assert status != 0
        assert doc["inconclusive"], doc
        for line in doc["inconclusive"]:
            assert f"  inconclusive: {line}" in said
    if status == 2:
        assert said.startswith("INCONCLUSIVE: ") and doc["verdict"] == "inconclusive"
    if status == 1:
        assert doc["verdict"] == "drop" and doc["dropped"] and "dropped by more than" in said
    # Every benchmark that is not whole on a side is named.
    named = " ".join(doc["inconclusive"])
    for bench, (kb, kc, _, _) in asked.items():
        if kb != COMPLETE or kc != COMPLETE:
            assert bench in named, (bench, named)


def test_a_run_that_crashed_is_inconclusive_exit_2_not_a_pass(tmp_path: Path) -> None:
    """The reproduction: `compare run=<ok>,<crashed> max_drop=0.02` exited 0."""
    record(tmp_path, A, "m1", {"quiz": rollouts(SAME)})
    record(tmp_path, B, "m2", {"quiz": None}, expected={"quiz": 12}, crashed=("quiz",))
    env = user_env(tmp_path)
    rc, out, err = gymbuild("compare", f"run={A},{B}", "max_drop=0.02", cwd=tmp_path, env=env, timeout=120)
    assert rc == 2, (out, err)
    assert err.startswith("INCONCLUSIVE: ") and "Traceback" not in err
    assert "  inconclusive: quiz: the candidate's job is FAILED, not COMPLETED" in err
    assert "  inconclusive: quiz: no rollouts.jsonl in the candidate" in err
    assert "not compared in full (a max_drop= gate is INCONCLUSIVE):" in out
    rc, out, err = gymbuild(
        "compare", f"run={A},{B}", "max_drop=0.02", "json=1", cwd=tmp_path, env=env, timeout=120
    )
    assert rc == 2 and json.loads(out)["verdict"] == "inconclusive"
    # Without max_drop= it is a report, not a gate: said, exit 0.
    rc, out, err = gymbuild("compare", f"run={A},{B}", cwd=tmp_path, env=env, timeout=120)
    assert rc == 0 and "quiz: no rollouts.jsonl in the candidate" in out, err


def test_neither_side_with_rollouts_is_nothing_compared_exit_2(tmp_path: Path) -> None:
    """The second reproduction: neither run had a rollouts file, and the gate said 0."""
    record(tmp_path, A, "m1", {"quiz": None})
    record(tmp_path, B, "m2", {"quiz": None})
    rc, out, err = gymbuild(
        "compare", f"run={A},{B}", "max_drop=0.02", cwd=tmp_path, env=user_env(tmp_path), timeout=120
    )
    assert rc == 2, (out, err)
    assert "  inconclusive: quiz: no rollouts.jsonl in the baseline" in err
    assert "  inconclusive: quiz: no rollouts.jsonl in the candidate" in err
    assert "  inconclusive: nothing was compared" in err


def test_only_naming_a_benchmark_neither_run_has_is_a_mistake_not_an_empty_pass(tmp_path: Path) -> None:
    record(tmp_path, A, "m1", {"quiz": rollouts(SAME)})
    record(tmp_path, B, "m2", {"quiz": rollouts(SAME)})
    env = user_env(tmp_path)
    rc, out, err = gymbuild(
        "compare", f"run={A},{B}", "max_drop=0.02", "only=qiuz", cwd=tmp_path, env=env, timeout=120
    )
    assert rc == 64 and out == "" and "Traceback" not in err
    assert "only= names benchmark(s) neither run has: qiuz" in err and "fix: pick from quiz" in err
    rc, out, err = gymbuild(
        "compare", f"run={A},{B}", "max_drop=0.02", "only=quiz", "json=1", cwd=tmp_path, env=env, timeout=120
    )
    assert rc == 0 and json.loads(out)["verdict"] == "pass", err


def test_a_drop_with_a_partial_benchmark_beside_it_is_exit_1_naming_both(tmp_path: Path) -> None:
    tasks = range(50)
    record(tmp_path, A, "m1", {"quiz": rollouts({t: [1, 1] for t in tasks}), "math": rollouts(SAME)})
    drop = rollouts({t: [0, 0] if t % 5 < 2 else [1, 1] for t in tasks})
    record(tmp_path, B, "m2", {"quiz": drop, "math": rollouts(SAME)}, expected={"math": 500})
    rc, _, err = gymbuild(
        "compare", f"run={A},{B}", "max_drop=0.2", cwd=tmp_path, env=user_env(tmp_path), timeout=120
    )
    assert rc == 1, err
    assert "DROP quiz (agent) mean/reward -0.4" in err
    assert "  inconclusive: math (agent): the candidate is partial: 400/500 rollouts scored" in err


def test_a_candidate_that_failed_after_writing_every_rollout_is_inconclusive_not_gated(
    tmp_path: Path,
) -> None:
    """The reproduction: a FAILED job with complete files was gated as if it had completed."""
    record(tmp_path, A, "m1", {"quiz": rollouts(SAME)})
    record(tmp_path, B, "m2", {"quiz": rollouts(SAME)}, crashed=("quiz",))
    rc, out, err = gymbuild(
        "compare",
        f"run={A},{B}",
        "max_drop=0.02",
        "json=1",
        cwd=tmp_path,
        env=user_env(tmp_path),
        timeout=120,
    )
    assert rc == 2, err
    (verdict,) = json.loads(out)["verdicts"]
    assert verdict["outcome"] == "INCONCLUSIVE" and verdict["estimate"] == 0.0  # the numbers say pass
    assert "quiz: the candidate's job is FAILED, not COMPLETED" in verdict["reason"]
