"""`shards: K` changed after a submission queued a benchmark's jobs: refused, by submit, resubmit and
their dry runs alike, with one message naming the config file, `driver.benchmarks.<b>.shards`, the K
the run dir was queued with and the fix (restore it, or new=1), before anything is staged, copied,
released or queued. The shards already queued slice the rows by the old K: new shards with a new K
would run rows twice or never, and the merge would mix both.

In this process with the real Slurm executor in a real bash session and the stand-in scheduler of
tests/submit/test_queue.py (its sbatch and squeue).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gymbuild.cli import main
from gymbuild.resources import user_state_home
from gymbuild.state.records import SubmissionRecord
from tests.submit.test_queue import _queued, _submit
from tests.submit.test_shards_queue import shard_ids, sharded_user


def set_shards(user: dict[str, Any], count: int) -> None:
    """The user edits the config: `big` gets `shards: count` (1: the key removed, one job)."""
    path: Path = user["config"]
    data = yaml.safe_load(path.read_text())
    big = data["driver"]["benchmarks"]["big"]
    big.pop("shards", None)
    if count > 1:
        big["shards"] = count
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def run(user: dict[str, Any], capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str, str]:
    rc = main.main([*words, f"config={user['config']}"])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_refused(user: dict[str, Any], err: str, before: int, now: int) -> None:
    """The one message: the file, the config path, both K, the fix; nothing else on stderr."""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith(f"error: {user['config']}: driver.benchmarks.big.shards: "), err
    said = {1: "no shards (one job)"}
    assert f"{said.get(now, f'shards: {now}')} now" in lines[0], err
    assert f"queued big with {said.get(before, f'shards: {before}')}" in lines[0], err
    assert lines[1] == (
        f"    fix: restore shards: {before} to carry on with this run dir, or pass new=1 for a fresh "
        "submission with the new K"
    )


def submitted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, before: int) -> dict[str, Any]:
    user = sharded_user(tmp_path, monkeypatch, shards=max(before, 2))
    set_shards(user, before)
    rc, _, err = _submit(user, capsys)
    assert rc == 0, err
    return user


def snapshot(user: dict[str, Any]) -> tuple[dict[str, list[str]], str, dict[str, str]]:
    """What a refused verb must leave as it was: the scheduler's jobs, the record, the run dir's files."""
    (manifest,) = user["runs"].glob("gym-job-*/gym-job.json")
    files = {
        str(p.relative_to(user["runs"])): p.read_text()
        for p in sorted(user["runs"].rglob("*"))
        if p.is_file()
    }
    return _queued(user), manifest.read_text(), files


@pytest.mark.parametrize(("before", "now"), [(3, 2), (3, 4), (2, 1), (1, 3)])
def test_a_changed_k_is_refused_by_submit_and_render_and_restoring_it_carries_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, before: int, now: int
) -> None:
    user = submitted(tmp_path, monkeypatch, capsys, before)
    was = snapshot(user)
    set_shards(user, now)
    for verb in (["submit"], ["render"], ["submit", "--dry-run"], ["resubmit"], ["resubmit", "--dry-run"]):
        rc, _, err = run(user, capsys, *verb)
        assert rc == 1, (verb, err)
        assert_refused(user, err, before, now)
    assert snapshot(user) == was  # nothing queued, copied or recorded

    set_shards(user, before)  # the fix the message gives: the run dir carries on as it was
    rc, out, err = run(user, capsys, "submit")
    assert rc == 0 and "nothing to submit" in out, err
    assert _queued(user) == was[0]


def test_new_1_submits_the_new_k_afresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    user = submitted(tmp_path, monkeypatch, capsys, 3)
    set_shards(user, 2)
    rc, _, err = run(user, capsys, "submit", "new=1")
    assert rc == 0, err
    queued = {n: len(i) for n, i in _queued(user).items()}  # the old run's shard 2 is not queued again
    assert queued == {"gym-alpha": 2, "gym-big+shard0": 2, "gym-big+shard1": 2, "gym-big+shard2": 1}
    records = [
        SubmissionRecord.load(json.loads(p.read_text())) for p in user["runs"].glob("gym-job-*/gym-job.json")
    ]
    assert sorted(len(shard_ids(r)) for r in records) == [2, 3]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    before=st.integers(1, 4),
    now=st.integers(1, 4),
    refused=st.one_of(st.none(), st.integers(0, 3)),
    written=st.booleans(),
)
def test_submit_goes_on_exactly_when_k_is_the_one_queued(capsys, before, now, refused, written) -> None:
    """Searched: any K before and after, a shard (or the plain job) refused by sbatch the first time,
    and a workspace from before gymbuild wrote K down (its K read from the shards' outcomes)."""
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("XDG_STATE_HOME", f"{tmp}/state")  # each example's own workspace
        user = sharded_user(Path(tmp), monkeypatch, shards=max(before, 2))
        set_shards(user, before)
        name = "gym-big" if before == 1 else f"gym-big+shard{min(refused or 0, before - 1)}"
        (user["sched"] / "refused").write_text(f"{name}\n" if refused is not None else "")
        _submit(user, capsys)
        (user["sched"] / "refused").write_text("")
        if not written:  # the workspace as a submit before this change left it
            kept = list((user_state_home() / "gymbuild" / "workspaces").glob("*/outcomes/big.shards"))
            assert len(kept) == (before > 1)
            for each in kept:
                each.unlink()
        first = _queued(user)
        set_shards(user, now)
        rc, _, err = run(user, capsys, "submit")
        plain_never_queued = before == 1 and refused is not None  # no job ran: nothing to slice apart
        if before == now or plain_never_queued:
            assert rc == 0 and "Traceback" not in err, err
        else:
            assert rc == 1 and _queued(user) == first
            assert_refused(user, err, before, now)
