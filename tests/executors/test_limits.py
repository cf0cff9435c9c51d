"""The user's quota as read from the cluster (executors/slurm/limits.py): the parsing of what
sacctmgr, scontrol and squeue printed on the test cluster (tests/data/slurm-limits/, captured with
`limits_script()` run there: an account `gymquotacap` with root's association capped at
MaxSubmitJobs=4, MaxJobs=2, a QOS `gymquotaqos` with MaxSubmitJobsPerUser=6, MaxJobsPerUser=3, and
held jobs queued in them; `no-slurm-conf.txt` the same script where no Slurm tool answers;
`group.txt` group limits: an account `gymq2par` with GrpSubmitJobs=3 over two sub-accounts,
`gymq2kid` (GrpJobs=2) and `gymq2sib`, a held job in each, and `gymq2zero` with GrpSubmitJobs=0;
`tres.txt` root's association in `gymq2tres` with MaxTRESPerJob node=1, gres/gpu=2)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gymbuild.executors.slurm.limits import Limits, job_tres, parse, refused_by_limit

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm-limits"


def captured(name: str) -> str:
    return (DATA / name).read_text()


def test_the_association_limit_of_the_named_account_and_the_jobs_queued_in_it() -> None:
    # 1 job in gymquotacap under QOS gymquotaqos, 3 under normal: all 4 count against the association.
    limits = parse(captured("full.txt"), "gymquotacap")
    assert limits == Limits(
        max_submit_jobs=4,
        max_jobs=2,
        max_array_size=4,
        queued=4,
        submit_source="MaxSubmitJobs=4 of association gymquotacap/root",
        jobs_source="MaxJobs=2 of association gymquotacap/root",
    )
    assert limits.room == 0
    assert limits.fits([1, 1]) == 0


def test_with_room_left_the_jobs_that_fit_are_counted() -> None:
    limits = parse(captured("assoc-and-qos.txt"), "gymquotacap")
    assert (limits.max_submit_jobs, limits.queued, limits.room) == (4, 3, 1)
    assert limits.fits([1, 1, 1]) == 1


def test_the_tighter_of_the_association_and_the_qos_binds() -> None:
    # In gymquotacap the association leaves no room (4 of 4), the QOS five (1 of 6): the association binds.
    both = parse(captured("full.txt"), "gymquotacap", "gymquotaqos")
    assert (both.max_submit_jobs, both.queued, both.room) == (4, 4, 0)
    # Under `gym` (no association limit) the QOS's per-user limit counts the user's jobs in that QOS.
    qos_only = parse(captured("full.txt"), "gym", "gymquotaqos")
    assert (qos_only.max_submit_jobs, qos_only.queued, qos_only.max_jobs) == (6, 1, 3)
    assert qos_only.submit_source == "MaxSubmitJobsPerUser=6 of QOS gymquotaqos"


def test_an_account_without_limits_and_the_default_account() -> None:
    # No account named: the user's default (root), which has no limit; MaxArraySize is the cluster's.
    assert parse(captured("full.txt")) == Limits(max_array_size=4)
    assert parse(captured("full.txt")).room is None
    assert parse(captured("full.txt"), "gym").fits([1] * 1000) == 1000


def test_a_site_without_accounting_has_no_limits_found() -> None:
    limits = parse(captured("no-slurm-conf.txt"), "gymquotacap")
    assert limits == Limits()
    assert limits.fits([1] * 50) == 50


def test_a_section_whose_tool_failed_is_not_read() -> None:
    # sacctmgr answered nothing usable (it failed half-way): its lines are not taken as limits.
    text = captured("full.txt").replace(
        "@assoc\n", "@assoc\nsacctmgr: error: Problem talking to the database\n", 1
    )
    text = text.replace("root|root||||normal|\n@rc 0", "root|root||||normal|\n@rc 1", 1)
    assert parse(text, "gymquotacap").max_submit_jobs is None


def test_sbatch_naming_a_limit_is_a_wait_and_other_refusals_are_not() -> None:
    assert refused_by_limit(captured("sbatch-refused.txt"))
    assert refused_by_limit("sbatch: error: QOSMaxSubmitJobPerUserLimit")
    invalid = "Invalid account or account/partition combination specified"
    assert not refused_by_limit(f"sbatch: error: Batch job submission failed: {invalid}")
    assert not refused_by_limit("sbatch: error: Batch job submission failed: Invalid job array specification")


@given(
    limit=st.integers(0, 60),
    queued=st.integers(0, 80),
    weights=st.lists(st.integers(1, 8), max_size=40),
)
def test_what_fits_never_exceeds_the_room_and_keeps_the_order(
    limit: int, queued: int, weights: list[int]
) -> None:
    limits = Limits(max_submit_jobs=limit, queued=queued, submit_source="MaxSubmitJobs")
    fit = limits.fits(weights)
    assert queued + sum(weights[:fit]) <= max(limit, queued)
    # Greedy in order: the next job (if any) would not have fitted.
    if fit < len(weights):
        assert queued + sum(weights[: fit + 1]) > limit


def test_a_parent_accounts_group_limit_counts_the_jobs_of_its_sub_accounts() -> None:
    # gymq2par allows 3 jobs for all its sub-accounts: one queued in gymq2kid and one in its sibling
    # leave room for one, though root's own association in gymq2kid has no limit.
    limits = parse(captured("group.txt"), "gymq2kid")
    assert (limits.max_submit_jobs, limits.queued, limits.room) == (3, 2, 1)
    assert (
        limits.why() == "GrpSubmitJobs=3 of account gymq2par (2 jobs of all its users are queued there now)"
    )
    assert (limits.max_jobs, limits.jobs_source) == (2, "GrpJobs=2 of account gymq2kid")
    assert limits.never == ""
    assert parse(captured("group.txt"), "gymq2sib").room == 1  # the same group, from the sibling


def test_a_limit_of_zero_is_a_limit_no_job_ever_fits() -> None:
    limits = parse(captured("group.txt"), "gymq2zero")
    assert limits.never == "GrpSubmitJobs=0 of account gymq2zero"
    assert parse(captured("full.txt"), "gymquotacap").never == ""  # full now: room frees later


def _script_output(
    parents: dict[str, str], grp: dict[str, int], qos_grp: int | None, jobs: list[tuple[str, str, bool]]
) -> str:
    """What `limits_script` prints for an account tree (account -> parent, "" at the top), the
    accounts' GrpSubmitJobs, the QOS `q`'s, and the queue (account, QOS, the user's own?): the
    sections as sacctmgr and squeue lay them out (tests/data/slurm-limits/group.txt)."""
    tree = [f"{a}||{p}|{grp.get(a, '')}|" for a, p in parents.items()]
    assoc = [f"{a}|me||||q,normal||||" for a in parents]
    counts: dict[str, int] = {}
    for account, qos, mine in jobs:
        key = f"{account}|{qos}|{int(mine)}"
        counts[key] = counts.get(key, 0) + 1
    queued = [f"{n:7d} {key}" for key, n in sorted(counts.items())]
    qos = [f"q|||{'' if qos_grp is None else qos_grp}|", "normal||||"]
    sections = {"user": ["a0"], "assoc": assoc, "tree": tree, "qos": qos, "queued": queued}
    return "".join(
        f"@{name}\n" + "".join(f"{line}\n" for line in lines) + "@rc 0\n" for name, lines in sections.items()
    )


@st.composite
def account_trees(draw: st.DrawFn) -> dict[str, str]:
    """Accounts a0..aN, each under an earlier one (a0 under root): any shape of tree."""
    size = draw(st.integers(1, 7))
    return {"a0": "root", **{f"a{i}": f"a{draw(st.integers(0, i - 1))}" for i in range(1, size)}}


@given(data=st.data(), parents=account_trees())
def test_the_room_is_the_least_any_group_limit_above_the_account_leaves(
    data: st.DataObject, parents: dict[str, str]
) -> None:
    accounts = sorted(parents)
    grp = data.draw(st.dictionaries(st.sampled_from(accounts), st.integers(0, 12)))
    qos_grp = data.draw(st.one_of(st.none(), st.integers(0, 12)))
    jobs = data.draw(
        st.lists(st.tuples(st.sampled_from(accounts), st.sampled_from(["q", "normal"]), st.booleans()))
    )
    account = data.draw(st.sampled_from(accounts))
    limits = parse(_script_output(parents, grp, qos_grp, jobs), account, "q")

    def below(top: str) -> set[str]:  # the account and its sub-accounts, walking down
        found, todo = {top}, [top]
        while todo:
            here = todo.pop()
            kids = {a for a, p in parents.items() if p == here}
            todo += sorted(kids - found)
            found |= kids
        return found

    rooms = [n - sum(a in below(top) for a, _, _ in jobs) for top, n in grp.items() if account in below(top)]
    if qos_grp is not None:
        rooms.append(qos_grp - sum(q == "q" for _, q, _ in jobs))
    if not rooms:
        assert limits.room is None
        return
    assert limits.room == max(0, min(rooms))
    # Never: exactly when one of the limits above the account (or the QOS's) is 0.
    zero = any(n == 0 for top, n in grp.items() if account in below(top)) or qos_grp == 0
    assert bool(limits.never) == zero


def test_a_job_bigger_than_a_per_job_tres_limit_is_named_with_what_it_asks() -> None:
    limits = parse(captured("tres.txt"), "gymq2tres")
    where = "of association gymq2tres/root"
    assert limits.too_big({"nodes": "2"}) == f"MaxTRESPerJob node=1 {where} (a job here asks node=2)"
    assert limits.too_big({"nodes": "1", "gpus-per-node": "4"}) == (
        f"MaxTRESPerJob gres/gpu=2 {where} (a job here asks gres/gpu=4)"
    )
    assert limits.too_big({"gres": "gpu:a100:3"}).startswith("MaxTRESPerJob gres/gpu=2 ")
    assert limits.too_big({"nodes": "1", "gpus-per-node": "2"}) == ""
    assert limits.too_big({}) == ""  # one node, no GPUs asked: fits
    assert parse(captured("full.txt"), "gymquotacap").too_big({"nodes": "64"}) == ""  # no such limit


@given(
    nodes=st.integers(1, 64), gpus=st.integers(0, 16), how=st.sampled_from(["gpus-per-node", "gres", "gpus"])
)
def test_what_a_job_asks_is_its_nodes_and_all_its_gpus_however_they_are_written(
    nodes: int, gpus: int, how: str
) -> None:
    written = {"gpus-per-node": str(gpus), "gres": f"gpu:h100:{gpus}", "gpus": str(gpus * nodes)}[how]
    directives = {"nodes": f"{nodes}-{nodes + 2}" if nodes % 2 else str(nodes), how: written}
    assert job_tres(directives) == {"node": nodes, "gres/gpu": gpus * nodes}
    fits = nodes <= 1 and gpus * nodes <= 2
    assert (parse(captured("tres.txt"), "gymq2tres").too_big(directives) == "") == fits
