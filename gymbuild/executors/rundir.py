"""The run directory on the submit target: check mounts, create it, copy the staged tree into it.

Shared by every executor: where a job runs differs, how its files get there does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from gymbuild.config.model import Config
from gymbuild.errors import UserError
from gymbuild.executors.connection import Connection
from gymbuild.shell import join, quote


def mount_sources(config: Config) -> dict[str, list[str]]:
    """Each host path the jobs mount, with the config paths that mount it (for the error message)."""
    found: dict[str, list[str]] = {}

    def add(owner: str, mounts: Iterable[str]) -> None:
        for mount in mounts:
            found.setdefault(mount.split(":", 1)[0], []).append(owner)

    for name, svc in config.services.items():
        add(f"services.{name}.mounts", svc.mounts)
        for tier in ("prefill", "decode"):
            sub = getattr(svc, tier, None)
            if sub is not None:
                add(f"services.{name}.{tier}.mounts", sub.mounts)
    add("driver.mounts", config.driver.mounts)
    return found


def check_mounts(conn: Connection, sources: Mapping[str, list[str]], source_file: str) -> None:
    """Every mount source must exist on the cluster before anything is copied: one round trip."""
    if not sources:
        return
    paths = list(sources)
    result = conn.run(f'for p in {join(paths)}; do [ -e "$p" ] || printf "%s\\0" "$p"; done')
    missing = [p for p in result.stdout.split("\0") if p]
    if missing:
        lines = "\n".join(f"  - {p} (mounted by {', '.join(sources[p])})" for p in missing)
        raise UserError(
            f"error: {source_file}: mount source{'s' if len(missing) > 1 else ''} missing on "
            f"{conn.target}:\n{lines}\n    fix: create the path on the cluster or correct the mount"
        )


class RunDirExists(UserError):
    """The first sync of a submission found its run directory already there (someone else's)."""


def prepare_run_dir(conn: Connection, run_dir: str, benches: Iterable[str], *, fresh: bool) -> None:
    """Create the run directory, and `logs/` of each benchmark about to be queued; the first sync of
    a submission must find the run directory absent.

    Slurm opens a job's `logs/slurm-<id>.log` before the job runs, so `logs/` must exist when it is
    queued. It is made here, by one remote `mkdir` in the round trip that makes the run directory,
    rather than staged: an empty directory per benchmark was half of the staged tree's directories,
    and creating them was a large part of rendering a thousand benchmarks. (The bench dirs `mkdir -p`
    creates on the way get their mode from rsync, which copies the staged tree's 0755.)
    """
    check = f"if [ -e {quote(run_dir)} ]; then echo exists; exit 3; fi; " if fresh else ""
    script = f"{check}mkdir -p {quote(run_dir)} && chmod 755 {quote(run_dir)}"
    logs = [f"{bench}/logs" for bench in benches]
    if logs:
        script += f" && cd {quote(run_dir)} && mkdir -p -m 755 -- {join(logs)}"
    result = conn.run(script)
    if result.status == 3:
        raise RunDirExists(
            f"error: the run directory {run_dir} already exists on {conn.target}\n"
            "    fix: pass new=1 to start a fresh submission with a new id"
        )
    if not result.ok:
        raise UserError(
            f"error: cannot create the run directory {run_dir} on {conn.target}: "
            f"{result.stderr.strip()}\n    fix: check job.output_path exists and is writable"
        )


def sync(conn: Connection, staged: str, run_dir: str, names: Sequence[str] | None = None) -> None:
    """Copy the staged tree into the run directory; with `names`, each of those directories of
    `staged` into `run_dir/<name>` (a sweep's run directories, in one copy)."""
    result = conn.copy_tree(Path(staged), run_dir, names)
    if not result.ok:
        raise UserError(
            f"error: copying the run directory to {conn.target}:{run_dir} failed: "
            f"{result.stderr.strip()}\n    fix: check free space and permissions under job.output_path"
        )
