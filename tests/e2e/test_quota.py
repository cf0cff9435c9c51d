"""End to end: a submission three times larger than the user's quota (issue 43, item 5).

A test account of its own (a unique name, removed at the end) caps root's association in it at
MaxSubmitJobs=4; twelve `command` benchmarks name that account. `gymbuild submit watch=1` queues the
four that fit, says the others wait and why, feeds them as the first end, and ends when every job
has ended: every benchmark COMPLETED, and no sbatch was refused (its own output and sacct).
Root's association under `gym` is never touched.
"""

from __future__ import annotations

import json
import secrets
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from e2e_helpers import (
    gymbuild,
    job_ids,
    manifest,
    run_dir,
    run_dirs,
    set_submit_limit,
    slurm_config,
    user_env,
    wait_for_jobs,
    write_config,
)
from follow_helpers import Follower

from tests.sweep.test_slurm import Sweeper

pytestmark = pytest.mark.cluster

LIMIT = 4


def _remove_account(cluster: Any, name: str) -> None:
    """A test account's jobs cancelled, then the account and root's association in it removed."""
    cluster.ssh(
        f"scancel -A {name} 2>/dev/null; sacctmgr -i delete user root account={name} >/dev/null; "
        f"sacctmgr -i delete account {name} >/dev/null",
        check=False,
    )


def _cap_account(cluster: Any, name: str, setting: str) -> None:
    """Set a limit on account `name` itself (e.g. GrpSubmitJobs=2) and wait until slurmctld, which
    judges sbatch, has taken it (as scontrol shows it: `GrpSubmitJobs=2(0)`, or MaxTRES as
    `MaxTRESPJ=node=1`)."""
    cluster.ssh(f"sacctmgr -i modify account where name={name} set {setting} >/dev/null")
    key, _, value = setting.partition("=")
    shown = f"MaxTRESPJ={value}" if key == "MaxTRES" else f"{key}={value}("
    deadline = time.monotonic() + 30
    while (
        shown not in cluster.ssh(f"scontrol show assoc_mgr accounts={name} flags=assoc", check=False).stdout
    ):
        assert time.monotonic() < deadline, f"slurmctld did not take {setting} for {name}"
        time.sleep(0.5)


@contextmanager
def _own_account(cluster: Any, prefix: str, limit: int | None, setting: str = "") -> Iterator[str]:
    """An account of the test's own (`prefix` and a unique tail), root's association in it capped at
    MaxSubmitJobs=`limit` (None: uncapped) and the account's own `setting` (e.g. GrpSubmitJobs=0),
    each waited for until slurmctld, which judges sbatch, enforces it; its jobs cancelled and the
    account removed afterwards, whatever the test did."""
    name = f"{prefix}{secrets.token_hex(4)}"
    try:
        set_submit_limit(name, limit)
        if setting:
            _cap_account(cluster, name, setting)
        yield name
    finally:
        _remove_account(cluster, name)


@pytest.fixture
def capped_account(cluster: Any) -> Iterator[str]:
    """An account of this test's own, root's association in it capped at MaxSubmitJobs=LIMIT."""
    with _own_account(cluster, "gymquota", LIMIT) as name:
        yield name


def test_a_submission_three_times_the_quota_is_fed_to_the_end_without_a_refused_sbatch(
    cluster: Any, capped_account: str, tmp_path: Any
) -> None:
    benchmarks = {f"b{i:02d}": {"command": "sleep 1"} for i in range(3 * LIMIT)}
    config = slurm_config(cluster.run_dir("e2e-quota"), benchmarks, services={}, account=capped_account)
    del config["driver"]["policy_model"]
    write_config(tmp_path, config)
    env = user_env(tmp_path, GYMBUILD_WATCH_INTERVALS="1,2")

    render = gymbuild("render", cwd=tmp_path, env=env)
    assert render.rc == 0, render.stderr
    assert f"account {capped_account}" in render.stderr and "MaxSubmitJobs" in render.stderr

    done = gymbuild("submit", "watch=1", cwd=tmp_path, env=env, timeout=600)
    assert done.rc == 0, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert f"waiting {2 * LIMIT} " in done.stdout  # the first pass: four queued, eight wait ...
    assert f"MaxSubmitJobs={LIMIT} of association {capped_account}/root" in done.stdout  # ... and why
    assert "AssocMaxSubmitJobLimit" not in said, said
    assert not [line for line in done.stdout.splitlines() if line.startswith("failed ")]
    assert f"{3 * LIMIT} benchmarks: 0 pending, 0 running, {3 * LIMIT} completed, 0 failed" in done.stdout

    ids = job_ids(manifest(config))
    assert all(ids.values()) and len(set(ids.values())) == 3 * LIMIT
    ended = wait_for_jobs(cluster, list(ids.values()))  # sacct's record, once it has caught up
    assert {job_id: result.state for job_id, result in ended.items()} == dict.fromkeys(
        ids.values(), "COMPLETED"
    )
    # No job of the account but the submission's own (sacct's listing by account may lag behind the
    # jobs' own records, which wait_for_jobs waited for: a subset, not equality).
    accounted = cluster.ssh(f"sacct -X -n -P -A {capped_account} -S now-1hour -o JobID").stdout
    assert set(accounted.split()) <= set(ids.values())

    status = gymbuild("status", "json=1", cwd=tmp_path, env=env)
    assert json.loads(status.stdout)["summary"]["completed"] == 3 * LIMIT


LOAD_WITH_NEMO_GYM = (
    "import json, sys\n"
    "from nemo_gym.orchestration.jobs import SubmissionRecord\n"
    "record = SubmissionRecord.load(json.load(open(sys.argv[1])))\n"
    "print(json.dumps([[b.benchmark, b.job_id] for b in record.benchmarks]))\n"
)


def test_a_plain_submit_leaves_the_rest_waiting_and_a_later_submit_queues_them(
    cluster: Any, capped_account: str, nemo_gym: Any, tmp_path: Any
) -> None:
    benchmarks = {f"w{i}": {"command": "true"} for i in range(LIMIT + 2)}
    config = slurm_config(cluster.run_dir("e2e-quota-plain"), benchmarks, services={}, account=capped_account)
    del config["driver"]["policy_model"]
    write_config(tmp_path, config)
    env = user_env(tmp_path)

    first = gymbuild("submit", cwd=tmp_path, env=env)
    assert first.rc == 0, first.stdout + first.stderr  # waiting is not failing
    assert "waiting 2 (w4, w5)" in first.stdout
    submitted = [line.split()[1] for line in first.stdout.splitlines() if line.startswith("submitted")]
    assert submitted == [f"w{i}" for i in range(LIMIT)]

    status = json.loads(gymbuild("status", "json=1", cwd=tmp_path, env=env).stdout)
    rows = {row["benchmark"]: row for row in status["benchmarks"]}
    assert {b: (rows[b]["state"], rows[b]["job_id"]) for b in ("w4", "w5")} == dict.fromkeys(
        ("w4", "w5"), ("WAITING", None)
    )
    assert (status["summary"]["waiting"], status["summary"]["failed"]) == (2, 0)
    table = gymbuild("status", cwd=tmp_path, env=env).stdout
    assert "waiting for room" in table and f"MaxSubmitJobs={LIMIT}" in table
    # Every verb says it in the same words, none as a failure or "never queued".
    under = f"waiting for room under MaxSubmitJobs={LIMIT} of association {capped_account}/root"
    logs = gymbuild("logs", "only=w4", cwd=tmp_path, env=env)
    assert logs.rc == 1 and f"error: w4 has no job, so no logs: {under}" in logs.stderr, logs.stderr
    said = {
        verb: gymbuild(*argv, cwd=tmp_path, env=env)
        for verb, argv in {
            "results": ("results", "json=1"),
            "resubmit": ("resubmit", "only=w4", "dry_run=1"),
            "cancel": ("cancel", "dry_run=1"),
        }.items()
    }
    assert under in said["results"].stdout and under in said["resubmit"].stdout + said["resubmit"].stderr
    assert "2 waiting for room (w4, w5) have no job to cancel" in said["cancel"].stdout
    assert not [v for v, r in said.items() if "never queued" in r.stdout + r.stderr]

    # NeMo Gym 0.7.0 reads the record as its own: the waiting ones are entries with no job id yet.
    loaded = nemo_gym.run_python(LOAD_WITH_NEMO_GYM, str(run_dir(config) / "gym-job.json"))
    assert loaded.returncode == 0, loaded.stderr
    assert dict(json.loads(loaded.stdout)) == job_ids(manifest(config))

    wait_for_jobs(cluster, [job_id for job_id in job_ids(manifest(config)).values() if job_id])
    # `runs`: the submission has not ended while two wait, and they are not "not queued".
    (listed,) = json.loads(gymbuild("runs", "json=1", cwd=tmp_path, env=env).stdout)
    assert (listed["state"], listed["not_queued"], listed["benchmarks"].get("waiting")) == ("PENDING", 0, 2)
    again = gymbuild("submit", cwd=tmp_path, env=env)
    assert again.rc == 0, again.stdout + again.stderr
    fed = [line.split()[1] for line in again.stdout.splitlines() if line.startswith("submitted")]
    assert fed == ["w4", "w5"]
    ids = job_ids(manifest(config))
    assert {r.state for r in wait_for_jobs(cluster, [ids["w4"], ids["w5"]]).values()} == {"COMPLETED"}


def test_the_limits_are_read_from_the_cluster_in_one_round_trip(cluster: Any, capped_account: str) -> None:
    from gymbuild.executors.connection import Connection
    from gymbuild.executors.slurm import read_limits  # the executor's ask_limits, answered at once

    array = cluster.ssh("scontrol show config | sed -n 's/^MaxArraySize *= *//p'").stdout.strip()
    with Connection(cluster.ssh_alias) as conn:
        before = conn.round_trips
        limits = read_limits(conn, {"account": capped_account})
        assert conn.round_trips - before == 1
    assert (limits.max_submit_jobs, limits.queued, limits.room) == (LIMIT, 0, LIMIT)
    assert limits.max_array_size == int(array)
    assert limits.submit_source == f"MaxSubmitJobs={LIMIT} of association {capped_account}/root"


def test_a_follower_feeds_the_checkpoints_that_wait_for_room(
    cluster: Any, capped_account: str, tmp_path: Any
) -> None:
    # LIMIT + 2 complete checkpoints, one job each: the first poll queues LIMIT, two wait; the follower
    # feeds them as the first end, and all complete (none is given up on as "failed").
    sweeper = Sweeper(cluster, tmp_path, "follow-quota")
    ckpts = cluster.run_dir("follow-quota-ckpts")
    for step in range(LIMIT + 2):
        (ckpts / f"step_{step}").mkdir()
        (ckpts / f"step_{step}" / "config.json").write_text("{}")
    args = [
        "submit",
        f"config={sweeper.config}",
        "multirun=1",
        "follow=1",
        "every=1",
        f"compute.cluster.account={capped_account}",
        f"services.policy.model=paths({ckpts}/step_*)",
    ]
    follower = Follower(tmp_path, args, sweeper.env)
    try:
        for step in range(LIMIT + 2):
            follower.expect(f"submitted {ckpts}/step_{step} (gym-job-", timeout=120)
        follower.expect("fed ", timeout=300)
        for _ in range(LIMIT + 2):
            follower.expect(f"completed {ckpts}/step_", timeout=300)
        rc, said, err = follower.stop(signal.SIGTERM)
        assert rc == 0 and "Traceback" not in err, err
        assert f"{LIMIT + 2} checkpoint(s) submitted, {LIMIT + 2} completed, 0 given up on" in said[-1], said
    finally:
        follower.kill()
    assert not [c for c in sweeper.ssh.commands() if "AssocMaxSubmitJobLimit" in c]


@pytest.fixture
def group_capped_account(cluster: Any) -> Iterator[str]:
    """An account of this test's own under a parent account of its own with GrpSubmitJobs=2: a
    group limit above the job's account, which counts every user's jobs in the parent's sub-accounts
    and which root's own association (no limit) does not show."""
    parent = f"gymquotagrp{secrets.token_hex(4)}"
    name = f"{parent}k"
    try:
        cluster.ssh(f"sacctmgr -i add account {parent} cluster=gymtest >/dev/null")
        cluster.ssh(f"sacctmgr -i add account {name} parent={parent} cluster=gymtest >/dev/null")
        set_submit_limit(name, None)  # root's association in the child, no limit of root's
        _cap_account(cluster, parent, "GrpSubmitJobs=2")
        yield name
    finally:
        _remove_account(cluster, name)
        _remove_account(cluster, parent)


def test_a_parent_accounts_group_limit_is_read_before_sbatch_and_the_rest_is_fed(
    cluster: Any, group_capped_account: str, tmp_path: Any
) -> None:
    parent = group_capped_account.removesuffix("k")
    benchmarks = {f"g{i}": {"command": "sleep 2"} for i in range(4)}
    config = slurm_config(
        cluster.run_dir("e2e-quota-grp"), benchmarks, services={}, account=group_capped_account
    )
    del config["driver"]["policy_model"]
    write_config(tmp_path, config)
    env = user_env(tmp_path, GYMBUILD_WATCH_INTERVALS="1,2")

    first = gymbuild("submit", cwd=tmp_path, env=env)
    assert first.rc == 0, first.stdout + first.stderr  # the group's room is full: waiting, not failed
    ids = job_ids(manifest(config))
    assert [b for b, job_id in ids.items() if job_id] == ["g0", "g1"]
    # Read before any sbatch: the parent's limit is named, and no sbatch was refused.
    assert f"waiting 2 (g2, g3): GrpSubmitJobs=2 of account {parent}" in first.stdout, first.stdout
    assert "sbatch said" not in first.stdout and "GrpSubmitJobsLimit" not in first.stdout + first.stderr
    rows = json.loads(gymbuild("status", "json=1", cwd=tmp_path, env=env).stdout)["benchmarks"]
    assert [r["state"] for r in rows if r["benchmark"] in ("g2", "g3")] == ["WAITING", "WAITING"]

    fed = gymbuild("submit", "watch=1", cwd=tmp_path, env=env, timeout=600)
    assert fed.rc == 0, fed.stdout + fed.stderr
    assert "GrpSubmitJobsLimit" not in fed.stdout + fed.stderr
    assert "4 benchmarks: 0 pending, 0 running, 4 completed, 0 failed" in fed.stdout
    ids = job_ids(manifest(config))
    ended = wait_for_jobs(cluster, [job_id for job_id in ids.values() if job_id])
    assert len(ended) == 4 and {r.state for r in ended.values()} == {"COMPLETED"}


# Limits no job of the submission can ever fit: (the account's own setting, the nodes a job asks,
# the limit the error names, what its fix names).
NEVER = {
    "limit-of-0": ("GrpSubmitJobs=0", 1, "GrpSubmitJobs=0 of account {a}", "compute.cluster.account="),
    "job-too-big": (
        "MaxTRES=node=1",
        2,
        "MaxTRESPerJob node=1 of association {a}/root (a job here asks node=2)",
        "compute.cluster.node_pools",
    ),
}


@pytest.mark.parametrize("case", list(NEVER))
def test_a_limit_no_job_can_ever_fit_ends_submit_watch_with_one_error_and_nothing_queued(
    cluster: Any, tmp_path: Any, case: str
) -> None:
    setting, nodes, limit, fix_names = NEVER[case]
    with _own_account(cluster, "gymquotanever", None, setting) as account:
        benchmarks = {f"z{i}": {"command": "true"} for i in range(3)}
        config = slurm_config(cluster.run_dir(f"e2e-quota-{case}"), benchmarks, services={}, account=account)
        del config["driver"]["policy_model"]
        config["compute"]["cluster"]["node_pools"]["gpu"]["nodes"] = nodes
        write_config(tmp_path, config)
        env = user_env(tmp_path, GYMBUILD_WATCH_INTERVALS="1,2")

        render = gymbuild("render", cwd=tmp_path, env=env)
        assert render.rc == 0 and "lets no job in at all (0) ends the submit with an error" in render.stderr

        done = gymbuild("submit", "watch=1", cwd=tmp_path, env=env, timeout=300)
        assert done.rc == 1 and "Traceback" not in done.stderr, done.stdout + done.stderr
        (error, fix) = [line for line in done.stderr.splitlines() if line.startswith(("error:", "    fix:"))]
        assert error.startswith("error: ") and "submit.yaml: compute.cluster.account: " in error
        assert f"{limit.format(a=account)} lets none of these jobs (account {account}" in error, error
        assert "nothing was queued" in error and fix_names in fix, fix
        # Nothing queued: no job of the account, and no job id in any record.
        queued = cluster.ssh(f"squeue -h -A {account} -o %i; sacct -X -n -A {account} -o JobID")
        assert queued.stdout.split() == []
        manifests = [d / "gym-job.json" for d in run_dirs(config["job"]["output_path"])]
        records = [json.loads(p.read_text()) for p in manifests if p.exists()]
        assert not [job_id for record in records for job_id in job_ids(record).values() if job_id]


def test_an_array_submission_over_the_quota_queues_what_fits_and_feeds_the_rest_as_arrays(
    cluster: Any, capped_account: str, tmp_path: Any
) -> None:
    """Arrays and the quota together: every array task counts against MaxSubmitJobs, so of ten
    benchmarks under a limit of four, one array of four is queued (MaxArraySize is 4 on the test
    cluster) and six wait; fed as room frees, each benchmark ends COMPLETED as an array task, and no
    sbatch was refused."""
    benchmarks = {f"b{i:02d}": {"command": "sleep 1"} for i in range(10)}
    config = slurm_config(
        cluster.run_dir("e2e-quota-arrays"), benchmarks, services={}, account=capped_account
    )
    del config["driver"]["policy_model"]
    config["compute"][next(iter(config["compute"]))]["array"] = True
    write_config(tmp_path, config)
    env = user_env(tmp_path, GYMBUILD_WATCH_INTERVALS="1,2")

    done = gymbuild("submit", "watch=1", cwd=tmp_path, env=env, timeout=600)
    assert done.rc == 0, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "waiting 6 " in done.stdout, said
    assert "AssocMaxSubmitJobLimit" not in said and "QOSMaxSubmitJob" not in said, said
    assert "10 benchmarks: 0 pending, 0 running, 10 completed, 0 failed" in done.stdout, said
    ids = job_ids(manifest(config))
    assert all("_" in str(i) for i in ids.values()), ids  # every one an array task
    assert all(int(str(i).rsplit("_", 1)[1]) < 4 for i in ids.values())  # under MaxArraySize
