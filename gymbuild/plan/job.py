"""What one sbatch queues: a job, which plans one benchmark or a group of them that share it.

A run queues jobs, not benchmarks. Without `driver.benchmarks_per_job` every job is one benchmark's
own; with it, the benchmarks to queue are packed in config order, up to `benchmarks_per_job` a job
and never two resume settings in one (`job_groups`), so a resubmit packs what is left anew. A group
of one is that benchmark's own job, exactly as without sharing. Each benchmark keeps its own
outcome: every member of a shared job gets the job's id, which is how status and resubmit tell a
shared job from its benchmarks later.

Pure, like the rest of plan/: a packing is decided from the config and the names alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gymbuild.config.derived import job_groups
from gymbuild.config.model import Config
from gymbuild.plan.model import BenchPlan
from gymbuild.plan.shared import SharedJobPlan, job_rel_dir, plan_shared_job
from gymbuild.plan.submission import shard_of, shard_rel_dir

Group = tuple[str, ...]


@dataclass(frozen=True)
class Packing:
    """Which benchmarks share a job: bench -> its job's benchmarks, for groups of two or more; a
    benchmark it does not name is its own job."""

    shared: Mapping[str, Group] = field(default_factory=dict)

    def members(self, bench: str) -> Group:
        """The benchmarks of `bench`'s job, in the order they run (itself alone when not shared)."""
        return self.shared.get(bench, (bench,))

    def jobs(self, benches: Iterable[str]) -> list[Group]:
        """The jobs of `benches`, once each, in order of their first benchmark."""
        return list(dict.fromkeys(self.members(bench) for bench in benches))


def pack(config: Config, benches: Iterable[str]) -> Packing:
    """The packing of `benches` (in config order) under the config's `benchmarks_per_job`."""
    drv = config.driver
    if not drv.shares_jobs:
        return Packing()
    alone = [b for b in benches if drv.benchmarks[b].shards <= 1]  # a sharded one's jobs are its shards
    groups = job_groups(alone, drv.benchmarks_per_job, lambda b: drv.benchmarks[b].resumable)
    return Packing({bench: group for group in groups if len(group) > 1 for bench in group})


def job_dir_of(group: Sequence[str]) -> str:
    """Where a job's files live, relative to the run directory: a benchmark's own directory, or the
    shared job's under +jobs/, or a shard's (`<bench>+shard<k>`) under its benchmark's."""
    if len(group) > 1:
        return job_rel_dir(group)
    shard = shard_of(group[0])
    return group[0] if shard is None else f"{shard[0]}/{shard_rel_dir(shard[1])}"


@dataclass(frozen=True)
class JobPlan:
    """One job, planned: its benchmarks and the plan of the job as a whole (its directives, services,
    collector, resume chain and where its job.sh is); `shared` holds each member's own driver step
    when several share it."""

    members: Group
    plan: BenchPlan
    shared: SharedJobPlan | None

    @property
    def key(self) -> str:
        """The benchmark that stands for the job where state is per job (its in-flight stamp)."""
        return self.members[0]

    @property
    def rel_dir(self) -> str:
        return job_dir_of(self.members)


def plan_job(plans: Sequence[BenchPlan], concurrent: int) -> JobPlan:
    """The job of `plans` (its benchmarks' own plans, in the order they run)."""
    members = tuple(p.bench for p in plans)
    if len(plans) == 1:
        return JobPlan(members, plans[0], None)
    shared = plan_shared_job(plans, concurrent)
    return JobPlan(members, shared.job, shared)
