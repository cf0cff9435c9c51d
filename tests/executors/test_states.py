"""The Slurm executor's status round trip (`slurm.states`) against real jobs on the test cluster.

Faster than the gymbuild-level tests in tests/day_two/test_slurm.py: plain sbatch'd scripts stand in for
benchmarks, so corner cases of a resume chain can be set up exactly. Everything else is real: the
local shell session, squeue, sacct, the chain file.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from gymbuild.executors import slurm
from gymbuild.executors.chain import parse_stopped
from gymbuild.executors.connection import Connection
from gymbuild.state.rollouts import Progress

if TYPE_CHECKING:
    from tests.conftest import Cluster

pytestmark = pytest.mark.cluster


def sbatch(cluster: Cluster, bench_dir: Path, body: str, *flags: str) -> str:
    script = bench_dir / "job.sh"
    script.write_text(f"#!/bin/bash\n{body}\n")
    out = subprocess.run(
        [
            "sbatch",
            "--parsable",
            f"--account={cluster.account}",
            f"--partition={cluster.partition}",
            f"--chdir={bench_dir}",
            "--output=/dev/null",
            "--time=2",
            *flags,
            str(script),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.strip().split(";")[0]


def test_status_follows_the_chain_the_recorded_job_started_not_an_older_one(cluster: Cluster) -> None:
    """A resumable benchmark resubmitted: `.gym_job_chain` still ends with the old chain (first, then
    its successor) while the new job waits in the queue. Status must report the new job, or it shows
    the old chain's end and a second resubmit queues the benchmark twice."""
    bench_dir = cluster.run_dir("chain")
    first = sbatch(cluster, bench_dir, "exit 3")
    successor = sbatch(cluster, bench_dir, "exit 0")
    cluster.wait_for_job(first)
    cluster.wait_for_job(successor)
    (bench_dir / ".gym_job_chain").write_text(f"{first}\n{successor}\n")
    resubmitted = sbatch(cluster, bench_dir, "true", "--hold")  # pending until released
    try:
        with Connection(None) as conn:
            old = slurm.states(conn, {str(bench_dir): first})[str(bench_dir)]
            new = slurm.states(conn, {str(bench_dir): resubmitted})[str(bench_dir)]
        assert (new.job_id, new.state) == (resubmitted, "PENDING")
        # Asked by the old id (the record never does after a resubmit), the chain is followed to its
        # successor, as sacct tells it; and a live job newer than the chain in its bench dir is taken
        # for the chain's own (a successor no file names yet), never the dead one.
        assert old.chain is not None
        assert [(s.job_id, s.state) for s in old.chain.steps[:2]] == [
            (first, "FAILED"),
            (successor, "COMPLETED"),
        ]
        assert (old.job_id, old.state) == (resubmitted, "PENDING")
    finally:
        subprocess.run(["scancel", resubmitted], check=False)


def test_cancel_also_ends_the_successor_a_resumable_job_queued(cluster: Cluster) -> None:
    """A resumable job queues its successor (afternotok) before its services start; the record only
    knows the first id. Cancel must not leave that successor pending, to start once the job is gone."""
    bench_dir = cluster.run_dir("successor")
    other_dir = cluster.run_dir("bystander")
    running = sbatch(cluster, bench_dir, "sleep 300")
    successor = sbatch(cluster, bench_dir, "true", f"--dependency=afternotok:{running}")
    bystander = sbatch(cluster, other_dir, "sleep 300")  # this user's job elsewhere: left alone
    (bench_dir / ".gym_job_chain").write_text(f"{running}\n")  # as the job's prologue writes it
    try:
        with Connection(None) as conn:
            result = slurm.cancel(conn, {str(bench_dir): running})
        assert result.ok, result.stderr
        # It says what it stopped, and marks the chain cancelled (a successor it missed runs nothing).
        assert {(x.job_id, x.bench_dir) for x in parse_stopped(result.stdout)} == {
            (running, str(bench_dir)),
            (successor, str(bench_dir)),
        }
        assert (bench_dir / ".gym_chain_cancelled").is_file()
        assert (bench_dir / ".gym_chain_end").read_text().startswith("cancelled by gymbuild cancel at 20")
        assert not (other_dir / ".gym_chain_end").exists()
        assert cluster.wait_for_job(running).state == "CANCELLED"
        assert cluster.wait_for_job(successor).state == "CANCELLED"
        left = subprocess.run(["squeue", "-h", "-o", "%i", "-j", bystander], capture_output=True, text=True)
        assert left.stdout.split() == [bystander]
    finally:
        subprocess.run(["scancel", running, successor, bystander], check=False)


def test_a_job_nothing_can_describe_is_unknown_with_what_squeue_and_sacct_said(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Controller and slurmdbd out of reach (for this status alone: SLURM_CONF names closed ports),
    and the job left no exit file: UNKNOWN, with Slurm's own words on why, not a bare UNKNOWN."""
    bench_dir = cluster.run_dir("unreachable")
    job = sbatch(cluster, bench_dir, "true")
    cluster.wait_for_job(job)
    closed = {"SlurmctldPort": "6999", "AccountingStoragePort": "6998", "MessageTimeout": "2"}
    conf = [
        line
        for line in Path("/etc/slurm/slurm.conf").read_text().splitlines()
        if line.split("=", 1)[0] not in closed
    ]
    dead = tmp_path / "unreachable-slurm.conf"
    dead.write_text("\n".join([*conf, *(f"{k}={v}" for k, v in closed.items()), ""]))
    monkeypatch.setenv("SLURM_CONF", str(dead))  # the local shell session inherits it
    with Connection(None) as conn:
        state = slurm.states(conn, {str(bench_dir): job})[str(bench_dir)]
    assert (state.job_id, state.state) == (job, "UNKNOWN")
    assert state.note and "squeue: " in state.note and "Unable to contact slurm controller" in state.note
    assert "sacct: " in state.note and "Connection refused" in state.note


def test_status_of_many_jobs_in_hostile_dirs_reads_each_one(cluster: Cluster) -> None:
    """The status script finds chain and exit files with one glob over the bench dirs' parent and
    sends back what it found, NUL-separated. Every dir must still arrive as it is: quotes, `$(...)`,
    spaces, tabs, newlines, glob characters and a leading dot included; each keeps its own job and
    chain."""
    root = cluster.run_dir("hostile")
    names = ["plain", "it's", "$(touch canary)", "two words", "tab\there", "semi;colon", "new\nline"]
    names += [".hidden", "star*[x]"]
    dirs = [root / name for name in names]
    for d in dirs:
        d.mkdir()
    ids = [sbatch(cluster, d, "exit 0") for d in dirs]
    chained = {}  # these dirs' chains moved on to a newer job
    for d, first in ((dirs[1], ids[1]), (dirs[6], ids[6])):
        chained[str(d)] = sbatch(cluster, d, "exit 0")
        (d / ".gym_job_chain").write_text(f"{first}\n{chained[str(d)]}\n")
    for job in (*ids, *chained.values()):
        cluster.wait_for_job(job)
    with Connection(None) as conn:
        found = slurm.states(conn, {str(d): job for d, job in zip(dirs, ids, strict=True)})
    expected = dict(zip(map(str, dirs), ids, strict=True)) | chained
    assert {d: s.job_id for d, s in found.items()} == expected
    assert {s.state for s in found.values()} == {"COMPLETED"}
    assert not any(root.rglob("canary")) and not Path("canary").exists()


def test_status_of_dirs_under_two_parents_reads_only_each_dirs_own_files(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bench dirs of the same name under two parents, each with a resume chain whose newest job left
    its exit status; beside one of them dirs nobody asked about, each holding a chain file that is no
    list of job ids and an exit file of the other dir's newest job. Each dir gets its own newest job
    and exit status, with accounting and, from the exit files, without it."""
    benches = [cluster.run_dir(parent) / "bench" for parent in ("parent-a", "parent-b")]
    recorded, newest = {}, {}
    for bench_dir, code in zip(benches, (0, 5), strict=True):
        bench_dir.mkdir()
        recorded[str(bench_dir)] = sbatch(cluster, bench_dir, "exit 3")
        body = f'echo {code} >".gym_exit-$SLURM_JOB_ID"; exit {code}'  # as every gymbuild job does
        newest[str(bench_dir)] = sbatch(cluster, bench_dir, body)
        (bench_dir / ".gym_job_chain").write_text(f"{recorded[str(bench_dir)]}\n{newest[str(bench_dir)]}\n")
    strangers = [benches[0].parent / name for name in ("a-stranger", "z-stranger")]  # before and after
    for stranger in strangers:
        stranger.mkdir()
        (stranger / ".gym_job_chain").write_text(f"{newest[str(benches[0])]}\nnot a job; $(touch canary)\n")
        (stranger / f".gym_exit-{newest[str(benches[0])]}").write_text("9\n")
    for job in newest.values():
        cluster.wait_for_job(job)

    def status(accounted: bool) -> None:
        with Connection(None) as conn:
            found = slurm.states(conn, recorded)
        assert {d: s.job_id for d, s in found.items()} == newest
        # Only sacct knows how long a job ran: the ids asked about must hold each chain's newest job.
        assert {d: (s.state, s.exit_code, bool(s.elapsed)) for d, s in found.items()} == {
            str(benches[0]): ("COMPLETED", "0:0", accounted),
            str(benches[1]): ("FAILED", "5:0", accounted),
        }

    status(accounted=True)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sacct").write_text("#!/bin/bash\necho 'Slurm accounting storage is disabled' >&2\nexit 1\n")
    (fake / "sacct").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")  # the local shell session inherits it
    status(accounted=False)  # the jobs' exit files tell it
    assert not any(benches[0].parent.rglob("canary"))


def test_sacct_bounded_by_the_submission_time_still_finds_its_jobs_in_any_time_zone(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """status bounds sacct's search with `-S` a day before the record's submitted_at (UTC); sacct reads
    `-S` in the login node's own zone, so the slack must hold even twelve hours west of UTC."""
    from datetime import UTC, datetime

    from gymbuild.state.provenance import utc_timestamp

    submitted_at = utc_timestamp(datetime.now(UTC).replace(microsecond=0))
    bench_dir = cluster.run_dir("sacct-since")
    job = sbatch(cluster, bench_dir, "exit 4")
    cluster.wait_for_job(job)
    monkeypatch.setenv("TZ", "Etc/GMT+12")  # the session's shell, squeue and sacct inherit it
    with Connection(None) as conn:
        state = slurm.states(conn, {str(bench_dir): job}, since=submitted_at)[str(bench_dir)]
    # FAILED with its exit code and how long it ran: only sacct says so of a finished job.
    assert (state.state, state.exit_code, bool(state.elapsed)) == ("FAILED", "4:0", True), state


def test_status_counts_a_running_benchmarks_rollouts_in_the_same_round_trip(cluster: Cluster) -> None:
    """A job with gym's three files in its artifacts/ (as `gym eval run` writes them while it runs):
    status reads done/expected and failed with the job's state, while it runs and after it failed
    short of them all; its neighbour under the same parent, a command benchmark, has no count."""
    root = cluster.run_dir("counts")
    gym_dir, command_dir = root / "gym bench", root / "command"
    artifacts = gym_dir / "artifacts"
    artifacts.mkdir(parents=True)
    command_dir.mkdir()
    (artifacts / "rollouts_materialized_inputs.jsonl").write_text("{}\n" * 5)
    (artifacts / "rollouts.jsonl").write_text("{}\n" * 2)
    (artifacts / "rollouts_failures.jsonl").write_text("{}\n")
    gate = gym_dir / "gate"
    body = "while [ ! -e gate ]; do sleep 0.2; done; echo {} >> artifacts/rollouts.jsonl; exit 1"
    job = sbatch(cluster, gym_dir, body)
    other = sbatch(cluster, command_dir, "exit 0")
    try:
        cluster.wait_for_job(other)
        with Connection(None) as conn:
            ask = {str(gym_dir): job, str(command_dir): other}
            deadline = time.monotonic() + 120
            while (found := slurm.states(conn, ask))[str(gym_dir)].state != "RUNNING":
                assert time.monotonic() < deadline, found
            assert found[str(gym_dir)].progress == Progress(2, 5, 1)
            assert (found[str(command_dir)].state, found[str(command_dir)].progress) == ("COMPLETED", None)
            gate.touch()
            cluster.wait_for_job(job)
            ended = slurm.states(conn, ask)[str(gym_dir)]
        assert (ended.state, ended.progress) == ("FAILED", Progress(3, 5, 1))
    finally:
        subprocess.run(["scancel", job, other], check=False)


def test_a_chain_whose_files_are_behind_is_followed_and_stopped_through_the_queue(cluster: Cluster) -> None:
    """The record's job is dead; its successor runs (still in its prologue: in no chain file), and
    has queued its own successor; neither wrote a successor file (a job killed right after its
    sbatch never does). Status finds the running one among the user's live jobs working in the bench
    dir; cancel stops both in one call and says so."""
    bench_dir = cluster.run_dir("behind")
    head = sbatch(cluster, bench_dir, "exit 3")
    cluster.wait_for_job(head)
    (bench_dir / ".gym_job_chain").write_text(f"{head}\n")
    running = sbatch(cluster, bench_dir, "sleep 300")
    queued = sbatch(cluster, bench_dir, "true", f"--dependency=afternotok:{running}")
    try:
        deadline = time.monotonic() + 120
        with Connection(None) as conn:
            while (state := slurm.states(conn, {str(bench_dir): head})[str(bench_dir)]).state != "RUNNING":
                assert state.job_id in (running, queued), state  # never the dead head
                assert time.monotonic() < deadline, state
                time.sleep(1)
            assert state.job_id == running and state.chain is not None
            assert (state.chain.attempt, state.chain.live) == (2, (running, queued))
            assert [(s.job_id, s.state) for s in state.chain.steps] == [
                (head, "FAILED"),
                (running, "RUNNING"),
                (queued, "PENDING"),
            ]
            result = slurm.cancel(conn, {str(bench_dir): running})
        assert result.ok, result.stderr
        assert {(x.job_id, x.state) for x in parse_stopped(result.stdout)} == {
            (running, "RUNNING"),
            (queued, "PENDING"),
        }
        for job in (running, queued):
            assert cluster.wait_for_job(job).state == "CANCELLED"
    finally:
        subprocess.run(["scancel", running, queued], check=False)
