"""`gymbuild results` end to end under the local executor: real jobs, real files, real subprocesses.

- The README's example: after its first command, `results` shows the demo's score; asked again, it
  reads nothing (no shell is even started: the finished benchmark is cached).
- A submission of every fate: a benchmark reporting through NeMo Gym's aggregate (the real two-agent
  file from tests/data), one through metrics.json, one failed, one still running, one that finished
  without metrics; what each round trip read, then what the second call no longer reads; and two
  runs of it side by side.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import EXAMPLES, REPO, gymbuild, kill_local_jobs, user_env, write_config
from results_helpers import Sessions

README = REPO / "README.md"
AGGREGATE = REPO / "tests" / "data" / "nemo-gym-0.7.0-aggregate" / "run-a" / "weather" / "artifacts"


class User:
    """A user in `home`, with gymbuild's python3 on PATH (the local jobs run `python3 -m ...`)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"

    def run(self, *args: str, wrap: Sessions | None = None, **env: str) -> Any:
        path = f"{wrap.bin}{os.pathsep}{self.path}" if wrap else self.path
        return gymbuild(*args, cwd=self.home, env=user_env(self.home, PATH=path, **env), timeout=120)

    def ok(self, *args: str, wrap: Sessions | None = None, **env: str) -> str:
        done = self.run(*args, wrap=wrap, **env)
        assert done.rc == 0, f"gymbuild {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def states(self, *args: str) -> dict[str, str]:
        payload = json.loads(self.ok("status", "json=1", *args))
        return {row["benchmark"]: row["state"] for row in payload["benchmarks"]}

    def wait(self, want: Any, *args: str, timeout: float = 90) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while not want(rows := self.states(*args)):
            if time.monotonic() > deadline:
                pytest.fail(f"status did not reach the wanted states in {timeout}s: {rows}")
            time.sleep(1)
        return rows


def table(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines()]


def test_the_readme_example_shows_its_score_and_a_second_look_reads_nothing(tmp_path: Path) -> None:
    user = User(tmp_path)
    shutil.copy(EXAMPLES / "local.yaml", tmp_path / "local.yaml")
    user.ok("submit", "config=local.yaml")
    user.wait(lambda rows: rows["demo"] == "COMPLETED", "config=local.yaml")

    shell = Sessions(tmp_path / "count", "bash")
    first = user.ok("results", "config=local.yaml", wrap=shell)
    rows = table(first)
    assert rows[1] == ["BENCHMARK", "AGENT", "STATE", "METRIC", "VALUE"]
    assert rows[2] == ["demo", "-", "COMPLETED", "accuracy", "1"]
    assert rows[3] == ["answered", "3"]
    # What the README says this command prints, but for the run's own id and directory.
    shown = README.read_text().split("shows its score:\n\n```text\n", 1)[1].split("```", 1)[0]
    assert first.splitlines()[1:] == shown.splitlines()[1:]
    assert shell.invocations() == ["-s"]  # one shell, and in it one status and one metrics read
    assert (len(shell.status_reads()), len(shell.metrics_reads())) == (1, 1)

    shell.reset()
    assert user.ok("results", "config=local.yaml", wrap=shell) == first
    assert shell.invocations() == []  # COMPLETED with metrics: cached, no shell started at all

    # The same by id from another directory, through the local index and the same cache.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    gym_job_id = first.split()[0]
    by_id = gymbuild(
        "results", f"run={gym_job_id}", cwd=elsewhere, env=user_env(tmp_path, PATH=f"{shell.bin}:{user.path}")
    )
    assert by_id.rc == 0 and by_id.stdout == first and shell.invocations() == []


BENCHMARKS = {
    "agg": {
        "command": f'cp {AGGREGATE / "rollouts_aggregate_metrics.json"} "$NEMO_GYM_BENCH_DIR/artifacts/"'
    },
    "cmd": {
        "command": 'printf \'{"accuracy": %s, "answered": 4}\' "$SCORE" '
        '> "$NEMO_GYM_BENCH_DIR/artifacts/metrics.json"'
    },
    "fail": {"command": "echo failing; exit 3"},
    "slow": {"command": "sleep 300"},
    "silent": {"command": "echo done, no numbers"},
}


@pytest.fixture
def fates(tmp_path: Path) -> Iterator[tuple[User, Path]]:
    config = {
        "services": {},
        "compute": {"here": {"type": "local", "walltime": "00:10:00"}},
        "driver": {"env": {"SCORE": "host:SCORE"}, "benchmarks": BENCHMARKS},
        "job": {"output_path": "runs"},
        "otel": {"enabled": False},
    }
    user = User(tmp_path)
    path = write_config(tmp_path, config, "fates.yaml")
    try:
        yield user, path
    finally:  # no process left behind: every job of every run
        kill_local_jobs(tmp_path / "runs")


def ended_but_slow(rows: dict[str, str]) -> bool:
    return rows["slow"] == "RUNNING" and all(s != "RUNNING" for b, s in rows.items() if b != "slow")


def test_every_fate_then_only_what_is_unfinished_is_read_again_then_two_runs(
    fates: tuple[User, Path], tmp_path: Path
) -> None:
    user, config = fates
    cfg = f"config={config}"
    user.ok("submit", cfg, SCORE="0.5")
    user.wait(ended_but_slow, cfg)
    shell = Sessions(tmp_path / "count", "bash")

    out = user.ok("results", cfg, wrap=shell)
    rows = table(out)
    weather = {
        e["agent_ref"]["name"]: e["key_metrics"]
        for e in json.loads((AGGREGATE / "rollouts_aggregate_metrics.json").read_text())
    }
    assert ["agg", "weather_agent_large", "COMPLETED", "mean/reward", "0.6667"] in rows
    assert ["weather_agent_small", "COMPLETED", "mean/reward", "0.3333"] in rows
    assert len([r for r in rows if r and r[-2].startswith("mean/")]) == sum(len(m) for m in weather.values())
    assert ["cmd", "-", "COMPLETED", "accuracy", "0.5"] in rows
    assert ["fail", "-", "FAILED", "-", "-"] in rows
    assert out.split("no metrics:\n", 1)[1].splitlines() == [
        "  fail: failed, without writing metrics",
        "  slow: still running",
        "  silent: finished without writing metrics (no artifacts/rollouts_aggregate_metrics.json or"
        " artifacts/metrics.json)",
    ]
    # One status for all five, one read for the four that ended (the running one's files are not
    # its own yet: what is there is from an earlier attempt, if anything).
    (status,) = shell.status_reads()
    (read,) = shell.metrics_reads()
    assert all(f"/{b}/.gym_exit-" in status for b in BENCHMARKS)
    assert [b for b in BENCHMARKS if f"/{b} " in read or f"/{b}\n" in read] == [
        "agg",
        "cmd",
        "fail",
        "silent",
    ]

    # Again: the two that completed with metrics come from the cache; the rest is asked again.
    shell.reset()
    again = user.ok("results", cfg, wrap=shell)
    assert again == out
    (status,) = shell.status_reads()
    (read,) = shell.metrics_reads()
    assert [b for b in BENCHMARKS if f"/{b}/.gym_exit-" in status] == ["fail", "slow", "silent"]
    assert [b for b in BENCHMARKS if f"/{b} " in read or f"/{b}\n" in read] == ["fail", "silent"]

    # only= narrows to some benchmarks.
    narrowed = table(user.ok("results", cfg, "only=cmd,fail"))
    assert [r[0] for r in narrowed[2:] if r and r[0] in BENCHMARKS] == ["cmd", "fail"]

    # json=1 for scripts.
    payload = json.loads(user.ok("results", cfg, "json=1"))
    benches = {b["benchmark"]: b for b in payload["runs"][0]["benchmarks"]}
    assert {b: r["state"] for b, r in benches.items()} == {
        "agg": "COMPLETED",
        "cmd": "COMPLETED",
        "fail": "FAILED",
        "slow": "RUNNING",
        "silent": "COMPLETED",
    }
    assert {a["agent"]: a["key_metrics"] for a in benches["agg"]["agents"]} == weather
    assert benches["cmd"]["agents"] == [{"agent": None, "key_metrics": {"accuracy": 0.5, "answered": 4}}]

    # A second run with a better score, compared with the first: one column each, by id (no policy
    # model tells them apart), the difference after the second.
    first_id = payload["runs"][0]["gym_job_id"]
    user.ok("submit", cfg, "new=1", SCORE="0.75")
    user.wait(ended_but_slow, cfg)
    second_id = json.loads(user.ok("status", "json=1", cfg))["gym_job_id"]
    shell.reset()
    side = user.ok("results", f"run={first_id},{second_id}", wrap=shell)
    rows = table(side)
    assert rows[1] == ["BENCHMARK", "AGENT", "METRIC", first_id, second_id]
    assert ["cmd", "-", "accuracy", "0.5", "0.75", "(+0.25)"] in rows
    assert ["answered", "4", "4", "(+0)"] in rows
    assert ["fail", "-", "-", "(FAILED)", "(FAILED)"] in rows
    assert ["slow", "-", "-", "(RUNNING)", "(RUNNING)"] in rows
    assert ["agg", "weather_agent_large", "mean/reward", "0.6667", "0.6667", "(+0)"] in rows
    assert ["weather_agent_small", "mean/reward", "0.3333", "0.3333", "(+0)"] in rows
    # Both runs in one status round trip and one read.
    assert (len(shell.status_reads()), len(shell.metrics_reads())) == (1, 1)
    assert shell.invocations() == ["-s"]
    # The runs of the config, as its workspace remembers them: the same two, oldest first.
    assert user.ok("results", cfg, "run=all") == side


def test_mistakes_are_one_message_and_exit_1(tmp_path: Path) -> None:
    user = User(tmp_path)
    for args, says in (
        (("run=gym-job-20990101T000000Z-000000",), "is not in this machine's local index"),
        (("config=nowhere.yaml",), "nowhere.yaml: no such file"),
        (("config=nowhere.yaml", "format=xlsx"), "format=xlsx is not a format results prints"),
        (("run=gym-job-20990101T000000Z-000000,gym-job-20990101T000000Z-000000",), "run= names a run twice"),
        (("run=a",), "run='a' is not a gym_job_id"),
    ):
        done = user.run("results", *args)
        assert done.rc == 1, done
        assert says in done.stderr and "Traceback" not in done.stderr + done.stdout
