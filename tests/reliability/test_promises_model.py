"""DESIGN.md's promises, held by a model-based test over the local executor (issue 40, item 10).

`hypothesis.stateful` plays random sequences of what a user does to one config file: submit (plain,
`new=1`, `only=`, `--json`), submit interrupted by SIGINT, SIGTERM or SIGHUP at a moment picked by an
event (gymbuild took the workspace's lock, the Nth job started), resubmit, cancel, every inspecting
verb (render, resolve, status, results, logs, runs, compare, doit's list and info) and every verb
under NeMo Gym's `--dry-run` / `--resolve-only`, `json=1` / `--json`, `new=1` where it means nothing,
through every path to the same file (absolute, relative, `..`, a symlink; `config=`, `-c`,
`--config`), with the workspace deleted in between, and jobs ending (completed or failed) when the
test lets them. After each step it checks, from real processes and real files:

(a) no bench dir has two live jobs, and a submit without `new=1` never starts a second submission
    of a config that has one (the local index is the second guard when the workspace is gone);
(b) a dry run or an inspecting verb started and stopped no job, and changed no record, no workspace
    file and no run dir (caches of derived data aside: the config and template caches, the staged
    tree, the lock's holder);
(c) every job that started (its own log says so) is in its run's gym-job.json and local index entry;
(d) `compare run=A,B max_drop=X` never exits 0 when nothing was compared (these jobs write no
    results);
(e) an interrupted submit exits 130 / 143 / 129 for SIGINT / SIGTERM / SIGHUP; `json=1` prints
    exactly one JSON document on stdout; no verb shows a traceback.

Jobs are `command` benchmarks that write `waiting-<job id>` and then wait for a gate file the test
writes (its content is the exit status), so the test decides when a job ends and never sleeps. The
example database is off and the run is derandomized: the same sequences on every machine.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import gymbuild_argv
from hypothesis import strategies as st
from hypothesis.stateful import rule
from promises_helpers import Figures, kill_groups, live_local_jobs, run_dirs, started_local_jobs
from promises_machine import JSON_FLAGS, PATHS, PromisesMachine, machine_settings

FIGURES = Figures()


class LocalPromises(PromisesMachine):
    """The local executor: a job is a process group on this machine, seen in /proc."""

    INSPECT = (
        ("render",),
        ("resolve",),
        ("status",),
        ("results",),
        ("logs", "only=a"),
        ("list", "--status"),
        ("info", "submit"),
        ("submit", "--dry-run"),
        ("submit", "--resolve-only"),
        ("resubmit", "--dry-run"),
        ("cancel", "--dry-run"),
        ("status", "--resolve-only"),
    )
    MOMENTS = ("lock", "job1", "job2")
    figures = FIGURES

    def config_for(self, benchmarks: dict[str, Any]) -> dict[str, Any]:
        return {
            "services": {},
            "compute": {"here": {"type": "local", "walltime": "00:10:00"}},
            "driver": {"benchmarks": benchmarks},
            "job": {"output_path": str(self.output)},
            "otel": {"enabled": False},
        }

    def live(self) -> dict[str, set[str]]:
        return live_local_jobs(self.output)

    def started(self) -> dict[tuple[str, str], set[str]]:
        return started_local_jobs(self.output)

    def settled(self) -> bool:
        """Every live job waits at its gate, and none is cancelled but not yet gone (the local
        executor marks a job `.gym_cancelled-<id>` before it signals it)."""
        for bench_dir, ids in self.live().items():
            for job in ids:
                bench = Path(bench_dir)
                if (bench / f".gym_cancelled-{job}").exists() or not (bench / f"waiting-{job}").exists():
                    return False
        return True

    def stop_all(self) -> None:
        kill_groups({j for ids in self.live().values() for j in ids})

    @rule(where=st.sampled_from(sorted(PATHS)), only=st.sampled_from(("", "only=a")))
    def resubmit(self, where: str, only: str) -> None:
        self.figures.step("resubmit")
        runs = len(run_dirs(self.output))
        self.run(*self.argv(("resubmit",), where, "config=", (only,)))
        self.one_submission(False, runs)
        self.quiesce()

    @rule(as_json=st.sampled_from(JSON_FLAGS))
    def runs(self, as_json: str) -> None:
        self.figures.step("runs")
        self.inspected(gymbuild_argv("runs", *filter(None, [as_json])), self.root)

    @rule(a=st.integers(0, 3), b=st.integers(0, 3), max_drop=st.sampled_from(("0", "0.05", "1")))
    def compare(self, a: int, b: int, max_drop: str) -> None:
        """(d) these jobs write no results: a gate over them has compared nothing, and never passes.
        A and B are the a-th and b-th of this machine's submissions and one that never was, counted
        round (what is drawn never depends on what exists)."""
        self.figures.step("compare")
        known = [*sorted(p.name for p in run_dirs(self.output)), "gym-job-20260101T000000Z-000000"]
        first, second = known[a % len(known)], known[b % len(known)]
        argv = gymbuild_argv("compare", f"run={first},{second}", f"max_drop={max_drop}")
        done = self.inspected(argv, self.root)
        assert done.returncode != 0, f"(d) {argv[1:]} passed the gate on nothing:\n{done.stdout}"


LocalPromises.TestCase.settings = machine_settings(max_examples=15, steps=10)


def test_promises_hold_over_the_local_executor() -> None:
    try:
        LocalPromises.TestCase().runTest()
    finally:
        print(f"\npromises model (local): {FIGURES.summary()}")


class _Drawn:
    """The draws of a step written down: what `data.draw` returns, in order."""

    def __init__(self, *values: Any) -> None:
        self.values = list(values)

    def draw(self, strategy: Any, label: str | None = None) -> Any:
        return self.values.pop(0)


def _submit(m: LocalPromises, **kw: Any) -> None:
    m.submit(**{"where": "absolute", "spelling": "config=", "new": False, "only": "", "as_json": "", **kw})


def _inspect(m: LocalPromises, *verb: str, **kw: Any) -> None:
    args = {"where": "absolute", "spelling": "config=", "as_json": "", "new": False, **kw}
    m.inspect(data=_Drawn(verb), **args)  # type: ignore[arg-type]


def _interrupt(m: LocalPromises, sig: signal.Signals) -> None:
    m.interrupted_submit(data=_Drawn("job1"), where="absolute", sig=sig, new=False)  # type: ignore[arg-type]


# The shortest sequences the model found failing (on the main of issue 40, and one on the merged fixes), kept
# as plain regressions so the merged fixes are held to each of them, whatever the search draws.
KNOWN = {
    "symlink-second-submission": [_submit, lambda m: _submit(m, where="symlink")],
    "deleted-workspace-second-submission": [_submit, lambda m: m.delete_workspace(), _submit],
    "cancel-dry-run-cancels": [_submit, lambda m: _inspect(m, "cancel", "--dry-run")],
    "cancel-dry-run-json": [_submit, lambda m: _inspect(m, "cancel", "--dry-run", as_json="json=1")],
    "status-resolve-only-json": [
        _submit,
        lambda m: _inspect(m, "status", "--resolve-only", as_json="json=1"),
    ],
    "render-settles-a-submission": [lambda m: _inspect(m, "render")],
    "resolve-writes-doit-db": [lambda m: _inspect(m, "resolve")],
    "render-after-submit-writes-doit-db": [_submit, lambda m: _inspect(m, "render")],
    "resubmit-dry-run-new-starts-a-submission": [
        _submit,
        lambda m: _inspect(m, "resubmit", "--dry-run", new=True),
    ],
    "compare-passes-on-nothing": [
        _submit,
        lambda m: _submit(m, new=True),
        lambda m: m.compare(a=0, b=1, max_drop="1"),
    ],
    "sigint-after-first-job": [lambda m: _interrupt(m, signal.SIGINT)],
    "sigterm-after-first-job": [lambda m: _interrupt(m, signal.SIGTERM)],
    "sighup-after-first-job": [lambda m: _interrupt(m, signal.SIGHUP)],
}


@pytest.mark.parametrize("name", list(KNOWN))
def test_known_failing_sequence_holds(name: str) -> None:
    machine = LocalPromises()
    try:
        machine.start()
        for step in KNOWN[name]:
            step(machine)
            machine.one_live_job_per_bench_dir()
            machine.every_started_job_is_recorded()
    finally:
        machine.teardown()
