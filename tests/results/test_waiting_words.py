"""A benchmark waiting for room under the quota has no job, and it has not failed: every verb says so
in the same words (`waiting for room under <the limit>`, status's WAITING), and a benchmark that was
never queued for another reason keeps its own (`never queued: <why>`). Searched over limits' wording
and errors, for the words of results, resubmit, compare and cancel (status and logs: the e2e tests,
tests/e2e/test_quota.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gymbuild.day_two.replan import _why_not
from gymbuild.executors.states import (
    NOT_QUEUED,
    WAITING_FOR_ROOM_STATE,
    BenchStatus,
    status_rows,
    unqueued_reason,
    waiting_note,
)
from gymbuild.results.compare_cover import Found, shortfalls
from gymbuild.results.table import no_metrics_reason
from gymbuild.state.records import BenchmarkJob
from gymbuild.submit.quota import refused_why, waiting_text

LIVE = frozenset({"RUNNING"})
limit_words = st.text(st.characters(codec="utf-8"), min_size=1, max_size=60)


def _row(error: str) -> BenchStatus:
    """The row `status` makes of a record entry with no job id and this error."""
    (row,) = status_rows([BenchmarkJob(benchmark="b", job_id=None, job_dir="/r/b", error=error)], {})
    return row


def _said(row: BenchStatus) -> dict[str, str]:
    """What results, resubmit and compare say of the benchmark."""
    # compare_read hands a side with no job over as its unqueued_reason: its lines about the candidate.
    candidate = Found(True, unqueued_reason(row.error), None)
    compare = "\n".join(shortfalls("b", Found(True, "COMPLETED", None), candidate, []))
    return {
        "results": no_metrics_reason(row.state, row.error),
        "resubmit": _why_not(row, LIVE),
        "compare": compare,
    }


# A limit read before sbatch (its source), or one sbatch named when it refused (its message).
reasons = st.one_of(limit_words, limit_words.map(refused_why))


@given(why=reasons)
def test_a_waiting_benchmark_is_waiting_for_room_under_its_limit_in_every_verb(why: str) -> None:
    row = _row(waiting_text(why))
    assert (row.state, row.job_id) == (WAITING_FOR_ROOM_STATE, None)
    for verb, text in _said(row).items():
        assert f"waiting for room under {why}" in text, verb
        assert "never queued" not in text and "failed" not in text.replace(why, ""), verb
    assert "waiting for room (b) have no job to cancel" in waiting_note([row])


@given(error=limit_words.filter(lambda e: not e.startswith("waiting for room")))
def test_a_benchmark_never_queued_for_another_reason_is_not_said_to_wait(error: str) -> None:
    row = _row(error)
    assert row.state == NOT_QUEUED
    said = _said(row)
    assert said["results"] == f"never queued: {error}"
    assert said["resubmit"].startswith("never queued")
    assert f"has no job: never queued: {error}" in said["compare"]
    assert not any("waiting for room" in text.replace(error, "") for text in said.values())
    assert waiting_note([row]) == ""
