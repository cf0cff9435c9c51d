"""How far a benchmark's `gym eval run` has come, counted from the files NeMo Gym writes as it goes.

`gym eval run` first writes one line per rollout it will run to `rollouts_materialized_inputs.jsonl`
(repeats included), then appends each finished rollout to `rollouts.jsonl` and each failed attempt to
`rollouts_failures.jsonl`, all in the benchmark's `artifacts/` (nemo_gym/path_utils.py names them).
Their line counts are its progress while it runs, and after it ends what its score covers: gym's own
`coverage/expected` is the materialized line count and `coverage/scored` the rollouts it kept, and
`require_complete` fails the run with `EVAL FAILED: k/N samples completed` when k < N.

A `command` benchmark writes none of these files: it gets no count rather than a wrong one.
Pure: the status scripts run `count_command`'s bash and hand its output to `parse_counts`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

ARTIFACTS = "artifacts"
DONE_FILE = "rollouts.jsonl"
FAILED_FILE = "rollouts_failures.jsonl"
EXPECTED_FILE = "rollouts_materialized_inputs.jsonl"
_FIELDS = {DONE_FILE: "done", FAILED_FILE: "failed", EXPECTED_FILE: "expected"}
# The three files as one bash brace expansion after `<bench dir>/artifacts/`, unquoted so it expands.
# `[l]` makes each word a glob, which nullglob drops when no such file exists (a plain word stays).
_GLOB = f"{ARTIFACTS}/rollouts{{,_failures,_materialized_inputs}}.json[l]"


@dataclass(frozen=True)
class Progress:
    """Rollouts written (`done`), failed attempts (`failed`), and rollouts to run (`expected`, None
    until gym has written its materialized inputs)."""

    done: int
    expected: int | None = None
    failed: int = 0

    @property
    def partial(self) -> bool:
        """Fewer rollouts than gym set out to run: a score over them covers only part of the benchmark."""
        return self.expected is not None and self.done < self.expected

    def text(self) -> str:
        """`3/5`, `3/5 (1 failed)`; `3` while the expected count is not known."""
        shown = f"{self.done}/{self.expected}" if self.expected is not None else str(self.done)
        return shown + (f" ({self.failed} failed)" if self.failed else "")

    def scored(self) -> str:
        """What a score covers, as `results` shows it: `5/5`, or `3/5 partial`."""
        shown = f"{self.done}/{self.expected}" if self.expected is not None else str(self.done)
        return shown + (" partial" if self.partial else "")

    def as_json(self) -> dict[str, int | bool | None]:
        """{scored, expected, failed, partial}: gym's coverage/scored and coverage/expected."""
        return {
            "scored": self.done,
            "expected": self.expected,
            "failed": self.failed,
            "partial": self.partial,
        }


def dir_files(bench_dir_bash: str) -> str:
    """The count files of one bench dir as bash words: `bench_dir_bash` is the dir already quoted
    (or a `"$p"/*` glob), followed by the unquoted brace expansion of the three names."""
    return f"{bench_dir_bash}/{_GLOB}"


def count_command(files_bash: str) -> str:
    """Bash printing `wc -l` of every existing file among `files_bash` (words that may be globs, with
    `nullglob` on), in ONE process whatever their number, or nothing when none exists (wc with no
    file would read stdin). Sets the array `fs`."""
    return f'fs=({files_bash}); if ((${{#fs[@]}})); then wc -l -- "${{fs[@]}}" 2>/dev/null; fi'


def parse_counts(wc_out: str) -> dict[str, Progress]:
    """bench dir (as the script spelled it) -> its Progress, from `wc -l` lines `<count> <path>`.

    wc shell-quotes a name holding a newline; such a dir matches no file name here and gets no count.
    """
    found: dict[str, dict[str, int]] = {}
    for line in wc_out.splitlines():
        count, _, path = line.lstrip().partition(" ")
        head, _, name = path.rpartition("/")
        bench_dir, _, artifacts = head.rpartition("/")
        if name in _FIELDS and artifacts == ARTIFACTS and count.isdigit():
            found.setdefault(bench_dir, {})[_FIELDS[name]] = int(count)
    return {d: _progress(fields) for d, fields in found.items() if "done" in fields or "expected" in fields}


def _progress(fields: Mapping[str, int]) -> Progress:
    return Progress(fields.get("done", 0), fields.get("expected"), fields.get("failed", 0))


# --- watch=1: a bar and the time left ---------------------------------------------------------------

BAR = 20  # characters of a progress bar


class Rates:
    """The rate of each benchmark's rollouts since watch first saw its job, for the time left.

    Measured from the first look, not from the job's start: a job spends its first minutes starting
    servers and loading the model, and a rate over that time would promise far too late an end."""

    def __init__(self) -> None:
        self.first: dict[tuple[str, str | None], tuple[float, int]] = {}
        self.now = 0.0

    def seen(self, rows: list[tuple[str, str | None, Progress | None]], now: float) -> Rates:
        """Record this look's (benchmark, job id, progress) at `now` (seconds, monotonic)."""
        self.now = now
        for bench, job_id, progress in rows:
            if progress is not None:
                self.first.setdefault((bench, job_id), (now, progress.done))
        return self

    def eta(self, bench: str, job_id: str | None, progress: Progress) -> float | None:
        """Seconds left at the rate so far, or None: nothing to go on yet, or nothing left."""
        start = self.first.get((bench, job_id))
        if start is None or progress.expected is None or progress.done >= progress.expected:
            return None
        t0, done0 = start
        if progress.done <= done0 or self.now <= t0:
            return None
        rate = (progress.done - done0) / (self.now - t0)
        return (progress.expected - progress.done) / rate

    def bar(self, bench: str, job_id: str | None, progress: Progress) -> str:
        """`[#####...............] 3/12 (1 failed), 2m10s left`."""
        text = progress.text()
        if progress.expected:
            filled = min(BAR, BAR * progress.done // progress.expected)
            text = f"[{'#' * filled}{'.' * (BAR - filled)}] {text}"
        eta = self.eta(bench, job_id, progress)
        return text + (f", {duration(eta)} left" if eta is not None else "")


def duration(seconds: float) -> str:
    """`45s`, `2m10s`, `3h05m`: a time left as a person reads it."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
