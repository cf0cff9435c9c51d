"""End to end: gymbuild's jobs really run on the test cluster (issue 5).

Every scenario is submitted once, all at the same time, by a module fixture (so the suite waits for
the slowest job, not for the sum of them); each test then waits for its own jobs and checks what a
user would look at: sacct's verdict, the run directory's logs and artifacts, and the container
options each step got (fake-pyxis records).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import (
    DRIVER_IMAGE,
    POLICY_IMAGE,
    Run,
    gymbuild_argv,
    job_ids,
    manifest,
    policy_service,
    pyxis_steps,
    read_jsonl,
    run_dir,
    slurm_config,
    user_env,
    write_config,
)

pytestmark = pytest.mark.cluster


@dataclass(frozen=True)
class Submitted:
    """One scenario's config, its `gymbuild submit` and the record it wrote."""

    config: dict[str, Any]
    submit: Run
    record: dict[str, Any] | None

    def job(self, bench: str) -> str:
        assert self.submit.rc == 0, f"submit failed:\n{self.submit.stdout}{self.submit.stderr}"
        assert self.record is not None
        job_id = job_ids(self.record)[bench]
        assert job_id, self.record
        return job_id

    def bench_dir(self, bench: str) -> Path:
        return run_dir(self.config) / bench


def _scenarios(cluster: Any, mount_src: Path) -> dict[str, dict[str, Any]]:
    out = cluster.run_dir
    two_calls = {"config_paths": ["benchmarks/gpqa/config.yaml"], "fake_num_calls": 2}
    return {
        # One node: the policy and the driver in their own containers, with the mounts asked for.
        "one_node": slurm_config(
            out("e2e-one-node"),
            {"gpqa": {"run": two_calls}},
            services={"policy": policy_service(mounts=[f"{mount_src}:/models:ro"])},
            pools={"gpu": {"partition": "gpu", "nodes": 1, "gpus_per_node": 1}},
            driver={"container": DRIVER_IMAGE, "mounts": [f"{mount_src}:/data"]},
        ),
        # Two pools of one node each: the policy pinned to `serve`, so the driver runs beside it.
        "two_node": slurm_config(
            out("e2e-two-node"),
            {"gpqa": {"run": two_calls}},
            services={"policy": policy_service(node_pool="serve")},
            pools={"serve": {"partition": "gpu", "nodes": 1}, "drive": {"partition": "gpu", "nodes": 1}},
        ),
        # Two benchmarks on node1 at once, submitted on the login node itself (no hostname): each
        # job's policy wants port 8000, so one of them must settle on another port at run time.
        "same_node": slurm_config(
            out("e2e-same-node"),
            {
                name: {"run": {**two_calls, "fake_call_interval_seconds": 3, "fake_sleep_seconds": 5}}
                for name in ("first", "second")
            },
            pools={},
            hostname=None,
            extra_args={"nodelist": "node1"},
        ),
        # With the collector on (the cluster's fake otelcol-contrib): the job ends before its driver.
        "never_healthy": {
            **slurm_config(
                out("e2e-never-healthy"),
                {"gpqa": {"run": two_calls}},
                services={
                    "policy": policy_service(
                        env={"FAKE_VLLM_NEVER_HEALTHY": "lit:1"}, health_check={"timeout_seconds": 10}
                    )
                },
            ),
            "otel": {
                "endpoint": "http://127.0.0.1:9",
                "service_name": "e2e-never-healthy",
                "gym_telemetry": False,
                "container": None,
            },
        },
        "dies": slurm_config(
            out("e2e-dies"),
            {"gpqa": {"run": {**two_calls, "fake_sleep_seconds": 120}}},
            services={"policy": policy_service(env={"FAKE_VLLM_DIE_AFTER": "lit:10"})},
        ),
        # A one-minute walltime (Slurm enforces it up to half a minute late): the first call at
        # about 5 s, then a 200 s pause before the second, so the first job times out with one
        # complete line; its successor resumes from it and makes only the last call (the pause comes
        # between calls, never after the last one).
        "resumable": slurm_config(
            out("e2e-resumable"),
            {
                "aime25": {
                    "resumable": True,
                    "run": {"fake_num_calls": 2, "fake_call_interval_seconds": 200},
                }
            },
            walltime="1",
        ),
    }


@pytest.fixture(scope="module")
def submitted(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Submitted]:
    """Submit every scenario at once (one `gymbuild submit` process each) and collect the records."""
    mount_src = cluster.run_dir("e2e-mount-src")
    procs = {}
    configs = _scenarios(cluster, mount_src)
    for name, config in configs.items():
        home = tmp_path_factory.mktemp(name)
        path = write_config(home, config)
        procs[name] = subprocess.Popen(
            gymbuild_argv("submit", f"config={path}"),
            cwd=home,
            env=user_env(home, OTEL_TOKEN="e2e-ingest-token"),  # read only where the collector is on
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
    found = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        config = configs[name]
        record = manifest(config) if proc.returncode == 0 else None
        found[name] = Submitted(config, Run(proc.returncode, stdout, stderr), record)
    found["mount_src"] = mount_src  # type: ignore[assignment]
    return found


def _log(bench_dir: Path, name: str) -> str:
    return (bench_dir / "logs" / name).read_text()


def _reply_host_port(line: dict[str, Any]) -> tuple[str, int]:
    match = re.search(r"on host (\S+) \(port (\d+)\)", line["reply"])
    assert match, line["reply"]
    return match.group(1), int(match.group(2))


def test_one_node_job_completes_with_the_containers_it_asked_for(cluster, submitted):
    s = submitted["one_node"]
    job = s.job("gpqa")
    assert s.submit.stdout.splitlines()[-1] == f"submitted gpqa -> Slurm job {job}"
    result = cluster.wait_for_job(job)
    bench = s.bench_dir("gpqa")
    assert (result.state, result.exit_code) == ("COMPLETED", 0), _log(bench, f"slurm-{job}.log")
    rollouts = read_jsonl(bench / "artifacts" / "rollouts.jsonl")
    assert len(rollouts) == 2 and all(r["status"] == 200 for r in rollouts)
    assert {p.name for p in (bench / "logs").iterdir()} >= {f"policy-{job}.log", f"driver-{job}.log"}

    steps = [records for records in pyxis_steps(bench, job).values()]
    by_image = {records[0]["image"]: records[0] for records in steps}
    assert set(by_image) == {POLICY_IMAGE, DRIVER_IMAGE}, steps
    mount_src = submitted["mount_src"]
    policy, driver = by_image[POLICY_IMAGE], by_image[DRIVER_IMAGE]
    assert f"{mount_src}:/models:ro" in policy["mounts"]
    assert f"{mount_src}:/data" in driver["mounts"]
    assert f"{bench}:{bench}" in driver["mounts"]  # the driver writes its artifacts through this
    assert policy["mount_home"] is False and driver["mount_home"] is False
    # The driver reached the policy on the node both ran on.
    host, _ = _reply_host_port(rollouts[0])
    assert host == policy["node"] == rollouts[0]["hostname"]


def test_two_node_job_runs_the_policy_on_its_pool_and_the_driver_beside_it(cluster, submitted):
    s = submitted["two_node"]
    job = s.job("gpqa")
    result = cluster.wait_for_job(job)
    bench = s.bench_dir("gpqa")
    assert (result.state, result.exit_code) == ("COMPLETED", 0), _log(bench, f"slurm-{job}.log")
    nodes = subprocess.run(
        ["sacct", "-j", job, "-X", "-n", "-P", "-o", "NNodes"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert nodes == ["2"]
    steps = pyxis_steps(bench, job)
    policy = next(r for records in steps.values() for r in records if r["image"] == POLICY_IMAGE)
    assert policy["nnodes"] == 1 and policy["node_id"] == 0  # pool `serve` is the first node
    rollouts = read_jsonl(bench / "artifacts" / "rollouts.jsonl")
    host, port = _reply_host_port(rollouts[0])
    assert host == policy["node"] == rollouts[0]["hostname"]
    published = (bench / ".gym_ports" / f"policy-{job}").read_text().strip()
    assert rollouts[0]["url"] == f"http://localhost:{published}/v1/chat/completions"
    assert port == int(published)
    assert (bench / "logs" / f"driver-{job}.log").is_file()


def test_two_jobs_on_one_node_each_talk_to_their_own_policy(cluster, submitted):
    s = submitted["same_node"]
    assert s.submit.rc == 0, s.submit.stderr
    assert s.record is not None and s.record["hostname"] is None  # submitted here, no SSH
    jobs = {b: s.job(b) for b in ("first", "second")}
    times = {}
    ports = {}
    for bench, job in jobs.items():
        result = cluster.wait_for_job(job)
        bench_dir = s.bench_dir(bench)
        assert (result.state, result.exit_code) == ("COMPLETED", 0), _log(bench_dir, f"slurm-{job}.log")
        row = subprocess.run(
            ["sacct", "-j", job, "-X", "-n", "-P", "-o", "NodeList,Start,End"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        node, start, end = row.split("|")
        assert node == "node1"
        times[bench] = (start, end)
        published = int((bench_dir / ".gym_ports" / f"policy-{job}").read_text())
        for line in read_jsonl(bench_dir / "artifacts" / "rollouts.jsonl"):
            assert line["status"] == 200
            assert _reply_host_port(line) == ("node1", published), "a reply came from another job's server"
        ports[bench] = published
    (s1, e1), (s2, e2) = times.values()
    assert s1 < e2 and s2 < e1, f"the jobs did not overlap ({times}): this test proves nothing"
    assert ports["first"] != ports["second"]


def _processes_naming(text: str) -> list[str]:
    """The command lines of this machine's processes (every node's too) that contain `text`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        if text in argv:
            found.append(argv)
    return found


def test_a_service_that_never_becomes_healthy_fails_the_job_and_names_itself(cluster, submitted):
    s = submitted["never_healthy"]
    job = s.job("gpqa")
    result = cluster.wait_for_job(job)
    assert (result.state, result.exit_code) == ("FAILED", 1)
    bench = s.bench_dir("gpqa")
    log = _log(bench, f"slurm-{job}.log")
    assert "service otel_collector is healthy" in log and "service policy was not ready" in log, log
    assert not (bench / "artifacts" / "rollouts.jsonl").exists()
    # The job stopped its collector on the way out: nothing of it outlives the job.
    assert _processes_naming(str(bench / "otel")) == []


def test_a_service_that_dies_mid_run_stops_the_driver_and_fails_the_job(cluster, submitted):
    s = submitted["dies"]
    job = s.job("gpqa")
    result = cluster.wait_for_job(job, timeout=120)
    bench = s.bench_dir("gpqa")
    log = _log(bench, f"slurm-{job}.log")
    assert result.state == "FAILED" and result.exit_code != 0, log
    assert "service step policy exited while the driver was running" in log, log
    assert "received SIGTERM" in _log(bench, f"driver-{job}.log")
    assert len(read_jsonl(bench / "artifacts" / "rollouts.jsonl")) == 2  # it did run before


def test_a_resumable_benchmark_that_times_out_is_resumed_by_its_successor(cluster, submitted):
    s = submitted["resumable"]
    first = s.job("aime25")
    bench = s.bench_dir("aime25")
    assert cluster.wait_for_job(first, timeout=150).state == "TIMEOUT"
    chain = []
    for _ in range(60):  # the successor appends itself when it starts
        chain = (bench / ".gym_job_chain").read_text().split()
        if len(chain) == 2:
            break
        subprocess.run(["sleep", "1"], check=True)
    assert chain[0] == first and len(chain) == 2, chain
    second = chain[1]
    result = cluster.wait_for_job(second, timeout=120)
    assert (result.state, result.exit_code) == ("COMPLETED", 0), _log(bench, f"slurm-{second}.log")
    rollouts = read_jsonl(bench / "artifacts" / "rollouts.jsonl")
    assert [r["index"] for r in rollouts] == [0, 1]
    assert [r["slurm_job_id"] for r in rollouts] == [first, second]
    assert f"previous job {first} ended TIMEOUT" in _log(bench, f"slurm-{second}.log")
    # The timeout came after a new row: resumed without spending a retry; the completion ends the chain.
    attempts = [line.split("\t") for line in (bench / ".gym_attempts").read_text().splitlines()]
    assert [(a[0], a[5], a[6]) for a in attempts] == [
        (first, "head", "head of the chain"),
        (second, "resume", "TIMEOUT after 1 new rows"),
    ]
    assert (bench / ".gym_chain_end").read_text() == "complete: 2 rows\n"
    assert not (bench / ".gym_infra_retries").exists()
    assert (bench / "logs" / f"driver-{first}.log").is_file()
    assert (bench / "logs" / f"driver-{second}.log").is_file()
