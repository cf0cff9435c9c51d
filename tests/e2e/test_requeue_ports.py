"""A requeued job on a busy node: Slurm runs it again under the same job id (preemption, a node
failure, `scontrol requeue`), and by then another job may hold the port its services took before.
Each service settles a port anew, and the job must wait for that one, never the port its last run
published under the same id.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from e2e_helpers import (
    gymbuild,
    job_ids,
    manifest,
    policy_service,
    run_dir,
    slurm_config,
    user_env,
    wait_for_file,
    write_config,
)

pytestmark = pytest.mark.cluster

# Takes a port on node1 the way another job's service does (tests/cluster: each node is a network
# namespace; a job claims a port with an abstract unix socket named after it, lib.sh.j2). The first
# run's claim lasts until its step is gone, a moment after the requeue: retried until then.
CLAIM = """
import socket, sys, time
port = int(sys.argv[1])
claim = socket.socket(socket.AF_UNIX)
deadline = time.monotonic() + 60
while True:
    try:
        claim.bind("\\0gym-port-%d" % port)
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("the first run never let go of port %d" % port)
        time.sleep(0.2)
print("claimed", flush=True)
sys.stdin.read()
"""

# The driver: on the first run it waits to be requeued; on the second it ends, and so does the job.
COMMAND = 'if [ -e "$GYM_BENCH_DIR/ran-once" ]; then exit 0; fi\n: >"$GYM_BENCH_DIR/ran-once"\nexec sleep 600'


def test_a_requeued_job_whose_policy_takes_another_port_waits_for_that_one(cluster, tmp_path):
    output = cluster.run_dir("requeue-ports")
    data = slurm_config(
        output,
        {"again": {"command": COMMAND}},
        services={"policy": policy_service(health_check={"timeout_seconds": 10})},
        extra_args={"nodelist": "node1"},
    )
    config = write_config(tmp_path, data)
    submitted = gymbuild("submit", f"config={config}", cwd=tmp_path, env=user_env(tmp_path))
    assert submitted.rc == 0, submitted.stdout + submitted.stderr
    job = job_ids(manifest(output))["again"]
    assert job
    bench = run_dir(output) / "again"
    port_file = bench / ".gym_ports" / f"policy-{job}"
    claimer = None
    try:
        wait_for_file(bench / "ran-once")  # the driver runs: the first run's policy was healthy
        first_port = int(port_file.read_text())
        subprocess.run(["scontrol", "requeuehold", job], check=True, capture_output=True, timeout=30)
        claimer = subprocess.Popen(
            ["ip", "netns", "exec", "gym-node1", sys.executable, "-c", CLAIM, str(first_port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert claimer.stdout is not None
        assert claimer.stdout.readline().strip() == "claimed", f"could not take port {first_port} on node1"
        subprocess.run(["scontrol", "release", job], check=True, capture_output=True, timeout=30)

        result = cluster.wait_for_job(job)
        log = (bench / "logs" / f"slurm-{job}.log").read_text()
        assert (result.state, result.exit_code) == ("COMPLETED", 0), log
        second_port = int(port_file.read_text())
        assert second_port != first_port
        assert f"gym: service policy is healthy at http://localhost:{second_port}/health" in log
    finally:
        subprocess.run(["scancel", job], capture_output=True, check=False)
        if claimer is not None:
            claimer.kill()
            claimer.wait()
