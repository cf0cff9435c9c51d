"""Reading a resume chain (executors/chain.py): the `.gym_attempts` lines, and which job is a chain's
newest whatever its bookkeeping says. Pure: the files' texts and squeue's and sacct's answers are
given as the status round trip returns them (slurm._Seen reads them as `states` does)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from gymbuild.executors import chain
from gymbuild.executors.slurm import _Seen

GOOD = "988\t2\t987\tTIMEOUT\t31\tresume\tTIMEOUT after 31 new rows"


def test_attempt_lines_are_read_and_garbage_is_skipped() -> None:
    text = "\n".join(
        [
            "987\t1\t-\t-\t0\thead\tsubmitted",
            GOOD,
            "989\t3\t988\tUNKNOWN\t31\tretry",  # a field short: a line cut by a killed job
            "x89\t3\t988\tFAILED\t31\tretry\tno",  # not a job id
            "989\t3\t988\tFAILED\tmany\tretry\tno",  # rows not a count
            "989\t0\t988\tFAILED\t3\tretry\tno",  # no attempt 0
            "989\t3\t988\tFAILED\t3\tmaybe\tno",  # no such decision
            "989\t3\t$(rm -rf)\tFAILED\t3\tretry\tno",  # a predecessor that is no id
            "12_3\t4\t989\tFAILED\t40\tstop\tstopped: max_retries (3) reached",
            "",
        ]
    )
    attempts = chain.parse_attempts(text)
    assert [(a.job_id, a.n, a.predecessor, a.decision) for a in attempts] == [
        ("987", 1, None, "head"),
        ("988", 2, "987", "resume"),
        ("12_3", 4, "989", "stop"),
    ]
    assert attempts[1] == chain.Attempt("988", 2, "987", "TIMEOUT", 31, "resume", "TIMEOUT after 31 new rows")
    assert attempts[0].predecessor_state is None


@given(st.text())
def test_any_text_reads_as_attempts_or_nothing(text: str) -> None:
    for attempt in chain.parse_attempts(text + "\n" + GOOD):
        assert chain.job_id(attempt.job_id) and attempt.n >= 1 and attempt.decision in chain.DECISIONS
    assert chain.parse_attempts(text + "\n" + GOOD)[-1].job_id == "988"


# --- the newest job, over every combination of a chain's jobs and its files -----------------------

DEAD = ("FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "CANCELLED", "COMPLETED", "OUT_OF_MEMORY")
BENCH = "/runs/gym-job-1/bench"


@dataclass
class World:
    """A chain of jobs 100, 101, ... of which the first `started` have started (each queued the next
    when it started); the files written as far as they got, and squeue's and sacct's views."""

    jobs: list[str]
    started: int
    live: dict[str, str]  # job -> squeue's live state (the user's jobs, with their dirs)
    accounted: dict[str, str]  # job -> sacct's state (accounting may know none)
    chain_file: list[str]
    successor_files: dict[str, str]
    attempts: list[str]

    def seen(self) -> _Seen:
        squeue = "".join(f"{j}\t{s}\t0:01\t\t{j}\t{BENCH}\n" for j, s in self.live.items())
        sacct = "".join(f"{j}\t{s}\t0:0\t00:00:01\tnode1\t{j}\n" for j, s in self.accounted.items())
        return _Seen.read(squeue, sacct)

    def files(self) -> dict[str, str]:
        files = {
            chain.CHAIN: "".join(f"{j}\n" for j in self.chain_file),
            chain.ATTEMPTS: "".join(f"{line}\n" for line in self.attempts),
        }
        files.update({f"{chain.SUCCESSOR}{j}": f"{s}\n" for j, s in self.successor_files.items()})
        return files


@st.composite
def worlds(draw: st.DrawFn) -> World:
    started = draw(st.integers(1, 5))
    # The last started job may have queued a successor that has not started (it waits its turn).
    queued = draw(st.booleans())
    jobs = [str(100 + i) for i in range(started + queued)]
    live: dict[str, str] = {}
    accounted: dict[str, str] = {}
    last = jobs[started - 1]
    last_live = draw(st.booleans())
    for job in jobs[: started - 1]:  # every earlier one ended (its successor started)
        accounted[job] = draw(st.sampled_from(DEAD[:4]))
    if last_live:
        live[last] = draw(st.sampled_from(["RUNNING", "COMPLETING", "CONFIGURING"]))
    else:
        accounted[last] = draw(st.sampled_from(DEAD))
    if queued:
        successor = jobs[-1]
        if draw(st.booleans()) or (not last_live and accounted[last] != "COMPLETED"):
            live[successor] = "PENDING"  # waits for its predecessor's end, or its turn
        else:
            accounted[successor] = "CANCELLED"  # its predecessor completed and cancelled it
    # sacct may be silent about any job (accounting down, or lagging)
    for job in list(accounted):
        if draw(st.booleans()) and draw(st.booleans()):
            del accounted[job]
    # The bookkeeping, each part behind by any amount: the chain file a prefix of the started jobs,
    # any successor file missing (a job killed right after its sbatch), any attempt line missing.
    chain_file = jobs[: draw(st.integers(0, started))]
    successor_files = {
        jobs[i]: jobs[i + 1] for i in range(len(jobs) - 1) if i < started and draw(st.booleans())
    }
    attempts = []
    for i, job in enumerate(jobs[:started]):
        if draw(st.booleans()):
            pred = jobs[i - 1] if i else "-"
            attempts.append(
                f"{job}\t{i + 1}\t{pred}\t{'-' if not i else 'UNKNOWN'}\t0\t{'retry' if i else 'head'}\tr"
            )
    if not live and not queued and draw(st.booleans()):
        # The chain stopped itself: a last successor whose prologue decided `stop` and ran nothing
        # (COMPLETED); the files may name it anywhere a job of the chain is named.
        stopper = str(100 + started)
        accounted[stopper] = "COMPLETED"
        attempts.append(f"{stopper}\t{started + 1}\t{last}\tFAILED\t0\tstop\tmax_retries reached")
        if draw(st.booleans()):
            successor_files[last] = stopper
        if draw(st.booleans()) and len(chain_file) == started:
            chain_file.append(stopper)
    return World(jobs, started, live, accounted, chain_file, successor_files, attempts)


@settings(max_examples=400)
@given(worlds())
def test_status_never_shows_a_dead_job_while_one_of_its_chain_is_live(world: World) -> None:
    state = world.seen().newest("100", world.files(), BENCH, None)
    if world.live:
        assert state.state in world.live.values(), (state, world)
        running = [j for j, s in world.live.items() if s != "PENDING"]
        assert state.job_id == (running or list(world.live))[-1]  # the newest that runs, else waits
    else:
        # Nothing live: the newest job the files say joined the chain.
        # (a job writes its successor file when it starts)
        ran = [a.split("\t")[0] for a in world.attempts if "\tstop\t" not in a]
        ran += [a.split("\t")[2] for a in world.attempts if a.split("\t")[2] != "-"]  # its predecessor
        joined = [world.jobs[0], *(j for j in world.chain_file if j in world.jobs), *ran]
        assert state.job_id == max([*joined, *world.successor_files], key=int), (state, world)
    # Its attempt: exact while the files or the queue know every job before it; never more.
    attempt = world.jobs.index(state.job_id) + 1
    known = {world.jobs[0], *world.chain_file, *world.successor_files, *world.successor_files.values()}
    known |= {a.split("\t")[0] for a in world.attempts} | set(world.live)
    own_line = any(a.startswith(f"{state.job_id}\t") for a in world.attempts)
    if state.chain is not None and (own_line or set(world.jobs[:attempt]) <= known):
        assert state.chain.attempt == attempt
    assert state.chain is None or state.chain.attempt <= attempt
    assert state.chain is None or set(state.chain.live) == set(world.live)


def test_a_chain_is_described_attempt_by_attempt_with_its_end() -> None:
    files = {
        chain.CHAIN: "987\n988\n",
        chain.ATTEMPTS: "987\t1\t-\t-\t0\thead\tsubmitted\n"
        "988\t2\t987\tTIMEOUT\t31\tresume\tTIMEOUT after 31 new rows\n"
        "989\t3\t988\tUNKNOWN\t40\tstop\tno progress in 2 attempts in a row\n",
        f"{chain.SUCCESSOR}987": "988\n",
        f"{chain.SUCCESSOR}988": "989\n",
        chain.CHAIN_END: "stopped: no progress in 2 attempts in a row (jobs 987, 988)\n",
    }
    # sacct knows the first two; the stopper (989) ran nothing and is not the benchmark's job
    seen = _Seen.read(
        "",
        "987\tTIMEOUT\t0:0\t00:01:00\tnode1\t987\n988\tFAILED\t1:0\t00:00:30\tnode2\t988\n989\tCOMPLETED\t0:0\t00:00:01\tnode1\t989\n",
    )
    state = seen.newest("987", files, BENCH, None)
    assert (state.job_id, state.state) == ("988", "FAILED")
    assert state.chain is not None
    assert state.chain.attempt == 2 and state.chain.live == ()
    assert state.chain.end == "stopped: no progress in 2 attempts in a row (jobs 987, 988)"
    assert [(s.job_id, s.attempt, s.state, s.then) for s in state.chain.steps] == [
        ("987", 1, "TIMEOUT", "resume"),
        ("988", 2, "FAILED", "stop"),
    ]
    assert state.chain.line() == (
        "987 TIMEOUT -> resume (TIMEOUT after 31 new rows); "
        "988 FAILED -> stop (no progress in 2 attempts in a row); "
        "stopped: no progress in 2 attempts in a row (jobs 987, 988)"
    )


def test_a_stopper_is_never_the_benchmark_s_job_once_it_has_ended() -> None:
    """A successor whose prologue stops the chain exits 0 (COMPLETED) having run nothing: even if it
    appended itself to the chain file, the benchmark's state is its predecessor's, with the reason."""
    files = {
        chain.CHAIN: "987\n988\n",
        chain.ATTEMPTS: "988\t2\t987\tFAILED\t0\tstop\tdeterministic failure: not retried\n",
        f"{chain.SUCCESSOR}987": "988\n",
    }
    ended = _Seen.read(
        "", "987\tFAILED\t2:0\t00:00:09\tnode1\t987\n988\tCOMPLETED\t0:0\t00:00:01\tnode1\t988\n"
    )
    state = ended.newest("987", files, BENCH, None)
    assert (state.job_id, state.state, state.exit_code) == ("987", "FAILED", "2:0")
    assert state.chain is not None and state.chain.steps[0].then == "stop"
    starting = _Seen.read(
        f"988\tRUNNING\t0:01\tnode1\t988\t{BENCH}\n", "987\tFAILED\t2:0\t00:00:09\tnode1\t987\n"
    )
    assert starting.newest("987", files, BENCH, None).job_id == "988"  # its prologue still runs


def test_without_sacct_a_job_s_end_is_what_its_successor_s_prologue_said() -> None:
    files = {chain.ATTEMPTS: "988\t2\t987\tTIMEOUT\t31\tresume\tTIMEOUT after 31 new rows\n"}
    seen = _Seen.read(f"988\tRUNNING\t0:10\tnode1\t988\t{BENCH}/\n", "")
    state = seen.newest("987", files, BENCH, None)
    assert (state.job_id, state.state) == ("988", "RUNNING")
    assert state.chain is not None
    assert [(s.job_id, s.state) for s in state.chain.steps] == [("987", "TIMEOUT"), ("988", "RUNNING")]
    assert state.chain.end is None


def test_a_benchmark_that_is_no_chain_has_no_chain() -> None:
    seen = _Seen.read("", "5\tCOMPLETED\t0:0\t00:00:01\tnode1\t5\n")
    state = seen.newest("5", {".gym_exit-5": "0\n"}, BENCH, None)
    assert (state.job_id, state.state, state.chain) == ("5", "COMPLETED", None)


def test_cancel_s_lines_are_read_and_others_ignored() -> None:
    out = (
        f"stopped\t989\tRUNNING\t{BENCH}\nstopped\tx\tPENDING\t{BENCH}\nnoise\nstopped\t990\tPENDING\t/a\tb\n"
    )
    assert chain.parse_stopped(out) == [
        chain.Stopped("989", "RUNNING", BENCH),
        chain.Stopped("990", "PENDING", "/a\tb"),
    ]
