"""The compare reader that cuts rollouts to their numbers on the target gives the comparison exactly
what the reader before it gave (tests/results/compare_before.py, frozen), on odd files as on gym's:
unicode, huge and non-finite numbers, missing fields, lines that are not objects or do not parse,
duplicates, blank lines and empty files. Each reader runs as the verb runs it: the bash of one round
trip (compare_read.read_script), python3 found on PATH, its output split as the connection splits it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import unicodedata
from pathlib import Path

import compare_before
from compare_helpers import A, B, asked, record, rollouts
from e2e_helpers import gymbuild, user_env
from hypothesis import event, given
from hypothesis import strategies as st

from gymbuild.results import compare, compare_read, read

FILES = {
    "rollouts": compare.ROLLOUTS_FILE,
    "asked": compare.MATERIALIZED_FILE,
    "failures": compare.FAILURES_FILE,
    "aggregate": compare.AGGREGATE_FILE,
}


def through(script: str, bench_dir: Path, *, path: str | None = None) -> dict[str, str]:
    """One bench dir's files as the verb gets them from the round trip running `script`."""
    env = dict(os.environ) if path is None else {"PATH": path}
    bash = shutil.which("bash")
    assert bash
    done = subprocess.run([bash, "-c", script], capture_output=True, env=env, check=True, timeout=120)
    (got,) = read.parse_read(done.stdout.decode(errors="replace"), 1)
    return {name.rsplit("/", 1)[-1]: text for name, text in got.items()}


def sides(bench_dir: Path) -> tuple[compare.Side | None, compare.Side | None]:
    """(the Side before, from the frozen reader and parse; the Side now)."""
    pairs = [("b", str(bench_dir))]
    old = read.read_script(pairs, compare_before.READER, "exit 97")  # python3 is on this PATH
    before = compare_before.parse_side(through(old, bench_dir))
    return before, compare.parse_side(through(compare_read.read_script(pairs), bench_dir))


def write(bench_dir: Path, files: dict[str, bytes | None]) -> None:
    artifacts = bench_dir / "artifacts"
    artifacts.mkdir(parents=True)
    for key, data in files.items():
        if data is not None:
            (artifacts / FILES[key]).write_bytes(data)


# --- odd rows -----------------------------------------------------------------------------------

HUGE = 10**400  # an int JSON carries and no float holds
NUMBERS = (
    st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0, -0.0, 1e308, 5e-324, True])
)
ODD_NUMBERS = NUMBERS | st.sampled_from([HUGE, -HUGE, False])
SCALARS = st.none() | st.booleans() | NUMBERS | st.text(max_size=6)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
INDEX = (
    st.integers(0, 3)
    | st.floats(0, 3)
    | st.sampled_from(
        ["1", " 2 ", "\u0663", "1_0", "x", "", None, True, HUGE, float("inf"), float("nan"), [1], {}]
    )
)
NAMES = st.none() | st.sampled_from(["agent", "other", "\u00e9t\u00e9", "\u2028", ""]) | st.integers(0, 2)
EXTRA = {
    "_ng_environment_server": NAMES,
    "sc\u00f6re": ODD_NUMBERS,
    "_private": NUMBERS,
    "response": SCALARS
    | st.fixed_dictionaries(
        {},
        optional={
            "usage": SCALARS
            | st.dictionaries(
                st.sampled_from(["input_tokens", "output_tokens", "total_tokens", "x"]), NUMBERS | SCALARS
            ),
            "output": VALUES,
        },
    ),
    "answer": st.text(),
    "extra": VALUES,
}
GYM_ROW = st.fixed_dictionaries(  # a row gym writes, with odd values where gym leaves room
    {
        "_ng_task_index": st.integers(0, 3),
        "_ng_rollout_index": st.integers(0, 2),
        "agent_ref": st.fixed_dictionaries({"name": st.sampled_from(["agent", "other"])}),
        "reward": NUMBERS,
    },
    optional=EXTRA,
)
ODD_ROW = st.fixed_dictionaries(  # any of its fields missing or of another type
    {},
    optional={
        "_ng_task_index": INDEX,
        "_ng_rollout_index": INDEX,
        "agent_ref": st.none()
        | st.just([])
        | st.fixed_dictionaries({}, optional={"name": NAMES, "x": SCALARS}),
        "reward": ODD_NUMBERS,
        **EXTRA,
    },
)
ROW = GYM_ROW | GYM_ROW | ODD_ROW


@st.composite
def lines(draw: st.DrawFn, rows: st.SearchStrategy[dict[str, object]] = ROW) -> bytes:
    """A file of JSON lines as a job may leave it: gym's lines, and lines that are not objects, do
    not parse, are cut short, blank, or carry bytes and unicode that JSON and line-splitting treat
    apart (U+2028, a BOM, CR, NUL, invalid UTF-8)."""
    out = []
    for _ in range(draw(st.integers(0, 12))):
        row = draw(rows)
        text = json.dumps(row, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
        kind = draw(st.integers(0, 12))
        line = {
            0: text,
            1: json.dumps(draw(VALUES)).encode(),  # not an object
            2: text[: draw(st.integers(0, max(len(text) - 1, 0)))],  # cut short
            3: b"",
            4: b" \t",
            5: b" " + text,
            6: text + b" x",  # extra data
            7: b"\xef\xbb\xbf" + text,  # a BOM: json.loads of bytes takes it
            8: text.replace(b",", b",\r", 1),
            9: text + b"\x00",
            10: b"\xff" + text,
            11: text + b"\r",
            12: text,
        }[kind]
        out.append(line)
    return b"\n".join(out) + draw(st.sampled_from([b"", b"\n", b"\n\n"]))


ASKED = st.fixed_dictionaries(
    {"_ng_task_index": st.integers(0, 3)},
    optional={"agent_ref": st.none() | st.fixed_dictionaries({}, optional={"name": NAMES})},
)
AGGREGATE = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "agent_ref": st.fixed_dictionaries({}, optional={"name": NAMES}),
            "key_metrics": st.dictionaries(st.text(max_size=8), NUMBERS, max_size=2)
            | st.lists(st.text(max_size=8), max_size=2),
        },
    ),
    max_size=2,
).map(lambda got: json.dumps(got).encode()) | st.sampled_from([b"", b"{", b"null", b"[1]"])


@given(
    rollouts_=st.none() | lines(),
    asked_=st.none() | lines(ASKED),
    failures=st.none() | lines(),
    aggregate=st.none() | AGGREGATE,
)
def test_the_cut_gives_the_comparison_what_the_whole_rows_gave(
    tmp_path_factory: object,
    rollouts_: bytes | None,
    asked_: bytes | None,
    failures: bytes | None,
    aggregate: bytes | None,
) -> None:
    bench_dir = tmp_path_factory.mktemp("bench")  # type: ignore[attr-defined]
    write(bench_dir, {"rollouts": rollouts_, "asked": asked_, "failures": failures, "aggregate": aggregate})
    try:
        before, now = sides(bench_dir)
    except OverflowError:  # the reader before raised on an int past float's range, or an infinite index
        event("before: OverflowError")
        now = compare.parse_side(through(compare_read.read_script([("b", str(bench_dir))]), bench_dir))
        assert now is not None
        return
    event(f"rows compared: {sum(len(r) for r in before.rollouts.values()) if before else None}")
    assert now == before


def test_rows_as_gym_writes_them_give_the_same_side_read_whole_without_python3(tmp_path: Path) -> None:
    """A target without python3 sends the files whole (read.bash_reader): the same Side as the cut."""
    scores = {t: [t % 2, (t // 2) % 2, 1] for t in range(40)}
    files = {
        "rollouts": (rollouts(scores, tokens=30) + rollouts({0: [1]}, agent="other")).encode(),
        "asked": (asked(scores) + asked({0: [1]}, agent="other")).encode(),
        "failures": b"{}\n{}\n",
        "aggregate": json.dumps(
            [{"agent_ref": {"name": "agent"}, "key_metrics": {"mean/reward": 0.5}}]
        ).encode(),
    }
    write(tmp_path, files)
    whole = through(compare_read.read_script([("b", str(tmp_path))]), tmp_path, path="/nonexistent")
    assert compare.ROLLOUTS_FILE in whole and compare.ROLLOUTS_FILE + compare.CUT not in whole
    side = compare.parse_side(whole)
    assert side is not None and side.lines == {"agent": 120, "other": 1} and side.failed == 2
    assert side == sides(tmp_path)[1]


def test_what_travels_of_a_rollout_is_its_numbers_not_its_answer(tmp_path: Path) -> None:
    row = {
        "_ng_task_index": 7,
        "_ng_rollout_index": 1,
        "agent_ref": {"name": "agent"},
        "reward": 1.0,
        "response": {"output": [{"text": "the answer is SECRET-42"}], "usage": {"output_tokens": 9}},
        "extracted_answer": "SECRET-42",
    }
    write(tmp_path, {"rollouts": (json.dumps(row) + "\n").encode()})
    bash = shutil.which("bash")
    assert bash
    script = compare_read.read_script([("b", str(tmp_path))])
    sent = subprocess.run([bash, "-c", script], capture_output=True, check=True, timeout=120).stdout
    assert b"SECRET-42" not in sent and b"output_tokens" in sent
    side = compare.parse_side(through(script, tmp_path))
    assert side is not None
    assert side.rollouts == {"agent": {(7, 1): {"mean/reward": 1.0, "mean/output_tokens": 9.0}}}


def test_a_number_past_a_floats_range_is_left_out_not_a_traceback(tmp_path: Path) -> None:
    """An int too large for a float (JSON allows it) in a metric or a task index: that number or row
    is left out, as inf is, and the rest compared (before: OverflowError, a traceback)."""
    good = {t: [1, 0] for t in range(30)}
    odd = json.dumps({"_ng_task_index": 99, "agent_ref": {"name": "agent"}, "reward": 1.0, "score": HUGE})
    inf_task = json.dumps({"_ng_task_index": 1e400, "agent_ref": {"name": "agent"}, "reward": 1.0})
    record(tmp_path, A, "m-a", {"quiz": rollouts(good) + odd + "\n" + inf_task + "\n"})
    record(tmp_path, B, "m-b", {"quiz": rollouts(good) + odd + "\n"})
    rc, out, err = gymbuild(
        "compare", f"run={A},{B}", "json=1", cwd=tmp_path, env=user_env(tmp_path), timeout=120
    )
    assert rc == 0 and "Traceback" not in err, err
    (agent,) = json.loads(out)["agents"]
    assert agent["pairs"] == 61 and agent["baseline_scored"] == 61
    assert [m["metric"] for m in agent["metrics"]] == ["mean/reward"]


def test_a_line_nested_past_jsons_depth_is_left_out_as_a_line_that_does_not_parse(tmp_path: Path) -> None:
    """(before: RecursionError killed the reader, and compare said the runs could not be read)"""
    good = {t: [1, 0] for t in range(30)}
    deep = "[" * 100_000 + "]" * 100_000
    record(tmp_path, A, "m-a", {"quiz": rollouts(good) + deep + "\n"})
    record(tmp_path, B, "m-b", {"quiz": deep + "\n" + rollouts(good)})
    rc, out, err = gymbuild(
        "compare", f"run={A},{B}", "json=1", cwd=tmp_path, env=user_env(tmp_path), timeout=120
    )
    assert rc == 0 and "Traceback" not in err, err
    (agent,) = json.loads(out)["agents"]
    assert agent["pairs"] == 60 and agent["baseline_scored"] == agent["candidate_scored"] == 60


def test_a_rollouts_file_that_cannot_be_read_is_one_line_naming_it(tmp_path: Path) -> None:
    record(tmp_path, A, "m-a", {"quiz": rollouts({0: [1]})})
    record(tmp_path, B, "m-b", {"quiz": rollouts({0: [1]})})
    broken = tmp_path / "runs" / B / "quiz" / "artifacts" / compare.ROLLOUTS_FILE
    broken.unlink()
    broken.symlink_to("/proc/self/mem")  # opens, and every read of it fails (EIO)
    rc, out, err = gymbuild("compare", f"run={A},{B}", cwd=tmp_path, env=user_env(tmp_path), timeout=120)
    assert rc == 1 and out == "" and "Traceback" not in err, err
    assert err.strip().splitlines() == [
        f"error: the runs' rollouts could not be read on this machine: cannot read {broken.parent.parent}/"
        f"artifacts/{compare.ROLLOUTS_FILE}: Input/output error"
    ]


@given(st.text())
def test_a_failed_read_is_said_on_one_line_with_no_control_character(stderr: str) -> None:
    """Whatever the host's reader printed (a file name holds any byte but / and NUL) reaches the
    user's terminal as one line that does nothing to it."""
    from gymbuild.executors.connection import Result
    from gymbuild.results.read import failure

    said = failure(Result(3, "", stderr))
    assert said
    assert not any(unicodedata.category(c) == "Cc" for c in said)
    if not stderr.split():
        assert said == "the read exited 3"
