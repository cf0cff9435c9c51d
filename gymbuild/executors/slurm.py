"""The Slurm executor: check mounts, copy the staged tree, one `sbatch --parsable` per benchmark.

Everything goes through the run's one Connection. Each sbatch is its own round trip with its own exit
status and output, so a refused benchmark fails alone and its neighbours' job ids cannot shift onto it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gymbuild.config.model import Config
from gymbuild.errors import UserError
from gymbuild.executors.connection import Connection
from gymbuild.shell import join, quote

NAME = "slurm"


@dataclass(frozen=True)
class Queued:
    """sbatch's answer for one benchmark: a job id, or the error that kept it from one."""

    job_id: str | None
    error: str | None


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


def prepare_run_dir(conn: Connection, run_dir: str, *, fresh: bool) -> None:
    """Create the run directory; the first sync of a submission must find it absent."""
    check = f"if [ -e {quote(run_dir)} ]; then echo exists; exit 3; fi; " if fresh else ""
    result = conn.run(f"{check}mkdir -p {quote(run_dir)} && chmod 755 {quote(run_dir)}")
    if result.status == 3:
        raise UserError(
            f"error: the run directory {run_dir} already exists on {conn.target}\n"
            "    fix: pass new=1 to start a fresh submission with a new id"
        )
    if not result.ok:
        raise UserError(
            f"error: cannot create the run directory {run_dir} on {conn.target}: "
            f"{result.stderr.strip()}\n    fix: check job.output_path exists and is writable"
        )


def sync(conn: Connection, staged: str, run_dir: str) -> None:
    from pathlib import Path

    result = conn.copy_tree(Path(staged), run_dir)
    if not result.ok:
        raise UserError(
            f"error: copying the run directory to {conn.target}:{run_dir} failed: "
            f"{result.stderr.strip()}\n    fix: check free space and permissions under job.output_path"
        )


def parse_job_id(stdout: str) -> str | None:
    """`sbatch --parsable` prints `<id>` or `<id>;<cluster>`; the id is what squeue and sacct know."""
    first = stdout.strip().splitlines()[0] if stdout.strip() else ""
    job_id = first.split(";", 1)[0].strip()
    return job_id if job_id.isdigit() else None


def queue(conn: Connection, script: str) -> Queued:
    """One `sbatch --parsable` of a benchmark's job.sh, in the run's shell session."""
    result = conn.run(f"sbatch --parsable {quote(script)}")
    job_id = parse_job_id(result.stdout) if result.ok else None
    if job_id is None:
        reason = result.stderr.strip() or result.stdout.strip() or f"sbatch exited {result.status}"
        return Queued(None, " ".join(reason.split()))
    return Queued(job_id, None)
