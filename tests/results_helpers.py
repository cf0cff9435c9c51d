"""Counting what `gymbuild results` asks of the submit target, for the local and the cluster e2e tests.

A wrapper first on PATH stands in front of the program the run's connection starts (`bash -s` on this
machine, `ssh ... bash -s` to a login node): it notes each session and copies what gymbuild sends into
it to a log, then runs the real program. Each command gymbuild sends is framed by a marker line, so
the log says how many round trips a call made and what each one read.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

# How Connection.send ends each command it sends (the line that saves its exit status).
_END_OF_COMMAND = "; __gym_rc=$?\n"


class Sessions:
    """The wrapper directory (put it first on PATH) and what it recorded."""

    def __init__(self, root: Path, program: str) -> None:
        self.bin = root / "bin"
        self.log = root / "sent.log"
        self.starts = root / "sessions.log"
        self.bin.mkdir(parents=True, exist_ok=True)
        real = shutil.which(program, path="/usr/local/bin:/usr/bin:/bin")
        assert real, f"{program} is not installed"
        log, starts = shlex.quote(str(self.log)), shlex.quote(str(self.starts))
        # The local connection is `bash -s`; over ssh, the session's remote command (its last argument).
        sessions = {"bash": '[ "$#" -eq 1 ] && [ "$1" = -s ]', "ssh": '[ "${@: -1}" = "bash -s" ]'}
        is_session = sessions[program]
        wrapper = self.bin / program
        # A session's streams belong to the real program alone: the wrapper keeps none of them open,
        # so when the program ends (a dropped connection) its reader sees the end, as without it.
        session = (
            "exec 3>&1 4<&0 >/dev/null </dev/null; "
            f'tee -a {log} <&4 3>&- 4<&- | {real} "$@" >&3 3>&- 4<&- & '
            'exec 3>&- 4<&-; wait "$!"; exit'
        )
        wrapper.write_text(
            "#!/bin/bash\n"
            f'printf "%s\\n" "$*" >> {starts}\n'
            f"if {is_session}; then {session}; fi\n"
            f'exec {real} "$@"\n'
        )
        wrapper.chmod(0o755)

    def reset(self) -> None:
        self.log.unlink(missing_ok=True)
        self.starts.unlink(missing_ok=True)

    def invocations(self) -> list[str]:
        """Every start of the wrapped program (sessions, and for ssh its master and `-O exit`)."""
        return self.starts.read_text().splitlines() if self.starts.exists() else []

    def commands(self) -> list[str]:
        """The text of each command sent into the sessions, in order."""
        text = self.log.read_text() if self.log.exists() else ""
        return text.split(_END_OF_COMMAND)[:-1]

    def status_reads(self) -> list[str]:
        return [c for c in self.commands() if ".gym_exit-" in c]

    def metrics_reads(self) -> list[str]:
        return [c for c in self.commands() if "rollouts_aggregate_metrics.json" in c]
