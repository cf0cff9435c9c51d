"""Rollout counts (gymbuild/state/rollouts.py): gym's three files in a bench dir's artifacts/, counted by the
real bash and `wc` the status scripts run, and what status shows of them.

The local executor's status round trip runs here on real files (its job gone, so it reads FAILED);
the Slurm one runs on the test cluster in tests/executors/test_states.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from gymbuild.day_two.status import format_statuses, statuses_json
from gymbuild.executors import local
from gymbuild.executors.connection import Connection
from gymbuild.executors.states import BenchStatus
from gymbuild.shell import quote
from gymbuild.state.records import SubmissionRecord
from gymbuild.state.rollouts import Progress, Rates, count_command, dir_files, duration, parse_counts


def write_artifacts(bench_dir: Path, done: int, expected: int | None, failed: int = 0) -> None:
    """What gym eval run leaves in a bench dir: one line per materialized, finished, failed rollout."""
    artifacts = bench_dir / "artifacts"
    artifacts.mkdir(parents=True)
    (artifacts / "rollouts.jsonl").write_text("".join(f'{{"task_index": {i}}}\n' for i in range(done)))
    if expected is not None:
        (artifacts / "rollouts_materialized_inputs.jsonl").write_text('{"x": 1}\n' * expected)
    if failed:
        (artifacts / "rollouts_failures.jsonl").write_text('{"failure": 1}\n' * failed)


def counted(dirs: list[Path]) -> dict[str, Progress]:
    files = " ".join(dir_files(quote(str(d))) for d in dirs)
    script = f"shopt -s nullglob; {count_command(files)}"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True, timeout=60)
    return parse_counts(out.stdout)


def test_each_dir_gets_its_own_counts_and_a_dir_without_gyms_files_none(tmp_path: Path) -> None:
    running, spaced, early, command = (tmp_path / n for n in ("running", "two words", "early", "command"))
    write_artifacts(running, done=3, expected=10, failed=2)
    write_artifacts(spaced, done=5, expected=5)
    write_artifacts(early, done=0, expected=None)  # gym still writing its materialized inputs
    (command / "artifacts").mkdir(parents=True)
    (command / "artifacts" / "metrics.json").write_text("{}")
    assert counted([running, spaced, early, command]) == {
        str(running): Progress(3, 10, 2),
        str(spaced): Progress(5, 5, 0),
        str(early): Progress(0, None, 0),
    }


def test_no_file_at_all_prints_nothing_rather_than_reading_stdin(tmp_path: Path) -> None:
    """wc with no file would wait on stdin; a run of command benchmarks has none of gym's files."""
    assert counted([tmp_path / "command"]) == {}


def test_a_half_written_last_line_is_not_a_rollout(tmp_path: Path) -> None:
    """gym appends a rollout as one line; a job killed mid-write leaves a tail without its newline,
    which gym's resume drops (_drop_truncated_tail): it is not counted as done either."""
    bench = tmp_path / "cut"
    write_artifacts(bench, done=2, expected=4)
    with (bench / "artifacts" / "rollouts.jsonl").open("a") as f:
        f.write('{"task_ind')
    assert counted([bench]) == {str(bench): Progress(2, 4, 0)}


def test_the_text_says_done_of_expected_and_failed() -> None:
    assert Progress(3, 5, 1).text() == "3/5 (1 failed)"
    assert Progress(5, 5).text() == "5/5"
    assert Progress(2).text() == "2"
    assert Progress(3, 5).partial and not Progress(5, 5).partial and not Progress(2).partial


def test_the_time_left_is_from_the_rate_since_the_first_look() -> None:
    """First seen at 2 of 12 (the model loading took minutes before); 10 s later at 4: 0.2 a second,
    so the 8 left take 40 s, whatever the job's elapsed time."""
    rates = Rates()
    rates.seen([("b", "7", Progress(2, 12))], now=100.0)
    assert rates.eta("b", "7", Progress(2, 12)) is None  # one look: no rate yet
    now = Progress(4, 12, 1)
    rates.seen([("b", "7", now)], now=110.0)
    assert rates.eta("b", "7", now) == 40.0
    assert rates.bar("b", "7", now) == "[######..............] 4/12 (1 failed), 40s left"
    assert rates.eta("b", "8", now) is None  # a new job (a resubmit) starts its own rate
    assert rates.bar("b", "7", Progress(12, 12)) == "[####################] 12/12"


def test_durations_read_as_a_person_says_them() -> None:
    assert [duration(s) for s in (0, 45.4, 130, 3600 * 3 + 5 * 60 + 9)] == ["0s", "45s", "2m10s", "3h05m"]


def record() -> SubmissionRecord:
    return SubmissionRecord(
        gym_job_id="gym-job-20260101T000000Z-abcdef",
        gym_version="0.1.0",
        submitted_at="2026-01-01T00:00:00Z",
        run_dir="/runs/r",
        cluster="gym-login",
        executor="slurm",
        submitted_by="me",
        benchmarks=(),
    )


def test_status_shows_a_rollouts_column_only_when_some_benchmark_counts() -> None:
    rows = [
        BenchStatus("gsm8k", "11", "RUNNING", None, "00:05", "n1", None, progress=Progress(3, 10, 1)),
        BenchStatus("math", "12", "FAILED", "1:0", "00:09", "n2", None, progress=Progress(7, 10)),
        BenchStatus("done", "13", "COMPLETED", "0:0", "00:09", "n2", None, progress=Progress(10, 10)),
        BenchStatus("custom", "14", "COMPLETED", "0:0", "00:01", "n3", None),
    ]
    table = format_statuses(record(), rows).splitlines()
    assert table[1].split() == ["BENCHMARK", "JOB", "STATE", "EXIT", "ELAPSED", "ROLLOUTS", "NODES"]
    assert table[2].split() == ["gsm8k", "11", "RUNNING", "-", "00:05", "3/10", "(1", "failed)", "n1"]
    assert table[3].split() == ["math", "12", "FAILED", "1:0", "00:09", "7/10", "partial", "n2"]
    assert table[4].split() == ["done", "13", "COMPLETED", "0:0", "00:09", "10/10", "n2"]
    assert table[5].split() == ["custom", "14", "COMPLETED", "0:0", "00:01", "-", "n3"]
    plain = format_statuses(record(), [rows[3]]).splitlines()
    assert plain[1].split() == ["BENCHMARK", "JOB", "STATE", "EXIT", "ELAPSED", "NODES"]
    docs = statuses_json(record(), rows)
    assert '"progress": {\n        "done": 3,\n        "expected": 10,\n        "failed": 1\n      }' in docs
    assert docs.count('"progress"') == 3


def test_watch_draws_a_bar_and_the_time_left_for_a_running_benchmark() -> None:
    rates = Rates().seen([("gsm8k", "11", Progress(2, 10))], now=0.0)
    row = BenchStatus("gsm8k", "11", "RUNNING", None, "00:05", "n1", None, progress=Progress(6, 10))
    rates.seen([("gsm8k", "11", row.progress)], now=20.0)
    (line,) = [x for x in format_statuses(record(), [row], rates=rates).splitlines() if "gsm8k" in x]
    assert "[############........] 6/10, 20s left" in line


def test_local_status_counts_in_its_one_round_trip(tmp_path: Path) -> None:
    """A local job gone without an exit file (killed from outside) reads FAILED; its counts come with
    that look, and a dir whose job wrote none of gym's files has none."""
    gym, command = tmp_path / "gym", tmp_path / "it's a command"
    write_artifacts(gym, done=4, expected=9, failed=1)
    command.mkdir()
    with Connection(None) as conn:
        found = local.states(conn, {str(gym): "999999999", str(command): "999999998"})
    assert (found[str(gym)].state, found[str(gym)].progress) == ("FAILED", Progress(4, 9, 1))
    assert (found[str(command)].state, found[str(command)].progress) == ("FAILED", None)
