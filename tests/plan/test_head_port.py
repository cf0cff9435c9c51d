"""The head server port a driver starts from: the benchmark's `run.head_server.port` (dotted or
nested), else NeMo Gym 0.7.0's default 11000. The driver settles the port actually used at run time
(driver.sh.j2; tests/executors/test_head_ports.py runs two drivers at once), so the planned words
hand gym the settled port and never the configured one a second time (Hydra refuses a key twice)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gymbuild.errors import UserError
from tests.plan.test_planner import plan, tree


def head_words(run: dict[str, Any]) -> tuple[int | None, list[str]]:
    t = tree(gpu=1)
    t["driver"]["benchmarks"]["b"] = {"run": run}
    driver = plan(t).driver
    words = ["".join(p if isinstance(p, str) else "${" + p.name + "}" for p in w) for w in driver.run]
    return driver.head_port, [w for w in words if "head_server" in w]


def test_without_a_configured_port_the_driver_starts_from_gyms_default() -> None:
    assert head_words({"x": 1}) == (11000, ["++head_server.port=${GYM_HEAD_PORT}"])


@pytest.mark.parametrize(
    ("run", "kept"),
    [
        ({"head_server.port": 12345}, []),
        ({"head_server": {"port": "12345"}}, []),
        ({"head_server": {"port": 12345, "host": "0.0.0.0"}}, ["+head_server.host=0.0.0.0"]),
    ],
)
def test_a_configured_port_is_the_first_choice_and_other_head_keys_stay(
    run: dict[str, Any], kept: list[str]
) -> None:
    assert head_words(run) == (12345, [*kept, "++head_server.port=${GYM_HEAD_PORT}"])


# Any text but NUL, which the config's validation refuses before any plan (tested there).
NO_NUL = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=8)


@given(st.one_of(st.integers(), NO_NUL, st.booleans(), st.none(), st.floats()))
@settings(max_examples=60, deadline=None)
def test_a_port_is_a_number_from_1_to_65535_or_one_message(value: Any) -> None:
    try:
        port, words = head_words({"head_server.port": value})
    except UserError as e:
        assert str(e).startswith("driver.benchmarks.b.run.head_server.port: ")
        assert "is not a port number (1-65535)" in str(e)
        return
    assert isinstance(port, int) and 1 <= port <= 65535 and port == int(value)
    assert words == ["++head_server.port=${GYM_HEAD_PORT}"]


def test_a_command_benchmark_runs_no_gym_and_settles_no_head_port() -> None:
    t = tree(gpu=1)
    t["driver"]["benchmarks"]["b"] = {"command": "python run.py"}
    assert plan(t).driver.head_port is None
