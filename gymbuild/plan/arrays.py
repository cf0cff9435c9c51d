"""Job arrays (`compute.<name>.array`, a gymbuild extension): which jobs go into which Slurm array.

Pure: the jobs to queue (each with its `#SBATCH` directives) and the cluster's MaxArraySize in, the
arrays out. One array's tasks share one allocation request, so jobs whose directives differ (but
for the three that name the job's own place: its job name, working directory and output file, which
the array's task script sets per task) cannot share one: they are grouped by identical directives,
in order of their first job. Slurm refuses an array index >= MaxArraySize, so a group larger than
it is split into arrays of at most MaxArraySize tasks, each indexed from 0 again (a higher index
would be refused; submitit writes `--array=0-N%256` and has no answer for it). A group of one is a
plain job: an array of one task would only rename it.

Which MaxArraySize applies is the caller's to find out (at submit, in its round trip); here it is
an argument, so a dry run can plan with the value it knows (or none).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Directives = tuple[tuple[str, str | None], ...]
K = TypeVar("K", bound=Hashable)

# The directives that differ between any two jobs: an array sets them per task (its task script cds
# into the job's directory and writes Slurm's output there), so they never keep jobs apart.
PER_TASK = frozenset({"job-name", "chdir", "output"})


def shared_directives(directives: Directives) -> Directives:
    """The directives an array of this job must carry: all but the per-task ones, in order."""
    return tuple((key, value) for key, value in directives if key not in PER_TASK)


@dataclass(frozen=True)
class ArrayJob(Generic[K]):
    """One sbatch: the jobs its tasks run (task i runs `keys[i]`), the directives they share and the
    throttle. One key is a plain job (`is_array` false)."""

    keys: tuple[K, ...]
    directives: Directives
    parallel: int | None = None

    @property
    def is_array(self) -> bool:
        return len(self.keys) > 1

    @property
    def spec(self) -> str:
        """sbatch's `--array` value: `0-<n-1>`, and `%<parallel>` with a throttle."""
        throttle = f"%{self.parallel}" if self.parallel else ""
        return f"0-{len(self.keys) - 1}{throttle}"


def plan_arrays(
    jobs: Sequence[tuple[K, Directives]], max_array_size: int | None, parallel: int | None = None
) -> tuple[ArrayJob[K], ...]:
    """The sbatch calls that queue `jobs` ((key, directives) each, in queue order) as arrays.

    `max_array_size`: the cluster's MaxArraySize (the highest index is one less), None when unknown
    (no split). Below 1 (MaxArraySize=0 disables arrays) every job is a plain job.
    """
    groups: dict[Directives, list[K]] = {}
    for key, directives in jobs:
        groups.setdefault(shared_directives(directives), []).append(key)
    size = max(1, max_array_size) if max_array_size is not None else max(1, len(jobs))
    return tuple(
        ArrayJob(tuple(keys[start : start + size]), directives, parallel)
        for directives, keys in groups.items()
        for start in range(0, len(keys), size)
    )
