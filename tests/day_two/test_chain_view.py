"""How `status` (its table, json=1, and watch=1's redraw, which is the same table) and `cancel` show a
resume chain: the attempt beside the state, every attempt so far with what the chain did next, the
chain's end; and what cancel would stop. Pure: rows as the status look returns them."""

from __future__ import annotations

import json
from dataclasses import replace

from gymbuild.day_two.act import live_job_ids
from gymbuild.day_two.status import format_statuses, statuses_json
from gymbuild.executors.chain import Chain, Step
from gymbuild.executors.states import BenchStatus, tally
from gymbuild.state.records import BenchmarkJob
from tests.day_two.test_rollouts import record

LIVE = frozenset({"PENDING", "RUNNING"})
# status's view of a record (test_rollouts' one) with two benchmarks
RECORD = replace(
    record(), benchmarks=(BenchmarkJob("gpqa", "/r/gpqa", "987"), BenchmarkJob("aime", "/r/aime", "5"))
)
RUNNING = Chain(
    3,
    (
        Step("987", 1, "FAILED", 0, "retry", "FAILED, exit 1"),
        Step("988", 2, "TIMEOUT", 12, "resume", "TIMEOUT after 31 new rows"),
        Step("989", 3, "RUNNING", 43),
        Step("990", 4, "PENDING"),
    ),
    None,
    ("989", "990"),
)
ROWS = [
    BenchStatus("gpqa", "989", "RUNNING", None, "0:10", "node1", None, chain=RUNNING),
    BenchStatus("aime", "5", "COMPLETED", "0:0", "1:00", "node2", None),
]


def test_the_table_shows_each_chain_s_attempt_and_its_attempts_so_far() -> None:
    text = format_statuses(RECORD, ROWS, tally(ROWS, LIVE))
    lines = text.splitlines()
    assert lines[1].split() == ["BENCHMARK", "JOB", "STATE", "ATTEMPT", "EXIT", "ELAPSED", "NODES"]
    assert lines[2].split() == ["gpqa", "989", "RUNNING", "3", "-", "0:10", "node1"]
    assert lines[3].split() == ["aime", "5", "COMPLETED", "-", "0:0", "1:00", "node2"]
    assert "resume chains (job state -> what the chain did next):" in lines
    assert (
        "  gpqa: 987 FAILED -> retry (FAILED, exit 1); 988 TIMEOUT -> resume (TIMEOUT after 31 new rows); "
        "989 RUNNING; 990 PENDING"
    ) in lines


def test_a_stopped_chain_says_why() -> None:
    ended = Chain(
        2,
        (Step("987", 1, "FAILED"), Step("988", 2, "FAILED", None, "stop", "max_retries (1)")),
        "stopped: max_retries (1) reached",
        (),
    )
    row = BenchStatus("gpqa", "988", "FAILED", "1:0", None, None, None, chain=ended)
    text = format_statuses(RECORD, [row], tally([row], LIVE))
    assert (
        "  gpqa: 987 FAILED; 988 FAILED -> stop (max_retries (1)); stopped: max_retries (1) reached" in text
    )


def test_json_carries_the_attempt_the_attempts_and_the_end() -> None:
    doc = json.loads(statuses_json(RECORD, ROWS))
    gpqa, aime = doc["benchmarks"]
    assert (gpqa["job_id"], gpqa["attempt"], gpqa["chain_end"], gpqa["chain_live"]) == (
        "989",
        3,
        None,
        ["989", "990"],
    )
    assert gpqa["attempts"][1] == {
        "job_id": "988",
        "attempt": 2,
        "state": "TIMEOUT",
        "rows": 12,
        "then": "resume",
        "reason": "TIMEOUT after 31 new rows",
    }
    assert "chain" not in gpqa and "attempt" not in aime and "chain" not in aime


def test_cancel_stops_a_chain_s_running_job_and_its_queued_successor() -> None:
    assert live_job_ids(ROWS, (), LIVE) == ["989", "990"]
    assert live_job_ids(ROWS, ("aime",), LIVE) == []
    # A chain whose recorded job is dead and whose successor waits: the successor is live.
    waiting = Chain(2, (Step("987", 1, "FAILED"), Step("988", 2, "PENDING")), None, ("988",))
    row = BenchStatus("gpqa", "988", "PENDING", None, None, None, None, chain=waiting)
    assert live_job_ids([row], ("gpqa",), LIVE) == ["988"]
