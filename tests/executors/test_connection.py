"""The run's one connection: framed results, exact bytes, modes kept, and nothing deleted by a copy.

The local shell is exercised here on every machine; the same Connection over SSH is exercised by the
cluster tests (tests/e2e/) against the test cluster's login node.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gymbuild.errors import UserError
from gymbuild.executors.connection import Connection, is_this_machine
from gymbuild.shell import join


@pytest.fixture
def conn():
    with Connection(None) as c:
        yield c


def test_each_command_gets_its_own_status_stdout_and_stderr(conn):
    first = conn.run("echo out; echo err >&2; exit 7")
    second = conn.run("printf 'no newline'")
    assert (first.status, first.stdout, first.stderr) == (7, "out\n", "err\n")
    assert (second.status, second.stdout, second.stderr) == (0, "no newline", "")
    assert conn.round_trips == 3  # the session's own start-up check, then these two


def test_output_that_looks_like_the_framing_cannot_confuse_the_reader(conn):
    noisy = conn.run("echo __gym_done_0000 0 0 0; head -c 3000 /dev/zero | tr '\\0' x")
    assert noisy.stdout.startswith("__gym_done_0000 0 0 0\n")
    assert noisy.stdout.endswith("x" * 3000)
    assert conn.run("echo next").stdout == "next\n"


def test_commands_share_one_shell_session(conn):
    conn.run("echo $$ > /dev/null")
    pids = {conn.run("echo $PPID").stdout for _ in range(3)}
    assert len(pids) == 1


def test_hostile_values_pass_through_byte_exact(conn):
    values = ["it's", 'say "hi"', "$(touch canary)", "`touch canary`", "a; touch canary", "two\nlines", "*"]
    result = conn.run(f"printf '%s\\0' {join(values)}")
    assert result.stdout.split("\0")[:-1] == values
    assert not Path("canary").exists()


def test_streams_come_back_whole_nul_bytes_trailing_newlines_and_all(conn, tmp_path):
    """The framing prints each captured stream with bash builtins (no `cat`): every byte must still
    come back, in a UTF-8 locale too, for a short answer and a long one alike."""
    blob = tmp_path / "blob"
    blob.write_bytes(bytes(range(256)) * 600 + b"\n\n\n")
    assert conn.run_in_session("export LC_ALL=C.UTF-8").ok  # the session's shell reads in UTF-8
    result = conn.run(f"cat {blob}; printf 'a\\0b\\n\\n' >&2")
    assert result.stdout == blob.read_bytes().decode(errors="replace")
    assert result.stderr == "a\0b\n\n"
    assert conn.run("printf 'é'").stdout == "é"


def test_write_file_is_exact_and_keeps_the_mode(conn, tmp_path):
    target = tmp_path / "dir with space" / "job.sh"
    target.parent.mkdir()
    data = b"#!/bin/bash\n\x00\xff secret\n"
    assert conn.write_file(str(target), data, 0o600).ok
    assert target.read_bytes() == data
    assert target.stat().st_mode & 0o777 == 0o600


def test_copy_tree_keeps_modes_and_never_deletes_what_a_job_wrote(conn, tmp_path):
    staged = tmp_path / "stage"
    (staged / "bench" / "logs").mkdir(parents=True)
    (staged / "bench" / "job.sh").write_text("echo v1\n")
    os.chmod(staged / "bench" / "job.sh", 0o600)
    run_dir = tmp_path / "run dir"
    assert conn.copy_tree(staged, str(run_dir)).ok
    (run_dir / "bench" / "logs" / "driver-1.log").write_text("a job wrote this\n")
    (staged / "bench" / "job.sh").write_text("echo v2\n")
    assert conn.copy_tree(staged, str(run_dir)).ok
    assert (run_dir / "bench" / "logs" / "driver-1.log").read_text() == "a job wrote this\n"
    assert (run_dir / "bench" / "job.sh").read_text() == "echo v2\n"
    assert (run_dir / "bench" / "job.sh").stat().st_mode & 0o777 == 0o600


def test_unreachable_host_is_one_clear_error():
    with pytest.raises(UserError) as err:
        Connection("nonexistent.invalid").open()
    assert "cannot connect to nonexistent.invalid over SSH" in str(err.value)
    assert "fix:" in str(err.value)


def test_this_machine_is_local():
    import socket

    assert is_this_machine(None)
    assert is_this_machine(socket.gethostname())
    assert not is_this_machine("gym-login")
