"""config.load.host_hint: the host a first submit starts its SSH handshake with, before the config is
composed and validated. A wrong hint opens a connection nobody uses (or to the wrong host), so it
must say nothing whenever the resolved config could name another host."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gymbuild.config.load import host_hint


def _config(tmp_path: Path, compute: dict, **top: object) -> Path:
    path = tmp_path / "submit.yaml"
    path.write_text(yaml.safe_dump({**top, "compute": compute, "driver": {"benchmarks": {"a": {}}}}))
    return path


CLUSTER = {"cluster": {"type": "slurm", "hostname": "login.example.org", "account": "gym"}}


def test_the_single_computes_plain_hostname(tmp_path: Path) -> None:
    assert host_hint(_config(tmp_path, CLUSTER), []) == "login.example.org"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["compute.cluster.walltime=01:00:00", "+driver.benchmarks.b.run.limit=3"], "login.example.org"),
        (["compute.cluster.hostname=other-login"], "other-login"),
        (["++compute.cluster.hostname='other-login'"], "other-login"),
        (["~compute.cluster.hostname"], None),  # removed: the run is local
        (["compute.cluster={type: local}"], None),  # the whole compute replaced
        (["compute=other"], None),
        (["compute.cluster.hostname=${oc.env:LOGIN}"], None),
    ],
)
def test_overrides_win_and_anything_unclear_gives_no_hint(
    tmp_path: Path, overrides: list[str], expected: str | None
) -> None:
    assert host_hint(_config(tmp_path, CLUSTER), overrides) == expected


@pytest.mark.parametrize(
    ("compute", "top"),
    [
        ({"cluster": {"type": "slurm", "hostname": "${oc.env:LOGIN}"}}, {}),  # an interpolation
        ({"cluster": {"type": "local"}}, {}),  # no hostname: this machine
        ({"a": {"hostname": "one"}, "b": {"hostname": "two"}}, {}),  # the schema refuses two
        (CLUSTER, {"defaults": ["_self_", {"compute": "big"}]}),  # composition may replace it
    ],
)
def test_a_file_that_does_not_plainly_name_one_host_gives_no_hint(
    tmp_path: Path, compute: dict, top: dict
) -> None:
    assert host_hint(_config(tmp_path, compute, **top), []) is None


def test_an_unreadable_or_broken_file_gives_no_hint(tmp_path: Path) -> None:
    assert host_hint(tmp_path / "missing.yaml", []) is None
    broken = tmp_path / "broken.yaml"
    broken.write_text("compute: [unclosed\n")
    assert host_hint(broken, []) is None
