"""A shared job's files (plan/shared.py): its job.sh from templates/shared.sh.j2 and, with the collector
on, its otel/collector.yaml, keyed by path relative to the job's own directory. Pure, like render_job,
and through the same quoting filter and executor templates."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from gymbuild.plan.job import JobPlan
from gymbuild.plan.shared import SharedJobPlan
from gymbuild.render import RenderedJob, job_files, render_job


def render_shared_job(shared: SharedJobPlan, secrets: Mapping[str, str]) -> RenderedJob:
    files = job_files(shared.job, secrets, "shared.sh.j2", shared, f"job {shared.name}")
    return RenderedJob(shared.name, shared.job_dir, MappingProxyType(files))


def render_job_plan(job: JobPlan, secrets: Mapping[str, str]) -> RenderedJob:
    """A job's files, whether one benchmark's own or shared by several."""
    return render_job(job.plan, secrets) if job.shared is None else render_shared_job(job.shared, secrets)
