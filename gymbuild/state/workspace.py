"""The workspace: what this machine knows about the current submission of each config file.

`.gymbuild/` (or `workspace=`) holds, per config file, the staged tree of its current submission and
one outcome file per benchmark. The outcome files, written atomically the moment sbatch returns, are
the truth about what is queued: doit saves its own database only when a run ends, so a submit killed
half-way would otherwise forget job ids that Slurm already holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from gymbuild.errors import UserError
from gymbuild.resources import user_state_home

LOCK_WAIT_SECONDS = 10.0


def atomic_write(path: Path, data: bytes | str, mode: int = 0o644, *, durable: bool = True) -> None:
    """Write through a temp file and rename, so a reader (or a crash) never sees half a file.

    `durable=False` skips the fsync, for files that are derived and rebuilt when stale (the staged
    tree, its stamps): an fsync costs milliseconds, a thousand of them seconds.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    raw = data.encode() if isinstance(data, str) else data
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as handle:  # a loop of os.write calls, in effect: no short write
            handle.write(raw)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Submission:
    """The submission a config file is currently building: its identity and where it goes."""

    gym_job_id: str
    run_dir: str
    cluster: str
    executor: str
    hostname: str | None
    submitted_at: str
    submitted_by: str


@dataclass(frozen=True)
class Outcome:
    """What queueing one benchmark gave: a job id, or the error that kept it from one."""

    benchmark: str
    job_id: str | None
    error: str | None
    script_digest: str
    at: str
    previous_job_ids: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Outcome:
        data = json.loads(text)
        data["previous_job_ids"] = tuple(data.get("previous_job_ids", ()))
        return cls(**data)


class Workspace:
    """One config file's corner of the workspace directory.

    The corner is keyed by the file's real path (symlinks, `..` and relative spellings resolved) and
    named after the real file's stem, never the spelling's: every path that reaches one file finds one
    submission. A `draft` workspace is the one a dry run (render, resolve) works in: it reads the
    config's submission and outcomes but stages into `draft/`, beside them, and starts nothing, so
    looking never changes what was submitted (`begin_draft`)."""

    def __init__(
        self, root: Path, config_path: Path, cell: str | None = None, *, draft: bool = False
    ) -> None:
        resolved = config_path.resolve()
        key = hashlib.sha256(str(resolved).encode()).hexdigest()[:10]
        self.root, self.config_path, self.cell, self.draft = root, config_path, cell, draft
        self.config_dir = root / f"{resolved.stem}-{key}"
        # A sweep's combination (sweep/expand.py) is a submission of its own, kept under its config.
        self.dir = self.config_dir / "cells" / cell if cell else self.config_dir
        # Where this run's derived files go (the staged tree, its stamps, doit's database, the lock):
        # the submission's own directory, or for a dry run its draft beside it.
        self.scratch = self.dir / "draft" if draft else self.dir
        self.lock_dir = self.config_dir / "draft" if draft else self.config_dir
        self.stage = self.scratch / "stage"
        self.outcomes_dir = self.dir / "outcomes"
        self.stamps_dir = self.scratch / "stamps"
        self.submission_file = self.dir / "submission.json"
        self.draft_file = self.dir / "draft" / "submission.json"  # a dry run's provisional submission
        self.history_file = self.dir / "submissions.jsonl"  # every submission of the config, oldest first
        self.stage_stamps_file = self.stamps_dir / "stage.json"
        # Which workspace holds this config's (or cell's) current submission, whatever workspace= says:
        # kept in the user's state directory, so a second workspace never queues it again unasked.

        claim = f"{self.config_dir.name}.{cell}" if cell else self.config_dir.name
        self.claim_file = user_state_home() / "gymbuild" / "claims" / f"{claim}.json"
        self._stage_stamps_cache: dict[str, str] | None = None
        self._stage_stamps_dirty = False
        # Every outcome, once read: the run that writes outcomes holds the workspace, so nobody else
        # changes them under it (save_outcome keeps this up to date), and a read-only run reads them
        # once. A submit of 1000 benchmarks read the 1000 files five times, a no-op 2000 times.
        self._outcomes_cache: dict[str, Outcome] | None = None
        self._no_outcomes = False  # a draft of a fresh submission: the current one's are not its own

    def as_draft(self) -> Workspace:
        """The same corner, for a dry run: see the class's docstring."""
        return Workspace(self.root, self.config_path, self.cell, draft=True)

    # --- the current submission ----------------------------------------------------------------

    def submission(self) -> Submission | None:
        try:
            return Submission(**json.loads(self.submission_file.read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as err:
            raise UserError(
                f"error: {self.submission_file} is damaged ({err})\n"
                "    fix: pass new=1 to start a fresh submission"
            ) from None

    def start(self, submission: Submission) -> None:
        """Make `submission` current: a fresh staged tree and no outcomes. Only a submit starts one:
        its id and submitted_at are those of the submit (a dry run renders a draft, begin_draft)."""
        assert not self.draft, "a dry run starts no submission"
        for stale in (self.stage, self.outcomes_dir, self.stamps_dir):
            shutil.rmtree(stale, ignore_errors=True)
        (self.dir / "gym-job.json").unlink(missing_ok=True)  # the last submission's manifest copy
        self._stage_stamps_cache, self._stage_stamps_dirty = None, False
        self._outcomes_cache = {}
        self.stage.mkdir(parents=True)
        self.stage.chmod(0o755)
        atomic_write(self.submission_file, json.dumps(asdict(submission), indent=2) + "\n")
        with open(self.history_file, "a", encoding="utf-8") as history:  # one short line: one write
            history.write(json.dumps(asdict(submission), separators=(",", ":")) + "\n")
        claim = {"workspace": str(self.dir.resolve()), "gym_job_id": submission.gym_job_id}
        atomic_write(self.claim_file, json.dumps(claim) + "\n", durable=False)

    def draft_submission(self) -> Submission | None:
        """The provisional submission the last dry run of a fresh submission rendered for (reused
        while it goes to the same place, so a second render finds its scripts staged)."""
        try:
            return Submission(**json.loads(self.draft_file.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def begin_draft(self, submission: Submission) -> None:
        """Render `submission`, a fresh one, in the draft: it has no outcomes (the current
        submission's stay its own), and a draft staged for another provisional id is dropped. Nothing
        of the config's state (its submission, history, claim, outcomes) is touched."""
        assert self.draft, "only a draft workspace renders a submission it has not started"
        self._no_outcomes, self._outcomes_cache = True, {}
        if self.draft_submission() != submission:
            for stale in (self.stage, self.stamps_dir):
                shutil.rmtree(stale, ignore_errors=True)
            self._stage_stamps_cache, self._stage_stamps_dirty = None, False
            atomic_write(self.draft_file, json.dumps(asdict(submission), indent=2) + "\n", durable=False)

    def claimed_elsewhere(self) -> tuple[Path, str] | None:
        """The other workspace (and its submission) that queued jobs for this config, if any: a
        submit here without new=1 would queue the same benchmarks a second time."""
        try:
            claim = json.loads(self.claim_file.read_text())
            other = Path(claim["workspace"])
            gym_job_id = str(claim["gym_job_id"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if other == self.dir.resolve():
            return None
        try:
            current = json.loads((other / "submission.json").read_text()).get("gym_job_id")
        except (OSError, ValueError, AttributeError):
            return None
        outcomes = (other / "outcomes").glob("*.json")
        queued = any(json.loads(p.read_text()).get("job_id") for p in outcomes if p.is_file())
        return (other, gym_job_id) if current == gym_job_id and queued else None

    def history(self) -> list[Submission]:
        """Every submission this workspace started for the config, oldest first (`results run=all`
        compares them); the current one even when it predates the history file."""
        found: dict[str, Submission] = {}
        try:
            lines = self.history_file.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines:
            try:
                sub = Submission(**json.loads(line))
            except (ValueError, TypeError):
                continue  # a line cut short by a crash: the others still count
            found.setdefault(sub.gym_job_id, sub)
        current = self.submission()
        if current is not None:
            found.setdefault(current.gym_job_id, current)
        return list(found.values())

    # --- outcomes --------------------------------------------------------------------------------

    def outcome_path(self, bench: str) -> Path:
        return self.outcomes_dir / f"{bench}.json"

    def outcome(self, bench: str) -> Outcome | None:
        if self._outcomes_cache is None:
            self.outcomes()
        assert self._outcomes_cache is not None
        return self._outcomes_cache.get(bench)

    def _outcome_files(self) -> list[str]:
        if self._no_outcomes:
            return []
        try:
            return sorted(e.path for e in os.scandir(self.outcomes_dir) if e.name.endswith(".json"))
        except FileNotFoundError:
            return []

    def outcomes(self) -> dict[str, Outcome]:
        """Every benchmark's outcome (plain os calls: pathlib's overhead was a tenth of a 1000-job status)."""
        if self._outcomes_cache is None:
            found = {}
            for path in self._outcome_files():
                with open(path, encoding="utf-8") as handle:
                    outcome = Outcome.from_json(handle.read())
                found[outcome.benchmark] = outcome
            self._outcomes_cache = found
        # A copy (IO threads save outcomes while a submit queues), in file-name order as read from
        # disk: the record's stamp digests them in this order, so a no-op finds it unchanged.
        cache = self._outcomes_cache
        names = list(cache)  # one C call: a thread adding an outcome cannot change it under the sort
        return {bench: cache[bench] for bench in sorted(names, key=lambda bench: f"{bench}.json")}

    def has_outcomes(self) -> bool:
        return bool(self._outcome_files())

    def save_outcome(self, outcome: Outcome) -> None:
        atomic_write(self.outcome_path(outcome.benchmark), outcome.to_json())
        if self._outcomes_cache is not None:
            self._outcomes_cache[outcome.benchmark] = outcome

    def queued_shards(self, bench: str) -> int | None:
        """The `shards: K` this submission first queued `bench`'s shards with (set_queued_shards);
        None when it queued none (or before gymbuild wrote it down: submit/shards.queued_with)."""
        if self._no_outcomes:  # a draft of a fresh submission: the current one's are not its own
            return None
        try:
            return int((self.outcomes_dir / f"{bench}.shards").read_text())
        except (FileNotFoundError, ValueError):
            return None

    def set_queued_shards(self, bench: str, count: int) -> None:
        """Write `bench`'s K down before its first shard is sent: a later K (a changed config) would
        slice its rows differently from the shards already queued, so submit compares the two. Kept
        beside the outcomes (not a `.json`: no outcome), gone with them when new=1 starts afresh."""
        atomic_write(self.outcomes_dir / f"{bench}.shards", f"{count}\n")

    def release(self, bench: str, why: str) -> None:
        """Make a queued benchmark queueable again, keeping its job id in the history."""
        outcome = self.outcome(bench)
        if outcome is None or outcome.job_id is None:
            return
        self.save_outcome(
            replace(
                outcome,
                job_id=None,
                error=f"to be re-queued after {why}",
                previous_job_ids=(*outcome.previous_job_ids, outcome.job_id),
            )
        )

    # --- the staged tree --------------------------------------------------------------------------

    def write_staged(self, job_dir: str, files: dict[str, tuple[str, int]]) -> None:
        """A job's rendered files in the staged tree (`job_dir`: a benchmark's, or a shared job's
        under +jobs/), written in place.

        Not through a temp file, not fsynced: the staged tree is derived, and the stage stamps that
        vouch for it are dropped before the first file is touched and saved only after the last
        (`stage_stamp`). A temp file, a rename and an fsync per file were most of a large render.
        """
        if not self.stage.is_dir():  # a draft's stage is made on its first write (begin_draft empties it)
            self.stage.mkdir(parents=True, exist_ok=True)
            self.stage.chmod(0o755)
        bench_dir = os.path.join(self.stage, job_dir)
        parents = [os.path.join(self.stage, p) for p in Path(job_dir).parents if p != Path(".")]
        subs = sorted({os.path.dirname(rel) for rel in files} - {""})
        for path in (*reversed(parents), bench_dir, *(os.path.join(bench_dir, sub) for sub in subs)):
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, 0o755)
            if not _umask_keeps(0o755):  # the cluster's job user reads them, whatever the umask
                os.chmod(path, 0o755)
        for rel, (text, mode) in files.items():
            fd = os.open(os.path.join(bench_dir, rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with os.fdopen(fd, "wb") as handle:
                handle.write(text.encode())
                os.fchmod(fd, mode)

    def stage_stamp(self, bench: str) -> str | None:
        """The plan digest `bench`'s staged files were rendered from, if they are known to be whole."""
        return self._stage_stamps().get(bench)

    def set_stage_stamp(self, bench: str, value: str) -> None:
        """Remember (until save_stage_stamps) that `bench` is staged from `value`. The first change in a
        run removes the saved map, so a run killed while it rewrites staged files vouches for none."""
        self._changing_stage_stamps()[bench] = value

    def drop_stage_stamp(self, bench: str) -> None:
        """Forget that `bench` is staged (its files were removed): the next run renders it again."""
        if bench in self._stage_stamps():
            del self._changing_stage_stamps()[bench]

    def _changing_stage_stamps(self) -> dict[str, str]:
        """The stage stamps, about to change: the saved map goes first (see set_stage_stamp)."""
        stamps = self._stage_stamps()
        if not self._stage_stamps_dirty:
            self._stage_stamps_dirty = True
            self.stage_stamps_file.unlink(missing_ok=True)
        return stamps

    def save_stage_stamps(self) -> None:
        """One file for every benchmark's stage stamp (a thousand stamp files cost a tenth of a second)."""
        if self._stage_stamps_dirty and self._stage_stamps_cache is not None and self.stage.is_dir():
            atomic_write(self.stage_stamps_file, json.dumps(self._stage_stamps_cache), durable=False)
            self._stage_stamps_dirty = False

    def _stage_stamps(self) -> dict[str, str]:
        if self._stage_stamps_cache is None:
            try:
                self._stage_stamps_cache = dict(json.loads(self.stage_stamps_file.read_text()))
            except (FileNotFoundError, ValueError, TypeError):  # none yet, or damaged: re-render
                self._stage_stamps_cache = {}
        return self._stage_stamps_cache

    # --- stamps: small files that say what was last done, for doit's uptodate checks ------------

    def stamp(self, name: str) -> str | None:
        try:
            return (self.stamps_dir / name).read_text()
        except FileNotFoundError:
            return None

    def set_stamp(self, name: str, value: str, *, durable: bool = True) -> None:
        atomic_write(self.stamps_dir / name, value, durable=durable)


@functools.cache
def _umask() -> int | None:
    """This process's umask, read without setting it (os.umask can only swap it, which would race the
    threads that create files meanwhile); None where /proc does not tell."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _umask_keeps(mode: int) -> bool:
    """Whether a directory made with `mode` gets all of it (then a thousand chmod calls are saved)."""
    umask = _umask()
    return umask is not None and not umask & mode


@contextlib.contextmanager
def locked(root: Path, command: str, wait: float = LOCK_WAIT_SECONDS) -> Iterator[None]:
    """Hold the workspace for one gymbuild run; a second run waits briefly, then names the holder."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / "lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = Path(path).read_text().strip() or "another gymbuild run"
                    raise UserError(
                        f"error: the workspace {root} is in use by {holder}\n"
                        "    fix: wait for that run to finish, or use workspace=<another dir>"
                    ) from None
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} ({command})\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def digest(*parts: object) -> str:
    """A short stable digest of JSON-able parts, for stamps and change detection."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
