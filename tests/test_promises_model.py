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

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from e2e_helpers import gymbuild_argv, user_env, write_config
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from promises_helpers import (
    INTERRUPT_STATUS,
    Figures,
    Snapshot,
    kill_groups,
    live_local_jobs,
    one_json_document,
    recorded_jobs,
    run_dirs,
    started_local_jobs,
    wait_until,
)

BENCHES = ("a", "b")
FIGURES = Figures()

# Where the config is named from: (working directory under the test's root, the path as typed).
PATHS = {
    "absolute": ("", "{root}/proj/submit.yaml"),
    "relative": ("proj", "submit.yaml"),
    "dotdot": ("proj/sub", "../submit.yaml"),
    "symlink": ("", "{root}/link.yaml"),
}
SPELLINGS = ("config=", "-c", "--config")
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
# doit's own commands take no json=1 (the promise of one JSON document is gymbuild's verbs').
DOIT_COMMANDS = (("list", "--status"), ("info", "submit"))
JSON_FLAGS = ("", "json=1", "--json")
MOMENTS = ("spawn", "lock", "job1", "job2")


def _gate_command(gates: Path) -> str:
    """A benchmark that says it is waiting, then waits for the test's gate file and exits with the
    status written there."""
    gate = f"{gates}/$GYM_JOB_ID"
    return (
        f'echo "$GYM_JOB_ID" > "$NEMO_GYM_BENCH_DIR/waiting-$GYM_JOB_ID"; '
        f'while [ ! -e "{gate}" ]; do sleep 0.05; done; exit "$(cat "{gate}")"'
    )


def _derived(path: Path) -> bool:
    """Caches of derived data, and a lock's holder: what a dry run may write."""
    parts = path.parts
    if "workspaces" in parts:
        rest = parts[parts.index("workspaces") + 2 :]
        if rest[:1] in (("stage",), ("script-code",)) or rest in (
            ("stamps", "stage.json"),
            ("stamps", "resolved"),
        ):
            return True
        if rest == ("lock",):
            return True
    return False


class PromisesModel(RuleBasedStateMachine):
    """One user, one config of two gated `command` benchmarks, the local executor."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="gym-promises-"))
        self.home = self.root / "home"
        self.gates = self.root / "gates"
        self.output = self.root / "runs"
        for d in (self.home, self.gates, self.root / "proj" / "sub"):
            d.mkdir(parents=True)
        benches = {b: {"command": _gate_command(self.gates)} for b in BENCHES}
        config = {
            "services": {},
            "compute": {"here": {"type": "local", "walltime": "00:10:00"}},
            "driver": {"benchmarks": benches},
            "job": {"output_path": str(self.output)},
            "otel": {"enabled": False},
        }
        self.config = write_config(self.root / "proj", config)
        (self.root / "link.yaml").symlink_to(self.config)
        self.env = user_env(self.home)
        self.state = self.home / "xdg-state" / "gymbuild"
        self.index = self.home / "xdg-cache" / "nemo-gym" / "jobs"
        FIGURES.sequences += 1

    # --- running gymbuild -------------------------------------------------------------------------

    def _argv(
        self, verb: tuple[str, ...], where: str, spelling: str, extra: tuple[str, ...]
    ) -> tuple[list[str], Path]:
        cwd, typed = PATHS[where]
        path = typed.format(root=self.root)
        named = [f"config={path}"] if spelling == "config=" else [spelling, path]
        return gymbuild_argv(*verb, *named, *filter(None, extra)), self.root / cwd

    def _run(self, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            argv, cwd=cwd, env=self.env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
        )
        assert "Traceback" not in done.stderr, f"{argv[1:]} showed a traceback:\n{done.stderr}"
        return done

    def _check_json(self, argv: list[str], done: subprocess.CompletedProcess[str]) -> None:
        if "json=1" not in argv and "--json" not in argv:
            return
        if done.returncode == 0 or done.stdout.strip():
            assert one_json_document(done.stdout), (
                f"(e) {argv[1:]} exited {done.returncode} with json=1 and printed not exactly one JSON "
                f"document on stdout:\n{done.stdout[:2000]}"
            )

    # --- what the test observes -------------------------------------------------------------------

    def _live(self) -> dict[str, set[int]]:
        return live_local_jobs(self.root)

    def _quiesce(self) -> None:
        """Wait until every live job is waiting at its gate and every cancelled job is gone, so what
        the next step sees is gymbuild's doing, not a job still starting or stopping."""

        def settled() -> bool:
            for bench_dir, groups in self._live().items():
                for group in groups:
                    bench = Path(bench_dir)
                    if (bench / f".gym_cancelled-{group}").exists():
                        return False
                    if not (bench / f"waiting-{group}").exists():
                        return False
            return True

        wait_until(settled, f"every live job under {self.root} waiting at its gate")

    def _snapshot(self) -> Snapshot:
        return Snapshot.take(
            {
                "jobs": [self.output],
                "records": [self.index, self.state / "runs", self.state / "claims"],
                "workspace": [self.state / "workspaces"],
            },
            skip=_derived,
        )

    def _inspected(self, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        """Run a verb that must act on nothing, and hold it to (b) and (e)."""
        live = self._live()
        before = self._snapshot()
        done = self._run(argv, cwd)
        self._check_json(argv, done)
        after = self._snapshot()
        assert self._live() == live, f"(b) {argv[1:]} started or stopped a job: {live} -> {self._live()}"
        changed = before.changes(after, "jobs")
        assert not changed, f"(b) {argv[1:]} changed a run dir:\n" + "\n".join(changed)
        changed = before.changes(after, "records")
        assert not changed, f"(b) {argv[1:]} changed the local records:\n" + "\n".join(changed)
        doit_db = [c for c in before.changes(after, "workspace") if c.endswith("doit-db.json")]
        assert not doit_db, f"(b) {argv[1:]} wrote doit's database:\n" + "\n".join(doit_db)
        changed = [c for c in before.changes(after, "workspace") if not c.endswith("doit-db.json")]
        assert not changed, f"(b) {argv[1:]} changed the workspace:\n" + "\n".join(changed)
        return done

    def _submitted(self, new: bool, runs_before: int) -> None:
        """(a) a submit without new=1 starts no second submission of the config."""
        allowed = runs_before + 1 if new or runs_before == 0 else runs_before
        found = run_dirs(self.output)
        assert len(found) <= allowed, (
            f"(a) a submit{' new=1' if new else ''} made a submission beside the {runs_before} there: "
            f"{[p.name for p in found]}"
        )

    # --- the steps --------------------------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        FIGURES.step("start")

    @rule(
        where=st.sampled_from(sorted(PATHS)),
        spelling=st.sampled_from(SPELLINGS),
        new=st.booleans(),
        only=st.sampled_from(("", "only=a", "only=b")),
        as_json=st.sampled_from(JSON_FLAGS),
    )
    def submit(self, where: str, spelling: str, new: bool, only: str, as_json: str) -> None:
        FIGURES.step("submit")
        runs = len(run_dirs(self.output))
        argv, cwd = self._argv(("submit",), where, spelling, ("new=1" if new else "", only, as_json))
        done = self._run(argv, cwd)
        self._check_json(argv, done)
        self._quiesce()
        self._submitted(new, runs)

    @rule(
        where=st.sampled_from(sorted(PATHS)),
        sig=st.sampled_from((signal.SIGINT, signal.SIGTERM, signal.SIGHUP)),
        moment=st.sampled_from(MOMENTS),
        new=st.booleans(),
    )
    def interrupted_submit(self, where: str, sig: signal.Signals, moment: str, new: bool) -> None:
        FIGURES.step("interrupted submit")
        FIGURES.interrupts_tried += 1
        runs = len(run_dirs(self.output))
        started = sum(len(ids) for ids in started_local_jobs(self.output).values())
        argv, cwd = self._argv(("submit",), where, "config=", ("new=1" if new else "",))
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own group: a terminal's ^C or hangup reaches all of it
        )
        try:

            def reached() -> bool:
                if proc.poll() is not None:
                    return True
                if moment == "spawn":
                    return True
                if moment == "lock":
                    locks = (self.state / "workspaces").glob("*/lock")
                    return any(f"pid {proc.pid} " in lock.read_text(errors="replace") for lock in locks)
                now = sum(len(ids) for ids in started_local_jobs(self.output).values())
                return now - started >= int(moment.removeprefix("job"))

            wait_until(reached, f"submit reaching {moment}", timeout=120, poll=0.005)
            delivered = proc.poll() is None
            if delivered:
                FIGURES.interrupts_delivered += 1
                if sig == signal.SIGTERM:
                    proc.send_signal(sig)
                else:  # what a terminal does on ^C or a hangup: the whole foreground group
                    os.killpg(proc.pid, sig)
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert "Traceback" not in err, f"an interrupted submit showed a traceback:\n{err}"
        if delivered:
            want = INTERRUPT_STATUS[sig]
            assert proc.returncode in (want, -sig), (
                f"(e) submit interrupted by {sig.name} at {moment} exited {proc.returncode}, "
                f"not {want}:\n{err}"
            )
        self._quiesce()
        self._submitted(new, runs)

    @rule(where=st.sampled_from(sorted(PATHS)), only=st.sampled_from(("", "only=a")))
    def resubmit(self, where: str, only: str) -> None:
        FIGURES.step("resubmit")
        runs = len(run_dirs(self.output))
        argv, cwd = self._argv(("resubmit",), where, "config=", (only,))
        self._run(argv, cwd)
        self._quiesce()
        self._submitted(False, runs)

    @rule(where=st.sampled_from(sorted(PATHS)), only=st.sampled_from(("", "only=b")))
    def cancel(self, where: str, only: str) -> None:
        FIGURES.step("cancel")
        argv, cwd = self._argv(("cancel",), where, "config=", (only,))
        self._run(argv, cwd)
        self._quiesce()

    @rule(
        verb=st.sampled_from(INSPECT),
        where=st.sampled_from(sorted(PATHS)),
        spelling=st.sampled_from(SPELLINGS),
        as_json=st.sampled_from(JSON_FLAGS),
        new=st.booleans(),
    )
    def inspect(self, verb: tuple[str, ...], where: str, spelling: str, as_json: str, new: bool) -> None:
        FIGURES.step(" ".join(verb))
        as_json = "" if verb in DOIT_COMMANDS else as_json
        argv, cwd = self._argv(verb, where, spelling, (as_json, "new=1" if new else ""))
        self._inspected(argv, cwd)

    @rule(as_json=st.sampled_from(JSON_FLAGS))
    def runs(self, as_json: str) -> None:
        FIGURES.step("runs")
        self._inspected(gymbuild_argv("runs", *filter(None, [as_json])), self.root)

    @rule(data=st.data(), max_drop=st.sampled_from(("0", "0.05", "1")))
    def compare(self, data: st.DataObject, max_drop: str) -> None:
        """(d) these jobs write no results: a gate over them has compared nothing, and never passes."""
        FIGURES.step("compare")
        known = [*sorted(p.name for p in run_dirs(self.output)), "gym-job-20260101T000000Z-000000"]
        first = data.draw(st.sampled_from(known), label="A")
        second = data.draw(st.sampled_from(known), label="B")
        argv = gymbuild_argv("compare", f"run={first},{second}", f"max_drop={max_drop}")
        done = self._inspected(argv, self.root)
        assert done.returncode != 0, f"(d) {argv[1:]} passed the gate on nothing:\n{done.stdout}"

    @precondition(lambda self: bool(self._live()))
    @rule(data=st.data(), status=st.sampled_from(("0", "3")))
    def job_ends(self, data: st.DataObject, status: str) -> None:
        """A live job finishes: completed (0) or failed (3)."""
        FIGURES.step("job ends")
        live = sorted((d, g) for d, groups in self._live().items() for g in groups)
        bench_dir, group = data.draw(st.sampled_from(live), label="job")
        gate = self.gates / str(group)
        (self.gates / f".{group}").write_text(status)
        (self.gates / f".{group}").rename(gate)
        wait_until(lambda: group not in self._live().get(bench_dir, set()), f"job {group} ending")

    @rule()
    def delete_workspace(self) -> None:
        FIGURES.step("delete workspace")
        shutil.rmtree(self.state / "workspaces", ignore_errors=True)

    # --- after every step -------------------------------------------------------------------------

    @invariant()
    def one_live_job_per_bench_dir(self) -> None:
        doubles = {d: g for d, g in self._live().items() if len(g) > 1}
        FIGURES.doubles += len(doubles)
        assert not doubles, f"(a) two live jobs of one benchmark: {doubles}"

    @invariant()
    def every_started_job_is_recorded(self) -> None:
        for (run, bench), ids in started_local_jobs(self.output).items():
            manifest = recorded_jobs(Path(run) / "gym-job.json") or {}
            missing = ids - manifest.get(bench, set())
            assert not missing, (
                f"(c) {run}/gym-job.json does not name {bench}'s started job(s) {sorted(missing)}"
            )
            index = recorded_jobs(self.index / f"{Path(run).name}.json") or {}
            missing = ids - index.get(bench, set())
            assert not missing, (
                f"(c) the local index does not name {bench}'s started job(s) {sorted(missing)} of {run}"
            )

    def teardown(self) -> None:
        """Kill every job this sequence started, then forget its files."""
        kill_groups({g for groups in self._live().values() for g in groups})
        shutil.rmtree(self.root, ignore_errors=True)


PromisesModel.TestCase.settings = settings(
    max_examples=15,
    stateful_step_count=10,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def test_promises_hold_over_the_local_executor() -> None:
    try:
        PromisesModel.TestCase().runTest()
    finally:
        print(f"\npromises model (local): {FIGURES.summary()}")
