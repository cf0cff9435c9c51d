"""The day-two verbs on a sharded benchmark: `resubmit` queues again only the shards missing rows
(its record entry keeps shard 0's job, the shards' ids in executor_metadata are updated; the dry run
names them), `status` shows one row, `cancel` stops every live shard, `logs` shows every shard's.

In this process with the real Slurm executor in a real bash session and the stand-in scheduler of
tests/submit/test_queue.py, whose sacct here reports the states a test writes; the rollout counts are
real files in the run directory (status reads them as on a cluster).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gymbuild.cli import main
from tests.day_two.test_rollouts import write_artifacts
from tests.submit.test_queue import _queued, _submit
from tests.submit.test_shards_queue import shard_ids, shard_record, sharded_user


def sacct_says(user: dict[str, Any], states: dict[str, tuple[str, str]]) -> None:
    """What the stand-in sacct reports: job id -> (state, exit code), as `sacct -X -n -P` prints it."""
    lines = "".join(f"{i}\\t{st}\\t{code}\\t00:01:00\\tnode1\\t{i}\\n" for i, (st, code) in states.items())
    (user["sched"] / "sacct").write_text(lines)


@pytest.fixture
def two_shards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    user = sharded_user(tmp_path, monkeypatch, shards=2)
    monkeypatch.setenv("BASH_FUNC_sacct%%", '() { printf "$(cat "$GYM_TEST_SCHED/sacct" 2>/dev/null)"; }')
    return user


def _submitted(user: dict[str, Any], capsys: Any) -> tuple[dict[str, list[str]], str, str, Path]:
    """Submitted: what the scheduler holds, shard 0's and shard 1's job ids, the run dir."""
    rc, _, err = _submit(user, capsys)
    assert rc == 0, err
    first = _queued(user)
    return first, first["gym-big+shard0"][0], first["gym-big+shard1"][0], Path(shard_record(user).run_dir)


def test_resubmit_queues_only_the_shard_missing_rows(two_shards, capsys) -> None:
    user = two_shards
    first, shard0, shard1, run_dir = _submitted(user, capsys)
    write_artifacts(run_dir / "big", done=0, expected=5)  # materialized once by shard 0; no merge yet
    write_artifacts(run_dir / "big" / "shards" / "0", done=2, expected=2)  # complete
    write_artifacts(run_dir / "big" / "shards" / "1", done=1, expected=3)  # 2 rows missing
    sacct_says(
        user,
        {
            first["gym-alpha"][0]: ("COMPLETED", "0:0"),
            shard0: ("COMPLETED", "0:0"),
            shard1: ("FAILED", "1:0"),
        },
    )

    rc = main.main(["resubmit", f"config={user['config']}", "--dry-run"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "would re-queue 1 benchmark(s)" in out and "shards to queue: big+shard1" in out
    assert "rows 1/5 scored" not in out and "rows 3/5 scored" in out  # the shards' sum of the whole
    assert _queued(user) == first  # a dry run queues nothing

    rc = main.main(["resubmit", f"config={user['config']}"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    after = _queued(user)
    assert after["gym-big+shard0"] == [shard0] and after["gym-alpha"] == first["gym-alpha"]
    assert len(after["gym-big+shard1"]) == 2  # shard 1 alone, queued again
    again = after["gym-big+shard1"][1]
    assert f"submitted big shard 1 -> Slurm job {again}" in out
    record = shard_record(user)
    big = record.benchmarks[1]
    assert shard_ids(record) == [shard0, again] and big.job_id == shard0  # shard 0's job, unchanged
    assert shard1 in big.previous_job_ids


# squeue as the status and cancel scripts ask it (-u, their -o formats): the live jobs a test lists in
# `live` (`id state dir`); scancel notes what it was asked to stop.
_SQUEUE_LIVE = r"""() {
  case "$*" in *-u*) ;; *) return 0;; esac
  local id st dir; while read -r id st dir; do
    case "$*" in *%M*) printf '%s\t%s\t00:10\tnode1\t%s\t%s\n' "$id" "$st" "$id" "$dir";;
                 *) printf '%s\t%s\t%s\n' "$id" "$st" "$dir";; esac
  done < <(cat "$GYM_TEST_SCHED/live" 2>/dev/null)
}"""


def test_cancel_stops_every_live_shard_of_the_benchmark(two_shards, capsys, monkeypatch) -> None:
    user = two_shards
    first, shard0, shard1, run_dir = _submitted(user, capsys)
    monkeypatch.setenv("BASH_FUNC_squeue%%", _SQUEUE_LIVE)
    monkeypatch.setenv("BASH_FUNC_scancel%%", '() { echo "$@" >> "$GYM_TEST_SCHED/scancelled"; }')
    live = [
        (shard0, "RUNNING", run_dir / "big" / "shards" / "0"),
        (shard1, "PENDING", run_dir / "big" / "shards" / "1"),
    ]
    (user["sched"] / "live").write_text("".join(f"{i} {st} {d}\n" for i, st, d in live))
    sacct_says(user, {first["gym-alpha"][0]: ("COMPLETED", "0:0")})

    rc = main.main(["status", f"config={user['config']}"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert f"big: 0: {shard0} RUNNING, 1: {shard1} PENDING" in out  # one row, RUNNING while one runs

    rc = main.main(["cancel", f"config={user['config']}"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert sorted((user["sched"] / "scancelled").read_text().split()) == sorted([shard0, shard1])
    assert f"{shard0} (big shard 0 RUNNING)" in out and f"{shard1} (big shard 1 PENDING)" in out


def test_logs_show_every_shards_logs_under_its_name(two_shards, capsys) -> None:
    user = two_shards
    _, shard0, shard1, run_dir = _submitted(user, capsys)
    for k, job in enumerate((shard0, shard1)):
        (run_dir / "big" / "shards" / str(k) / "logs" / f"driver-{job}.log").write_text(
            f"gym: shard {k} of 2\n"
        )
    sacct_says(user, {shard0: ("COMPLETED", "0:0"), shard1: ("FAILED", "1:0")})
    rc = main.main(["logs", f"config={user['config']}", "only=big"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    at0, at1 = (
        out.index(f"=== big shard 0 (job {shard0}) ==="),
        out.index(f"=== big shard 1 (job {shard1}) ==="),
    )
    assert at0 < out.index("gym: shard 0 of 2") < at1 < out.index("gym: shard 1 of 2")
