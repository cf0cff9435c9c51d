"""The decisions behind one benchmark's job, made once, in plain data, before any text is written.

A `BenchPlan` says where every step runs, which ports it tries first, what environment it gets and
what the driver runs. Templates (gymbuild/render) only turn it into bash; they decide nothing. Keeping
the decisions here makes them testable without parsing shell. Each part has a canonical JSON text
(`canonical_json`), which the renderer keys the parts it renders once on: equal text, equal script.

Pure: no I/O, no clock, no environment. Secrets stay references (`EnvValue("host", VAR)`) until
render time, so a plan can be printed, hashed and stored without leaking anything.

The package, by subject:
- model: the plan's dataclasses and the words (literal text and `Ref`s) that reach bash;
- canonical: their canonical JSON;
- overrides: Hydra override quoting (`gym eval run` / `prepare` arguments);
- checks: shell variable names, env entries and mounts a config hands to the shell;
- directives: `#SBATCH` directives (the Slurm time grammar is gymbuild.config.walltime);
- placement: which nodes each step runs on, and the ports steps try;
- services: each service's background steps;
- driver: the driver step;
- collector: the OpenTelemetry collector step;
- submission: the shared parts planned once, each benchmark's plan around them.
"""

from __future__ import annotations

from gymbuild.config.walltime import walltime_seconds
from gymbuild.plan.canonical import canonical_json
from gymbuild.plan.checks import shell_name
from gymbuild.plan.model import (
    BenchPlan,
    CollectorPlan,
    DriverStep,
    EnvEntry,
    EnvSource,
    ExecutorTraits,
    GymInstallPlan,
    Health,
    Nodes,
    Part,
    PoolRange,
    Port,
    Ref,
    ResumePlan,
    ServiceStep,
    StepKind,
    VllmMode,
    Word,
)
from gymbuild.plan.overrides import flatten_overrides, hydra_value
from gymbuild.plan.placement import driver_nodes, node_host, place, pool_ranges
from gymbuild.plan.services import ray_address_var, ray_workers_var
from gymbuild.plan.submission import (
    Planner,
    plan_benchmark,
    plan_shards,
    plan_submission,
    planner,
    shard_name,
    shard_of,
    shard_rel_dir,
    shard_units,
)

__all__ = [
    "BenchPlan",
    "CollectorPlan",
    "DriverStep",
    "EnvEntry",
    "EnvSource",
    "ExecutorTraits",
    "GymInstallPlan",
    "Health",
    "Nodes",
    "Part",
    "Planner",
    "PoolRange",
    "Port",
    "Ref",
    "ResumePlan",
    "ServiceStep",
    "StepKind",
    "VllmMode",
    "Word",
    "canonical_json",
    "driver_nodes",
    "flatten_overrides",
    "hydra_value",
    "node_host",
    "place",
    "plan_benchmark",
    "plan_shards",
    "plan_submission",
    "planner",
    "pool_ranges",
    "ray_address_var",
    "ray_workers_var",
    "shard_name",
    "shard_of",
    "shard_rel_dir",
    "shard_units",
    "shell_name",
    "walltime_seconds",
]
