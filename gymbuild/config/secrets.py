"""`host:VAR` values: read from the submitting shell, kept apart from the config.

The config tree keeps `host:VAR` as written, so anything derived from it (resolved-config.yaml, the
record, `resolve` and `render` output) is safe to share. The values live in the map returned here and
are read only where a job script is written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from gymbuild.config.tree import JsonObject, mapping_at
from gymbuild.errors import Problem
from gymbuild.shell import is_shell_name


def env_entries(tree: Mapping[str, object]) -> Iterator[tuple[str, str, str]]:
    """(config path, key, value) of every `env` entry of the services, their tiers and the driver.

    Walks the raw tree defensively: it runs before (and regardless of) schema validation so that an
    unset variable is reported together with every other problem.
    """

    def from_env(prefix: str, env: object) -> Iterator[tuple[str, str, str]]:
        if isinstance(env, Mapping):
            for key, value in env.items():
                if isinstance(value, str):
                    yield f"{prefix}.env.{key}", str(key), value

    services = tree.get("services")
    if isinstance(services, Mapping):
        for name, svc in services.items():
            if not isinstance(svc, Mapping):
                continue
            yield from from_env(f"services.{name}", svc.get("env"))
            for tier in ("prefill", "decode"):
                sub = svc.get(tier)
                if isinstance(sub, Mapping):
                    yield from from_env(f"services.{name}.{tier}", sub.get("env"))
    driver = tree.get("driver")
    if isinstance(driver, Mapping):
        yield from from_env("driver", driver.get("env"))


def host_secrets(
    tree: Mapping[str, object], environ: Mapping[str, str]
) -> tuple[dict[str, str], list[Problem]]:
    """VAR -> value for every `host:VAR`, and a Problem for each one the shell does not set."""
    secrets: dict[str, str] = {}
    problems = []
    for path, _key, value in env_entries(tree):
        if not value.startswith("host:"):
            continue
        var = value[len("host:") :]
        if var in environ:
            secrets[var] = environ[var]
        elif is_shell_name(var):  # a malformed name is reported by the rules, not as "unset"
            problems.append(
                Problem(
                    path,
                    f"host:{var} is not set in this shell",
                    f"export {var}=... before submitting, or use runtime:{var} to read it on the cluster",
                )
            )
    return secrets, problems


def stand_ins(tree: Mapping[str, object], filled: JsonObject, found: Mapping[str, str]) -> dict[str, str]:
    """VAR -> a stand-in value for each secret of the config (`host:` values, the collector's token)
    not `found` in the shell: a run that queues nothing renders with these, and what it prints masks
    every secret all the same."""
    names = [value[len("host:") :] for _, _, value in env_entries(tree) if value.startswith("host:")]
    if mapping_at(filled, "otel")["enabled"]:
        names.append(_token_env(filled))
    return {name: f"<{name} unset>" for name in names if name not in found}


def _token_env(filled: JsonObject) -> str:
    """The variable holding the collector's token (validated: a str)."""
    var = mapping_at(filled, "otel")["token_env"]
    if not isinstance(var, str):
        raise TypeError(f"otel.token_env is {var!r}, not the str the schema gives it")
    return var


def otel_token(tree: JsonObject, environ: Mapping[str, str]) -> tuple[dict[str, str], list[Problem]]:
    """The collector's ingest token, a secret like `host:` values; required while the collector is on."""
    if not mapping_at(tree, "otel")["enabled"]:
        return {}, []
    var = _token_env(tree)
    if environ.get(var):
        return {var: environ[var]}, []
    return {}, [
        Problem(
            "otel.token_env",
            f"the collector is enabled but ${var} (its ingest token) is not set",
            f"export {var}=<token>, or set otel.enabled: false",
        )
    ]
