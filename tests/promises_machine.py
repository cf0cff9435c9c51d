"""The state machine both model tests of DESIGN.md's promises play
(tests/reliability/test_promises_model.py on the local executor,
tests/reliability/test_promises_cluster.py on the test Slurm cluster): the steps a user takes with
one config file, and the promises checked after each (docstring of tests/reliability/test_promises_model.py).
The executor's side, how live and started jobs are seen, is each test's subclass.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from e2e_helpers import gymbuild_argv, user_env, with_default_signals, write_config
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from promises_helpers import (
    INTERRUPT_STATUS,
    Figures,
    Snapshot,
    one_json_document,
    recorded_jobs,
    run_dirs,
    signal_while_alive,
    wait_until,
)

# Where the config is named from: (working directory under the test's root, the path as typed).
PATHS = {
    "absolute": ("", "{root}/proj/submit.yaml"),
    "relative": ("proj", "submit.yaml"),
    "dotdot": ("proj/sub", "../submit.yaml"),
    "symlink": ("", "{root}/link.yaml"),
}
SPELLINGS = ("config=", "-c", "--config")
JSON_FLAGS = ("", "json=1", "--json")
# doit's own commands take no json=1 (the promise of one JSON document is gymbuild's verbs').
DOIT_COMMANDS = (("list", "--status"), ("info", "submit"))
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def gate_command(gates: Path) -> str:
    """A benchmark that says it is waiting (`waiting-<job id>` in its bench dir), then waits for the
    test's gate file `gates/<job id>` and exits with the status written there."""
    gate = f"{gates}/$GYM_JOB_ID"
    return (
        f'echo "$GYM_JOB_ID" > "$NEMO_GYM_BENCH_DIR/waiting-$GYM_JOB_ID"; '
        f'while [ ! -e "{gate}" ]; do sleep 0.05; done; exit "$(cat "{gate}")"'
    )


def derived(path: Path) -> bool:
    """What a dry run may write, being no state: caches of derived data (the staged tree and the
    stamps that say what it was rendered from), a lock's holder, and the config's draft: the corner
    where render and resolve stage (workspace.Workspace.as_draft), with its own doit database and a
    provisional id that no submit reads (a submit mints its own when it is submitted). The config
    and template caches live in XDG_CACHE_HOME/gymbuild, which no snapshot reads."""
    parts = path.parts
    if "workspaces" not in parts:
        return False
    rest = parts[parts.index("workspaces") + 2 :]
    if "draft" in (rest[:1] if rest[:1] != ("cells",) else rest[2:3]):
        return True
    return rest[:1] in (("stage",), ("script-code",), ("lock",)) or rest in (
        ("stamps", "stage.json"),
        ("stamps", "resolved"),
    )


class PromisesMachine(RuleBasedStateMachine):
    """One user, one config of gated `command` benchmarks; the executor's side is the subclass's:
    `config_for` (the compute), `live` (job ids alive, by bench dir), `started` (every job that
    started, by run dir and benchmark), `settled` (no job half-started or half-stopped), `stop_all`.

    `output` and `gates` are where the jobs can see them (the subclass's `shared_dir`); the config,
    the symlink to it and HOME are in a directory of the test's own."""

    BENCHES: tuple[str, ...] = ("a", "b")
    INSPECT: tuple[tuple[str, ...], ...] = ()
    # Moments are events, never times: gymbuild holds the workspace's lock, or its Nth job started.
    MOMENTS: tuple[str, ...] = ("lock", "job1")
    SETTLE_SECONDS: float = 60
    figures: Figures

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="gym-promises-"))
        shared = self.shared_dir()
        self.home, self.gates, self.output = self.root / "home", shared / "gates", shared / "runs"
        for d in (self.home, self.gates, self.root / "proj" / "sub"):
            d.mkdir(parents=True, exist_ok=True)
        benches = {b: {"command": gate_command(self.gates)} for b in self.BENCHES}
        self.config = write_config(self.root / "proj", self.config_for(benches))
        (self.root / "link.yaml").symlink_to(self.config)
        self.env = user_env(self.home)
        self.state = self.home / "xdg-state" / "gymbuild"
        self.index = self.home / "xdg-cache" / "nemo-gym" / "jobs"
        self.submitted = False  # no submit of any kind yet
        self.figures.sequences += 1

    # the executor's side
    def shared_dir(self) -> Path:
        return self.root

    def config_for(self, benchmarks: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def live(self) -> dict[str, set[str]]:
        raise NotImplementedError

    def started(self) -> dict[tuple[str, str], set[str]]:
        raise NotImplementedError

    def settled(self) -> bool:
        raise NotImplementedError

    def stop_all(self) -> None:
        raise NotImplementedError

    # running gymbuild
    def argv(
        self, verb: tuple[str, ...], where: str, spelling: str, extra: Iterable[str]
    ) -> tuple[list[str], Path]:
        cwd, typed = PATHS[where]
        path = typed.format(root=self.root)
        named = [f"config={path}"] if spelling == "config=" else [spelling, path]
        return gymbuild_argv(*verb, *named, *filter(None, extra)), self.root / cwd

    def run(self, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            argv, cwd=cwd, env=self.env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
        )
        assert "Traceback" not in done.stderr, f"{argv[1:]} showed a traceback:\n{done.stderr}"
        self.check_json(argv, done)
        return done

    @staticmethod
    def check_json(argv: list[str], done: subprocess.CompletedProcess[str]) -> None:
        """(e) json=1: one JSON document on stdout (or, after a failure, nothing)."""
        if "json=1" not in argv and "--json" not in argv:
            return
        if done.returncode == 0 or done.stdout.strip():
            assert one_json_document(done.stdout), (
                f"(e) {argv[1:]} exited {done.returncode} with json=1 and printed not exactly one JSON "
                f"document on stdout:\n{done.stdout[:2000]}"
            )

    def quiesce(self) -> None:
        """Wait until every job has started or stopped for good, so what the next step sees is
        gymbuild's doing, not a job still on its way."""
        wait_until(
            self.settled, f"every live job under {self.output} waiting at its gate", self.SETTLE_SECONDS
        )

    def snapshot(self) -> Snapshot:
        return Snapshot.take(
            {
                "jobs": [self.output],
                "records": [self.index, self.state / "runs", self.state / "claims"],
                "workspace": [self.state / "workspaces"],
            },
            skip=derived,
        )

    def inspected(self, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        """(b) run a verb that must act on nothing: no job started or stopped, no state changed."""
        live, before = self.live(), self.snapshot()
        done = self.run(argv, cwd)
        after = self.snapshot()
        assert self.live() == live, f"(b) {argv[1:]} started or stopped a job: {live} -> {self.live()}"
        changed = before.changes(after, "jobs")
        assert not changed, f"(b) {argv[1:]} changed a run dir:\n" + "\n".join(changed)
        changed = before.changes(after, "records")
        assert not changed, f"(b) {argv[1:]} changed the local records:\n" + "\n".join(changed)
        workspace = before.changes(after, "workspace")
        doit_db = [c for c in workspace if c.endswith("/doit-db.json")]
        assert not doit_db, f"(b) {argv[1:]} wrote doit's database:\n" + "\n".join(doit_db)
        changed = [c for c in workspace if c not in doit_db]
        assert not changed, f"(b) {argv[1:]} changed the workspace:\n" + "\n".join(changed)
        return done

    def one_submission(self, new: bool, runs_before: int) -> None:
        """(a) a submit without new=1 starts no second submission of a config that has one."""
        allowed = runs_before + 1 if new or runs_before == 0 else runs_before
        found = run_dirs(self.output)
        if len(found) > allowed:
            self.figures.doubles += 1
        assert len(found) <= allowed, (
            f"(a) a submit{' new=1' if new else ''} made a submission it was not asked for beside the "
            f"{runs_before} there, so its benchmarks are queued twice: {[p.name for p in found]}"
        )

    # the steps
    @initialize()
    def start(self) -> None:
        self.figures.step("start")

    @rule(
        where=st.sampled_from(sorted(PATHS)),
        spelling=st.sampled_from(SPELLINGS),
        new=st.booleans(),
        only=st.sampled_from(("", "only=a")),
        as_json=st.sampled_from(JSON_FLAGS),
    )
    def submit(self, where: str, spelling: str, new: bool, only: str, as_json: str) -> None:
        self.figures.step("submit")
        runs = len(run_dirs(self.output))
        done = self.run(*self.argv(("submit",), where, spelling, ("new=1" if new else "", only, as_json)))
        self.one_submission(new, runs)
        self.quiesce()
        if not self.submitted:  # the model's ground: the first submit of a config queues its jobs
            asked = 1 if only else len(self.BENCHES)
            assert done.returncode == 0, f"the first submit failed:\n{done.stdout}\n{done.stderr}"
            assert sum(map(len, self.live().values())) == asked, (
                f"the first submit queued no jobs: {done.stdout}"
            )
        self.submitted = True

    @rule(
        data=st.data(), where=st.sampled_from(sorted(PATHS)), sig=st.sampled_from(SIGNALS), new=st.booleans()
    )
    def interrupted_submit(self, data: st.DataObject, where: str, sig: signal.Signals, new: bool) -> None:
        """(e) a submit interrupted at a moment picked by an event: the workspace's lock taken by it,
        or the Nth job of it started."""
        moment = data.draw(st.sampled_from(self.MOMENTS), label="moment")
        self.figures.step("interrupted submit")
        self.submitted = True
        self.figures.interrupts_tried += 1
        runs = len(run_dirs(self.output))
        started = sum(len(ids) for ids in self.started().values())
        argv, cwd = self.argv(("submit",), where, "config=", ("new=1" if new else "",))
        proc = subprocess.Popen(
            with_default_signals(argv),  # the signal tested is not one this test run ignores
            cwd=cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own group: a terminal's ^C or hangup reaches all of it
        )

        def reached() -> bool:
            if proc.poll() is not None:
                return True
            if moment == "lock":
                locks = (self.state / "workspaces").glob("*/lock")
                return any(f"pid {proc.pid} " in lock.read_text(errors="replace") for lock in locks)
            now = sum(len(ids) for ids in self.started().values())
            return now - started >= int(moment.removeprefix("job"))

        try:
            wait_until(reached, f"submit reaching {moment}", timeout=300, poll=0.005)
            # SIGTERM to gymbuild alone, as `kill` does; ^C or a hangup to the whole foreground group,
            # as a terminal does. Only a signal that reached a gymbuild not yet exiting is judged.
            delivered = signal_while_alive(proc, sig, group=sig != signal.SIGTERM)
            if delivered:
                self.figures.interrupts_delivered += 1
            _, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert "Traceback" not in err, f"an interrupted submit showed a traceback:\n{err}"
        want = INTERRUPT_STATUS[sig]
        assert not delivered or proc.returncode in (want, -sig), (
            f"(e) submit interrupted by {sig.name} at {moment} exited {proc.returncode}, not {want}:\n{err}"
        )
        self.one_submission(new, runs)
        self.quiesce()

    @rule(where=st.sampled_from(sorted(PATHS)), only=st.sampled_from(("", "only=b")))
    def cancel(self, where: str, only: str) -> None:
        self.figures.step("cancel")
        self.run(*self.argv(("cancel",), where, "config=", (only,)))
        self.quiesce()

    @rule(
        data=st.data(),
        where=st.sampled_from(sorted(PATHS)),
        spelling=st.sampled_from(SPELLINGS),
        as_json=st.sampled_from(JSON_FLAGS),
        new=st.booleans(),
    )
    def inspect(self, data: st.DataObject, where: str, spelling: str, as_json: str, new: bool) -> None:
        verb = data.draw(st.sampled_from(self.INSPECT), label="verb")
        self.figures.step(" ".join(verb))
        as_json = "" if verb in DOIT_COMMANDS else as_json
        self.inspected(*self.argv(verb, where, spelling, (as_json, "new=1" if new else "")))

    @rule(which=st.integers(0, 3), status=st.sampled_from(("0", "3")))
    def job_ends(self, which: int, status: str) -> None:
        """A live job finishes: completed (0) or failed (3); the `which`-th live one, counted round,
        so what is drawn never depends on what is running (a replay draws the same)."""
        live = sorted((d, j) for d, ids in self.live().items() for j in ids)
        if not live:
            return
        self.figures.step("job ends")
        bench_dir, job = live[which % len(live)]
        (self.gates / f".{job}").write_text(status)
        (self.gates / f".{job}").rename(self.gates / job)
        wait_until(lambda: job not in self.live().get(bench_dir, set()), f"job {job} ending", 120)
        self.quiesce()

    @rule()
    def delete_workspace(self) -> None:
        self.figures.step("delete workspace")
        shutil.rmtree(self.state / "workspaces", ignore_errors=True)

    # after every step
    @invariant()
    def one_live_job_per_bench_dir(self) -> None:
        doubles = {d: ids for d, ids in self.live().items() if len(ids) > 1}
        self.figures.doubles += len(doubles)
        assert not doubles, f"(a) two live jobs of one benchmark: {doubles}"

    @invariant()
    def every_started_job_is_recorded(self) -> None:
        for (run, bench), ids in self.started().items():
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
        """Stop every job this sequence started, then forget its files."""
        self.stop_all()
        shutil.rmtree(self.root, ignore_errors=True)


def machine_settings(max_examples: int, steps: int) -> settings:
    """Bounded, and the same sequences on every machine: derandomized, no example database.
    GYMBUILD_PROMISES_EXAMPLES raises the count for a longer search by hand (docs/reliability.md)."""
    return settings(
        max_examples=int(os.environ.get("GYMBUILD_PROMISES_EXAMPLES", max_examples)),
        stateful_step_count=steps,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
