"""A sharded benchmark (`shards: K`) submitted: each shard queued once as a job of its own, through the
same attempt protocol as any job (in-flight stamp, queue log, recovery after a kill), and ONE record
entry for the benchmark (job_id: shard 0's; every shard's id in executor_metadata["shards.<b>"]).

In this process, with the real Slurm executor in a real bash session; only the scheduler is the
stand-in tests/submit/test_queue.py describes (its sbatch and squeue, reused here).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import slurm_config, write_config

from gymbuild.cli import main
from gymbuild.state.records import SubmissionRecord
from tests.submit.test_queue import _queued, _submit, killed_after_two_sends, scheduler

RUN = {"config_paths": ["benchmarks/gpqa/config.yaml"]}
SHARDS = ("gym-big+shard0", "gym-big+shard1", "gym-big+shard2")


def sharded_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: int = 3, **compute: Any
) -> dict[str, Any]:
    """A config of `alpha` and `big` (`shards: K`) for the stand-in scheduler (test_queue.py)."""
    sched = scheduler(tmp_path, monkeypatch)
    benches = {"alpha": {"run": RUN}, "big": {"run": RUN, "shards": shards}}
    config = slurm_config(tmp_path / "runs", benches, hostname=None)
    config["compute"]["cluster"].update(compute)
    return {"config": write_config(tmp_path, config), "sched": sched, "runs": tmp_path / "runs"}


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    return sharded_user(tmp_path, monkeypatch)


def _manifest(user: dict[str, Any]) -> Path:
    (manifest,) = user["runs"].glob("gym-job-*/gym-job.json")
    return manifest


def shard_record(user: dict[str, Any]) -> SubmissionRecord:
    return SubmissionRecord.load(json.loads(_manifest(user).read_text()))  # valid against the schema


def shard_ids(record: SubmissionRecord) -> list[str]:
    return record.executor_metadata["shards.big"].split(",")


def test_each_shard_is_a_job_and_the_benchmark_one_record_entry(user, capsys) -> None:
    rc, out, err = _submit(user, capsys)
    assert rc == 0 and "Traceback" not in err, err
    queued = _queued(user)
    assert {name: len(ids) for name, ids in queued.items()} == {"gym-alpha": 1, **{s: 1 for s in SHARDS}}
    record = shard_record(user)
    assert [j.benchmark for j in record.benchmarks] == ["alpha", "big"]  # one entry, no shard's own
    big = record.benchmarks[1]
    assert shard_ids(record) == [queued[s][0] for s in SHARDS]
    assert big.job_id == queued["gym-big+shard0"][0] and big.job_dir == f"{record.run_dir}/big"
    for k in range(3):  # each shard ran in its own directory, with its logs/ made before sbatch
        shard_dir = Path(record.run_dir) / "big" / "shards" / str(k)
        assert (shard_dir / "job.sh").is_file() and (shard_dir / "logs").is_dir()
        assert f"#SBATCH --chdir={shard_dir}" in (shard_dir / "job.sh").read_text()
    for k, name in enumerate(SHARDS):
        assert f"submitted big shard {k} -> Slurm job {queued[name][0]}" in out

    rc, out, err = _submit(user, capsys)  # nothing left: no sbatch
    assert rc == 0, err
    assert _queued(user) == queued and "nothing to submit" in out


def test_a_refused_shard_waits_alone_and_the_next_submit_queues_only_it(user, capsys) -> None:
    (user["sched"] / "refused").write_text("gym-big+shard1\n")
    rc, out, err = _submit(user, capsys)
    assert rc == 1 and "Traceback" not in err
    first = _queued(user)
    assert sorted(first) == ["gym-alpha", "gym-big+shard0", "gym-big+shard2"]
    record = shard_record(user)
    assert shard_ids(record) == [first["gym-big+shard0"][0], "", first["gym-big+shard2"][0]]
    # not all queued: no job id for the benchmark, the refused shard named, as for a refused sbatch
    assert record.benchmarks[1].job_id is None
    assert "failed big: shard 1: sbatch: error: Batch job submission failed" in out

    (user["sched"] / "refused").write_text("")
    rc, out, err = _submit(user, capsys)
    assert rc == 0, out + err
    after = _queued(user)
    assert {name: len(ids) for name, ids in after.items()} == {"gym-alpha": 1, **{s: 1 for s in SHARDS}}
    assert shard_ids(shard_record(user)) == [after[s][0] for s in SHARDS]
    assert shard_record(user).benchmarks[1].job_id == after["gym-big+shard0"][0]
    assert f"submitted big shard 1 -> Slurm job {after['gym-big+shard1'][0]}" in out  # that shard alone
    assert "shard 0" not in out and "submitted alpha" not in out


def test_a_submit_killed_mid_queue_leaves_each_shard_queued_exactly_once(
    user, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    killed_after_two_sends(user, capsys, monkeypatch)  # alpha and shard 0 sent, unanswered
    assert sorted(_queued(user)) == ["gym-alpha", "gym-big+shard0"]

    rc, _, err = _submit(user, capsys)
    assert rc == 0 and "Traceback" not in err, err
    queued = _queued(user)  # the sent attempts adopted, the others revoked and queued afresh
    assert {name: len(ids) for name, ids in queued.items()} == {"gym-alpha": 1, **{s: 1 for s in SHARDS}}
    assert shard_ids(shard_record(user)) == [queued[s][0] for s in SHARDS]


def test_shards_with_job_arrays_are_refused_before_anything_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    user = sharded_user(tmp_path, monkeypatch, array=True)
    rc, _, err = _submit(user, capsys)
    assert rc == 1 and "Traceback" not in err
    assert f"error: {user['config']}: driver.benchmarks.big.shards:" in err
    assert "compute.array" in err and "fix: remove shards from big" in err
    assert not _queued(user) and not user["runs"].exists()


def test_the_dry_run_refuses_shards_with_job_arrays_in_the_words_of_submit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """render says what submit will do: the same refusal, the same one message, no job script shown."""
    user = sharded_user(tmp_path, monkeypatch, array=True)
    rc, _, submitted = _submit(user, capsys)
    assert rc == 1
    for words in (["render"], ["render", "json=1"], ["submit", "--dry-run"]):
        rc = main.main([*words, f"config={user['config']}"])
        out, err = capsys.readouterr()
        assert rc == 1 and "Traceback" not in err, (words, err)
        assert err.strip() == submitted.strip(), words  # one message, word for word submit's
        assert "#SBATCH" not in out, words
    assert not _queued(user) and not user["runs"].exists()


def test_nemo_gym_reads_the_sharded_record(user, capsys, nemo_gym: Any) -> None:
    rc, _, err = _submit(user, capsys)
    assert rc == 0, err
    read = subprocess.run(
        [
            str(nemo_gym.python),
            "-c",
            "import sys; from nemo_gym.orchestration.jobs import SubmissionRecord as R; "
            "r = R.model_validate_json(open(sys.argv[1]).read()); "
            "print(*[b.job_id for b in r.benchmarks], r.executor_metadata['shards.big'])",
            str(_manifest(user)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    record = shard_record(user)
    assert read.stdout.split() == [*(j.job_id for j in record.benchmarks), ",".join(shard_ids(record))], (
        read.stderr
    )


def test_each_shard_counts_as_a_job_against_the_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    user = sharded_user(tmp_path, monkeypatch)
    # sacctmgr as a site with MaxSubmitJobs=2 on account gym prints it (limits.py reads these sections)
    cap = user["sched"] / "max-submit"
    cap.write_text("2")
    assoc = 'echo "gym|root||$(cat "$GYM_TEST_SCHED/max-submit")||normal|"'
    sacctmgr = f'() {{ case "$*" in *"show user"*) echo gym;; *"show assoc"*) {assoc};; *) true;; esac; }}'
    monkeypatch.setenv("BASH_FUNC_sacctmgr%%", sacctmgr)
    rc, out, err = _submit(user, capsys)
    assert rc == 0 and "Traceback" not in err, err
    first = _queued(user)
    assert sorted(first) == ["gym-alpha", "gym-big+shard0"]  # two jobs: alpha and ONE shard
    record = shard_record(user)
    big = record.benchmarks[1]
    assert big.job_id is None and big.error and big.error.startswith("waiting for room: ")
    assert shard_ids(record) == [first["gym-big+shard0"][0], "", ""]

    cap.write_text("10")  # room: the next submit queues the two waiting shards, nothing else
    (user["sched"] / "jobs").write_text("")  # what this pass sbatches, alone
    rc, out, err = _submit(user, capsys)
    assert rc == 0, out + err
    now = _queued(user)
    assert sorted(now) == ["gym-big+shard1", "gym-big+shard2"]
    assert shard_ids(shard_record(user)) == [
        first["gym-big+shard0"][0],
        now["gym-big+shard1"][0],
        now["gym-big+shard2"][0],
    ]
