"""The resume chain's prologue and epilogue, run by real bash, one job after another, as Slurm would.

Each job is the rendered prologue + a stand-in driver (it appends rows to the rollouts and exits with
the status the scenario gives) + the rendered epilogue, with the job's EXIT trap writing its
`.gym_exit-<id>` as body.sh.j2's does. `sacct`, `sbatch` and `scancel` are programs on PATH that
answer from the scenario (a job's end state and elapsed time, or nothing: sacct silent) and record
what they were asked; `sleep` returns at once, so the prologue's polls cost nothing. A successor
runs when its predecessor queued it and did not exit 0 (afternotok).

What is checked is what a user relies on: the chain stops by itself, whatever sacct says, within
max_retries plus the attempts that scored new rows; no attempt continues for free without new rows;
and .gym_attempts / .gym_chain_end say what happened (docs/reliability.md, "Resume chains").
"""

from __future__ import annotations

import copy
import itertools
import os
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import shellcheck
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gymbuild.config.build import build_config
from gymbuild.config.validate import validate
from gymbuild.executors.base import planning_traits
from gymbuild.plan import plan_benchmark
from gymbuild.plan.model import BenchPlan
from gymbuild.plan.shared import plan_shared_job
from gymbuild.render import _ENV, mask_secrets, render_job

FREE = ("TIMEOUT", "PREEMPTED", "NODE_FAIL")  # the ends that may continue without a retry, with rows

BASE: dict[str, Any] = {
    "services": {"policy": {"type": "vllm", "container": "vllm/vllm-openai:v0.10.1", "model": "m"}},
    "compute": {
        "cluster": {
            "type": "slurm",
            "account": "gym",
            "walltime": "00:10:00",
            "node_pools": {"gpu": {"partition": "gpu", "gpus_per_node": 2}},
        }
    },
    "driver": {"policy_model": "policy", "benchmarks": {"b": {"resumable": True, "run": {}}}},
    "job": {"output_path": "/tmp"},
    "otel": {"enabled": False},
}


def chain_plan(run_dir: Path, resumable: Any = True, budget: dict[str, Any] | None = None) -> BenchPlan:
    tree = copy.deepcopy(BASE)
    tree["driver"]["benchmarks"]["b"]["resumable"] = resumable
    if budget is not None:
        tree["driver"]["budget"] = budget
    checked = validate(tree)
    assert not checked.problems, [p.render() for p in checked.problems]
    cfg = build_config(checked.tree)
    return plan_benchmark(cfg, planning_traits(cfg), "b", run_dir=str(run_dir), gym_job_id="gym-job-x")


FAKES = {
    # sacct -n -X -P -j ID -o State,ElapsedRaw,AllocTRES: the scenario's answer for ID, or nothing
    "sacct": """#!/bin/bash
id=
while (($#)); do [[ $1 == -j ]] && id=$2; shift; done
echo "$id" >>"$SIM/sacct.log"
[[ -f $SIM/sacct-$id ]] || exit 1
cat "$SIM/sacct-$id"
""",
    "sbatch": """#!/bin/bash
n=$(($(cat "$SIM/next" 2>/dev/null || echo 100) + 1))
echo "$n" >"$SIM/next"
printf '%s\\n' "$*" >>"$SIM/sbatch.log"
echo "$n;cluster"
""",
    "scancel": """#!/bin/bash
printf '%s\\n' "$*" >>"$SIM/scancel.log"
""",
    "sleep": "#!/bin/bash\n",
}


@dataclass
class Outcome:
    """How one job of the chain ends: sacct's state for it (None: sacct says nothing), the rows its
    driver adds, its exit status, its elapsed seconds, and whether its EXIT trap ran."""

    state: str | None
    rows: int = 0
    status: int = 1
    elapsed: int = 60
    trap: bool = True


@dataclass
class Chain:
    """A chain played out in `bench_dir`: each job's id, prologue exit, decision line."""

    jobs: list[str] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def attempts(self, bench_dir: Path) -> list[list[str]]:
        path = bench_dir / ".gym_attempts"
        return [line.split("\t") for line in path.read_text().splitlines()] if path.exists() else []


class Sim:
    """One bench dir, its fake Slurm, and the rendered job of `plan`."""

    def __init__(self, tmp: Path, plan: BenchPlan) -> None:
        self.sim = tmp / "sim"
        self.bin = tmp / "bin"
        self.sim.mkdir()
        self.bin.mkdir()
        for name, text in FAKES.items():
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)
        self.bench_dir = Path(plan.bench_dir)
        (self.bench_dir / "artifacts").mkdir(parents=True, exist_ok=True)
        module: Any = _ENV.get_template("slurm/resume.sh.j2").module
        lib: Any = _ENV.get_template("lib.sh.j2").module
        self.script = tmp / "job.sh"
        self.script.write_text(
            "#!/bin/bash\nset -uo pipefail\nGYM_JOB_ID=$SLURM_JOB_ID\n"
            'cd "$GYM_BENCH_DIR" || exit 1\n'
            'trap \'printf "%s\\n" "$?" >".gym_exit-$GYM_JOB_ID"\' EXIT\n'
            + lib.port_functions(())
            + lib.batch_functions()
            + module.prologue(plan)
            + "# the driver stand-in\n"
            + 'for ((i = 0; i < DRIVER_ROWS; i++)); do echo "{}" >>artifacts/rollouts.jsonl; done\n'
            + "__gym_status=$DRIVER_STATUS\n"
            + module.epilogue(plan)
            + 'exit "$__gym_status"\n'
        )

    def run(self, job: str, prev: str | None, outcome: Outcome) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "SIM": str(self.sim),
            "SLURM_JOB_ID": job,
            "GYM_BENCH_DIR": str(self.bench_dir),
            "GYM_POLL_SECONDS": "5",
            "DRIVER_ROWS": str(outcome.rows),
            "DRIVER_STATUS": str(outcome.status),
        }
        args = ["bash", str(self.script), *([prev] if prev else [])]
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, check=False)
        # What Slurm's accounting says of this job afterwards, and what a hard kill leaves behind.
        if outcome.state is not None:
            tres = "billing=2,cpu=2,gres/gpu=2,mem=1G,node=1"
            (self.sim / f"sacct-{job}").write_text(f"{outcome.state}|{outcome.elapsed}|{tres}\n")
        if not outcome.trap:
            (self.bench_dir / f".gym_exit-{job}").unlink(missing_ok=True)
        return done

    def successor_of(self, job: str) -> str | None:
        path = self.bench_dir / f".gym_successor-{job}"
        return path.read_text().strip() if path.exists() else None

    def play(self, outcomes: list[Outcome], tail: Outcome, limit: int = 40) -> Chain:
        """Run the head, then every successor queued by a job that did not exit 0; outcomes in
        order, then `tail` for as long as the chain goes on (at most `limit` jobs)."""
        chain = Chain()
        job, prev = "100", None
        (self.sim / "next").write_text("100\n")
        for n in range(limit):
            outcome = outcomes[n] if n < len(outcomes) else tail
            done = self.run(job, prev, outcome)
            chain.jobs.append(job)
            chain.outputs.append(done.stdout + done.stderr)
            chain.statuses.append(done.returncode)
            successor = self.successor_of(job)
            if done.returncode == 0 or successor is None:  # afternotok: no successor after exit 0
                return chain
            job, prev = successor, job
        pytest.fail(f"the chain did not end within {limit} jobs:\n" + "\n".join(chain.outputs[-3:]))


def test_a_chain_whose_sacct_is_silent_stops_by_itself(tmp_path: Path) -> None:
    """The issue's runaway: every job fails with no new row while sacct says nothing."""
    sim = Sim(tmp_path, chain_plan(tmp_path / "run"))
    chain = sim.play([], Outcome(state=None, status=1))
    lines = chain.attempts(sim.bench_dir)
    assert [line[5] for line in lines] == ["head", "retry", "stop"]
    assert lines[1][3] == "UNKNOWN" and "sacct silent; exit status 1" in lines[1][6]
    assert lines[2][6] == "no progress in 2 attempts in a row (jobs 100, 101)"
    end = (sim.bench_dir / ".gym_chain_end").read_text()
    assert end == "stopped: no progress in 2 attempts in a row (jobs 100, 101)\n"
    assert chain.statuses[-1] == 1


@pytest.mark.parametrize(("trap", "polls"), [(True, 2), (False, 12)])
def test_a_silent_sacct_is_waited_for_briefly_once_the_predecessor_left_its_exit_status(
    tmp_path: Path, trap: bool, polls: int
) -> None:
    """10 s of 5 s polls once .gym_exit-<id> shows the predecessor ended; NeMo Gym's 60 s without it."""
    sim = Sim(tmp_path, chain_plan(tmp_path / "run"))
    sim.run("100", None, Outcome(state=None, rows=1, status=143, trap=trap))
    done = sim.run("101", "100", Outcome(state=None))
    assert (sim.sim / "sacct.log").read_text().split() == ["100"] * polls
    exit_status = "exit status 143" if trap else "no exit status"
    assert f"ended UNKNOWN{' (exit status 143)' if trap else ''};" in done.stdout
    assert exit_status in Chain().attempts(sim.bench_dir)[1][6]


def test_without_sacct_the_predecessors_time_comes_from_its_own_files(tmp_path: Path) -> None:
    """From .gym_successor-<id> (written as it started) to .gym_exit-<id> (its end): 200 s here,
    over a 150 s max_walltime; its GPUs, for the budget, are the plan's (2)."""
    run_dir = tmp_path / "run"
    sim = Sim(tmp_path, chain_plan(run_dir, {"max_walltime": "00:02:30"}, budget={"gpu_hours": 9}))
    sim.run("100", None, Outcome(state=None, rows=1, status=143))
    end = (sim.bench_dir / ".gym_exit-100").stat().st_mtime
    os.utime(sim.bench_dir / ".gym_successor-100", (end - 200, end - 200))
    done = sim.run("101", "100", Outcome(state=None))
    assert done.returncode == 0
    assert (sim.bench_dir / ".gym_accumulated_walltime").read_text() == "200\n"
    assert (sim.bench_dir / ".gym_chain_end").read_text() == "stopped: max_walltime (150 s) reached\n"
    assert "used\t100\t200\t2" in (run_dir / ".gym_budget").read_text().splitlines()


def test_a_silent_sacct_with_progress_still_spends_retries(tmp_path: Path) -> None:
    sim = Sim(tmp_path, chain_plan(tmp_path / "run", {"max_retries": 2}))
    chain = sim.play([], Outcome(state=None, rows=3, status=143))
    decisions = [line[5] for line in chain.attempts(sim.bench_dir)]
    assert decisions == ["head", "retry", "retry", "stop"]
    assert (sim.bench_dir / ".gym_chain_end").read_text() == "stopped: max_retries (2) reached\n"


def test_timeouts_with_new_rows_resume_free_until_the_rows_stop(tmp_path: Path) -> None:
    sim = Sim(tmp_path, chain_plan(tmp_path / "run", {"max_retries": 1}))
    timeouts = [Outcome("TIMEOUT", rows=5, status=143)] * 4
    chain = sim.play(timeouts, Outcome("TIMEOUT", rows=0, status=143))
    lines = chain.attempts(sim.bench_dir)
    assert [line[5] for line in lines] == ["head", "resume", "resume", "resume", "resume", "retry", "stop"]
    assert [line[4] for line in lines] == ["0", "5", "10", "15", "20", "20", "20"]
    assert lines[1][6] == "TIMEOUT after 5 new rows"


def test_a_deterministic_failure_is_retried_once(tmp_path: Path) -> None:
    """A driver that exits at once (a config error): one retry, then the chain stops, exit 1."""
    sim = Sim(tmp_path, chain_plan(tmp_path / "run", {"max_retries": 5}))
    chain = sim.play([], Outcome("FAILED", status=1, elapsed=3))
    assert [line[5] for line in chain.attempts(sim.bench_dir)] == ["head", "retry", "stop"]
    assert "driver stand-in" not in chain.outputs[-1]
    assert (sim.bench_dir / ".gym_infra_retries").read_text() == "1\n"


def test_a_completed_job_writes_the_chain_end_and_cancels_its_successor(tmp_path: Path) -> None:
    sim = Sim(tmp_path, chain_plan(tmp_path / "run"))
    (sim.bench_dir / "artifacts" / "rollouts_materialized_inputs.jsonl").write_text("{}\n" * 8)
    chain = sim.play([Outcome("TIMEOUT", rows=5, status=143)], Outcome("COMPLETED", rows=3, status=0))
    assert chain.jobs == ["100", "101"]
    assert (sim.bench_dir / ".gym_chain_end").read_text() == "complete: 8/8 rows\n"
    assert (sim.sim / "scancel.log").read_text().split() == ["102"]


def test_a_cancelled_chain_never_revives_and_a_new_head_clears_the_marker(tmp_path: Path) -> None:
    sim = Sim(tmp_path, chain_plan(tmp_path / "run"))
    sim.run("100", None, Outcome("TIMEOUT", rows=2, status=143))
    (sim.bench_dir / ".gym_chain_cancelled").write_text("")
    done = sim.run("101", "100", Outcome("TIMEOUT", rows=2, status=143))
    assert done.returncode == 0 and "runs nothing" in done.stdout
    assert sim.successor_of("101") is None
    assert (sim.bench_dir / "artifacts" / "rollouts.jsonl").read_text().count("\n") == 2  # no driver
    sim.run("200", None, Outcome("TIMEOUT", rows=0, status=143))  # a resubmit: a new chain
    assert not (sim.bench_dir / ".gym_chain_cancelled").exists()
    assert [line[:2] for line in Chain().attempts(sim.bench_dir)] == [["200", "1"]]


def test_a_requeued_job_queues_its_successor_again_without_a_new_attempt(tmp_path: Path) -> None:
    sim = Sim(tmp_path, chain_plan(tmp_path / "run"))
    sim.run("100", None, Outcome("NODE_FAIL", rows=1, status=143))
    first = sim.successor_of("100")
    sim.run("100", None, Outcome("NODE_FAIL", rows=1, status=143))  # Slurm starts it again
    assert sim.successor_of("100") != first
    assert (sim.sim / "scancel.log").read_text().split() == [first]
    assert len(Chain().attempts(sim.bench_dir)) == 1


def test_max_walltime_ends_a_chain_of_timeouts(tmp_path: Path) -> None:
    sim = Sim(tmp_path, chain_plan(tmp_path / "run", {"max_walltime": "00:02:30"}))
    chain = sim.play([], Outcome("TIMEOUT", rows=4, status=143, elapsed=60))
    # 60 s, 120 s: under the cap; the third job finds 180 s used
    assert [line[5] for line in chain.attempts(sim.bench_dir)] == ["head", "resume", "resume", "stop"]
    assert chain.statuses[-1] == 0
    assert (sim.bench_dir / ".gym_chain_end").read_text() == "stopped: max_walltime (150 s) reached\n"


@pytest.mark.parametrize(
    ("budget", "jobs", "end"),
    [
        ({"attempts": 3}, 3, "stopped: budget spent (3 attempts started of 3)\n"),
        ({"gpu_hours": 0.1}, 2, "stopped: budget spent (0.1 GPU-hours spent of 0.1)\n"),
    ],
)
def test_the_budget_stops_a_chain(tmp_path: Path, budget: dict[str, Any], jobs: int, end: str) -> None:
    """A chain that would resume for ever (new rows each time): 2 GPUs x 90 s is 0.05 GPU-hours a job."""
    sim = Sim(tmp_path, chain_plan(tmp_path / "run", budget=budget))
    chain = sim.play([], Outcome("TIMEOUT", rows=1, status=143, elapsed=90))
    assert [line[5] for line in chain.attempts(sim.bench_dir)] == ["head", *["resume"] * (jobs - 1), "stop"]
    assert (sim.bench_dir / ".gym_chain_end").read_text() == end
    assert chain.statuses[-1] == 1
    ledger = (tmp_path / "run" / ".gym_budget").read_text().splitlines()
    started = [line.split("\t")[1] for line in ledger if line.startswith("start")]
    assert started == chain.jobs[:jobs]


def test_a_shared_job_counts_the_rows_of_all_its_benchmarks(tmp_path: Path) -> None:
    """A job of two benchmarks (benchmarks_per_job) resumes as a whole: its progress is their rows
    together, each in its own bench dir, and its budget ledger is the run dir's."""
    run_dir = tmp_path / "run"
    one = chain_plan(run_dir, budget={"attempts": 9})
    job = plan_shared_job([one, replace(one, bench="c", bench_dir=f"{run_dir}/c")], 1).job
    sim = Sim(tmp_path, job)
    sim.run("100", None, Outcome("TIMEOUT", status=143))
    for bench, rows in (("b", 2), ("c", 3)):
        (run_dir / bench / "artifacts").mkdir(parents=True, exist_ok=True)
        (run_dir / bench / "artifacts" / "rollouts.jsonl").write_text("{}\n" * rows)
    sim.run("101", "100", Outcome("TIMEOUT", status=143))
    lines = Chain().attempts(sim.bench_dir)
    assert [(line[4], line[5], line[6]) for line in lines] == [
        ("0", "head", "head of the chain"),
        ("5", "resume", "TIMEOUT after 5 new rows"),
    ]
    assert (run_dir / ".gym_budget").read_text().count("start\t") == 2


def test_a_job_with_a_budget_passes_bash_n_and_shellcheck(tmp_path: Path) -> None:
    """The examples (the goldens, checked in test_rendered.py) have no budget: this job has one."""
    plan = chain_plan(
        tmp_path / "run", {"max_walltime": "01:00:00"}, budget={"attempts": 4, "gpu_hours": 2.5}
    )
    script = tmp_path / "job.sh"
    script.write_text(render_job(plan, mask_secrets(plan.secrets)).files["job.sh"].text)
    subprocess.run(["bash", "-n", str(script)], check=True)
    result = subprocess.run([shellcheck(), "--shell=bash", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
    assert "-v attempts=4 -v hours=2.5 " in script.read_text()


outcomes = st.builds(
    Outcome,
    state=st.sampled_from([None, *FREE, "FAILED", "OUT_OF_MEMORY", "BOOT_FAIL"]),
    rows=st.sampled_from([0, 0, 1, 7]),
    status=st.sampled_from([1, 143, 137]),
    elapsed=st.integers(0, 600),
    trap=st.booleans(),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seq=st.lists(outcomes, max_size=12), retries=st.integers(0, 3))
def test_every_chain_ends_within_its_bound_and_never_continues_free_without_rows(
    tmp_path: Path, seq: list[Outcome], retries: int
) -> None:
    """Any sequence of ends (sacct's state or silence, new rows or none, trap or hard kill), then a
    driver that fails at once for ever: the chain ends, and within 1 + max_retries + the attempts
    that scored new rows; each continuation without a retry followed new rows after TIMEOUT,
    PREEMPTED or NODE_FAIL; and the stop says why."""
    base = Path(tempfile.mkdtemp(dir=tmp_path))
    sim = Sim(base, chain_plan(base / "run", {"max_retries": retries}))
    chain = sim.play(seq, Outcome("FAILED", rows=0, status=1))
    lines = chain.attempts(sim.bench_dir)
    assert [line[0] for line in lines] == chain.jobs
    assert all(len(line) == 7 for line in lines)
    rows = [int(line[4]) for line in lines]
    progressed = sum(1 for a, b in itertools.pairwise(rows) if b > a)
    assert len(chain.jobs) <= 1 + retries + progressed + 1  # + the last job, which stops or completes
    assert sum(1 for line in lines if line[5] == "retry") <= retries
    for before, line in itertools.pairwise(lines):
        if line[5] == "resume":
            assert line[3] in FREE and int(line[4]) > int(before[4]), line
        if line[3] == "UNKNOWN":
            assert line[5] in ("retry", "stop"), line
    assert lines[-1][5] == "stop"
    assert (sim.bench_dir / ".gym_chain_end").read_text().startswith("stopped: ")
    for i in range(len(lines) - 2):  # two attempts in a row without new rows: the next one stops
        if rows[i + 1] <= rows[i] and rows[i + 2] <= rows[i + 1]:
            assert lines[i + 2][5] == "stop", lines
