"""The config rules JSON Schema cannot say: those that cross fields, and the string syntaxes whose
errors deserve a better message than "does not match pattern".

They run on the default-filled tree after schema validation, and each one reads only values the
schema accepted (`Rules.ok`), so a wrong type is reported once, by the schema, and never makes a rule
misfire or crash. Every finding names the config path and the fix. Pure: no I/O.

The rules live by what they read (rules_services, rules_driver, rules_strings, rules_otel) and read
the tree through rules_tree; this module runs them, in the order of RULES: a warning's place in the
output is its rule's place here.
"""

from __future__ import annotations

from gymbuild.config import rules_driver, rules_otel, rules_services, rules_strings
from gymbuild.config.rules_tree import Path, Rule, Rules
from gymbuild.config.tree import JsonObject
from gymbuild.errors import Problem

RULES: tuple[Rule, ...] = (
    rules_services.placement_and_pools,
    rules_services.ray_shape,
    rules_services.pd_services,
    rules_services.pools_agree,
    rules_services.vllm_sizing,
    rules_driver.policy_wiring,
    rules_driver.command_benchmarks,
    rules_driver.sharded_benchmarks,
    rules_driver.shared_jobs,
    rules_driver.benchmarks_present,
    rules_driver.budget_applies,
    rules_strings.names,
    rules_strings.values,
    rules_strings.env_values,
    rules_strings.walltimes,
    rules_strings.mounts,
    rules_strings.health_paths,
    rules_strings.install_refs,
    rules_strings.directives,
    rules_strings.output_path,
    rules_services.command_health_port,
    rules_otel.otel,
)


def check(tree: JsonObject, bad: list[Path]) -> tuple[list[Problem], list[str]]:
    """Fill the defaults that depend on other fields, then run every rule; (problems, warnings)."""
    r = Rules(tree, bad)
    rules_services.fill_placement(tree, r)
    for each in RULES:
        each(r)
    return r.problems, r.warnings
