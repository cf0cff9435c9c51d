"""Following a training run (issue 29, item 1): `submit multirun=1 follow=1` under the local executor.

A real follower process polls a real directory that gains checkpoints while it runs: one still being
written (no ready marker) is left alone until its marker lands; each complete one is submitted once;
one whose job fails is re-queued up to retries= and then given up on; SIGTERM and Ctrl-C stop it with
a summary; a restart submits nothing twice. Every wait is for an event (a line the follower prints, a
poll counted in its state file), bounded. The round trips a poll makes are counted by a wrapper in
front of the `bash -s` the local connection starts (results_helpers.Sessions).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import gymbuild_argv, kill_local_jobs, local_command_config, user_env, write_config
from follow_helpers import Follower, wait_polls
from results_helpers import Sessions

from gymbuild.errors import UserError
from gymbuild.request.invocation import Invocation
from gymbuild.request.verb_args import SubmitArgs
from gymbuild.sweep import follow

SCORE = '"$NEMO_GYM_BENCH_DIR/artifacts/metrics.json"'


def checkpoint(ckpts: Path, step: int, *, ready: bool = True, fails: bool = False) -> Path:
    """A checkpoint directory: `run` (the "evaluation": it scores the step, or fails) and, once
    complete, the config.json a trainer writes last."""
    directory = ckpts / f"step_{step}"
    directory.mkdir()
    body = "exit 3" if fails else f"printf '{{\"score\": {step}}}' > {SCORE}"
    (directory / "run").write_text(f"#!/bin/bash\n{body}\n")
    (directory / "run").chmod(0o755)
    if ready:
        (directory / "config.json").write_text("{}")
    return directory


def test_a_follower_takes_each_complete_checkpoint_once_retries_failures_and_stops_cleanly(
    tmp_path: Path,
) -> None:
    ckpts = tmp_path / "ckpts"
    ckpts.mkdir()
    checkpoint(ckpts, 20)
    checkpoint(ckpts, 40, ready=False)  # still being written
    write_config(tmp_path, local_command_config(), "eval.yaml")
    wrap = Sessions(tmp_path / "wrap", "bash")
    path = f"{wrap.bin}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = user_env(tmp_path, PATH=path)
    args = [
        "submit",
        "config=eval.yaml",
        "multirun=1",
        "follow=1",
        "every=0.2",
        "retries=1",
        f"driver.benchmarks.demo.command=paths({ckpts}/step_*/run)",
    ]
    first = Follower(tmp_path, args, env)
    try:
        first.expect("following sweep sweep-")
        first.expect(f"submitted {ckpts}/step_20/run (gym-job-")
        wait_polls(tmp_path / "xdg-state", 3)
        assert not any("step_40" in line for line in first.seen), first.seen  # no marker: not taken
        (ckpts / "step_40" / "config.json").write_text("{}")
        first.expect(f"submitted {ckpts}/step_40/run")
        checkpoint(ckpts, 60, fails=True)
        first.expect(f"submitted {ckpts}/step_60/run")
        first.expect(f"completed {ckpts}/step_20/run")
        first.expect(f"completed {ckpts}/step_40/run")
        first.expect(f"re-queued {ckpts}/step_60/run (attempt 2): demo")
        first.expect(f"gave up on {ckpts}/step_60/run")
        # Nothing new and nothing in flight: one round trip (the glob) per poll.
        start = wait_polls(tmp_path / "xdg-state", 1)
        before = len(wrap.commands())
        polls = wait_polls(tmp_path / "xdg-state", 5) - start
        sent = wrap.commands()[before:]
        # (the poll under way at either end may or may not have sent its command yet)
        assert polls - 1 <= len(sent) <= polls + 1 and all("shopt -s nullglob" in c for c in sent), sent
        rc, said, err = first.stop(signal.SIGTERM)
        assert rc == 0 and "Traceback" not in err, err
        assert "3 checkpoint(s) submitted, 2 completed, 1 given up on" in said[-2], said
        assert (
            said[-1].startswith(f"  gave up on {ckpts}/step_60/run (gym-job-") and "demo FAILED" in said[-1]
        )
    finally:
        first.kill()
    assert len(list((tmp_path / "runs").iterdir())) == 3

    # Restarted (after a reboot, say): it remembers; nothing is submitted twice; Ctrl-C stops it.
    second = Follower(tmp_path, args, env)
    try:
        second.expect("following sweep sweep-")
        wait_polls(tmp_path / "xdg-state", 2)
        rc, said, err = second.stop(signal.SIGINT)
        assert rc == 0 and "Traceback" not in err, err
        assert not any(line.split("  ", 1)[-1].startswith("submitted") for line in said), said
        assert "3 checkpoint(s) submitted, 2 completed, 1 given up on" in said[-2], said
    finally:
        second.kill()
        kill_local_jobs(tmp_path / "runs")
    assert len(list((tmp_path / "runs").iterdir())) == 3


def _options(given: dict[str, str]) -> follow.Options:
    """The follower's options of a command line with these arguments (read by their arguments)."""
    return follow.options(SubmitArgs.of(Invocation.from_vars(given)))


def test_the_follower_s_arguments_are_checked_with_one_message() -> None:
    assert _options({}) == follow.Options(300.0, ("config.json", "metadata.json"), 2)
    assert _options({"ready": "none", "every": "5", "retries": "0"}) == follow.Options(5.0, (), 0)
    assert _options({"ready": "DONE,meta.json"}).ready == ("DONE", "meta.json")
    for bad, said in (
        ({"every": "soon"}, "every=soon is not a number of seconds"),
        ({"every": "0"}, "every=0"),
        ({"retries": "-1"}, "retries=-1 is not a count"),
        ({"ready": "a/b"}, "a marker is a file name"),
    ):
        with pytest.raises(UserError) as caught:
            _options(bad)
        assert said in str(caught.value) and "fix:" in str(caught.value)


def test_follow_without_a_glob_or_without_a_sweep_is_refused(tmp_path: Path) -> None:
    write_config(tmp_path, local_command_config(), "eval.yaml")
    env = user_env(tmp_path, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    for args, said in (
        (["config=eval.yaml", "follow=1"], "add multirun=1"),
        (["config=eval.yaml", "follow=1", "multirun=1", "driver.benchmarks.demo.command=a,b"], "no paths()"),
    ):
        done = subprocess.run(
            gymbuild_argv("submit", *args), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 1 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "runs").exists()
