"""A run's plans, made on first need: each benchmark's, each job's (one benchmark, or several sharing
one), and the digests that tell whether a staged script is current without planning anything.

Made once the run's submission is settled (the plans name its run dir and id), and handed to the
steps as a typed value: stage, sync, queue and the dry run ask it for jobs, not for benchmarks.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from gymbuild.config.model import thaw
from gymbuild.config.tree import at, mapping_at
from gymbuild.errors import UserError
from gymbuild.plan import Planner, plan_shards, planner, shard_of, shard_units
from gymbuild.plan.job import Group, JobPlan, Packing, pack, plan_job
from gymbuild.resources import script_code_digest, user_cache_home
from gymbuild.state.workspace import digest

if TYPE_CHECKING:
    from gymbuild.config import Resolved
    from gymbuild.plan.model import BenchPlan, ExecutorTraits
    from gymbuild.state.workspace import Submission


_T = TypeVar("_T")


@functools.cache
def keep_compiled_templates() -> None:
    """Keep gymbuild.render's compiled templates in the user's cache between runs (once a process)."""
    from gymbuild import render  # late: Jinja2 (House rules)

    render.keep_compiled_templates(user_cache_home() / "gymbuild" / "jinja")


class RunPlans:
    """The plans of one submission of one resolved config; each made once, when first asked for: a
    no-op submit plans nothing, a re-submit of ten of a thousand benchmarks plans ten."""

    def __init__(
        self, resolved: Resolved, submission: Submission, traits: ExecutorTraits, config_file: Path
    ) -> None:
        self.resolved = resolved
        self.submission = submission
        self._traits = traits
        self._config_file = config_file
        self._planner: Planner | None = None
        self._shards: dict[str, tuple[BenchPlan, ...]] = {}
        self._plans: dict[str, BenchPlan] = {}
        self._jobs: dict[Group, JobPlan] = {}
        self._packings: dict[tuple[str, ...], Packing] = {}
        self._digests: dict[str, str] = {}

    def bench(self, bench: str) -> BenchPlan:
        """`bench`'s own plan."""
        found = self._plans.get(bench)
        if found is None:
            found = self._plans[bench] = self._planned(lambda plan: plan(bench))
        return found

    def shards(self, bench: str) -> tuple[BenchPlan, ...]:
        """The jobs of `bench`'s shards (`shards: K`), in order; none when it is not sharded."""
        found = self._shards.get(bench)
        if found is None:
            config = self.resolved.config
            found = self._shards[bench] = self._planned(lambda plan: plan_shards(plan, config, bench))
        return found

    def units(self, bench: str) -> tuple[str, ...]:
        """What `bench` queues as jobs: itself, or its shards' names (plan.shard_units); a shard's
        name, or a benchmark the config names no more, is itself."""
        entry = self.resolved.config.driver.benchmarks.get(bench)
        return (bench,) if entry is None or shard_of(bench) is not None else shard_units(bench, entry.shards)

    def groups(self, packing: Packing, benches: Sequence[str]) -> list[Group]:
        """The jobs of `benches`, in order: a sharded benchmark's shards (one job each), the others'
        jobs as `packing` packs them."""
        out: list[Group] = []
        for group in packing.jobs(benches):
            out += [(u,) for u in self.units(group[0])] if len(group) == 1 else [group]
        return out

    def _planned(self, make: Callable[[Planner], _T]) -> _T:
        """`make(planner)`, the planner made once; a UserError names the config file too."""
        try:
            if self._planner is None:
                sub = self.submission
                self._planner = planner(
                    self.resolved.config, self._traits, run_dir=sub.run_dir, gym_job_id=sub.gym_job_id
                )
            return make(self._planner)
        except UserError as err:  # the plan names the config path; the user also needs the file
            fix = "" if "fix:" in str(err) else "\n    fix: correct that value in the config"
            raise UserError(f"error: {self._config_file}: {err}{fix}") from None

    def packing(self, benches: Sequence[str]) -> Packing:
        """Which of `benches` share a job (the config's benchmarks_per_job)."""
        key = tuple(benches)
        found = self._packings.get(key)
        if found is None:
            found = self._packings[key] = pack(self.resolved.config, key)
        return found

    def job(self, group: Group) -> JobPlan:
        """The job of `group` (a packing's group, or one benchmark alone)."""
        found = self._jobs.get(group)
        shard = shard_of(group[0]) if len(group) == 1 else None
        if found is None and shard is not None:  # a shard's job: its own, never shared
            found = self._jobs[group] = JobPlan(group, self.shards(shard[0])[shard[1]], None)
        if found is None:
            plans = [self.bench(b) for b in group]
            concurrent = self.resolved.config.driver.concurrent_benchmarks
            found = self._jobs[group] = plan_job(plans, concurrent)
        return found

    # --- is a staged script current ---------------------------------------------------------------

    @functools.cached_property
    def _stage_basis(self) -> str:
        """What every benchmark's script is made from besides its own entry: the code that makes
        scripts, the secrets, the submission, and the resolved config without driver.benchmarks."""
        sub = self.submission
        tree = dict(self.resolved.tree)
        tree["driver"] = {k: v for k, v in mapping_at(tree, "driver").items() if k != "benchmarks"}
        secrets = hashlib.sha256(json.dumps(dict(self.resolved.secrets), sort_keys=True).encode())
        return digest(script_code_digest(), secrets.hexdigest(), sub.run_dir, sub.gym_job_id, thaw(tree))

    def stage_digest(self, bench: str) -> str:
        """What `bench`'s script is made from: the shared basis and the benchmark's own config entry.

        A plan depends on nothing else (gymbuild/plan is pure and a benchmark's plan reads no other
        benchmark), so equal inputs make an equal script without planning or rendering anything.
        Kept for the run: doit's uptodate checks, stage, queue and the report all ask.
        """
        shard = shard_of(bench)
        if shard is not None:  # a shard's script is made from its benchmark's entry
            return self.stage_digest(shard[0])
        found = self._digests.get(bench)
        if found is None:
            entry = thaw(at(self.resolved.tree, "driver", "benchmarks", bench))
            found = self._digests[bench] = digest(self._stage_basis, bench, entry)
        return found

    def stage_want(self, bench: str, packing: Packing) -> str:
        """The stage stamp that says `bench` is staged under `packing`: its own digest, and for a
        member of a shared job also the job it is packed into (a resubmit packs anew)."""
        own = self.stage_digest(bench)
        group = packing.members(bench)
        return own if len(group) == 1 else digest(own, list(group))
