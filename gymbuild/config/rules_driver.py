"""The rules about the driver: its policy wiring, its benchmarks, and how they share jobs.

Apart from the services' rules because they read the benchmarks, and a service only as the policy
they are wired to.
"""

from __future__ import annotations

import copy

from gymbuild.config import lax
from gymbuild.config.derived import job_groups, resumable_setting
from gymbuild.config.rules_tree import Rules, quoted
from gymbuild.config.tree import JsonObject, JsonValue
from gymbuild.config.walltime import is_walltime

MODEL_TYPES = ("vllm", "vllm_pd", "command")
POLICY_KEYS = ("policy_base_url", "policy_model_name", "policy_api_key")


def fill_resumable(tree: JsonObject) -> None:
    """`driver.resumable` (gymbuild's one switch) as the `resumable` of every `gym eval run` benchmark
    that has none of its own, written into the tree before the schema fills its defaults: after
    that, an unset `resumable` and a written `false` look the same, and a benchmark's own `false`
    must win. A `command` benchmark is left alone (it cannot resume). A value of the wrong shape is
    not copied, so the schema reports it once, at driver.resumable, not again at every benchmark."""
    driver = tree.get("driver")
    if not isinstance(driver, dict) or "resumable" not in driver or not _resumable_shape(driver["resumable"]):
        return
    benchmarks = driver.get("benchmarks")
    for bench in benchmarks.values() if isinstance(benchmarks, dict) else ():
        if isinstance(bench, dict) and "resumable" not in bench and "command" not in bench:
            bench["resumable"] = copy.deepcopy(driver["resumable"])


def _resumable_shape(value: JsonValue) -> bool:
    """Whether `value` is a resumable setting the schema and the walltime rule accept."""
    if isinstance(value, bool):
        return True
    if not isinstance(value, dict) or not set(value) <= {"max_retries", "max_walltime"}:
        return False
    retries, walltime = value.get("max_retries", 3), value.get("max_walltime")
    retries_ok = isinstance(retries, int) and not isinstance(retries, bool)
    return retries_ok and (walltime is None or (isinstance(walltime, str) and is_walltime(walltime)))


def policy_wiring(r: Rules) -> None:
    """policy_model names a model server, and gymbuild alone wires its URL, name and key."""
    policy = r.get(("driver", "policy_model"))
    if not isinstance(policy, str):
        return
    services = r.mapping(("services",))
    svc = services.get(policy)
    if svc is None:
        models = [n for n, s in services.items() if isinstance(s, dict) and s.get("type") in MODEL_TYPES]
        r.error(
            ("driver", "policy_model"),
            f"`{policy}` is not a service",
            f"name one of the model services: {quoted(models)}",
        )
    elif not isinstance(svc, dict) or not r.ok(("services", policy, "type")):
        return
    elif svc.get("type") not in MODEL_TYPES:
        return  # NeMo Gym: a policy that serves no model (a Ray cluster) wires nothing into `run`
    elif svc.get("type") == "command" and svc.get("port") is None and r.ok(("services", policy, "port")):
        r.error(
            ("services", policy, "port"),
            f"`{policy}` is the policy but has no port for policy_base_url",
            f"set services.{policy}.port to the port its server listens on",
        )
    for path, bench in r.benchmarks():
        run = bench.get("run")
        if not isinstance(run, dict) or not r.ok((*path, "run")):
            continue
        for key in run:
            if isinstance(key, str) and key.lstrip("+") in POLICY_KEYS:
                r.error(
                    (*path, "run", key),
                    f"sets {key.lstrip('+')} while driver.policy_model (`{policy}`) already wires it",
                    "remove it from run, or set driver.policy_model: null and wire the policy yourself",
                )


def command_benchmarks(r: Rules) -> None:
    """A `command` replaces `gym eval run`, so run overrides and resuming have nothing to act on."""
    for path, bench in r.benchmarks():
        if not isinstance(bench.get("command"), str) or not r.ok((*path, "command")):
            continue
        if bench.get("run") and r.ok((*path, "run")):
            r.error(
                (*path, "run"),
                "a benchmark with `command` cannot also have `run` overrides",
                "remove run (pass its settings in the command), or remove command",
            )
        if bench.get("resumable") not in (False, None) and r.ok((*path, "resumable")):
            r.error(
                (*path, "resumable"),
                "a benchmark with `command` cannot be resumable",
                "remove resumable, or run the benchmark with `run` instead of command",
            )
        if bench.get("shards") not in (1, None) and r.ok((*path, "shards")):
            r.error(
                (*path, "shards"),
                "a benchmark with `command` cannot be sharded: gymbuild splits the rows `gym eval run` "
                "materializes, and a command has none it knows of",
                "remove shards, or run the benchmark with `run` instead of command",
            )


def sharded_benchmarks(r: Rules) -> None:
    """`shards: K` runs each shard through gymbuild's own rollout_collection_driver (the hook NeMo Gym
    gives for a custom collection), so a benchmark that sets its own cannot be sharded."""
    for path, bench in r.benchmarks():
        run = bench.get("run")
        if bench.get("shards") in (1, None) or not isinstance(run, dict) or not r.ok((*path, "run")):
            continue
        for key in run:
            if isinstance(key, str) and key.lstrip("+") == "rollout_collection_driver":
                r.error(
                    (*path, "run", key),
                    "sets rollout_collection_driver, which a sharded benchmark's jobs use to run their slice",
                    "remove shards, or remove rollout_collection_driver",
                )


def _per_job(r: Rules) -> int | str | None:
    """driver.benchmarks_per_job as the model reads it: 1 when unset, `all`, or an integer >= 1; integer
    text (`${oc.env:N}`) is the integer, as lax mode reads an int. None (reported) for anything else."""
    path = ("driver", "benchmarks_per_job")
    driver = r.get(("driver",))
    if not r.ok(path) or not isinstance(driver, dict):
        return None
    value = r.get(path)
    if value is None:
        return 1
    if isinstance(value, str) and value != "all":
        ok, number = lax.to_int(value)
        if not ok or not isinstance(number, int) or number < 1:
            r.error(
                path, f"`{value}` is neither a number of benchmarks nor `all`", "write an integer >= 1 or all"
            )
            return None
        value = driver["benchmarks_per_job"] = number
    return value if isinstance(value, int | str) else None  # the schema accepted an integer or `all`


def shared_jobs(r: Rules) -> None:
    """benchmarks_per_job packs benchmarks into jobs in config order; what a job has once (its resume
    chain, its concurrency) must fit every benchmark packed into it."""
    per_job = _per_job(r)
    concurrent = r.get(("driver", "concurrent_benchmarks"))
    size = per_job if isinstance(per_job, int) else None  # None: `all`, or a value already refused
    concurrent_ok = isinstance(concurrent, int) and r.ok(("driver", "concurrent_benchmarks"))
    if isinstance(concurrent, int) and concurrent_ok and size is not None and concurrent > size:
        r.error(
            ("driver", "concurrent_benchmarks"),
            f"{concurrent} benchmarks at once, but a job holds {size} (driver.benchmarks_per_job)",
            f"set concurrent_benchmarks to at most {size}, or raise driver.benchmarks_per_job",
        )
    if per_job is None or size == 1:
        return
    benches = {path[-1]: bench for path, bench in r.benchmarks() if r.ok((*path, "resumable"))}
    for group in job_groups(benches, None if per_job == "all" else size):
        first = group[0]
        wanted = resumable_setting(benches[first].get("resumable"))
        for name in group[1:]:
            if resumable_setting(benches[name].get("resumable")) != wanted:
                r.error(
                    ("driver", "benchmarks", name, "resumable"),
                    f"`{name}` shares a job with `{first}` (driver.benchmarks_per_job: {per_job} packs "
                    "benchmarks in config order), and a job resumes as a whole, but their resumable "
                    "settings differ",
                    "give the benchmarks of one job the same resumable setting, put the resumable ones "
                    "next to each other, or lower driver.benchmarks_per_job",
                )


def benchmarks_present(r: Rules) -> None:
    if r.ok(("driver", "benchmarks")) and r.get(("driver", "benchmarks")) == {}:
        r.warnings.append("driver.benchmarks is empty: nothing will be submitted")


def budget_applies(r: Rules) -> None:
    """driver.budget limits resume chains: without a resumable benchmark it limits nothing."""
    if not isinstance(r.get(("driver", "budget")), dict):
        return
    if not any(resumable_setting(bench.get("resumable")) for _path, bench in r.benchmarks()):
        r.warnings.append("driver.budget: no benchmark is resumable, so the budget limits nothing")
