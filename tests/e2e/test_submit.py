"""End to end: the submit pipeline against the test cluster (issue 6).

Each test runs `gymbuild submit` in a subprocess as a user would, then checks what Slurm itself
knows (sacct by job name and working directory: the jobs really queued, whatever gymbuild's record
says), the record in the run directory and the local index, and what the user was told.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from e2e_helpers import (
    EXAMPLES,
    SCHEMA,
    gymbuild,
    gymbuild_argv,
    job_ids,
    local_index_file,
    manifest,
    run_dir,
    run_dirs,
    sacct_jobs,
    sbatch_wrapper,
    slurm_config,
    user_env,
    wait_for_jobs,
    wait_for_sacct_jobs,
    workspaces,
    write_config,
)

pytestmark = pytest.mark.cluster

QUICK = {"config_paths": ["benchmarks/gpqa/config.yaml"], "fake_num_calls": 1}


def _assert_user_error(run: Any, *needles: str) -> None:
    """One clear message: exit 1, no traceback, the message on stderr, nothing on stdout."""
    assert run.rc == 1, run
    assert "Traceback" not in run.stderr, run.stderr
    for needle in needles:
        assert needle in run.stderr, run.stderr


def _validate(record: dict[str, Any]) -> None:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(record)


def _assert_queued_once(record: dict[str, Any]) -> None:
    """Every benchmark of the record has exactly the one job Slurm knows under its name and dir."""
    for job in record["benchmarks"]:
        known = wait_for_sacct_jobs(f"gym-{job['benchmark']}", job["job_dir"], 1)
        assert known == [job["job_id"]], (job, known)


def _job_wrote(rel: Path) -> bool:
    """A file a job wrote in its bench dir (not one gymbuild copied there)."""
    return rel.parts[0] in ("logs", "artifacts", "model-calls") or rel.parts[0].startswith(".gym_")


def _scancel(ids: list[str]) -> None:
    """Cancel jobs this test queued and no longer needs (never anyone else's)."""
    if ids:
        subprocess.run(["scancel", *ids], check=False, capture_output=True)


# --- the examples ----------------------------------------------------------------------------------


def test_every_example_queues_every_benchmark_with_a_valid_record(cluster, tmp_path):
    src = cluster.run_dir("e2e-mount-src")
    examples: dict[str, tuple[Path, list[str], dict[str, str]]] = {
        "minimal": (EXAMPLES / "minimal.yaml", [], {}),
        "node-pools": (EXAMPLES / "node-pools.yaml", [], {}),
        "command-benchmark": (
            EXAMPLES / "command-benchmark.yaml",
            [f"driver.mounts=['{src}:/scripts:ro']"],
            {},
        ),
        "command-service": (EXAMPLES / "command-service.yaml", [], {}),
        "secrets": (
            EXAMPLES / "secrets.yaml",
            [f"services.policy.mounts=['{src}']"],
            {"HF_TOKEN": "hf-e2e-" + secrets.token_hex(4), "WANDB_API_KEY": "wandb-e2e"},
        ),
        # The test cluster has no QOS `preemptible`.
        "resumable": (EXAMPLES / "resumable.yaml", ["compute.cluster.extra_args={}"], {}),
        "composed": (EXAMPLES / "composed" / "submit.yaml", [], {}),
    }
    procs = {}
    outputs = {}
    for name, (path, overrides, env) in examples.items():
        home = tmp_path / name
        home.mkdir()
        outputs[name] = cluster.run_dir(f"e2e-example-{name}")
        argv = gymbuild_argv(
            "submit",
            f"config={path}",
            "++compute.cluster.hostname=gym-login",
            f"job.output_path={outputs[name]}",
            *overrides,
        )
        procs[name] = (
            home,
            subprocess.Popen(
                argv,
                cwd=home,
                env=user_env(home, **env),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
        )
    queued: list[str] = []
    try:
        for name, (home, proc) in procs.items():
            stdout, stderr = proc.communicate(timeout=300)
            assert proc.returncode == 0, f"{name}:\n{stdout}{stderr}"
            directory = run_dir(outputs[name])
            raw = (directory / "gym-job.json").read_bytes()
            record = json.loads(raw)
            ids = job_ids(record)
            queued += [i for i in ids.values() if i]
            assert all(ids.values()), (name, record)
            _validate(record)
            assert local_index_file(home, record["gym_job_id"]).read_bytes() == raw, name
            assert record["hostname"] == "gym-login" and record["run_dir"] == str(directory)
            _assert_queued_once(record)
            for bench, job_id in ids.items():
                assert f"submitted {bench} -> Slurm job {job_id}" in stdout
    finally:
        _scancel(queued)


# --- a benchmark Slurm refuses ----------------------------------------------------------------------


def _sacctmgr(*args: str) -> None:
    subprocess.run(["sacctmgr", "-i", *args], capture_output=True, text=True, timeout=30, check=False)


def _wait_for_limit(account: str, shown: str) -> None:
    """slurmdbd pushes a limit to slurmctld a moment after sacctmgr sets it; wait until it has."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["scontrol", "show", "assoc_mgr", "users=root", f"accounts={account}", "flags=assoc"],
            capture_output=True,
            text=True,
        ).stdout
        if f"MaxSubmitJobs={shown}" in out.replace("MaxSubmitJobs=\n", "MaxSubmitJobs= \n"):
            return
        time.sleep(0.3)
    pytest.fail(f"the submit limit on {account} did not reach slurmctld: {out}")


@pytest.fixture
def limited_account() -> Iterator[str]:
    """A dedicated account on which root may have two jobs at most, so others' jobs are not refused."""
    account = "gym-e2e-limit"
    _sacctmgr("add", "account", account, "cluster=gymtest")
    _sacctmgr("add", "user", "root", f"account={account}", "cluster=gymtest")
    _sacctmgr("modify", "user", "root", "where", f"account={account}", "set", "maxsubmitjobs=2")
    try:
        _wait_for_limit(account, "2(")
        yield account
    finally:
        _sacctmgr("modify", "user", "root", "where", f"account={account}", "set", "maxsubmitjobs=-1")


def test_a_benchmark_over_the_limit_waits_alone_and_the_next_submit_queues_only_it(
    cluster, tmp_path, limited_account
):
    sleepy = {**QUICK, "fake_sleep_seconds": 8}
    config = slurm_config(
        cluster.run_dir("e2e-refused"),
        {"a": {"run": sleepy}, "b": {"run": sleepy}, "c": {"run": sleepy}},
        account=limited_account,
    )
    path = write_config(tmp_path, config)
    env = user_env(tmp_path)
    first = gymbuild("submit", f"config={path}", cwd=tmp_path, env=env)
    assert first.rc == 0, first  # waiting for room is no failure (issue 43)
    assert "Traceback" not in first.stderr
    record = manifest(config)
    ids = job_ids(record)
    # The limit is read before any sbatch: the first two in config order fit, the third waits.
    refused_names = [b for b, i in ids.items() if i is None]
    assert refused_names == ["c"], record
    refused_name = refused_names[0]
    accepted = [b for b in ids if b != refused_name]
    refused = next(j for j in record["benchmarks"] if j["benchmark"] == refused_name)
    assert refused["error"].startswith(
        f"waiting for room: MaxSubmitJobs=2 of association {limited_account}/root"
    )
    assert (
        f"waiting 1 ({refused_name}): MaxSubmitJobs=2 of association {limited_account}/root" in first.stdout
    )
    assert "failed" not in first.stdout
    for bench in accepted:
        assert f"submitted {bench} -> Slurm job {ids[bench]}" in first.stdout
    assert (
        local_index_file(tmp_path, record["gym_job_id"]).read_bytes()
        == (run_dir(config) / "gym-job.json").read_bytes()
    )

    results = wait_for_jobs(cluster, [ids[b] for b in accepted])
    assert {r.state for r in results.values()} == {"COMPLETED"}
    bench_dirs = {b: run_dir(config) / b for b in accepted}
    written = {
        p: p.read_bytes()
        for d in bench_dirs.values()
        for p in d.rglob("*")
        if p.is_file() and _job_wrote(p.relative_to(d))
    }
    assert any("artifacts" in p.parts for p in written)

    _sacctmgr("modify", "user", "root", "where", f"account={limited_account}", "set", "maxsubmitjobs=-1")
    _wait_for_limit(limited_account, " ")
    second = gymbuild("submit", f"config={path}", cwd=tmp_path, env=env)
    assert second.rc == 0, second
    again = manifest(config)  # the same run directory: still exactly one under output_path
    assert again["gym_job_id"] == record["gym_job_id"]
    new_ids = job_ids(again)
    assert {b: new_ids[b] for b in accepted} == {b: ids[b] for b in accepted}
    assert new_ids[refused_name]
    assert all(j["error"] is None for j in again["benchmarks"])
    assert second.stdout.splitlines()[1:] == [
        f"submitted {refused_name} -> Slurm job {new_ids[refused_name]}"
    ]
    _assert_queued_once(again)  # Slurm knows exactly one job per benchmark: one sbatch for the refused
    assert {p: p.read_bytes() for p in written} == written
    assert (
        local_index_file(tmp_path, again["gym_job_id"]).read_bytes()
        == (run_dir(config) / "gym-job.json").read_bytes()
    )
    assert cluster.wait_for_job(new_ids[refused_name]).state == "COMPLETED"


# --- a submit killed half-way -----------------------------------------------------------------------


def test_a_submit_killed_after_some_sbatch_calls_is_finished_by_the_next_one_each_job_once(cluster, tmp_path):
    wrapper = sbatch_wrapper(tmp_path, sleep=1)
    benches = [f"k{i}" for i in range(6)]
    config = slurm_config(cluster.run_dir("e2e-killed"), {b: {"run": QUICK} for b in benches}, hostname=None)
    path = write_config(tmp_path, config)
    env = user_env(tmp_path, PATH=wrapper.path())
    proc = subprocess.Popen(
        gymbuild_argv("submit", f"config={path}"),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while len(list(workspaces(tmp_path).glob("*/outcomes/*.json"))) < 2:
        assert proc.poll() is None, "submit ended before it could be killed"
        assert time.monotonic() < deadline, "no outcome file appeared"
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert len(list(workspaces(tmp_path).glob("*/outcomes/*.json"))) < 6, "killed too late to prove anything"

    run = gymbuild("submit", f"config={path}", cwd=tmp_path, env=env)
    assert run.rc == 0, run
    record = manifest(config)
    assert sorted(job_ids(record)) == benches and all(job_ids(record).values())
    _assert_queued_once(record)
    # The sbatch in flight at the kill still ran (its shell outlives gymbuild): it must be found in
    # Slurm, not queued again.
    assert wrapper.calls() == 6


# --- one clear error each -------------------------------------------------------------------------


@pytest.fixture
def ssh_aliases(tmp_path: Path) -> Iterator[dict[str, str]]:
    """Two SSH aliases of our own (a system config snippet, removed after): a closed port, and the
    login node with a key it does not accept."""
    tag = uuid.uuid4().hex[:8]
    key = tmp_path / "wrong_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    aliases = {"closed": f"gym-e2e-closed-{tag}", "badkey": f"gym-e2e-badkey-{tag}"}
    snippet = Path(f"/etc/ssh/ssh_config.d/gym-e2e-{tag}.conf")
    snippet.write_text(
        f"Host {aliases['closed']}\n    HostName 127.0.0.1\n    Port 9\n\n"
        f"Host {aliases['badkey']}\n    HostName 127.0.0.1\n    Port 2222\n    User root\n"
        f"    IdentityFile {key}\n    IdentitiesOnly yes\n"
        "    UserKnownHostsFile /var/lib/gymbuild-cluster/sshd/known_hosts\n"
    )
    try:
        yield aliases
    finally:
        snippet.unlink(missing_ok=True)


def _submit_expecting_nothing_queued(cluster: Any, tmp_path: Path, config: dict[str, Any]) -> Any:
    path = write_config(tmp_path, config)
    run = gymbuild("submit", f"config={path}", cwd=tmp_path, env=user_env(tmp_path))
    output = config["job"]["output_path"]
    assert run_dirs(output) == [], "something was written on the cluster"
    for bench in config["driver"]["benchmarks"]:
        assert sacct_jobs(f"gym-{bench}", output) == []
    return run


def test_an_unreachable_host_is_one_clear_error_and_nothing_is_queued(cluster, tmp_path, ssh_aliases):
    host = ssh_aliases["closed"]
    config = slurm_config(cluster.run_dir("e2e-unreachable"), {"gpqa": {"run": QUICK}}, hostname=host)
    run = _submit_expecting_nothing_queued(cluster, tmp_path, config)
    _assert_user_error(run, f"cannot connect to {host} over SSH", "Connection refused", f"ssh {host} true")


def test_a_refused_key_is_one_clear_error_and_nothing_is_queued(cluster, tmp_path, ssh_aliases):
    host = ssh_aliases["badkey"]
    config = slurm_config(cluster.run_dir("e2e-badkey"), {"gpqa": {"run": QUICK}}, hostname=host)
    run = _submit_expecting_nothing_queued(cluster, tmp_path, config)
    _assert_user_error(run, f"cannot connect to {host} over SSH", f"{host} refused the key")


def test_a_missing_mount_source_is_one_clear_error_and_nothing_is_queued(cluster, tmp_path):
    missing = f"/var/tmp/gymbuild-cluster/no-such-dir-{uuid.uuid4().hex[:8]}"
    config = slurm_config(
        cluster.run_dir("e2e-missing-mount"),
        {"gpqa": {"run": QUICK}},
        driver={"mounts": [f"{missing}:/data"]},
    )
    run = _submit_expecting_nothing_queued(cluster, tmp_path, config)
    _assert_user_error(run, "mount source missing on gym-login", f"{missing} (mounted by driver.mounts)")


def test_a_dead_controller_fails_every_benchmark_with_its_reason(cluster, tmp_path):
    # Not the shared slurmctld: sbatch of this submit alone reads a slurm.conf naming a closed port.
    conf = Path("/etc/slurm/slurm.conf").read_text().splitlines()
    conf = [line for line in conf if not line.startswith(("SlurmctldPort=", "MessageTimeout="))]
    dead = tmp_path / "dead-slurm.conf"
    dead.write_text("\n".join([*conf, "SlurmctldPort=6999", "MessageTimeout=2", ""]))
    wrapper = sbatch_wrapper(tmp_path, slurm_conf=dead)
    config = slurm_config(
        cluster.run_dir("e2e-dead-ctld"), {"a": {"run": QUICK}, "b": {"run": QUICK}}, hostname=None
    )
    path = write_config(tmp_path, config)
    run = gymbuild("submit", f"config={path}", cwd=tmp_path, env=user_env(tmp_path, PATH=wrapper.path()))
    assert run.rc == 1 and "Traceback" not in run.stderr, run
    record = manifest(config)
    for job in record["benchmarks"]:
        assert job["job_id"] is None
        assert "Unable to contact slurm controller" in job["error"], job
        assert f"failed {job['benchmark']}: {job['error']}" in run.stdout
        assert sacct_jobs(f"gym-{job['benchmark']}", config["job"]["output_path"]) == []
    assert wrapper.calls() == 2


def test_boolean_extra_args_are_sbatch_flags(cluster, tmp_path):
    """`hold: true` is sbatch's bare `--hold` (sbatch refuses `--hold=true`): the job is queued held;
    `false` writes no directive at all."""
    config = slurm_config(
        cluster.run_dir("e2e-flags"), {"a": {"run": QUICK}}, extra_args={"hold": True, "requeue": False}
    )
    path = write_config(tmp_path, config)
    run = gymbuild("submit", f"config={path}", cwd=tmp_path, env=user_env(tmp_path))
    assert run.rc == 0, run
    job_id = job_ids(manifest(config))["a"]
    assert job_id is not None
    try:
        script = (run_dir(config) / "a" / "job.sh").read_text()
        directives = [line for line in script.splitlines() if line.startswith("#SBATCH ")]
        assert "#SBATCH --hold" in directives and not [d for d in directives if "requeue" in d], directives
        reason = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%r"], capture_output=True, text=True)
        assert reason.stdout.strip() == "JobHeldUser", reason
    finally:
        _scancel([job_id])


# --- json output, nothing to do, a changed script, new=1 ---------------------------------------------


def test_json_output_then_nothing_to_do_then_a_changed_script_then_a_fresh_submission(cluster, tmp_path):
    wrapper = sbatch_wrapper(tmp_path)
    config = slurm_config(
        cluster.run_dir("e2e-rerun"), {"a": {"run": QUICK}, "b": {"run": QUICK}}, hostname=None
    )
    path = write_config(tmp_path, config)
    env = user_env(tmp_path, PATH=wrapper.path())

    first = gymbuild("submit", f"config={path}", "json=1", cwd=tmp_path, env=env)
    assert first.rc == 0, first
    jq = subprocess.run(["jq", "-e", ".gym_job_id"], input=first.stdout, capture_output=True, text=True)
    assert jq.returncode == 0, jq.stderr
    raw = (run_dir(config) / "gym-job.json").read_text()
    assert first.stdout == raw  # the manifest and nothing else
    record = json.loads(raw)
    assert json.loads(jq.stdout) == record["gym_job_id"]
    assert wrapper.calls() == 2
    _assert_queued_once(record)

    again = gymbuild("submit", f"config={path}", cwd=tmp_path, env=env)
    assert again.rc == 0, again
    said = again.stdout.splitlines()
    assert len(said) == 1 and said[0].startswith(
        f"nothing to submit: all 2 benchmarks are queued ({record['gym_job_id']});"
    )
    assert (
        "gymbuild resubmit config=" in said[0] and "only=NAME" in said[0]
    )  # how a failed or cancelled one goes again
    assert wrapper.calls() == 2

    changed = gymbuild(
        "submit", f"config={path}", "driver.benchmarks.a.run.fake_num_calls=2", cwd=tmp_path, env=env
    )
    assert changed.rc == 0, changed
    job_a = job_ids(record)["a"]
    assert f"a changed since it was queued as job {job_a}; it was left alone" in changed.stderr
    assert "b changed" not in changed.stderr
    assert wrapper.calls() == 2
    assert manifest(config) == record

    fresh = gymbuild("submit", f"config={path}", "new=1", cwd=tmp_path, env=env)
    assert fresh.rc == 0, fresh
    dirs = run_dirs(config["job"]["output_path"])
    assert len(dirs) == 2
    new_record = json.loads((dirs[-1] / "gym-job.json").read_text())
    assert new_record["gym_job_id"] != record["gym_job_id"]
    assert new_record["run_dir"] == str(dirs[-1]) != record["run_dir"]
    assert wrapper.calls() == 4
    assert set(job_ids(new_record).values()).isdisjoint(job_ids(record).values())
    _assert_queued_once(new_record)
