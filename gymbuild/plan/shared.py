"""A job that several benchmarks share (`driver.benchmarks_per_job`): one allocation, services started
and health-checked once, each benchmark its own driver step in its own directory.

Planned from the benchmarks' own plans, which already say everything a benchmark's driver step needs
(its command, environment, mounts) and everything its job shares with the others (services, ports,
pools, directives, the collector). So a shared job decides only what is the job's: where its own
files live, its job name, its resume chain, and the secrets of all its benchmarks. A group of one
benchmark is not a shared job: it is that benchmark's own job, exactly as without sharing.

Where the job's files live: `<run dir>/+jobs/<first benchmark>+<others>-<digest of the names>/`
(its job.sh, logs/slurm-<id>.log and the services' logs, the collector's files, .gym_exit-<id> for
the job as a whole). `+` is not allowed in a benchmark name, so no benchmark's directory can be it;
the digest keeps two different packings (a resubmit of some of them) apart, so a resume chain of an
earlier packing never runs a later one's script.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from gymbuild.plan.canonical import _Canonical
from gymbuild.plan.model import BenchPlan

JOBS_DIR = "+jobs"


@dataclass(frozen=True)
class SharedJobPlan(_Canonical):
    name: str  # the job's directory name under +jobs/, and its Slurm job name after `gym-`
    job_dir: str
    job: BenchPlan  # the job as a whole: directives, services, collector, resume; its driver is unused
    benches: tuple[BenchPlan, ...]  # in the order they run, each with its own driver step
    concurrent: int  # how many run at once


def job_rel_dir(group: Sequence[str]) -> str:
    """A shared job's directory, relative to the run directory."""
    return f"{JOBS_DIR}/{shared_job_name(group)}"


def shared_job_name(benches: Sequence[str]) -> str:
    """`<first>+<count of the others>-<6 hex>`: readable in squeue, unique per set of benchmarks."""
    tag = hashlib.sha256("\n".join(benches).encode()).hexdigest()[:6]
    return f"{benches[0]}+{len(benches) - 1}-{tag}"


def shared_job_dir(run_dir: str, benches: Sequence[str]) -> str:
    return f"{run_dir.rstrip('/')}/{JOBS_DIR}/{shared_job_name(benches)}"


def _with(
    directives: tuple[tuple[str, str | None], ...], **values: str
) -> tuple[tuple[str, str | None], ...]:
    return tuple((key, values.get(key.replace("-", "_"), value)) for key, value in directives)


def plan_shared_job(plans: Sequence[BenchPlan], concurrent: int) -> SharedJobPlan:
    """The job of `plans` (two or more benchmarks of one submission, in the order they run)."""
    assert len(plans) > 1, "a group of one benchmark is that benchmark's own job"
    first = plans[0]
    names = [p.bench for p in plans]
    name = shared_job_name(names)
    job_dir = shared_job_dir(first.run_dir, names)
    collector = first.collector
    if collector is not None:
        collector = replace(collector, benchmark=",".join(names), bench_dir=job_dir)
    resume = first.resume
    if resume is not None:  # the rules keep one resumable setting per job
        # The job's dir is <run dir>/+jobs/<name>: its benchmarks' dirs and the run dir are two up.
        resume = replace(
            resume,
            script=f"{job_dir}/job.sh",
            rollouts=tuple(f"../../{p.bench}/{r}" for p in plans for r in resume.rollouts),
            expected=tuple(f"../../{p.bench}/{r}" for p in plans for r in resume.expected),
            ledger=f"../{resume.ledger}",
        )
    secrets: dict[str, None] = {}
    for plan in plans:
        secrets.update(dict.fromkeys(plan.secrets))
    job = replace(
        first,
        bench=name,
        bench_dir=job_dir,
        directives=_with(first.directives, job_name=f"gym-{name}", chdir=job_dir),
        collector=collector,
        resume=resume,
        secrets=tuple(secrets),
    )
    return SharedJobPlan(
        name=name,
        job_dir=job_dir,
        job=job,
        benches=tuple(plans),
        concurrent=max(1, min(concurrent, len(plans))),
    )
