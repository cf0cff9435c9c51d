"""Two gym drivers on one machine at once: NeMo Gym's head server binds one fixed port
(`head_server.port`, 11000 by default), so two jobs of one config sharing a node (two benchmarks with
benchmarks_per_job=1, shards, array tasks, sweep cells) would both bind it and the second would fail.
The driver settles the port at run time, from the configured one, as a service settles its own.

Real local jobs (the local executor: real bash, detached process groups); the `gym` on the drivers'
PATH is a stand-in that binds the head server port gym would bind (from its `head_server.port`
override, else gym's default) and then waits, bounded, until the other driver has bound its own.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import kill_local_jobs

from tests.executors.test_local import User, local_config

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads process groups from /proc")

# Binds the head server port as gym's uvicorn would (no SO_REUSEADDR: a port another process listens
# on is refused), writes it down, then waits for the other driver to have bound its own.
FAKE_GYM = """#!/usr/bin/env python3
import os, pathlib, socket, sys, time
port = 11000
for word in sys.argv[1:]:
    key, _, value = word.lstrip("+").partition("=")
    if key == "head_server.port":
        port = int(value)
server = socket.socket()
server.bind(("127.0.0.1", port))
server.listen()
meet = pathlib.Path(os.environ["MEET_DIR"])
(meet / str(port)).write_text(os.environ["GYM_JOB_ID"])
deadline = time.monotonic() + 90
while len(list(meet.iterdir())) < 2:
    if time.monotonic() > deadline:
        sys.exit("the other driver never bound its head server")
    time.sleep(0.1)
"""


def free_port() -> int:
    """A port nothing on this machine listens on now, with room after it (the drivers' first choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def home(tmp_path: Path) -> Any:
    yield tmp_path
    kill_local_jobs(tmp_path / "runs")  # a failed test must leave no job behind


def test_two_drivers_of_one_config_on_one_machine_get_different_head_server_ports(home: Path) -> None:
    bin_dir, meet = home / "bin", home / "meet"
    bin_dir.mkdir()
    meet.mkdir()
    (bin_dir / "gym").write_text(FAKE_GYM)
    (bin_dir / "gym").chmod(0o755)
    first = free_port()
    run = {"head_server": {"port": first}}
    config = local_config({"a": {"run": run}, "b": {"run": run}})
    config["driver"]["env"] |= {
        "PATH": f"lit:{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "MEET_DIR": f"lit:{meet}",
    }
    u = User(home, config)
    u.submit()
    rows = u.wait()
    for bench in ("a", "b"):
        assert rows[bench]["state"] == "COMPLETED", u.log(bench, "driver")
    ports = sorted(int(p.name) for p in meet.iterdir())
    assert len(ports) == 2 and ports[0] != ports[1]
    assert ports[0] >= first  # the configured port is the first choice, the next free one the other's
    taken = {u.log(bench, "driver").split("head server takes port ")[1].split()[0] for bench in ("a", "b")}
    assert taken == {str(p) for p in ports}  # each driver says which port it took
