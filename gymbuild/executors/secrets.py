"""A benchmark's secrets file on the submit target, as every executor writes and removes it.

Shared by the executors (Slurm queues a job after writing it; the local executor starts one), so
neither imports the other, and the queue step builds it without knowing which executor runs the job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gymbuild.shell import SECRETS_DIR, join, secrets_path
from gymbuild.state import ids

if TYPE_CHECKING:
    from gymbuild.executors.connection import Connection, Result


@dataclass(frozen=True)
class SecretsFile:
    """A benchmark's secrets file on the submit target (`render.secrets_path`: 0600, in 0700
    directories, outside the run directory), which its job reads at start: Slurm stores every batch
    script and job environment, so neither may hold a `host:` value or the collector's token.

    `values`: the job's variable -> value (`render.secret_values`). `scrub`: the submitting shell's
    own secret variables, unset before the job is started or queued, so it never inherits one (the
    local executor's job inherits that shell's environment; sbatch passes it on).
    """

    gym_job_id: str
    bench: str
    values: Mapping[str, str]
    scrub: tuple[str, ...] = ()

    def write(self) -> str:
        """Bash writing the file, for the session's stdin: `printf` is a builtin, so no value is ever
        on a command line (`ps`). NUL-separated names and values: data the job reads with `read`,
        never code it runs. Builtins only while the directory exists: `mkdir` runs once a submission.
        Its status is the write's."""
        unset = f"unset {join(self.scrub)}\n" if self.scrub else ""
        if not self.values:
            return f"{unset}true"
        path = secrets_path(self.gym_job_id, self.bench)
        words = join(word for pair in self.values.items() for word in pair)
        write = f"printf '%s\\0' {words} >{path}"
        return (
            f"{unset}__gym_umask=${{__gym_umask:-$(umask)}}; umask 077\n"
            f"{{ {write}; }} 2>/dev/null || {{ mkdir -p {secrets_path(self.gym_job_id)} && {write}; }}\n"
            '__gym_w=$?; umask "$__gym_umask"; [ "$__gym_w" = 0 ]'
        )

    @property
    def failed(self) -> str:
        """What a submit says when the file cannot be written (the shell says why on the next line)."""
        return f"could not write the secrets file ~/{SECRETS_DIR}/{self.gym_job_id}/{self.bench}"

    def remove(self) -> str:
        """Bash removing the file (a refused sbatch: no job will), and the submission's dir if empty."""
        return _remove_secrets(self.gym_job_id, [self.bench]) if self.values else "true"


def _remove_secrets(gym_job_id: str, names: Iterable[str]) -> str:
    """Bash removing the named files of a submission's secrets directory, then the directory if that
    left it empty. Only the names gymbuild writes there (benchmarks', shared jobs'), never `rm -rf`:
    what else is in the directory is not gymbuild's. Nothing through a symbolic link: a link in place
    of `~/.gymbuild-secrets` or of the submission's directory is left as it is, with what it points
    to (`rm -f` of a file that is itself a link removes the link only)."""
    root, directory = f"~/{SECRETS_DIR}", secrets_path(ids.gym_job_id(gym_job_id, "a secrets directory: "))
    unique = list(dict.fromkeys(names))
    for name in unique:
        if not ids.is_plain_name(name):
            raise ids.BadIdError(f"error: {ids.shown(name)} cannot name a secrets file: not a plain name")
    files = " ".join(secrets_path(gym_job_id, name) for name in unique)
    if not files:
        return "true"
    return (
        f"if [ ! -L {root} ] && [ ! -L {directory} ] && [ -d {directory} ]; then "
        f"rm -f -- {files}; rmdir -- {directory} 2>/dev/null; fi; true"
    )


def forget_secrets(conn: Connection, gym_job_id: str, names: Iterable[str]) -> Result:
    """Remove the named secrets files of a submission (`cancel`: its benchmarks' and shared jobs'
    names, day_two.secret_names), and their directory once it is empty. A job removes its own file
    when it ends (gym_secrets_needed in Slurm's parts.sh.j2); this is for the jobs that did not."""
    return conn.run(_remove_secrets(gym_job_id, names))
