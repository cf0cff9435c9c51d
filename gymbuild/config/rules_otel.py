"""The rule about the otel section: a collector that is on needs somewhere to send, and Gym's
telemetry needs the Gym install it comes with.

Its own module because no other rule reads the otel section, and this one reads of the driver only
whether Gym is installed: the collector stands beside the services and the driver, part of neither.
"""

from __future__ import annotations

from gymbuild.config.rules_strings import VAR_FIX
from gymbuild.config.rules_tree import Rules
from gymbuild.shell import is_shell_name


def otel(r: Rules) -> None:
    """With the collector on (the default) it needs a destination, and Gym telemetry needs gym_install."""
    section = r.mapping(("otel",))
    token = section.get("token_env")
    if isinstance(token, str) and not is_shell_name(token):  # NeMo Gym checks it even with the collector off
        r.error(("otel", "token_env"), f"`{token}` is not a valid environment variable name", VAR_FIX)
    if section.get("enabled") is not True or not r.ok(("otel", "enabled")):
        return
    for key, example in (("endpoint", "https://otlp.example.com"), ("service_name", "my-eval")):
        if not section.get(key) and r.ok(("otel", key)):
            r.error(
                ("otel", key),
                f"the collector is enabled (the default) but otel.{key} is not set",
                f"set otel.{key} (e.g. {example}), or set otel.enabled: false",
            )
    if (
        section.get("gym_telemetry") is True
        and r.ok(("otel", "gym_telemetry"), ("driver", "gym_install"))
        and isinstance(r.get(("driver",)), dict)
        and r.get(("driver", "gym_install")) is None
    ):
        r.error(
            ("otel", "gym_telemetry"),
            "Gym telemetry is on but driver.gym_install is not set (the telemetry extra is installed there)",
            "set otel.gym_telemetry: false, or add driver.gym_install: {repo: <git url>, ref: <ref>}",
        )
