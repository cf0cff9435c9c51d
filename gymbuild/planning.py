"""A run's plans, made on first need, and the digest that tells a staged script is current.

Below both the stage step and sharing (a shared job is planned from its members' plans, and a
member's stage stamp holds its own digest): neither needs the other to plan or to tell staleness.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import TYPE_CHECKING, Any

from gymbuild.errors import UserError
from gymbuild.workspace import digest

if TYPE_CHECKING:
    from gymbuild.session import Session


@functools.cache
def renderer() -> Any:
    """gymbuild.render, with its compiled templates kept in the user's cache between runs."""
    from gymbuild import render
    from gymbuild.resources import user_cache_home

    render.keep_compiled_templates(user_cache_home() / "gymbuild" / "jinja")
    return render


def bench_plan(ctx: Session, bench: str) -> Any:
    """`bench`'s plan, made on first need: a no-op submit plans nothing, a re-submit of ten of a
    thousand benchmarks plans ten (whether a script is stale is told by stage_digest, unplanned)."""
    found = ctx.plans.get(bench)
    if found is None:
        from gymbuild.executors.base import planning_traits
        from gymbuild.plan import planner

        try:
            if ctx.planner is None:
                sub = ctx.submission()
                traits = planning_traits(ctx.config)
                ctx.planner = planner(ctx.config, traits, run_dir=sub.run_dir, gym_job_id=sub.gym_job_id)
            found = ctx.plans[bench] = ctx.planner(bench)
        except UserError as err:  # the plan names the config path; the user also needs the file
            fix = "" if "fix:" in str(err) else "\n    fix: correct that value in the config"
            raise UserError(f"error: {ctx.inv.config}: {err}{fix}") from None
    return found


def _stage_basis(ctx: Session) -> str:
    """What every benchmark's script is made from besides its own entry: the code that makes
    scripts, the secrets, the submission, and the resolved config without driver.benchmarks."""
    found = ctx.memo.get("stage_basis")
    if found is not None:
        return str(found)
    from gymbuild.config.model import thaw
    from gymbuild.resources import script_code_digest

    assert ctx.resolved is not None
    sub = ctx.submission()
    tree = dict(ctx.resolved.tree)
    tree["driver"] = {k: v for k, v in tree["driver"].items() if k != "benchmarks"}
    secrets_digest = hashlib.sha256(json.dumps(dict(ctx.resolved.secrets), sort_keys=True).encode())
    basis = digest(script_code_digest(), secrets_digest.hexdigest(), sub.run_dir, sub.gym_job_id, thaw(tree))
    ctx.memo["stage_basis"] = basis
    return basis


def stage_digest(ctx: Session, bench: str) -> str:
    """What `bench`'s script is made from: the shared basis and the benchmark's own config entry.

    A plan depends on nothing else (gymbuild/plan is pure and a benchmark's plan reads no other
    benchmark), so equal inputs make an equal script without planning or rendering anything.
    Cached for the run: doit's uptodate checks, stage, queue and the report all ask.
    """
    found = ctx.stage_digests.get(bench)
    if found is None:
        from gymbuild.config.model import thaw

        assert ctx.resolved is not None
        entry = thaw(ctx.resolved.tree["driver"]["benchmarks"][bench])
        found = ctx.stage_digests[bench] = digest(_stage_basis(ctx), bench, entry)
    return found
