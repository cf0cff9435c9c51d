"""`gymbuild results`, the edge: find the runs, their jobs' states and metrics files; keep a cache.

Cost per call, however many benchmarks and runs: one status round trip and one metrics round trip per
host (one squeue and one sacct for every run there at once), and none at all when every benchmark is
cached. A benchmark that COMPLETED with metrics is cached in `$XDG_CACHE_HOME/gymbuild/results/`:
its job ended and its files never change, so asking again reads nothing remote for it. A benchmark
still pending or running is not even read: files in its artifacts/ are from an earlier attempt.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict, TypeGuard

from gymbuild.day_two import find
from gymbuild.errors import UsageError, UserError, printable
from gymbuild.executors.base import executor_for
from gymbuild.executors.connection import Connection, Result, is_this_machine
from gymbuild.executors.states import states_of, unqueued_state
from gymbuild.request.verb_args import ResultsArgs
from gymbuild.resources import user_cache_home
from gymbuild.results import table
from gymbuild.shell import join, quote
from gymbuild.state import ids
from gymbuild.state.records import RESOLVED_CONFIG_NAME
from gymbuild.state.rollouts import Progress
from gymbuild.state.workspace import atomic_write

if TYPE_CHECKING:
    from gymbuild.executors.connection import Connection
    from gymbuild.executors.states import BenchStatus
    from gymbuild.state.records import BenchmarkJob, SubmissionRecord
    from gymbuild.state.rollouts import Progress
    from gymbuild.submit.session import Session

CACHE_VERSION = 1
_BENCH_FILES = (f"artifacts/{table.AGGREGATE_FILE}", f"artifacts/{table.COMMAND_FILE}")
_RUN_FILES = ("resolved-config.yaml",)

# One process for every file of the call, where the target has python3: it keeps of NeMo Gym's
# aggregate only what the table shows (agent_ref, key_metrics), since the per-task metrics in the same
# file grow with the benchmark (a thousand tasks make megabytes). Arguments: kind (b: bench dir, r: run
# dir) and dir, in pairs. Output: `<pair index>\0<file>\0<contents>\0` per file found.
_READER = f"""
import json, os, sys
a, out = sys.argv[1:], sys.stdout.buffer
names = {{"b": {_BENCH_FILES!r}, "r": {_RUN_FILES!r}}}
for i in range(0, len(a) - 1, 2):
    for n in names.get(a[i], ()):
        try:
            with open(os.path.join(a[i + 1], n), "rb") as f:
                data = f.read()
        except OSError:
            continue
        if n.endswith("aggregate_metrics.json"):
            try:
                data = json.dumps([{{k: e[k] for k in ("agent_ref", "key_metrics") if k in e}}
                                   for e in json.loads(data)]).encode()
            except Exception:
                pass
        out.write(b"%d\\0%s\\0%s\\0" % (i // 2, n.encode(), data.replace(b"\\0", b"")))
"""


def bash_reader(bench_files: Sequence[str], run_files: Sequence[str]) -> str:
    """What a reader does with bash builtins, for a target without python3: whole files."""
    return (
        'i=0; while [ "$#" -gt 1 ]; do case $1 in b) names="{bench}";; r) names="{run}";; *) names=;; esac; '
        'for n in $names; do if [ -f "$2/$n" ]; then c=; IFS= read -r -d \'\' c <"$2/$n"; '
        'printf \'%s\\0%s\\0%s\\0\' "$i" "$n" "$c"; fi; done; i=$((i + 1)); shift 2; done'
    ).format(bench=" ".join(bench_files), run=" ".join(run_files))


def failure(result: Result) -> str:
    """Why a read on the host failed, as one line: what it said on stderr, control characters escaped
    (the host's files decide what that text holds), or its exit status when it said nothing."""
    return printable(" ".join(result.stderr.split()), lines=False) or f"the read exited {result.status}"


def read_script(
    pairs: Sequence[tuple[str, str]],
    reader: str = _READER,
    fallback: str = bash_reader(_BENCH_FILES, _RUN_FILES),
) -> str:
    """The bash of a files round trip: every listed dir's files, in one command (python3's `reader`
    where the target has it, else the bash `fallback`). compare_read.py reads with its own pair."""
    args = join(word for pair in pairs for word in pair)
    return (
        f"set -- {args}\n"
        f'if command -v python3 >/dev/null 2>&1; then exec python3 -c {quote(reader)} "$@"; fi\n'
        f"{fallback}"
    )


def parse_read(stdout: str, count: int) -> list[dict[str, str]]:
    """Per pair: file name (relative) -> contents. Output cut short is trusted not at all."""
    found: list[dict[str, str]] = [{} for _ in range(count)]
    parts = stdout.split("\0")
    if len(parts) % 3 != 1:
        return found
    for index, name, text in zip(parts[0:-1:3], parts[1:-1:3], parts[2:-1:3], strict=True):
        if index.isdigit() and int(index) < count:
            found[int(index)][name] = text
    return found


# --- the cache ---------------------------------------------------------------------------------


class Cache:
    """What is known for good about a run: its benchmarks that COMPLETED with metrics (keyed by the
    job id the record gives them, so a re-queued benchmark is read afresh) and its policy model."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.hits = 0

    def _path(self, gym_job_id: str) -> Path:
        return ids.id_path(self.root, gym_job_id)

    def load(self, gym_job_id: str) -> Cached:
        try:
            data = json.loads(self._path(gym_job_id).read_text())
        except (OSError, ValueError):
            return {}
        return data if _is_cached(data) else {}

    def save(self, gym_job_id: str, data: Cached) -> None:
        # A cache that cannot be written costs the next call a read, nothing more.
        with contextlib.suppress(OSError):
            payload = json.dumps({**data, "version": CACHE_VERSION})
            atomic_write(self._path(gym_job_id), payload, durable=False)


class CachedBench(TypedDict):
    """A benchmark known for good: COMPLETED with metrics, under the job id the record gave it."""

    job_id: str | None
    state_job_id: str | None
    exit_code: str | None
    files: dict[str, str]
    coverage: dict[str, int | None] | None  # a Progress's fields (none in entries cached before it)


class Cached(TypedDict, total=False):
    """A run's cache file."""

    policy_model: str | None
    benchmarks: dict[str, CachedBench]
    version: NotRequired[int]


def _is_cached_bench(entry: object) -> TypeGuard[CachedBench]:
    if not isinstance(entry, dict) or not isinstance(entry.get("files"), dict):
        return False
    return all(isinstance(entry.get(key), str | None) for key in ("job_id", "state_job_id", "exit_code"))


def _is_cached(data: object) -> TypeGuard[Cached]:
    """Whether a cache file is this version's, with the shape `_result` writes (else it is ignored)."""
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
        return False
    benches = data.get("benchmarks", {})
    if not isinstance(data.get("policy_model"), str | None) or not isinstance(benches, dict):
        return False
    return all(_is_cached_bench(entry) for entry in benches.values())


# --- the runs ----------------------------------------------------------------------------------


@dataclass
class _Run:
    """One run being read: its record, what the cache holds, and what this call found."""

    record: SubmissionRecord
    cached: Cached
    policy_model: str | None
    statuses: dict[str, BenchStatus]
    files: dict[str, dict[str, str]]
    read_error: str | None = None  # why the metrics read failed, when it did


def find_records(s: Session, run: str | None) -> list[SubmissionRecord]:
    """`run` (the verb's run=): `<id>,<id>,...` in that order; `all`: every submission of the
    config, oldest first; else (None) the config's current submission."""
    if run == "all":
        return _config_records(s)
    # Each id whole (no strip): one that is not an id is refused before it is echoed or read.
    named = [ids.gym_job_id(i, "run=") for i in (run or "").split(",") if i]
    if not named:
        return [find.find_record(s, run, connect=False)]
    if len(set(named)) != len(named):
        raise UserError(f"error: run= names a run twice: {','.join(named)}\n    fix: name each run once")
    return [find.find_record(s, i, connect=False) for i in named]


def _config_records(s: Session) -> list[SubmissionRecord]:
    """The config's submissions from its workspace: the current one as the workspace knows it, the
    earlier ones from the local index (one missing there is named on stderr and left out)."""
    current = find.find_record(s, "", connect=False)  # no submission yet: its message
    records = []
    for sub in s.workspace.history():
        if sub.gym_job_id == current.gym_job_id:
            records.append(current)
            continue
        record = find.record_from_index(sub.gym_job_id) if ids.is_gym_job_id(sub.gym_job_id) else None
        if record is None:
            print(f"note: {sub.gym_job_id} is not in this machine's local index; left out", file=sys.stderr)
        else:
            records.append(record)
    return records


def local_policy_model(s: Session, record: SubmissionRecord) -> str | None:
    """The config's current submission has its resolved config in the workspace: no remote read."""
    current = s.workspace.submission()
    if current is None or current.gym_job_id != record.gym_job_id:
        return None
    try:
        text = (s.workspace.stage / RESOLVED_CONFIG_NAME).read_text()
    except OSError:
        return None
    return policy_model_of(text)


def policy_model_of(yaml_text: str) -> str | None:
    """The policy model of a resolved config: `services[driver.policy_model].model`."""
    import yaml

    try:
        tree = yaml.safe_load(yaml_text)
        service = tree["services"][tree["driver"]["policy_model"]]
        model = service.get("model") or service.get("served_model_name")
    except (yaml.YAMLError, KeyError, TypeError, AttributeError):
        return None
    return str(model) if model else None


def gather(s: Session, cache: Cache, records: Sequence[SubmissionRecord]) -> list[table.RunResult]:
    """Every record's results: the cache first, then, per host, one status and one metrics round trip
    for whatever the cache does not hold."""
    runs = []
    for record in records:
        cached = cache.load(record.gym_job_id)
        model = cached.get("policy_model") or local_policy_model(s, record)
        runs.append(_Run(record, cached, model, {}, {}))
    by_host: dict[str | None, list[_Run]] = {}
    for run in runs:
        host = None if is_this_machine(run.record.hostname) else run.record.hostname
        by_host.setdefault(host, []).append(run)
    for host, here in by_host.items():
        if any(_to_ask(run) for run in here):
            _read_remote(s, host, here)
    out = []
    for run in runs:
        out.append(_result(run, cache))
    return out


def _to_ask(run: _Run) -> list[BenchmarkJob]:
    """The benchmarks of `run` the cache cannot answer: queued, and not cached under their job id."""
    cached = run.cached.get("benchmarks", {})
    return [
        job
        for job in run.record.benchmarks
        if job.job_id and ((entry := cached.get(job.benchmark)) is None or entry["job_id"] != job.job_id)
    ]


def _read_remote(s: Session, host: str | None, runs: Sequence[_Run]) -> None:
    """One status round trip per executor (and one for the members of shared jobs: states.py), then
    one round trip reading every file wanted."""
    conn, own = connection_to(s, host)
    try:
        asked = [{job.benchmark for job in _to_ask(run)} for run in runs]
        for run, rows in zip(runs, states_of(conn, [run.record for run in runs], asked), strict=True):
            run.statuses = {row.benchmark: row for row in rows}
        pairs: list[tuple[str, str]] = []
        wanted: list[tuple[_Run, str | None]] = []  # per pair: the run, and its benchmark (None: the run)
        for run in runs:
            if run.policy_model is None:
                pairs.append(("r", run.record.run_dir))
                wanted.append((run, None))
            for job in run.record.benchmarks:
                row = run.statuses.get(job.benchmark)
                if row is not None and row.state not in executor_for(run.record.executor).LIVE:
                    pairs.append(("b", job.job_dir))
                    wanted.append((run, job.benchmark))
        if not pairs:
            return
        result = conn.run(read_script(pairs))
        if not result.ok:  # what it did print is used; what it did not is said to be unreadable
            for run in runs:
                run.read_error = failure(result)
        for (run, bench), files in zip(wanted, parse_read(result.stdout, len(pairs)), strict=True):
            if bench is None:
                text = files.get(_RUN_FILES[0])
                run.policy_model = policy_model_of(text) if text else None
            else:
                run.files[bench] = {name.rsplit("/", 1)[-1]: text for name, text in files.items()}
    finally:
        if own:
            conn.close()


def connection_to(s: Session, host: str | None) -> tuple[Connection, bool]:
    """The session's connection when it goes (or may go) to `host`, else one of our own (a comparison
    of runs on two clusters), which the caller closes: (connection, whether it is ours)."""
    conn = s.connection(host, use_config=False)
    if conn.hostname == host:
        return conn, False
    own = Connection(host)
    own.open()
    return own, True


def _result(run: _Run, cache: Cache) -> table.RunResult:
    """The run's RunResult; what COMPLETED with metrics goes into the cache."""
    record = run.record
    cached = dict(run.cached.get("benchmarks", {}))
    benches = []
    changed = False
    for job in record.benchmarks:
        entry = cached.get(job.benchmark)
        if job.job_id and entry and entry.get("job_id") == job.job_id:
            cache.hits += 1
            benches.append(
                table.bench_result(
                    job.benchmark,
                    "COMPLETED",
                    entry["files"],
                    job_id=entry.get("state_job_id"),
                    exit_code=entry.get("exit_code"),
                    coverage=_coverage(entry.get("coverage")),
                )
            )
            continue
        row = run.statuses.get(job.benchmark)
        if row is None:  # not queued (never asked about)
            benches.append(table.bench_result(job.benchmark, unqueued_state(job.error), {}, error=job.error))
            continue
        files = run.files.get(job.benchmark, {})
        bench = table.bench_result(
            job.benchmark,
            row.state,
            files,
            job_id=row.job_id,
            exit_code=row.exit_code,
            error=row.error,
            coverage=row.progress,
            chain=row.chain,
        )
        if not files and run.read_error and job.benchmark in run.files:
            bench = replace(bench, why=f"its artifacts could not be read: {run.read_error}")
        benches.append(bench)
        # Only a file read whole and holding numbers is known for good: one that could not be read
        # or parsed, or said nothing ({}, an agent without key_metrics), may be fixed or rewritten.
        if row.state == "COMPLETED" and bench.why is None and any(a.metrics for a in bench.agents):
            cached[job.benchmark] = {
                "job_id": job.job_id,
                "state_job_id": row.job_id,
                "exit_code": row.exit_code,
                "files": files,
                "coverage": None if row.progress is None else asdict(row.progress),
            }
            changed = True
    if changed or (run.policy_model and run.policy_model != run.cached.get("policy_model")):
        cache.save(record.gym_job_id, {"policy_model": run.policy_model, "benchmarks": cached})
    return table.RunResult(
        gym_job_id=record.gym_job_id,
        run_dir=record.run_dir,
        executor=record.executor,
        cluster=record.cluster,
        policy_model=run.policy_model,
        benchmarks=tuple(benches),
    )


def _coverage(saved: object) -> Progress | None:
    """A cached benchmark's coverage (an entry cached before there was one has none)."""
    if not isinstance(saved, dict):
        return None
    try:
        return Progress(**saved)
    except TypeError:
        return None


def _check_only(records: Iterable[SubmissionRecord], only: Sequence[str]) -> None:
    names = {job.benchmark for record in records for job in record.benchmarks}
    unknown = [b for b in only if b not in names]
    if unknown:
        raise UserError(
            f"error: only= names benchmark(s) no run here has: {', '.join(unknown)}\n"
            f"    fix: pick from {', '.join(sorted(names))}"
        )


def print_results(s: Session, args: ResultsArgs) -> None:
    """The verb: find the runs, read what is not cached, print the table (or JSON, CSV, markdown)."""
    fmt = args.format or "table"  # one of arguments.FORMATS: format= read it
    if args.series:
        raise UserError(
            "error: series=1 reads a sweep's combinations, and this is one submission\n"
            "    fix: add multirun=1 (the config's latest sweep) or sweep=ID"
        )
    if args.baseline is not None or args.max_drop is not None or args.policy is not None:
        raise UsageError(
            "error: baseline= with max_drop= or policy= gates a sweep's checkpoints, and this is one "
            "submission\n"
            "    fix: add multirun=1 series=1, or compare two runs: gymbuild compare run=A,B max_drop=X"
        )
    records = find_records(s, args.run)
    if args.only:
        _check_only(records, args.only)
        records = [
            replace(r, benchmarks=tuple(j for j in r.benchmarks if j.benchmark in args.only)) for r in records
        ]
    cache = Cache(user_cache_home() / "gymbuild" / "results")
    runs = gather(s, cache, records)
    sys.stdout.write(table.render(runs, as_json=args.json, fmt=fmt))
