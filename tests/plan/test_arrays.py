"""Job arrays, planned: grouping by directives and splitting under MaxArraySize (plan/arrays.py).

The property a user needs: every benchmark's job runs in exactly one array task (or plain job), and
Slurm accepts every array (no index at or past MaxArraySize), whatever the sizes, limit and throttle.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gymbuild.plan.arrays import plan_arrays, shared_directives

PER_JOB = (("job-name", "gym-x"), ("chdir", "/runs/x"), ("output", "logs/slurm-%j.log"))


def _jobs(kinds: list[int]) -> list[tuple[str, tuple[tuple[str, str | None], ...]]]:
    """Job i asks for walltime kind kinds[i]: jobs of one kind share every directive but their own."""
    return [
        (f"b{i}", ((PER_JOB[0][0], f"gym-b{i}"), ("time", f"0{kind}:00:00"), (PER_JOB[1][0], f"/r/b{i}")))
        for i, kind in enumerate(kinds)
    ]


@settings(max_examples=300, deadline=None)
@given(
    kinds=st.lists(st.integers(0, 3), max_size=60),
    max_array_size=st.none() | st.integers(0, 12),
    parallel=st.none() | st.integers(1, 8),
)
def test_every_job_runs_in_exactly_one_task_and_no_index_reaches_max_array_size(
    kinds: list[int], max_array_size: int | None, parallel: int | None
) -> None:
    jobs = _jobs(kinds)
    arrays = plan_arrays(jobs, max_array_size, parallel)
    placed = [key for array in arrays for key in array.keys]
    assert sorted(placed) == sorted(key for key, _ in jobs)  # each exactly once
    directives = dict(jobs)
    for array in arrays:
        # indices are re-based: 0..n-1 in every array, and n - 1 < MaxArraySize
        first, _, last = array.spec.partition("%")[0].partition("-")
        assert (int(first), int(last)) == (0, len(array.keys) - 1)
        if max_array_size is not None and array.is_array:
            assert int(last) < max_array_size
        if array.is_array:
            assert array.spec.endswith(f"%{parallel}") if parallel else "%" not in array.spec
        # one array, one allocation request: its jobs' shared directives are all the same
        assert {shared_directives(directives[key]) for key in array.keys} == {array.directives}
    if max_array_size is None or max_array_size > 1:
        # no more sbatch calls than the groups and the limit need
        size = max_array_size or len(jobs) or 1
        per_kind = [kinds.count(k) for k in set(kinds)]
        assert len(arrays) == sum(-(-n // size) for n in per_kind)


def test_a_submission_larger_than_max_array_size_is_split_into_arrays_indexed_from_zero() -> None:
    arrays = plan_arrays(_jobs([1] * 10), 4, 2)
    assert [(a.keys, a.spec) for a in arrays] == [
        (("b0", "b1", "b2", "b3"), "0-3%2"),
        (("b4", "b5", "b6", "b7"), "0-3%2"),
        (("b8", "b9"), "0-1%2"),
    ]


def test_jobs_whose_directives_differ_never_share_an_array() -> None:
    arrays = plan_arrays(_jobs([1, 2, 1, 2, 3]), None)
    assert [a.keys for a in arrays] == [("b0", "b2"), ("b1", "b3"), ("b4",)]
    assert [a.is_array for a in arrays] == [True, True, False]  # a group of one: a plain job
    assert arrays[0].directives == (("time", "01:00:00"),)  # job name and chdir are the task's own


def test_max_array_size_zero_disables_arrays_every_job_plain() -> None:
    assert [a.is_array for a in plan_arrays(_jobs([1, 1, 1]), 0)] == [False, False, False]
