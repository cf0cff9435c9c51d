"""Following a training run (issue 29, item 1) on the real test cluster, over SSH: checkpoints appear
on the cluster's file system while the follower runs; each complete one is queued once with sbatch,
a failing one re-queued and given up on, all over one SSH connection, and a poll with nothing new and
nothing in flight is one round trip (the glob). The scoring command and its failure flag files are
tests/sweep/test_slurm.py's (its Sweeper)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from follow_helpers import Follower, wait_polls

from tests.sweep.test_slurm import Sweeper

if TYPE_CHECKING:
    from tests.conftest import Cluster

pytestmark = pytest.mark.cluster


def test_a_follower_queues_each_complete_checkpoint_once_over_one_connection(
    cluster: Cluster, tmp_path: Path
) -> None:
    sweeper = Sweeper(cluster, tmp_path, "follow")
    ckpts = cluster.run_dir("follow-ckpts")
    (ckpts / "step_100").mkdir()
    (ckpts / "step_100" / "config.json").write_text("{}")
    (ckpts / "step_200").mkdir()  # being written: no marker yet
    (sweeper.flags / "step_300-0").touch()  # step_300's job fails (SCORE is lit:0)
    state = tmp_path / "xdg-state"
    args = [
        "submit",
        f"config={sweeper.config}",
        "multirun=1",
        "follow=1",
        "every=1",
        "retries=1",
        f"services.policy.model=paths({ckpts}/step_*)",
    ]
    follower = Follower(tmp_path, args, sweeper.env)
    try:
        follower.expect(f"submitted {ckpts}/step_100 (gym-job-", timeout=120)
        wait_polls(state, 2)
        assert not any("step_200" in line for line in follower.seen), follower.seen
        (ckpts / "step_200" / "metadata.json").write_text("{}")
        follower.expect(f"submitted {ckpts}/step_200 (gym-job-", timeout=120)
        (ckpts / "step_300").mkdir()
        (ckpts / "step_300" / "config.json").write_text("{}")
        follower.expect(f"submitted {ckpts}/step_300 (gym-job-", timeout=120)
        follower.expect(f"completed {ckpts}/step_100", timeout=300)
        follower.expect(f"completed {ckpts}/step_200", timeout=300)
        follower.expect(f"re-queued {ckpts}/step_300 (attempt 2): score", timeout=300)
        follower.expect(f"gave up on {ckpts}/step_300", timeout=300)
        start = wait_polls(state, 1)
        before = len(sweeper.ssh.commands())
        polls = wait_polls(state, 3) - start
        sent = sweeper.ssh.commands()[before:]
        assert polls - 1 <= len(sent) <= polls + 1 and all("__gym_g=" in c for c in sent), sent
        rc, said, err = follower.stop(signal.SIGTERM)
        assert rc == 0 and "Traceback" not in err, err
        assert "3 checkpoint(s) submitted, 2 completed, 1 given up on" in said[-2], said
    finally:
        follower.kill()
    starts = sweeper.ssh.invocations()
    assert len([s for s in starts if " -M " in f" {s} "]) == 1  # one SSH connection for the whole follow
    sbatch = sum(c.count("sbatch --parsable") for c in sweeper.ssh.commands())
    assert sbatch == 4  # three checkpoints, one retry
    assert len(list(sweeper.output.iterdir())) == 3


def test_a_follower_whose_connection_drops_connects_again_and_goes_on(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A follower runs for days; the login node's sshd restarts, a network blip drops the connection.
    The poll that finds it gone says so and the next one connects again: a checkpoint that lands
    after the drop is queued like any other, over the new connection."""
    sweeper = Sweeper(cluster, tmp_path, "follow-reconnect")
    ckpts = cluster.run_dir("follow-reconnect-ckpts")
    (ckpts / "step_100").mkdir()
    (ckpts / "step_100" / "config.json").write_text("{}")
    args = ["submit", f"config={sweeper.config}", "multirun=1", "follow=1", "every=1"]
    follower = Follower(tmp_path, [*args, f"services.policy.model=paths({ckpts}/step_*)"], sweeper.env)
    try:
        follower.expect(f"submitted {ckpts}/step_100 (gym-job-", timeout=120)
        (master,) = [s.split() for s in sweeper.ssh.invocations() if " -M " in f" {s} "]
        control = master[master.index("-S") + 1]
        dropped = subprocess.run(
            ["ssh", "-S", control, "-O", "exit", "gym-login"], capture_output=True, text=True
        )
        assert dropped.returncode == 0, dropped.stderr  # the connection is gone
        deadline = time.monotonic() + 120
        while "poll failed" not in follower.err.read_text():
            if time.monotonic() > deadline or follower.proc.poll() is not None:
                pytest.fail(f"no poll found the connection gone:\n{follower.err.read_text()}")
            time.sleep(0.2)
        (ckpts / "step_200").mkdir()
        (ckpts / "step_200" / "config.json").write_text("{}")
        follower.expect(f"submitted {ckpts}/step_200 (gym-job-", timeout=120)
        follower.expect(f"completed {ckpts}/step_200", timeout=300)
        rc, said, err = follower.stop(signal.SIGTERM)
        assert rc == 0 and "Traceback" not in err, err
        assert "2 checkpoint(s) submitted" in said[-1], said
    finally:
        follower.kill()
    assert len([s for s in sweeper.ssh.invocations() if " -M " in f" {s} "]) == 2  # connected again, once
