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
from collections.abc import Iterator
from typing import Any

import pytest
from e2e_helpers import gymbuild, job_ids, manifest, slurm_config, user_env, wait_for_jobs, write_config

pytestmark = pytest.mark.cluster

LIMIT = 4


@pytest.fixture
def capped_account(cluster: Any) -> Iterator[str]:
    """An account of this test's own, root's association in it capped at MaxSubmitJobs=LIMIT; its
    jobs cancelled and the account removed afterwards, whatever the test did."""
    name = f"gymquota{secrets.token_hex(4)}"
    try:
        cluster.ssh(
            f"sacctmgr -i add account {name} Description=gymbuild-quota-test >/dev/null && "
            f"sacctmgr -i add user root account={name} >/dev/null && "
            f"sacctmgr -i modify user where name=root account={name} set MaxSubmitJobs={LIMIT} >/dev/null"
        )
        yield name
    finally:
        cluster.ssh(
            f"scancel -A {name} 2>/dev/null; sacctmgr -i delete user root account={name} >/dev/null; "
            f"sacctmgr -i delete account {name} >/dev/null",
            check=False,
        )


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
    accounted = cluster.ssh(f"sacct -X -n -P -A {capped_account} -S now-1hour -o JobID").stdout
    assert set(accounted.split()) == set(ids.values())  # no other job (a refused one) in the account

    status = gymbuild("status", "json=1", cwd=tmp_path, env=env)
    assert json.loads(status.stdout)["summary"]["completed"] == 3 * LIMIT
