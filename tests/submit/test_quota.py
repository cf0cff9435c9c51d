"""What fits the user's quota, and what waits (submit/quota.py): the split a submit pass makes before
its first sbatch, searched over limits, what is queued already and submissions of every shape
(one job per benchmark, and shared jobs of several)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gymbuild.executors.slurm.limits import Limits
from gymbuild.executors.states import waits_for_room
from gymbuild.submit.quota import FEED_HINT, split, waiting_text


@st.composite
def submissions(draw: st.DrawFn) -> list[tuple[str, ...]]:
    """Benchmarks b0..bN packed into jobs of 1 to 4 (driver.benchmarks_per_job), in config order."""
    sizes = draw(st.lists(st.integers(1, 4), max_size=60))
    names = iter(f"b{i}" for i in range(sum(sizes)))
    return [tuple(next(names) for _ in range(size)) for size in sizes]


limits_found = st.one_of(
    st.none(),  # the executor has no quota (local)
    st.builds(Limits),  # a site without accounting: nothing found
    st.builds(
        Limits,
        max_submit_jobs=st.integers(0, 50),
        max_jobs=st.one_of(st.none(), st.integers(0, 50)),
        queued=st.integers(0, 70),
        submit_source=st.just("MaxSubmitJobs=N of association a/root"),
    ),
)


@given(groups=submissions(), limits=limits_found)
def test_no_sbatch_beyond_the_limit_and_every_benchmark_queued_or_waiting(
    groups: list[tuple[str, ...]], limits: Limits | None
) -> None:
    to_queue, waiting = split(groups, limits)
    everyone = [b for g in groups for b in g]
    # Every benchmark is either queued or waiting, once, in config order (the queued ones first).
    assert to_queue + waiting == everyone
    jobs_queued = [g for g in groups if set(g) <= set(to_queue)]
    # A job's benchmarks go together: no job is split between queued and waiting.
    assert sum(len(g) for g in jobs_queued) == len(to_queue)
    if limits is None or limits.max_submit_jobs is None:
        assert waiting == []  # nothing known to refuse: nothing is held back
        return
    # No sbatch the limit is known to refuse: what is queued now plus what the pass queues fits.
    if jobs_queued:
        assert limits.queued + len(jobs_queued) <= limits.max_submit_jobs
    # Nothing waits that would have fitted: the pass fills the room.
    if waiting:
        assert limits.queued + len(jobs_queued) >= limits.max_submit_jobs


def test_a_submission_three_times_the_room_queues_the_room_and_the_rest_waits() -> None:
    limits = Limits(max_submit_jobs=4, queued=1, submit_source="MaxSubmitJobs=4 of association q/root")
    groups = [(f"b{i:02d}",) for i in range(12)]
    to_queue, waiting = split(groups, limits)
    assert to_queue == ["b00", "b01", "b02"]
    assert len(waiting) == 9
    text = waiting_text(limits.why())
    assert waits_for_room(text)
    assert text.endswith(FEED_HINT)
    assert "MaxSubmitJobs=4 of association q/root (1 of your jobs are queued there now)" in text
