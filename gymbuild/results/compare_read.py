"""`gymbuild compare`, the edge: find the two runs, read their rollouts, print, gate on max_drop.

Cost: one round trip per host, reading every benchmark's rollouts of both runs at once (and the
run's resolved config, for its label, when the workspace does not have it). Where the target has
python3 each rollout is cut down there to what the comparison reads (compare_rows.py: its agent,
task, repeat and numbers; a line of a thousand-token answer becomes about thirty bytes), each file in
a process of its own; the materialized inputs travel as their counts, the failures file as its line
count and gym's aggregate as its key metric names. Without python3 the files come whole. scipy is
imported while the files travel.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gymbuild.errors import Inconclusive, UsageError, UserError, printable
from gymbuild.executors.connection import is_this_machine
from gymbuild.executors.states import states_of, unqueued_reason
from gymbuild.request.arguments import GATE_FORMATS
from gymbuild.request.verb_args import CompareArgs
from gymbuild.results import (
    compare,
    compare_cover,
    compare_rows,
    compare_text,
    gate,
    gate_text,
    policy,
    read,
    stats,
    table,
)

if TYPE_CHECKING:
    from gymbuild.state.records import SubmissionRecord
    from gymbuild.submit.session import Session

_BENCH_FILES = tuple(
    f"artifacts/{n}"
    for n in (compare.ROLLOUTS_FILE, compare.MATERIALIZED_FILE, compare.FAILURES_FILE, compare.AGGREGATE_FILE)
)
_RUN_FILES = ("resolved-config.yaml",)

# The reader's own loop, after compare_rows' source (its functions: rollout, asked_agent, parsed).
# Arguments: kind (b: bench dir, r: run dir) and dir, in pairs. Output: `<pair>\0<file>\0<text>\0`.
# The rollouts and the materialized inputs come cut (their names + compare.CUT; compare reads them),
# each file cut in a process of its own, as many at once as the target has processors: parsing the
# JSON is the reader's whole cost, a file's rows are independent and a login node has the cores.
# A reader that fails anywhere exits non-zero, so compare says the runs could not be read.
_LOOP = f"""
import os, sys, traceback
def cut_rollouts(f):
    agents, shapes = {{}}, {{}}
    for line in f:
        got = rollout(parsed(line)) if line.strip() else None
        if got is not None:
            agent, task, repeat, numbers = got
            mine = agents.get(agent)
            if mine is None:
                mine = agents[agent] = [0, {{}}]
            mine[0] += 1  # lines, duplicates counted; a duplicate's last row kept, where it came first
            shape = shapes.setdefault(tuple(numbers), len(shapes))
            mine[1][task, repeat] = [shape, task, repeat] + list(numbers.values())
    return json.dumps({{"shapes": [list(s) for s in shapes],
                       "agents": [[a, n, list(rows.values())] for a, (n, rows) in agents.items()]}},
                      separators=(",", ":")).encode()
def cut_asked(f):
    count, by_agent = 0, {{}}
    for line in f:
        if line.strip():
            count += 1
            name = asked_agent(parsed(line))
            if name is not None:
                by_agent[name] = by_agent.get(name, 0) + 1
    return json.dumps([count, by_agent]).encode()
def keys(text):
    got = parsed(text)
    return json.dumps([{{"agent_ref": e.get("agent_ref"), "key_metrics": list(e.get("key_metrics") or ())}}
                       for e in got if isinstance(e, dict)] if isinstance(got, list) else []).encode()
CUTS = (("rollouts.jsonl", cut_rollouts), ("materialized_inputs.jsonl", cut_asked))
def one(n, path):
    try:
        f = open(path, "rb")
    except OSError:
        return b""
    try:
        with f:
            cut = [c for end, c in CUTS if n.endswith(end)]
            if cut:
                n, data = n + {compare.CUT!r}, cut[0](f)
            elif n.endswith("aggregate_metrics.json"):
                data = keys(f.read())
            elif n.endswith(".jsonl"):
                data = b"{{}}\\n" * sum(1 for line in f if line.strip())
            else:
                data = f.read()
    except OSError as err:  # one line for compare's message, not a traceback
        sys.stderr.write("cannot read %s: %s\\n" % (path, err.strerror or err))
        sys.exit(1)
    return b"%s\\0%s\\0" % (n.encode(), data.replace(b"\\0", b""))
def forked(n, path):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            with os.fdopen(w, "wb") as pipe:
                pipe.write(one(n, path))
            code = 0
        except SystemExit as end:
            code = end.code
        except BaseException:
            traceback.print_exc()
        sys.stderr.flush()
        os._exit(code)
    os.close(w)
    return pid, r
def taken(child):
    pid, r = child
    with os.fdopen(r, "rb") as pipe:
        data = pipe.read()
    if os.waitpid(pid, 0)[1]:  # it said why on stderr; the others are ended, none outlives the read
        for other, _ in children.values():
            os.kill(other, 9)
            os.waitpid(other, 0)
        sys.exit(1)
    return data
a, out = sys.argv[1:], sys.stdout.buffer
names = {{"b": {_BENCH_FILES!r}, "r": {_RUN_FILES!r}}}
jobs = [(i // 2, n, os.path.join(a[i + 1], n)) for i in range(0, len(a) - 1, 2) for n in names.get(a[i], ())]
ahead = [j for j, (_, n, _) in enumerate(jobs) if any(n.endswith(end) for end, _ in CUTS)]
width = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8)
children = {{}}
for j, (k, n, path) in enumerate(jobs):
    while ahead and len(children) < width and hasattr(os, "fork"):  # the next cut files, started
        nxt = ahead.pop(0)
        children[nxt] = forked(*jobs[nxt][1:])
    data = taken(children.pop(j)) if j in children else one(n, path)
    if data:
        out.write(b"%d\\0" % k + data)
"""


def reader() -> str:
    """The reader program: compare_rows' source, then its loop (read from the installed package)."""
    return Path(compare_rows.__file__).read_text() + _LOOP


def read_script(pairs: Sequence[tuple[str, str]]) -> str:
    return read.read_script(pairs, reader(), read.bash_reader(_BENCH_FILES, _RUN_FILES))


def _records(s: Session, run: str | None) -> list[SubmissionRecord]:
    """The two runs run= names. A run that cannot be found (a malformed or unknown id, not two of
    them) is a usage error: the gate was never run, which is neither a drop nor undecided."""
    try:
        records = read.find_records(s, run)
    except UsageError:
        raise
    except UserError as err:
        raise UsageError(str(err)) from None
    if len(records) != 2:
        raise UsageError(
            f"error: compare compares two runs; {'run=' + run if run else 'the config'} names "
            f"{len(records)}\n"
            "    fix: run=<baseline gym_job_id>,<candidate gym_job_id> (`gymbuild runs` lists them)"
        )
    return records


@dataclass(frozen=True)
class RunRead:
    """One run as the comparison reads it: its record, per benchmark its files (name -> text), its
    policy model (None: unknown, then its label is its gym_job_id) and per benchmark its job's state."""

    record: SubmissionRecord
    files: Mapping[str, Mapping[str, str]]
    model: str | None
    states: Mapping[str, str]


def read_runs(s: Session, records: Sequence[SubmissionRecord]) -> list[RunRead]:
    """Every record's rollouts, in its order: per host, one status round trip per executor
    (states.py) and ONE reading the files of every run there, however many runs (compare's two, a
    sweep's checkpoints and its baseline)."""
    files: list[dict[str, dict[str, str]]] = [{} for _ in records]
    models: list[str | None] = [read.local_policy_model(s, r) for r in records]
    states: list[dict[str, str]] = [{} for _ in records]
    by_host: dict[str | None, list[int]] = {}
    for i, record in enumerate(records):
        by_host.setdefault(None if is_this_machine(record.hostname) else record.hostname, []).append(i)
    for host, indices in by_host.items():
        pairs: list[tuple[str, str]] = []
        wanted: list[tuple[int, str | None]] = []
        for i in indices:
            if models[i] is None:
                pairs.append(("r", records[i].run_dir))
                wanted.append((i, None))
            for job in records[i].benchmarks:
                pairs.append(("b", job.job_dir))
                wanted.append((i, job.benchmark))
        conn, own = read.connection_to(s, host)
        try:
            for i, rows in zip(indices, states_of(conn, [records[i] for i in indices]), strict=True):
                states[i] = {r.benchmark: r.state if r.job_id else unqueued_reason(r.error) for r in rows}
            result = conn.run(read_script(pairs))
        finally:
            if own:
                conn.close()
        if not result.ok:
            why = read.failure(result)
            raise UserError(f"error: the runs' rollouts could not be read on {host or 'this machine'}: {why}")
        for (i, bench), got in zip(wanted, read.parse_read(result.stdout, len(pairs)), strict=True):
            if bench is None:
                text = got.get(_RUN_FILES[0])
                models[i] = read.policy_model_of(text) if text else None
            else:
                files[i][bench] = {name.rsplit("/", 1)[-1]: text for name, text in got.items()}
    return [RunRead(r, f, m, st) for r, f, m, st in zip(records, files, models, states, strict=True)]


def asked(only: Sequence[str], records: Sequence[SubmissionRecord]) -> list[str]:
    """The benchmarks to compare: only='s, else every benchmark either run has (the baseline's order,
    then the candidate's own). only= naming one neither run has is a mistake, not "nothing to do"."""
    every = list(dict.fromkeys(j.benchmark for r in records for j in r.benchmarks))
    unknown = [b for b in only if b not in every]
    if unknown:
        raise UsageError(
            f"error: only= names benchmark(s) neither run has: {', '.join(unknown)}\n"
            f"    fix: pick from {', '.join(every) or '(the runs have no benchmark)'}"
        )
    return [b for b in every if not only or b in only]


def build(
    s: Session, args: CompareArgs, metric_of: Callable[[str], str | None] | None = None
) -> compare.Comparison:
    """The comparison of the two runs, with every reason a benchmark asked for was not compared in full.
    `metric_of`: per benchmark the metric to gate (a policy's, policy.metric_of); default: metric=."""
    chosen = metric_of or (lambda _bench: args.metric)
    records = _records(s, args.run)
    wanted = asked(args.only, records)
    # scipy's import (0.3 s quiet, 2-3 s on a loaded machine) overlaps the round trip, which waits.
    threading.Thread(target=stats.warm, name="import scipy", daemon=True).start()
    base, cand = read_runs(s, records)
    comparison = pair(base, cand, wanted, chosen)
    _check_metric(args.metric, comparison.agents)
    return comparison


def pair(
    base: RunRead, cand: RunRead, wanted: Sequence[str], metric_of: Callable[[str], str | None]
) -> compare.Comparison:
    """`cand` against `base`, paired by task and repeat, on the benchmarks `wanted`: every reason a
    benchmark was not compared in full included. `metric_of(benchmark)`: the metric its gate reads
    (None: its key metric, else the reward). Pure: what `read_runs` read in, the comparison out, so
    compare's verb and a sweep's gate (each checkpoint against its baseline, the best against the
    runner-up) pair the same way."""
    sides = (base, cand)
    runs = [
        table.RunResult(r.record.gym_job_id, r.record.run_dir, r.record.executor, r.record.cluster, r.model)
        for r in sides
    ]
    names = table.labels(runs)
    agents: list[compare.AgentDiff] = []
    skipped: list[str] = []
    short: dict[str, list[str]] = {}
    for bench in wanted:
        b, c = (
            compare_cover.Found(
                bench in {j.benchmark for j in r.record.benchmarks},
                r.states.get(bench),
                compare.parse_side(r.files[bench]) if bench in r.files else None,
            )
            for r in sides
        )
        found: list[compare.AgentDiff] = []
        mine = short.setdefault(bench, [])
        if b.side is not None and c.side is not None:
            found, left_out = compare.diff_benchmark(bench, b.side, c.side, metric_of(bench))
            skipped += left_out
            mine += left_out  # an agent only one side has: nothing to pair it with
        agents += found
        mine += compare_cover.shortfalls(bench, b, c, found)
    every = [line for bench in wanted for line in short[bench]]
    if not agents:
        every.append(compare_cover.NOTHING)
    return compare.Comparison(
        names[0],
        names[1],
        base.record.gym_job_id,
        cand.record.gym_job_id,
        tuple(agents),
        tuple(skipped),
        tuple(dict.fromkeys(every)),
        tuple(wanted),
        {bench: tuple(dict.fromkeys(v)) for bench, v in short.items() if v},
    )


def _check_metric(metric: str | None, agents: Sequence[compare.AgentDiff]) -> None:
    """metric= naming a metric no compared agent has is a usage error (a typo), not an undecided gate."""
    if metric is None or not agents or any(a.primary is not None for a in agents):
        return
    have = sorted({m.metric for a in agents for m in a.metrics})
    raise UsageError(
        f"error: metric={printable(metric, lines=False)} names no metric of the compared rollouts\n"
        f"    fix: pick from {', '.join(have) or '(none)'}"
    )


def check_args(args: CompareArgs) -> None:
    """What compare cannot use together, refused before anything is read (exit 64): the
    policy file says every margin and metric, so max_drop= or metric= beside it would be a second
    answer to the same question; format= names a gate's output, so it needs a gate."""
    fix = ""
    if args.format is not None and args.format not in GATE_FORMATS:
        problem, fix = (
            f"format={args.format} is not a format compare prints",
            f"use one of {', '.join(GATE_FORMATS)}",
        )
    elif args.policy is not None and (args.max_drop is not None or args.metric is not None):
        given = "max_drop=" if args.max_drop is not None else "metric="
        problem = f"{given} and policy= both say what the gate reads"
        fix = f"drop {given}, or put it in the policy file's default: rule (docs/compare.md)"
    elif args.format not in (None, "table") and args.policy is None and args.max_drop is None:
        problem = f"format={args.format} prints a gate's verdicts, and there is no gate"
        fix = "add policy=gate.yaml or max_drop=0.02"
    if fix:
        raise UsageError(f"error: {problem}\n    fix: {fix}")


def print_compare(s: Session, args: CompareArgs) -> None:
    """The verb: the comparison on stdout. With max_drop= or policy= it is a gate (gate.py, policy.py):
    exit 0 PASS, 1 DROP (the drops on stderr), 2 INCONCLUSIVE (the reasons on stderr, one line each);
    an argument or policy file it cannot use (or numpy and scipy missing) exits 64 before anything is
    printed."""
    check_args(args)
    max_drop = args.max_drop  # read and checked by its argument (arguments.py)
    chosen = policy.load(args.policy) if args.policy is not None else None  # a bad file: 64, nothing read
    if chosen is None and max_drop is not None and args.format not in (None, "table"):
        chosen = policy.Policy.of_max_drop(max_drop, args.metric)  # compact/markdown: one path for both
    try:
        comparison = build(s, args, policy.metric_of(chosen) if chosen is not None else None)
        decision = policy.decide(comparison, chosen) if chosen is not None else None
        verdicts = gate.verdicts(comparison, max_drop) if max_drop is not None and decision is None else None
    except stats.Missing as err:
        raise UsageError(f"error: {err}") from None
    if decision is not None:
        _print_decision(comparison, decision, args)
        return
    out = (
        compare_text.to_json(comparison, verdicts)
        if args.json
        else compare_text.format_table(comparison, verdicts)
    )
    sys.stdout.write(out)
    sys.stdout.flush()
    if verdicts is None:
        return
    outcome = gate.overall(verdicts)
    lines = "".join(
        f"\n  {printable(v.line(), lines=False)}" for v in verdicts if v.outcome is not gate.Outcome.PASS
    )
    unsure = "".join(f"\n  inconclusive: {printable(u, lines=False)}" for u in comparison.inconclusive)
    if outcome is gate.Outcome.DROP:
        drops = [v for v in verdicts if v.outcome is gate.Outcome.DROP]
        raise UserError(
            f"error: {len(drops)} benchmark(s) dropped by more than max_drop={max_drop:g}:" + lines + unsure
        )
    if outcome is gate.Outcome.INCONCLUSIVE:
        raise Inconclusive(
            f"INCONCLUSIVE: compare cannot tell whether anything dropped by more than "
            f"max_drop={max_drop:g}:"
            + lines
            + unsure
            + "\n    fix: compare runs whose jobs all COMPLETED with every rollout (resubmit the failed or "
            "partial side), on more tasks where the interval is too wide, or narrow with only="
        )


def _print_decision(c: compare.Comparison, d: policy.Decision, args: CompareArgs) -> None:
    """A policy's gate: its output on stdout (table, compact, markdown or JSON), the verdict on stderr
    and as the exit status."""
    if args.json:
        out = compare_text.to_json(c, d.verdicts, gate_text.json_keys(d))
    elif args.format == "compact":
        out = gate_text.compact(c, d)
    elif args.format == "markdown":
        out = gate_text.markdown(c, d)
    else:
        out = compare_text.format_table(c, gate_lines=gate_text.table_lines(c, d))
    sys.stdout.write(out)
    sys.stdout.flush()
    listed = () if args.format == "compact" and not args.json else d.verdicts  # compact: stdout lists them
    if d.outcome is gate.Outcome.DROP:
        raise UserError("error: " + gate_text.stderr_message(d, listed))
    if d.outcome is gate.Outcome.INCONCLUSIVE:
        raise Inconclusive(
            gate_text.stderr_message(d, listed)
            + "\n    fix: a supporting drop needs a person's look; an INCONCLUSIVE verdict complete runs "
            "(every job COMPLETED, every rollout) or more tasks; a policy without a critical benchmark "
            "never passes"
        )
