"""A sweep's gate, the edge: every checkpoint against one baseline, the best non-inferior one chosen.

`results multirun=1 series=1 baseline=B max_drop=X` (or `policy=gate.yaml`; and `report`, `export`
with the same arguments) reads the rollouts of every combination of the sweep and of the baseline in
ONE round trip per host (compare_read.read_runs), pairs each combination with the baseline as
`compare` pairs two runs (compare_read.pair), gates it (policy.decide: max_drop= is the policy with
every benchmark critical) and chooses (results/choose.py). The baseline is a run by its gym_job_id,
or one combination of the sweep itself (its label, e.g. `step_0`, or its swept value): then it is the
baseline and not a candidate.

Not a gate: what `results` prints is information, and it exits 0 whatever the checkpoints' outcomes
(a CI step that must fail on a drop runs `compare max_drop=` on the chosen checkpoint). An argument it
cannot use (a baseline it cannot find, baseline= without max_drop= or policy=, or the reverse, a
policy file with a mistake) is a usage error, exit 64, as compare's.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gymbuild.errors import UsageError, UserError, printable
from gymbuild.results import choose, compare, compare_read, stats
from gymbuild.state import ids

if TYPE_CHECKING:
    from gymbuild.request.verb_args import Gated
    from gymbuild.results.policy import Policy
    from gymbuild.results.table import RunResult
    from gymbuild.state.records import SubmissionRecord
    from gymbuild.submit.session import Session
    from gymbuild.sweep.series import Point


def policy_of(args: Gated) -> Policy | None:
    """The gate's policy (None: no gate asked for): policy=, else max_drop= as one (every benchmark
    critical, Policy.of_max_drop). Its mistakes are said before anything is read, exit 64."""
    from gymbuild.results import policy  # late: its YAML and schema only when a gate is asked for

    if args.baseline is None and args.max_drop is None and args.policy is None:
        return None
    if args.baseline is None:
        given = "policy=" if args.policy is not None else "max_drop="
        raise UsageError(
            f"error: {given} on a sweep gates every checkpoint against a baseline, and none is named\n"
            "    fix: add baseline=<gym_job_id> or baseline=<a combination's label, e.g. step_0>"
        )
    if args.max_drop is not None and args.policy is not None:
        raise UsageError(
            "error: max_drop= and policy= both say what the gate reads\n"
            "    fix: drop max_drop=, or put it in the policy file's default: rule (docs/compare.md)"
        )
    if args.policy is not None:
        return policy.load(args.policy)
    if args.max_drop is None:
        raise UsageError(
            f"error: baseline={printable(args.baseline, lines=False)} needs the margin a checkpoint may "
            "drop by\n    fix: add max_drop=X (e.g. max_drop=0.02) or policy=gate.yaml"
        )
    return policy.Policy.of_max_drop(args.max_drop)


def _baseline_cell(name: str, rows: Sequence[Point], runs: Sequence[RunResult]) -> str | None:
    """The gym_job_id of the combination `name` names (its id, short label, label or swept value)."""
    for r in rows:
        if name in (r.gym_job_id, r.label, *r.swept.values()):
            return r.gym_job_id
    return next((r.gym_job_id for r in runs if name in (r.gym_job_id, r.label)), None)


def _baseline(name: str, rows: Sequence[Point], runs: Sequence[RunResult]) -> str:
    """The baseline's gym_job_id: a combination's, else a run by its id in the local index."""
    cell = _baseline_cell(name, rows, runs)
    if cell is not None:
        return cell
    if ids.is_gym_job_id(name):
        return name
    labels = ", ".join(dict.fromkeys(printable(r.label, lines=False) for r in rows)) or "(none)"
    raise UsageError(
        f"error: baseline={printable(name, lines=False)} is neither a gym_job_id nor a combination "
        "of the sweep\n"
        f"    fix: baseline=<gym_job_id> (`gymbuild runs` lists them) or one of: {labels}"
    )


def _record(ident: str) -> SubmissionRecord:
    """A baseline that is not one of the sweep's combinations: a run of this machine's local index
    (a sweep's own config cannot say where another run's directory is)."""
    from gymbuild.day_two import find  # late: only a gate on another run reads the index

    try:
        found = find.record_from_index(ident)
    except UserError as err:
        raise UsageError(str(err)) from None
    if found is None:
        raise UsageError(
            f"error: baseline={ident} is not in this machine's local index\n"
            "    fix: name a run `gymbuild runs` lists, or a combination of the sweep (e.g. baseline=step_0)"
        )
    return found


def judge(
    s: Session,
    rule: Policy,
    baseline: str,
    records: Sequence[SubmissionRecord],
    runs: Sequence[RunResult],
    rows: Sequence[Point],
    only: Sequence[str] = (),
) -> choose.Choice:
    """The sweep's checkpoints gated against `baseline` (baseline=) under `rule` and the choice.
    `records`, `runs`: the submitted combinations' records and results (day_two.gathered), `rows`
    their series (for the labels and steps)."""
    from gymbuild.results import policy  # late: as in policy_of

    base_id = _baseline(baseline, rows, runs)
    by_id = {r.gym_job_id: r for r in records}
    base = by_id.get(base_id) or _record(base_id)
    candidates = [r for r in records if r.gym_job_id != base_id]
    threading.Thread(target=stats.warm, name="import scipy", daemon=True).start()
    found = compare_read.read_runs(s, [base, *candidates])  # one round trip per host, for all
    read = {r.record.gym_job_id: r for r in found}
    place = {r.gym_job_id: (r.label, r.step) for r in rows}
    metric_of = policy.metric_of(rule)

    def benchmarks(*pair: SubmissionRecord) -> list[str]:
        return compare_read.asked(only, pair)

    checkpoints = []
    try:
        for r in candidates:
            c = compare_read.pair(read[base_id], read[r.gym_job_id], benchmarks(base, r), metric_of)
            d = policy.decide(c, rule)
            label, step = place.get(r.gym_job_id, (r.gym_job_id, None))
            critical = frozenset(b for b, tier in d.tiers.items() if tier is policy.Tier.CRITICAL)
            checkpoints.append(choose.Checkpoint(label, step, r.gym_job_id, d.verdicts, d.outcome, critical))

        def versus(runner: choose.Checkpoint, best: choose.Checkpoint) -> compare.Comparison:
            metric = {v.benchmark: v.metric for v in best.verdicts}
            a, b = by_id[runner.gym_job_id], by_id[best.gym_job_id]
            return compare_read.pair(read[a.gym_job_id], read[b.gym_job_id], benchmarks(a, b), metric.get)

        name = place.get(base_id, (base_id, None))[0]
        return choose.choose(name, checkpoints, versus, base_id)
    except stats.Missing as err:
        raise UsageError(f"error: {err}") from None
