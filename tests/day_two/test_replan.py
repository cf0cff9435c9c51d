"""resubmit's plan (gymbuild/day_two/replan.py): the pure function from a look's states and gym's row
counts to what a resubmit queues and why, searched over states x counts; and how a config makes a
re-queued job (continues, starts again, its GPUs and walltime), from real config files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e_helpers import slurm_config, write_config
from hypothesis import given, note, settings
from hypothesis import strategies as st

from gymbuild.config import load_config
from gymbuild.day_two import replan
from gymbuild.day_two.replan import CONTINUE, FRESH, NOTHING, HowItRuns
from gymbuild.executors.local import LIVE as LOCAL_LIVE
from gymbuild.executors.local import RETRYABLE as LOCAL_RETRYABLE
from gymbuild.executors.slurm import LIVE, RETRYABLE
from gymbuild.executors.states import NOT_RUN, WAITING_IN_JOB, BenchStatus
from gymbuild.state.rollouts import Progress

ID = "gym-job-20260101T000000Z-abcdef"
GPU_JOB = HowItRuns(replan.RESUMABLE, gpus=4, walltime_seconds=2 * 3600)


def row(bench: str, state: str, progress: Progress | None = None, job_id: str | None = "41") -> BenchStatus:
    return BenchStatus(bench, job_id, state, None, None, None, None, progress=progress)


def one(
    state: str, progress: Progress | None, how: HowItRuns = GPU_JOB, only: tuple[str, ...] = ()
) -> replan.Step:
    (step,) = replan.plan(ID, [row("b", state, progress)], only, RETRYABLE, {"b": how}, LIVE).steps
    return step


def test_a_job_that_failed_after_writing_every_row_is_complete_and_not_queued() -> None:
    step = one("FAILED", Progress(40, 40, 3))
    assert (step.action, step.complete, step.bound()) == (NOTHING, True, 0.0)
    assert step.why == "complete: every row is scored, so not queued again though its job ended FAILED"
    timeout = one("TIMEOUT", Progress(40, 40))
    assert timeout.action == NOTHING and timeout.why.endswith("its job ended TIMEOUT")
    (line,) = replan.lines(replan.Plan(ID, (step,)))[1:]
    assert line == "  b: FAILED (job 41), rows 40/40 scored, 3 failed -> nothing: " + step.why


def test_a_timeout_part_way_continues_from_its_rows_and_says_what_it_may_cost() -> None:
    step = one("TIMEOUT", Progress(31, 40, 2))
    assert step.action == CONTINUE
    assert step.why == (
        "continues from its 31 scored rows (+resume_from_cache): 9 left to run "
        "(2 failed attempt(s) among what is asked again)"
    )
    assert step.gpu_hours == 8.0  # 2 h walltime x 4 GPUs: an upper bound
    (line,) = replan.lines(replan.Plan(ID, (step,)))[1:]
    assert line == (
        "  b: TIMEOUT (job 41), rows 31/40 scored, 2 failed -> continue: "
        + step.why
        + "; at most 8 GPU-hours per job (2h00m walltime x 4 GPUs)"
    )


def test_what_a_fresh_start_does_to_the_rows_written_is_said() -> None:
    never = HowItRuns(replan.NEVER, gpus=1, walltime_seconds=3600)
    step = one("FAILED", Progress(3, 10), never)
    assert step.action == FRESH
    assert (
        step.why
        == "run.resume_from_cache is false: gym removes the 3 rows written and starts from the first row"
    )
    no_inputs = one("FAILED", Progress(3, None), HowItRuns(replan.WHEN_WRITTEN))
    assert (
        no_inputs.action == FRESH
        and "materialized inputs are missing: gym removes the 3 rows" in no_inputs.why
    )
    assert one("FAILED", None).why == "no row scored yet: starts from the first row"
    command = one("FAILED", Progress(2, 5), HowItRuns(replan.COMMAND))
    assert command.action == FRESH and "its command runs again from the start" in command.why
    assert one("FAILED", Progress(2, 5), HowItRuns(replan.WHEN_WRITTEN)).action == CONTINUE


def test_what_is_not_queued_says_why_by_its_state() -> None:
    assert one("COMPLETED", Progress(5, 5)).why == "complete: its job completed"
    assert one("RUNNING", Progress(5, 5)).why == "complete (its job: RUNNING)"
    assert one("COMPLETED", None).why == "its job completed"
    assert one("RUNNING", Progress(2, 5)).why == "its job is RUNNING: still live"
    assert one("PENDING", None).why == "its job is PENDING: still live"
    assert one("CANCELLED", Progress(2, 5)).why == "cancelled: re-queued only when named (only=b)"
    assert one("CANCELLED", Progress(2, 5), only=("b",)).action == CONTINUE
    assert one("UNKNOWN", None).action == NOTHING
    assert one(NOT_RUN, None).action == FRESH  # its shared job ended before it started


def test_a_chain_is_bounded_by_its_max_walltime_and_retries_and_no_walltime_is_no_bound() -> None:
    """A chain's jobs resume after a timeout while under max_walltime (the last may then run a whole
    walltime) and after a failure up to max_retries times (parts.sh.j2): 2 GPUs x (6 h + 3 x 1 h)."""
    chain = HowItRuns(replan.RESUMABLE, 2, 3600, chain=True, chain_walltime_seconds=6 * 3600, chain_retries=2)
    step = one("TIMEOUT", Progress(1, 9), chain)
    assert (step.gpu_hours, step.chain_gpu_hours, step.bound()) == (2.0, 18.0, 18.0)
    assert "the head of a new resume chain" in step.why
    assert replan.lines(replan.Plan(ID, (step,)))[1].endswith(
        "; at most 2 GPU-hours per job (1h00m walltime x 2 GPUs), its chain at most 18 "
        "(max_walltime 6h00m + 3 x walltime)"
    )
    endless = one(
        "TIMEOUT", Progress(1, 9), HowItRuns(replan.RESUMABLE, gpus=2, walltime_seconds=3600, chain=True)
    )
    assert endless.bound() is None
    unlimited = one("FAILED", None, HowItRuns(replan.RESUMABLE, gpus=8))
    plan = replan.Plan(ID, (step, unlimited))
    assert plan.gpu_hours() is None
    assert replan.lines(plan)[0] == f"plan for {ID}: queue 2 of 2 benchmark(s), cost unbounded (see below)"
    assert replan.lines(plan)[2].endswith("; no walltime limit, so no bound on its cost")
    assert replan.Plan(ID, (step,)).gpu_hours() == 18.0
    no_gpu = one("FAILED", None, HowItRuns(replan.RESUMABLE, gpus=0))
    assert (no_gpu.bound(), replan.lines(replan.Plan(ID, (no_gpu,)))[1][-19:]) == (0.0, "; no GPUs asked for")


def test_nothing_to_queue_names_the_complete_and_the_cancelled() -> None:
    rows = [row("a", "FAILED", Progress(4, 4)), row("c", "CANCELLED", Progress(1, 4)), row("d", "COMPLETED")]
    plan = replan.plan(ID, rows, (), RETRYABLE, {}, LIVE)
    assert plan.queued == []
    assert replan.nothing_message(plan, ID, "eval.yaml") == (
        f"nothing to resubmit: no benchmark of {ID} ended in a retryable state with rows left to score; "
        "complete whatever their job's state: a; cancelled: c, re-queued only when named: "
        "gymbuild resubmit config=eval.yaml only=c"
    )


# --- searched: a complete benchmark is never queued, whatever its job's state ---------------------

STATES = sorted(
    RETRYABLE
    | LIVE
    | LOCAL_RETRYABLE
    | LOCAL_LIVE
    | {"COMPLETED", "CANCELLED", "UNKNOWN", NOT_RUN, "NOT QUEUED", WAITING_IN_JOB, "DEADLINE", "REVOKED"}
)


@st.composite
def progresses(draw: st.DrawFn) -> Progress | None:
    """gym's counts, with the boundaries a search must reach: every row scored, one short, none."""
    if draw(st.booleans()) and draw(st.booleans()):
        return None
    expected = draw(st.none() | st.integers(0, 50))
    near = [0, expected, max(0, expected - 1), expected + 1] if expected is not None else [0]
    done = draw(st.sampled_from(near) | st.integers(0, 60))
    return Progress(done, expected, draw(st.integers(0, 5)))


hows = st.builds(
    HowItRuns,
    st.sampled_from(
        [replan.RESUMABLE, replan.WHEN_WRITTEN, replan.NEVER, replan.COMMAND, replan.NOT_IN_CONFIG]
    ),
    st.integers(0, 8),
    st.none() | st.integers(60, 48 * 3600),
    st.booleans(),
    st.none() | st.integers(60, 96 * 3600),
)


@settings(max_examples=400, deadline=None)
@given(
    looked=st.lists(st.tuples(st.sampled_from(STATES), progresses(), hows), min_size=1, max_size=6),
    only_mask=st.lists(st.booleans(), min_size=6, max_size=6),
    slurm=st.booleans(),
)
def test_a_complete_benchmark_is_never_planned_for_queueing(
    looked: list[tuple[str, Progress | None, HowItRuns]], only_mask: list[bool], slurm: bool
) -> None:
    names = [f"b{i}" for i in range(len(looked))]
    rows = [row(n, state, progress) for n, (state, progress, _) in zip(names, looked, strict=True)]
    only = tuple(n for n, keep in zip(names, only_mask, strict=False) if keep)
    how = {n: h for n, (_, _, h) in zip(names, looked, strict=True)}
    retryable, live = (RETRYABLE, LIVE) if slurm else (LOCAL_RETRYABLE, LOCAL_LIVE)
    plan = replan.plan(ID, rows, only, retryable, how, live)
    note(replan.lines(plan))
    assert [s.benchmark for s in plan.steps] == [n for n in names if not only or n in only]
    for step in plan.steps:
        p = step.progress
        complete = p is not None and p.expected is not None and p.expected > 0 and p.done >= p.expected
        eligible = (
            step.state in retryable
            or step.state == NOT_RUN
            or (step.state == "CANCELLED" and step.benchmark in only)
        )
        assert (step.action != NOTHING) == (eligible and not complete), step
        # a continuation has rows to continue from and a command never continues
        if step.action == CONTINUE:
            assert (
                p is not None
                and p.done > 0
                and p.expected
                and step.how.resumes in (replan.RESUMABLE, replan.WHEN_WRITTEN)
            )
        assert step.why and "\n" not in step.why
    assert plan.queued == [s.benchmark for s in plan.steps if s.action != NOTHING]
    doc = replan.as_json(plan)
    assert doc["queued"] == plan.queued
    assert [b["queue"] for b in doc["benchmarks"]] == [s.action for s in plan.steps]  # type: ignore[union-attr]
    assert len(replan.lines(plan)) == 1 + len(plan.steps)


# --- how the config makes a re-queued job -------------------------------------------------------


def how_of(
    tmp_path: Path, benchmarks: dict[str, Any], *, scheduled: bool = True, **compute: Any
) -> dict[str, HowItRuns]:
    pools = {"gpu": {"partition": "gpu", "nodes": 2, "gpus_per_node": 4}}
    config = slurm_config(tmp_path / "runs", benchmarks, pools=pools, **compute)
    resolved = load_config(write_config(tmp_path, config), environ={})
    return replan.how_it_runs(resolved.config, scheduled=scheduled)


def test_the_config_says_how_each_benchmark_continues_and_what_its_job_holds(tmp_path: Path) -> None:
    how = how_of(
        tmp_path,
        {
            "chain": {
                "run": {"config_paths": ["x.yaml"]},
                "resumable": {"max_retries": 2, "max_walltime": "06:00:00"},
            },
            "plain": {"run": {"config_paths": ["x.yaml"]}},
            "restart": {"run": {"config_paths": ["x.yaml"], "resume_from_cache": False}},
            "script": {"command": "echo hi"},
            "own_false": {
                "run": {"config_paths": ["x.yaml"], "resume_from_cache": False},
                "resumable": {"max_retries": 1},
            },
            "own_true": {"run": {"config_paths": ["x.yaml"], "resume_from_cache": True}},
        },
        walltime="01:30:00",
    )
    assert how["chain"] == HowItRuns(
        replan.RESUMABLE, 8, 5400, chain=True, chain_walltime_seconds=6 * 3600, chain_retries=2
    )
    assert how["plain"] == HowItRuns(replan.WHEN_WRITTEN, 8, 5400)
    assert how["restart"] == HowItRuns(replan.NEVER, 8, 5400)
    assert how["script"] == HowItRuns(replan.COMMAND, 8, 5400)
    # the user's own resume_from_cache is what gym gets, resumable or not (plan/driver.py)
    assert (how["own_false"].resumes, how["own_false"].chain, how["own_false"].chain_retries) == (
        replan.NEVER,
        True,
        1,
    )
    assert how["own_true"] == HowItRuns(replan.RESUMABLE, 8, 5400)
    local = how_of(
        tmp_path / "l", {"chain": {"run": {"config_paths": ["x.yaml"]}, "resumable": True}}, scheduled=False
    )
    assert (local["chain"].resumes, local["chain"].chain) == (
        replan.RESUMABLE,
        False,
    )  # no chain off a scheduler


def test_a_bound_is_rounded_up_never_down() -> None:
    """10 minutes x 2 GPUs is 0.333... GPU-hours: shown as 0.34, since 0.33 would be below the bound."""
    step = one("FAILED", None, HowItRuns(replan.WHEN_WRITTEN, gpus=2, walltime_seconds=600))
    assert replan.lines(replan.Plan(ID, (step,)))[0].endswith(
        "at most 0.34 GPU-hours (an upper bound: walltime x GPUs of each job)"
    )
