"""resubmit's plan under the local executor: real `gymbuild` subprocesses, real jobs that write gym's
row files as `gym eval run` does, real files.

- the dry run prints the plan (and json=1 the same as data) and acts on nothing: no job, no record,
  no workspace file (promises_helpers.Snapshot, as the core promise's machine checks it);
- the real resubmit prints the same plan first and queues exactly its `queued`;
- a job that FAILED or timed out after writing every row is complete and never queued again, and a
  resubmit with nothing to queue says so and queues nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import gymbuild, kill_local_jobs, user_env, write_config
from promises_helpers import Snapshot, live_local_jobs, started_local_jobs, wait_until
from promises_machine import derived

WALLTIME = "00:00:08"  # `stuck` meets it after writing every row: a TIMEOUT at 4/4

# A `command` benchmark that writes gym's three files in its artifacts/ as `gym eval run` does.
WRITE = (
    'a="$NEMO_GYM_BENCH_DIR/artifacts"; mkdir -p "$a"; '
    'for i in $(seq {expected}); do echo "{{\\"i\\": $i}}"; done > "$a/rollouts_materialized_inputs.jsonl"; '
    'for i in $(seq {done}); do echo "{{\\"task_index\\": $i}}"; done > "$a/rollouts.jsonl"; '
    'for i in $(seq {failed}); do echo "{{\\"failure\\": $i}}"; done > "$a/rollouts_failures.jsonl"; '
)


@dataclass
class Home:
    home: Path
    config: Path

    def run(self, *args: str) -> Any:
        return gymbuild(*args, f"config={self.config}", cwd=self.home, env=user_env(self.home), timeout=120)

    def ok(self, *args: str) -> str:
        done = self.run(*args)
        assert done.rc == 0, f"gymbuild {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return str(done.stdout)

    def states(self) -> dict[str, str]:
        rows = json.loads(self.ok("status", "json=1"))["benchmarks"]
        return {r["benchmark"]: r["state"] for r in rows}

    def jobs(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        (run_dir,) = (self.home / "runs").glob("gym-job-*")
        record = json.loads((run_dir / "gym-job.json").read_text())
        return {b["benchmark"]: (b["job_id"], tuple(b["previous_job_ids"])) for b in record["benchmarks"]}

    def snapshot(self) -> Snapshot:
        cache, state = self.home / "xdg-cache", self.home / "xdg-state" / "gymbuild"
        return Snapshot.take(
            {
                "jobs": [self.home / "runs"],
                "records": [cache / "nemo-gym" / "jobs", state / "runs", state / "claims"],
                "workspace": [state / "workspaces"],
            },
            skip=derived,
        )


@pytest.fixture
def ended(tmp_path: Path) -> Iterator[Home]:
    """A submission whose four jobs have ended: `full` FAILED at 4/4, `stuck` TIMEOUT at 4/4, `half`
    FAILED at 1/4 with 2 failed attempts, `ok` COMPLETED without gym's files."""
    benchmarks = {
        "full": {"command": WRITE.format(expected=4, done=4, failed=0) + "exit 3"},
        "stuck": {"command": WRITE.format(expected=4, done=4, failed=0) + "sleep 300"},
        "half": {"command": WRITE.format(expected=4, done=1, failed=2) + "exit 3"},
        "ok": {"command": "echo all fine"},
    }
    config = {
        "services": {},
        "compute": {"here": {"type": "local", "walltime": WALLTIME}},
        "driver": {"benchmarks": benchmarks},
        "job": {"output_path": "runs"},
        "otel": {"enabled": False},
    }
    home = Home(tmp_path, write_config(tmp_path, config, "local.yaml"))
    try:
        home.ok("submit")
        want = {"full": "FAILED", "stuck": "TIMEOUT", "half": "FAILED", "ok": "COMPLETED"}
        wait_until(lambda: home.states() == want or None, f"the jobs ending as {want}", timeout=120, poll=0.5)
        yield home
    finally:
        kill_local_jobs(tmp_path / "runs")


def test_the_dry_run_plan_is_what_the_resubmit_queues_and_it_acts_on_nothing(ended: Home) -> None:
    before_jobs, before = ended.jobs(), ended.snapshot()
    started = started_local_jobs(ended.home / "runs")
    as_json = json.loads(ended.ok("resubmit", "--dry-run", "json=1"))
    text = ended.ok("resubmit", "dry_run=1").splitlines()
    after = ended.snapshot()
    for area in ("jobs", "records", "workspace"):
        assert before.changes(after, area) == [], area
    assert ended.jobs() == before_jobs and started_local_jobs(ended.home / "runs") == started
    assert live_local_jobs(ended.home / "runs") == {}

    plan = as_json["plan"]
    assert plan["queued"] == ["half"]
    steps = {b["benchmark"]: b for b in plan["benchmarks"]}
    assert steps["full"]["rows"] == {"scored": 4, "expected": 4, "failed": 0, "partial": False}
    assert (steps["full"]["queue"], steps["full"]["complete"]) == ("nothing", True)
    assert (
        steps["full"]["why"]
        == "complete: every row is scored, so not queued again though its job ended FAILED"
    )
    assert steps["stuck"]["why"].endswith("though its job ended TIMEOUT")
    assert steps["half"]["rows"] == {"scored": 1, "expected": 4, "failed": 2, "partial": True}
    assert (steps["half"]["queue"], steps["half"]["resumes"]) == ("fresh", "command")
    assert (steps["ok"]["queue"], steps["ok"]["rows"], steps["ok"]["why"]) == (
        "nothing",
        None,
        "its job completed",
    )
    assert as_json["would_resubmit"] == [
        {"benchmark": "half", "job_id": before_jobs["half"][0], "state": "FAILED"}
    ]

    assert text[0].startswith(f"would re-queue 1 benchmark(s) of {as_json['gym_job_id']}: half (FAILED, job ")
    plan_lines = text[1:]
    assert plan_lines[0] == (
        f"plan for {as_json['gym_job_id']}: queue 1 of 4 benchmark(s), "
        "at most 0 GPU-hours (an upper bound: walltime x GPUs of each job)"
    )
    assert [line.split(":")[0].strip() for line in plan_lines[1:]] == ["full", "stuck", "half", "ok"]

    real = ended.ok("resubmit").splitlines()
    assert real[: len(plan_lines)] == plan_lines  # the real one prints the same plan first ...
    assert any(line.startswith("submitted half -> local job") for line in real)
    now = ended.jobs()
    assert [b for b in now if now[b] != before_jobs[b]] == plan["queued"]  # ... and queues exactly it
    assert now["half"][1] == (before_jobs["half"][0],)


def test_a_resubmit_with_nothing_to_queue_says_so_and_queues_nothing(ended: Home) -> None:
    before_jobs, before = ended.jobs(), ended.snapshot()
    out = ended.ok("resubmit", "only=full,stuck,ok")
    assert out.splitlines()[-1] == (
        f"nothing to resubmit: no benchmark of {json.loads(ended.ok('status', 'json=1'))['gym_job_id']} "
        "ended in a retryable state with rows left to score; complete whatever their job's state: full, stuck"
    )
    assert (
        "  full: FAILED (job " in out and "rows 4/4 scored -> nothing: complete: every row is scored" in out
    )
    assert ended.jobs() == before_jobs and live_local_jobs(ended.home / "runs") == {}
    assert before.changes(ended.snapshot(), "jobs") == []
    as_json = ended.run("resubmit", "only=full", "json=1")  # stdout stays the manifest alone
    assert as_json.rc == 0 and json.loads(as_json.stdout)["gym_job_id"] in as_json.stderr
    assert as_json.stderr.startswith("plan for ") and "  full: FAILED (job " in as_json.stderr
    assert ended.jobs() == before_jobs
