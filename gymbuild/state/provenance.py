"""When and by which code a submission was made: its id, minted from the clock (NeMo Gym 0.7.0's
format, `new_gym_job_id`), its timestamp, and the commit of the gymbuild that made it (`gym_commit`,
which the record keeps so a result can be traced to the code that submitted it)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # jsonschema is imported only to explain a bad record
    pass

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # gymbuild/, the package


def utc_now() -> datetime:
    """The clock a submission is named from.

    A seam: tests freeze it to prove two submits in the same second still get distinct ids. Lives here
    rather than in an executor because every executor needs the same answer.
    """
    return datetime.now(UTC)


def utc_timestamp(now: datetime) -> str:
    """ISO 8601, seconds, explicit Z: a run directory is read on a cluster whose timezone need not
    match the submitter's.

    A naive datetime is refused rather than guessed at: guessing the local zone is exactly the error
    the Z is there to rule out.
    """
    # isoformat rather than strftime: %Y does not pad years below 1000 on glibc.
    return _as_utc(now).replace(microsecond=0, tzinfo=None).isoformat() + "Z"


def new_gym_job_id(now: datetime) -> str:
    """The submission's primary key and its run directory's name: `gym-job-<YYYYMMDDTHHMMSSZ>-<6 hex>`.

    The random suffix keeps two submits in the same second apart. Sharing a run directory is not merely
    untidy: an executor that stages by mirroring (the Slurm executor uses rsync --delete) would erase
    the first submit's scripts. The timestamp first makes ids sort chronologically.
    """
    compact = utc_timestamp(now).replace("-", "").replace(":", "")
    return f"gym-job-{compact}-{secrets.token_hex(3)}"


def _as_utc(now: datetime) -> datetime:
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"a naive datetime ({now.isoformat()}) has no defined UTC time; pass an aware one")
    return now.astimezone(UTC)


@cache
def gym_commit() -> str | None:
    """The commit of the gymbuild that is running, or None when it cannot be told.

    Install metadata first (PEP 610 `direct_url.json` of a `pip install git+...`), because an installed
    wheel has no checkout to ask; then the source checkout's HEAD, with `-dirty` when tracked files
    differ from it. Cached: it costs subprocesses and cannot change while the process runs.
    """
    return _commit_from_install() or _commit_from_checkout()


def _commit_from_install() -> str | None:
    try:
        dist = metadata.distribution("gymbuild")
        # Metadata left by an earlier install must not vouch for a checkout running from elsewhere.
        if Path(str(dist.locate_file("gymbuild/__init__.py"))).resolve().parent != _PACKAGE_DIR:
            return None
        info = json.loads(dist.read_text("direct_url.json") or "null")
        vcs = info.get("vcs_info") if isinstance(info, dict) else None
        if isinstance(vcs, dict) and vcs.get("vcs") == "git" and isinstance(vcs.get("commit_id"), str):
            return vcs["commit_id"]
    except (metadata.PackageNotFoundError, OSError, ValueError):
        pass
    return None


def _commit_from_checkout() -> str | None:
    def git(*args: str) -> subprocess.CompletedProcess[str]:
        # GIT_OPTIONAL_LOCKS=0: `git status` must not take index.lock from under a concurrent commit.
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
        return subprocess.run(
            ["git", "-C", str(_PACKAGE_DIR), *args], capture_output=True, text=True, timeout=10, env=env
        )

    try:
        # The package must be tracked by the repository found; otherwise gymbuild is merely installed
        # inside someone else's working tree (a .venv in a project), whose HEAD says nothing about it.
        if git("ls-files", "--error-unmatch", "--", "__init__.py").returncode != 0:
            return None
        head = git("rev-parse", "--verify", "HEAD")
        status = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0 or status.returncode != 0:
        return None
    commit = head.stdout.strip()
    return f"{commit}-dirty" if status.stdout.strip() else commit


# ---------------------------------------------------------------------------------------------------
# the local index
