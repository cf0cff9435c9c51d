"""The test cluster itself (tests/cluster/): what e2e tests rely on, proven against real Slurm.

Needs the cluster up (tests/cluster/up); skipped with a reason otherwise.
"""

from __future__ import annotations

import json
import random
import subprocess
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.conftest import Cluster

pytestmark = pytest.mark.cluster


def submit(
    cluster: Cluster, run_dir: Path, body: str, *directives: str, via_ssh: bool = True, name: str = "job.sh"
) -> str:
    """Write the script `name` in run_dir and sbatch it (over ssh gym-login, or locally) from there;
    returns the job id."""
    header = [
        "#!/bin/bash",
        f"#SBATCH --account={cluster.account}",
        f"#SBATCH --partition={cluster.partition}",
        f"#SBATCH --chdir={run_dir}",
        "#SBATCH --output=slurm-%j.out",
        "#SBATCH --time=5",
        *(f"#SBATCH {d}" for d in directives),
    ]
    script = run_dir / name
    script.write_text("\n".join(header) + "\n" + textwrap.dedent(body))
    if via_ssh:
        out = cluster.ssh(f"sbatch --parsable {script}").stdout
    else:
        out = subprocess.run(
            ["sbatch", "--parsable", str(script)], capture_output=True, text=True, check=True
        ).stdout
    return out.strip().split(";")[0]


def job_output(run_dir: Path, job_id: str) -> str:
    return (run_dir / f"slurm-{job_id}.out").read_text()


def test_two_node_container_steps_run_on_both_nodes_and_are_recorded(cluster: Cluster) -> None:
    run_dir = cluster.run_dir("pyxis")
    (run_dir / "models").mkdir()
    job = submit(
        cluster,
        run_dir,
        f"""
        srun --overlap --container-image=img:1 --container-mounts={run_dir}/models:/b \\
            --no-container-mount-home \\
            bash -c 'echo "step on $(hostname) image=$FAKE_PYXIS_IMAGE mounts=$FAKE_PYXIS_MOUNTS" \\
                "no_home=$FAKE_PYXIS_NO_MOUNT_HOME"'
        """,
        "--nodes=2",
        "--ntasks-per-node=1",
    )
    result = cluster.wait_for_job(job)
    out = job_output(run_dir, job)
    assert result.state == "COMPLETED", out
    for node in cluster.nodes:
        assert f"step on {node} image=img:1 mounts={run_dir}/models:/b no_home=1" in out

    records = cluster.pyxis_records(job, 0)
    assert sorted(r["node"] for r in records) == sorted(cluster.nodes)
    for record in records:
        assert record["image"] == "img:1"
        assert record["mounts"] == [f"{run_dir}/models:/b"]
        assert record["mount_home"] is False
        assert record["cwd"] == str(run_dir)
    # The same record next to the job, for tests that only know the run directory.
    local = (run_dir / ".fake-pyxis" / f"{job}.0.json").read_text().splitlines()
    assert len(local) == 2


def test_no_shell_of_the_login_or_of_a_job_step_reads_the_users_bashrc(cluster: Cluster) -> None:
    """The login is the machine's root, whose ~/.bashrc is the developer's (pyenv init, whose rehash
    takes a machine-wide lock): a cluster shell that read it waited 60 s behind a stale lock, and a
    whole CI run failed. A HOME with an rc file that leaves a mark stands in for that ~/.bashrc, for
    a shell started as the session's own and for a step started as gymbuild's job script starts one
    (a backgrounded srun, whose exec takes SHLVL back to 0)."""
    run_dir = cluster.run_dir("bashrc")
    home = run_dir / "home"
    home.mkdir()
    (home / ".bashrc").write_text('echo "$0 read ~/.bashrc" >>"$HOME/marks"\n')
    # `exec` hands the session's own level down, so this bash is as top-level as the session's.
    cluster.ssh(f"HOME={home} exec bash -c : session")
    # HOME is set in the script, not with sbatch's --export=...,HOME=, which has slurmd load root's
    # environment through a login shell (`su - root`), that is, through the machine's rc files.
    job = submit(
        cluster,
        run_dir,
        f"""
        export HOME={home}
        srun --overlap --nodes=1 --ntasks=1 bash -c 'echo "step ran"' step >logs-step.out 2>&1 </dev/null &
        wait $!
        """,
    )
    result = cluster.wait_for_job(job)
    assert result.state == "COMPLETED", job_output(run_dir, job)
    assert (run_dir / "logs-step.out").read_text() == "step ran\n"
    marks = home / "marks"
    assert not marks.exists(), marks.read_text()


def test_a_missing_mount_source_fails_the_step_as_with_pyxis(cluster: Cluster) -> None:
    run_dir = cluster.run_dir("pyxis-bad-mount")
    job = submit(
        cluster,
        run_dir,
        f"srun --container-image=img:1 --container-mounts={run_dir}/absent:/data true\n",
        via_ssh=False,
    )
    result = cluster.wait_for_job(job)
    assert result.state == "FAILED"
    assert "mount source" in job_output(run_dir, job)


def test_fake_vllm_on_node2_answers_node1_over_the_bridge(cluster: Cluster) -> None:
    run_dir = cluster.run_dir("vllm")
    port = random.randint(20000, 29999)
    client = textwrap.dedent(
        f"""
        import json, time, urllib.request
        base = "http://node2:{port}"
        for _ in range(100):
            try:
                if urllib.request.urlopen(base + "/health", timeout=2).status == 200:
                    break
            except OSError:
                time.sleep(0.2)
        body = {{"model": "policy", "messages": [{{"role": "user", "content": "hi"}}]}}
        req = urllib.request.Request(
            base + "/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={{"Content-Type": "application/json"}},
        )
        reply = json.load(urllib.request.urlopen(req, timeout=10))
        print("REPLY", json.dumps(reply))
        """
    )
    (run_dir / "client.py").write_text(client)
    job = submit(
        cluster,
        run_dir,
        f"""
        srun --overlap -N1 -n1 -w node2 --container-image=vllm/vllm-openai:v0 \\
            vllm serve some/model --port {port} --served-model-name policy --tensor-parallel-size 8 \\
            > vllm.log 2>&1 &
        srun --overlap -N1 -n1 -w node1 --container-image=python:3 python3 client.py
        # A second server on the same port refuses to start, like the real one.
        srun --overlap -N1 -n1 -w node2 vllm serve other --port {port} > vllm2.log 2>&1
        echo "second vllm exit=$?"
        """,
        "--nodes=2",
        "--ntasks-per-node=1",
    )
    result = cluster.wait_for_job(job)
    out = job_output(run_dir, job)
    assert result.state == "COMPLETED", out
    reply = json.loads(out.split("REPLY ", 1)[1].splitlines()[0])
    assert reply["object"] == "chat.completion"
    assert reply["model"] == "policy"
    content = reply["choices"][0]["message"]["content"]
    assert "policy" in content and "node2" in content
    assert "second vllm exit=1" in out
    assert "10.77.0.11" in (run_dir / "vllm.log").read_text()  # node1's address on the bridge


def test_gpus_per_node_is_accepted_and_allocated(cluster: Cluster) -> None:
    run_dir = cluster.run_dir("gpus")
    job = submit(cluster, run_dir, "true\n", "--nodes=2", "--gpus-per-node=2")
    assert cluster.wait_for_job(job).state == "COMPLETED"
    tres = subprocess.run(
        ["sacct", "-j", job, "-X", "-n", "-P", "-o", "AllocTRES"], capture_output=True, text=True
    ).stdout
    assert "gres/gpu=4" in tres


def test_a_per_user_submit_limit_makes_slurm_refuse_the_job(cluster: Cluster) -> None:
    # The limit goes on root's association with an account of its own, so jobs that other tests
    # submit under account gym meanwhile are not refused.
    account = "gym-limits"

    def sacctmgr(*args: str) -> None:
        subprocess.run(["sacctmgr", "-i", *args], capture_output=True, text=True, timeout=30)

    sacctmgr("add", "account", account, "cluster=gymtest")
    sacctmgr("add", "user", "root", f"account={account}", "cluster=gymtest")
    run_dir = cluster.run_dir("limit")
    script = run_dir / "held.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    held = []
    try:
        sacctmgr("modify", "user", "root", "where", f"account={account}", "set", "maxsubmitjobs=1")
        sbatch = ["sbatch", "--parsable", "--hold", f"--account={account}", f"--chdir={run_dir}"]
        first = subprocess.run([*sbatch, str(script)], capture_output=True, text=True, check=True)
        held.append(first.stdout.strip())
        # slurmdbd pushes the new limit to slurmctld within moments: until then a job may pass.
        deadline = time.monotonic() + 20
        while True:
            second = subprocess.run([*sbatch, str(script)], capture_output=True, text=True)
            if second.returncode != 0 or time.monotonic() > deadline:
                break
            held.append(second.stdout.strip())
            subprocess.run(["scancel", held.pop()], check=False)
            time.sleep(0.5)
        assert second.returncode != 0, "sbatch was not refused"
        assert "submit limit" in second.stderr or "violates accounting" in second.stderr, second.stderr
    finally:
        if held:
            subprocess.run(["scancel", *held], check=False)
        sacctmgr("modify", "user", "root", "where", f"account={account}", "set", "maxsubmitjobs=-1")


def test_two_single_cpu_jobs_run_at_the_same_time_on_one_node(cluster: Cluster) -> None:
    run_dir = cluster.run_dir("share")
    jobs = []
    for me, other in (("a", "b"), ("b", "a")):
        # Each job announces itself and waits for the other: both complete only if they overlap.
        body = f"""
            touch arrived-{me}
            for _ in $(seq 150); do [ -e arrived-{other} ] && {{ hostname; exit 0; }}; sleep 0.2; done
            echo "job {me}: the other job never ran alongside" >&2
            exit 1
            """
        jobs.append(submit(cluster, run_dir, body, "--nodelist=node1", "--ntasks=1", name=f"{me}.sh"))
    for job in jobs:
        result = cluster.wait_for_job(job)
        out = job_output(run_dir, job)
        assert result.state == "COMPLETED", out
        assert out.strip() == "node1"
