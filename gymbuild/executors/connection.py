"""One connection per run: a local shell, or one SSH ControlMaster, with one persistent `bash -s`.

Every remote command of a run goes through the same shell session (one round trip each, never one
`ssh` per command) and rsync reuses the same master, so a submit of a thousand benchmarks costs one
SSH handshake. Each command's stdout, stderr and exit status come back framed by a random token and
byte counts, so no output a command prints can be mistaken for another command's result.
"""

from __future__ import annotations

import base64
import filecmp
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from gymbuild.errors import UserError
from gymbuild.shell import join, quote

SSH_OPTIONS = (
    "-o",
    "BatchMode=yes",
    "-o",
    "StrictHostKeyChecking=accept-new",
    "-o",
    "ConnectTimeout=15",
    "-o",
    "ServerAliveInterval=15",
)


@dataclass(frozen=True)
class Result:
    status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.status == 0


def is_this_machine(hostname: str | None) -> bool:
    """`hostname` unset, or naming the machine we run on: commands run here, files are copied here."""
    if not hostname:
        return True
    names = {"localhost", socket.gethostname(), socket.getfqdn()}
    names |= {n.split(".")[0] for n in names}
    return hostname.lower() in {n.lower() for n in names}


def _ssh_failure(host: str, stderr: str) -> UserError:
    """The ssh client's complaint as the fix a user needs; the three failures people actually hit."""
    detail = stderr.strip().splitlines()[-1] if stderr.strip() else "ssh exited without a message"
    if "IDENTIFICATION HAS CHANGED" in stderr or "Host key verification failed" in stderr:
        fix = (
            f"the host key of {host} is not the one known_hosts holds; if the change is expected, "
            f"run `ssh-keygen -R {host}` and try again"
        )
    elif "Permission denied" in stderr:
        fix = (
            f"{host} refused the key: gymbuild connects with BatchMode=yes (no password prompts), so "
            f"`ssh {host} true` must work with a key or an agent"
        )
    else:
        fix = f"check compute.<name>.hostname and that `ssh {host} true` works from this machine"
    return UserError(f"error: cannot connect to {host} over SSH: {detail}\n    fix: {fix}")


def _control_path() -> str:
    """A new ControlMaster socket; a short path, since unix socket names are limited to ~100 bytes."""
    return os.path.join(tempfile.gettempdir(), f"gymbuild-{secrets.token_hex(6)}.ssh")


def _start_master(hostname: str, control: str) -> subprocess.Popen[str]:
    """`ssh -M -f -N`: returns once the master is authenticated and in the background."""
    argv = ["ssh", *SSH_OPTIONS, "-M", "-S", control, "-o", "ControlPersist=120", "-f", "-N", hostname]
    return subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def _stop_master(hostname: str, control: str) -> None:
    subprocess.run(["ssh", "-S", control, "-O", "exit", hostname], capture_output=True, check=False)
    Path(control).unlink(missing_ok=True)


# A file's bytes to stdout with bash builtins only: `cat` is a process of its own, ~1.3 ms each time,
# a third of what framing a queued sbatch cost on the login node. NUL-delimited reads keep every byte
# (NULs included); LC_ALL=C keeps bytes that are not valid UTF-8 as they are.
_EMIT = (
    "__gym_emit() { local LC_ALL=C __gym_c; "
    "while IFS= read -r -d '' __gym_c; do printf '%s\\0' \"$__gym_c\"; done < \"$1\"; "
    "printf '%s' \"$__gym_c\"; }"
)

# A command run in the session itself (`send(..., in_session=True)`) must not `exit` (that would end
# the session): it ends with `__gym_status N` instead, which gives its group the status N.
_STATUS = '__gym_status() { return "$1"; }'


class Connection:
    """A shell on the submit target, open for the whole run. Use as a context manager."""

    def __init__(self, hostname: str | None) -> None:
        self.hostname = None if is_this_machine(hostname) else hostname
        self._control: str | None = None
        self._master: subprocess.Popen[str] | None = None  # the ControlMaster while it shakes hands
        self._shell: subprocess.Popen[bytes] | None = None
        self._shell_err: IO[bytes] | None = None
        self.round_trips = 0
        # Run directories whose queue lock this shell holds (executors/slurm.py): the lock lives and
        # dies with the shell, so it is kept here, where a closed shell forgets it.
        self.held_queue_locks: set[str] = set()

    @property
    def is_local(self) -> bool:
        return self.hostname is None

    @property
    def target(self) -> str:
        return self.hostname or "this machine"

    def __enter__(self) -> Connection:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ssh(self, *args: str) -> list[str]:
        assert self.hostname and self._control
        return ["ssh", *SSH_OPTIONS, "-S", self._control, "-o", "ControlMaster=no", *args]

    def open(self) -> None:
        if self._shell is not None:
            return
        if self.is_local:
            argv = ["bash", "-s"]
        else:
            assert self.hostname
            self._control = _control_path()
            master = self._master = _start_master(self.hostname, self._control)
            try:
                _, stderr = master.communicate()
            finally:
                self._master = None
            if master.returncode != 0:
                self._control = None
                raise _ssh_failure(self.hostname, stderr)
            argv = self._ssh(self.hostname, "bash -s")
        self._shell_err = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the shell)
        # Its own session: Ctrl-C (and a hangup) reach the terminal's foreground process group, and
        # a shell killed with gymbuild would take the answers of the jobs it just started with it
        # (and say "lost the connection"). gymbuild reads them first (gymbuild/interrupts.py); the
        # shell ends when gymbuild closes its input, or at EOF once gymbuild is gone.
        self._shell = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._shell_err,
            start_new_session=True,
        )
        # The captured streams of every command go through two files: in memory (/dev/shm) where the
        # target has it, which halves what framing costs there; else the usual temp dir.
        self._send(
            "__gym_tmp=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d) || exit 1\n"
            f"trap 'rm -rf \"$__gym_tmp\"' EXIT\n{_EMIT}\n{_STATUS}\n"
        )
        if not self.run("true").ok:
            raise UserError(f"error: could not start a shell on {self.target}")

    def abort(self) -> None:
        """Stop a handshake still under way (another thread is in `open`, which then fails): a run
        that ends, or finds it needs another host, does not wait for an unreachable one."""
        master = self._master
        if master is not None and master.poll() is None:
            master.terminate()

    def close(self) -> None:
        """Close the shell and the master; safe to call twice, and on a half-open connection."""
        shell, self._shell = self._shell, None
        self.held_queue_locks.clear()
        if shell is not None:
            try:
                assert shell.stdin
                shell.stdin.write(b"exit 0\n")
                shell.stdin.close()
            except OSError:
                pass
            try:
                shell.wait(timeout=10)
            except subprocess.TimeoutExpired:
                shell.kill()
                shell.wait()
            if shell.stdout:
                shell.stdout.close()
        if self._shell_err is not None:
            self._shell_err.close()
            self._shell_err = None
        if self._control and self.hostname:
            _stop_master(self.hostname, self._control)
            self._control = None

    def _lost(self) -> UserError:
        detail = ""
        if self._shell_err is not None:
            self._shell_err.seek(0)
            detail = self._shell_err.read().decode(errors="replace").strip()
        last = f": {detail.splitlines()[-1]}" if detail else ""
        return UserError(f"error: lost the connection to {self.target}{last}")

    def _send(self, text: str) -> None:
        if self._shell is None or self._shell.stdin is None:
            raise RuntimeError("connection is not open")
        try:
            self._shell.stdin.write(text.encode())
            self._shell.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._lost() from None

    def run(self, script: str) -> Result:
        """Run `script` (bash text, built with gymbuild.shell) in the session; one round trip.

        The output comes back between lines holding a random token: `<token> o`, stdout, `<token> e`,
        stderr, `<token> <status>` (a newline added before each later marker is taken off again). Only
        bash builtins frame it (`__gym_emit` prints the captured streams): the earlier framing (two
        `wc -c` and a `cat` per command) cost about 10 ms a command, a third of a submit's sbatch.
        """
        return self.receive(self.send(script))

    def run_in_session(self, script: str) -> Result:
        """`run`, but in the session's shell itself rather than a subshell, so what `script` sets up
        (an `exec 9>>file` holding a lock) lasts for the rest of the session."""
        return self.receive(self.send(script, in_session=True))

    def send(self, script: str, *, in_session: bool = False) -> bytes:
        """Start `script` without waiting for it; `receive` its result later, in the order sent. Several
        commands in flight let this machine's work overlap the remote shell's (a submit's sbatch calls).

        `in_session`: run it in the session's shell, not a subshell (no fork: half a millisecond of the
        login node's time per command); it must then end with `__gym_status N`, never `exit`, and
        what it sets stays set.
        """
        token = f"__gym_done_{secrets.token_hex(8)}"
        tmp = '"$__gym_tmp"'
        group = f"{{ {script}\n}}" if in_session else f"( {script}\n)"
        self._send(
            f"{group} </dev/null >{tmp}/o 2>{tmp}/e; __gym_rc=$?\n"
            f"printf '%s o\\n' {token}; [ -s {tmp}/o ] && __gym_emit {tmp}/o\n"
            f"printf '\\n%s e\\n' {token}; [ -s {tmp}/e ] && __gym_emit {tmp}/e\n"
            f"printf '\\n%s %s\\n' {token} \"$__gym_rc\"\n"
        )
        return token.encode() + b" "

    def receive(self, marker: bytes) -> Result:
        """The result of the command `send` returned `marker` for; commands are received in send order."""
        self._read_until(marker + b"o\n")  # anything before the first marker is not this command's
        stdout, _ = self._read_until(marker + b"e\n")
        stderr, last = self._read_until(marker, prefix=True)
        self.round_trips += 1
        return Result(
            int(last[len(marker) :]), stdout.decode(errors="replace"), stderr.decode(errors="replace")
        )

    def _read_until(self, marker: bytes, *, prefix: bool = False) -> tuple[bytes, bytes]:
        """The shell's output up to the line `marker` (a line starting with it when `prefix`), less the
        one newline the framing puts before each marker; and the marker line itself."""
        assert self._shell and self._shell.stdout
        out = self._shell.stdout
        chunks: list[bytes] = []
        while True:
            line = out.readline()
            if not line:
                raise self._lost()
            if line.startswith(marker) if prefix else line == marker:
                return b"".join(chunks)[:-1], line.rstrip(b"\n")
            chunks.append(line)

    def command_argv(self, script: str) -> list[str]:
        """An argv running `script` on the target through the master, for output that streams."""
        if self.is_local:
            return ["bash", "-c", script]
        assert self.hostname
        return self._ssh(self.hostname, script)

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> Result:
        """Write a file on the target atomically (temp file, then rename), in one round trip."""
        encoded = base64.b64encode(data).decode()
        tmp = f"{path}.tmp.{secrets.token_hex(4)}"
        return self.run(
            f"printf %s {quote(encoded)} | base64 -d > {quote(tmp)} && chmod {mode:o} {quote(tmp)} "
            f"&& mv -f {quote(tmp)} {quote(path)}"
        )

    def copy_tree(self, source: Path, dest: str, names: Sequence[str] | None = None) -> Result:
        """Copy a staged tree into `dest`, keeping modes, never deleting what is already there.

        No `--delete`: the run directory holds what jobs wrote (logs, artifacts, `.gym_*`), and a
        re-submission must leave all of it in place. Over SSH this is rsync through the master; on
        this machine plain file copies, so the local executor needs nothing beyond Python.

        With `names`, only those directories of `source` are copied, each to `dest/<name>`, in the
        same one rsync (a sweep's run directories, side by side under job.output_path); `dest`
        itself, which other runs share, keeps its own mode and times.
        """
        pairs = [(source, dest)] if names is None else [(source / n, f"{dest}/{n}") for n in names]
        if self.is_local:
            try:
                for here, there in pairs:
                    _copy_tree_here(here, Path(there))
            except OSError as err:
                return Result(1, "", str(err))
            return Result(0, "", "")
        assert self._control and self.hostname
        rsh = join(["ssh", *SSH_OPTIONS, "-S", self._control, "-o", "ControlMaster=no"])
        # --checksum: a script re-rendered within the same second keeps its size and mtime, and
        # rsync's quick check would skip it.
        argv = ["rsync", "-rlpt", "--checksum", "--protect-args", "-e", rsh]
        sources = [f"{source}/"] if names is None else [str(source / n) for n in names]
        argv += [*sources, f"{self.hostname}:{dest}/"]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        return Result(done.returncode, done.stdout, done.stderr)


def _copy_tree_here(source: Path, dest: Path) -> None:
    """rsync -rlpt --checksum, locally: changed files replaced atomically, modes kept, nothing deleted."""
    for root, _dirs, files in os.walk(source):
        here = Path(root)
        target = dest / here.relative_to(source)
        target.mkdir(parents=True, exist_ok=True)
        shutil.copymode(here, target)
        for name in files:
            src, dst = here / name, target / name
            if dst.is_file() and filecmp.cmp(src, dst, shallow=False):
                shutil.copymode(src, dst)
                continue
            tmp = dst.with_name(f".{name}.gymbuild-tmp")
            shutil.copy2(src, tmp)
            os.replace(tmp, dst)
