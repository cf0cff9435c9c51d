"""Behaviour parity on the real test cluster: a sample of the corpus submitted with Slurm's own sbatch.

tests/parity/behaviour.py runs both tools' batch scripts on a simulated allocation: it reads the
`#SBATCH` directives itself and its srun stub fixes each step's task layout, so it cannot see what
real sbatch and srun decide (issue 27, "The harness is kinder than Slurm"): which of a repeated
directive wins, how a value with a space is read, how many tasks and nodes srun gives a step from the
job's allocation and the environment it inherits (SLURM_NTASKS_PER_NODE from `--ntasks-per-node`).
Here a few corpus configs where those decisions matter (SAMPLE) are fitted to the test cluster
(`on_cluster`), both tools' scripts are rendered for the same run dir (NeMo Gym 0.7.0's through the
oracle, gymbuild's through its renderer, both as behaviour.py gets them), each is submitted with
`sbatch --hold`, released one job at a time (so no two of these jobs share a node's ports or a bench
dir), and what Slurm decided is compared:

  job    the job's fields as slurmctld holds them (`scontrol show job -o`: partition, account, name,
         node and task counts, TRES with gres/gpu, time limit, comment, mail type, working dir, ...),
         or sbatch's refusal
  steps  each step Slurm ran, keyed by its container image: node and task counts and which of the
         job's nodes (sacct), and per node the tasks and container options pyxis got (the fake
         pyxis's records)
  state  how the job ended (sacct)

The fake programs are not a real image: a job may fail where a real one would not, so only the
steps both jobs started are compared (as behaviour.py compares "steps both started"). Every
difference fails the test unless KNOWN lists it with its reason; an entry that matches nothing
fails too ("no longer differs: remove this entry").
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Cluster
from tests.e2e_helpers import DRIVER_IMAGE
from tests.oracle.nemo_gym import NemoGym
from tests.parity import behaviour as bh
from tests.script_runs import stage_secrets

pytestmark = [pytest.mark.cluster, pytest.mark.oracle]

ACCEPT = bh.HERE / "corpus" / "accept"
# The sample: corpus configs where Slurm's own reading decides what runs, and why each is here.
SAMPLE: dict[str, str] = {
    "extra-args-before-pools": "a directive in compute.extra_args and a pool's: which one sbatch keeps",
    "extra-args-with-space": "an extra_args value with a space: how sbatch reads the #SBATCH line",
    "ntasks-per-node-two": "--ntasks-per-node=2: srun derives a step's tasks from SLURM_NTASKS_PER_NODE",
    "dp-multi-node": "data-parallel instances over both nodes: a step over the whole allocation",
    "multi-node-single-instance": "one instance over two nodes of 4 GPUs each: gres/gpu per node",
}
WALLTIME = "00:05:00"
MAX_NODES, MAX_GPUS = 2, 8  # tests/cluster/README.md: node1 and node2, 8 fake GPUs each
# Ports no other suite's job asks for (gymbuild's jobs try theirs from 8000 and 13345 upwards).
SERVICE_PORT, RPC_PORT = 28000, 28345
JOB_WAIT = 300.0  # seconds; the cluster may be loaded by the other suites

# scontrol's job fields that belong to one job, not to what its script asked for (never compared).
PER_JOB = {
    *("JobId", "ArrayJobId", "UserId", "GroupId", "Priority", "Nice", "JobState", "Reason"),
    *("Restarts", "BatchFlag", "Reboot", "ExitCode", "DerivedExitCode", "RunTime", "SubmitTime"),
    *("EligibleTime", "AccrueTime", "StartTime", "EndTime", "Deadline", "SuspendTime"),
    *("SecsPreSuspend", "LastSchedEval", "PreemptEligibleTime", "PreemptTime", "Scheduler"),
    *("NodeList", "BatchHost", "SchedNodeList", "ReqNodeList", "ExcNodeList", "Command", "Power"),
    "StdIn",
    "AllocNode:Sid",  # the submitting process's session
    # "logs" (behaviour.NORMALIZATIONS): gymbuild keeps the batch log in logs/slurm-%j.log
    *("StdOut", "StdErr"),
}
# The differences Slurm shows: (regex on `<config> <difference>`, why). Each is a NeMo Gym bug that
# gymbuild does not copy (differences.yaml, `behaviour`, lists it as the simulated harness sees it);
# a difference gymbuild should fix is not listed here but fixed.
KNOWN: list[tuple[str, str]] = [
    (
        r'^extra-args-with-space sbatch: NeMo Gym "sbatch: error: Invalid directive found in batch '
        r'script: eval" / gymbuild "accepted"$',
        "nemo-bug: NeMo Gym writes `#SBATCH --comment=nightly eval` unquoted, which the real sbatch "
        'refuses (a second word); gymbuild writes --comment="nightly eval" (Comment=nightly eval)',
    ),
    (
        r"^ntasks-per-node-two step vllm/vllm-openai:v0\.10\.1 (ntasks|pyxis): NeMo Gym ",
        "nemo-bug: one vLLM instance over two nodes with ntasks_per_node 2: NeMo Gym's step asks "
        "--ntasks=4, so srun runs two `ray symmetric-run` per node on the same GPUs; gymbuild's step "
        "runs one task per node (--ntasks=2 --ntasks-per-node=1, which the job's "
        "SLURM_NTASKS_PER_NODE=2 does not override)",
    ),
]


def on_cluster(tree: dict[str, Any], output_path: Path) -> dict[str, Any]:
    """The config fitted to the test cluster: every slurm compute on account `gym` with a 5-minute
    walltime, submitted here (no login hostname: this machine is the login node), every pool on
    partition `gpu` with at most 2 nodes and 8 GPUs a node, the run under `output_path` (the shared
    filesystem every node sees), and each vLLM service on ports no other suite's job wants: NeMo
    Gym's servers bind their configured port without looking, so another job on the node holding
    8000 would end NeMo Gym's job early, a failure of the shared cluster and not of its script.
    Only what the cluster cannot hold changes: the directives the sample is about (a compute's
    extra_args repeating the pool's, `ntasks_per_node`) stay as written, so sbatch meets them as a
    user's would."""
    out = copy.deepcopy(tree)
    for service in (out.get("services") or {}).values():
        if isinstance(service, dict) and service.get("type") == "vllm":
            service.update(port=SERVICE_PORT, data_parallel_rpc_port=RPC_PORT)
    for compute in (out.get("compute") or {}).values():
        if not isinstance(compute, dict) or compute.get("type") != "slurm":
            continue
        compute.update(account="gym", walltime=WALLTIME)
        compute.pop("hostname", None)
        for pool in (compute.get("node_pools") or {}).values():
            pool["partition"] = "gpu"
            pool["nodes"] = min(int(pool.get("nodes", 1) or 1), MAX_NODES)
            if pool.get("gpus_per_node") is not None:
                pool["gpus_per_node"] = min(int(pool["gpus_per_node"]), MAX_GPUS)
    out.setdefault("job", {})["output_path"] = str(output_path)
    return out


@dataclass
class Job:
    """One tool's batch script as Slurm took it."""

    tool: str
    script: Path
    job_id: str = ""
    refused: str = ""  # sbatch's message when it refused the script
    fields: dict[str, str] = field(default_factory=dict)
    state: str = ""
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)


FIELD = re.compile(r"(?:^| )([A-Za-z][\w/:]*)=")


def job_fields(text: str) -> dict[str, str]:
    """`scontrol show job -o` as its fields; a value may hold spaces (Comment=nightly eval)."""
    keys = list(FIELD.finditer(text.strip()))
    line = text.strip()
    return {
        m.group(1): line[m.end() : keys[i + 1].start() if i + 1 < len(keys) else len(line)].strip()
        for i, m in enumerate(keys)
    }


def submit(job: Job, env: dict[str, str]) -> None:
    """sbatch --hold, as the tool's submitter runs it (from the bench dir's run dir)."""
    done = subprocess.run(
        ["sbatch", "--parsable", "--hold", str(job.script)],
        cwd=job.script.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        job.refused = (
            done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        )
    else:
        job.job_id = done.stdout.strip().split(";")[0]


def scontrol(job_id: str) -> dict[str, str]:
    out = subprocess.run(
        ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=30
    ).stdout
    return job_fields(out)


def hostnames(nodelist: str) -> list[str]:
    out = subprocess.run(
        ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=30
    ).stdout
    return out.split()


def sacct_steps(cluster: Cluster, job_id: str) -> dict[str, list[str]]:
    """sacct's record of each step the job ran (JobName, NNodes, NTasks, NodeList by step number),
    once it holds every step the fake pyxis saw start: accounting may lag the job's end a moment."""
    started = {p.name.split(".")[1] for p in cluster.fake_pyxis_dir.glob(f"{job_id}.*.json")}
    started = {s for s in started if s.isdigit()}
    deadline = time.monotonic() + 60
    while True:
        out = subprocess.run(
            ["sacct", "-j", job_id, "--format=JobID,JobName,NNodes,NTasks,NodeList", "-P", "-n"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        rows = {line.split("|")[0].partition(".")[2]: line.split("|")[1:] for line in out.splitlines()}
        got = {step: row for step, row in rows.items() if step.isdigit()}
        if started <= set(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def steps(cluster: Cluster, job: Job) -> dict[str, dict[str, Any]]:
    """Each step Slurm ran for the job, keyed by its container image (`#n` for a second one): nodes
    and tasks as sacct records them, the nodes as indexes into the job's allocation, and per node
    what the fake pyxis recorded. The batch and extern steps are the job's fields' part."""
    nodes = hostnames(job.fields.get("NodeList", ""))
    got: dict[str, dict[str, Any]] = {}
    for step, (_name, nnodes, ntasks, nodelist) in sorted(
        sacct_steps(cluster, job.job_id).items(), key=lambda kv: int(kv[0])
    ):
        records = cluster.pyxis_records(job.job_id, step)
        image = next((r.get("image") for r in records if r.get("image")), None) or "<no container>"
        key, n = image, 2
        while key in got:
            key, n = f"{image}#{n}", n + 1
        per_node = {}
        for r in records:
            mounts = [
                m for m in r.get("mounts") or [] if not m.split(":")[0].endswith("/.gym_ports")
            ]  # "ports"
            per_node[f"node {r['node_id']}"] = {
                "local_tasks": r.get("local_tasks"),
                "mounts": sorted(mounts),
                **{
                    k: r.get(k)
                    for k in ("image", "workdir", "mount_home", "remap_root", "entrypoint", "writable")
                },
            }
        got[key] = {
            "nnodes": nnodes,
            "ntasks": ntasks,
            "nodes": [nodes.index(h) if h in nodes else h for h in hostnames(nodelist)],
            "pyxis": per_node,
        }
    return got


@dataclass
class Pair:
    config: str
    theirs: Job
    ours: Job
    differences: list[tuple[str, str]] = field(default_factory=list)
    compared: dict[str, int] = field(default_factory=dict)  # comparisons made, per category

    def diff(self, category: str, where: str, ours: Any, theirs: Any) -> None:
        self.compared[category] = self.compared.get(category, 0) + 1
        bh.diff_values(category, where, ours, theirs, self.differences)


def compare(pair: Pair) -> None:
    """What Slurm decided for the two jobs; differences go to pair.differences ((category, text))."""
    t, o = pair.theirs, pair.ours
    pair.diff("job", "sbatch", o.refused or "accepted", t.refused or "accepted")
    if t.refused or o.refused:
        return
    for key in sorted((set(t.fields) | set(o.fields)) - PER_JOB):
        pair.diff("job", key, o.fields.get(key, "<absent>"), t.fields.get(key, "<absent>"))
    pair.diff("state", "job state", o.state, t.state)
    for role in sorted(set(t.steps) & set(o.steps)):  # only the steps both jobs started
        for key in ("nnodes", "ntasks", "nodes", "pyxis"):
            pair.diff("steps", f"step {role} {key}", o.steps[role][key], t.steps[role][key])
    if "COMPLETED" in (t.state, o.state):  # a job that completed started every step it has
        pair.diff("steps", "steps started", sorted(o.steps), sorted(t.steps))


def prepare(cluster: Cluster, nemo_gym: NemoGym, work: Path) -> list[Pair]:
    """Both tools' scripts for each sampled config, in one bench dir each on the shared filesystem."""
    cases = []
    for name in SAMPLE:
        source = ACCEPT / f"{name}.yaml"
        root = cluster.run_dir(f"slurm-sample-{name}")
        config = work / f"{name}.yaml"
        config.write_text(
            yaml.safe_dump(on_cluster(yaml.safe_load(source.read_text()), root), sort_keys=False)
        )
        cases.append(bh.Case(name, config, source, "on-cluster", str(root / bh.GYM_JOB_ID)))
    asks = [{"id": c.id, "config": str(c.config), "run_dir": c.run_dir} for c in cases]
    answers = bh.oracle(nemo_gym.python, {"scripts": asks})["scripts"]
    pairs = []
    for case in cases:
        theirs = answers[case.id]
        assert "error" not in theirs, f"{case.id}: NeMo Gym refuses the fitted config: {theirs['error']}"
        rendered = bh.gymbuild_files(case)
        assert not isinstance(rendered, str), f"{case.id}: gymbuild refuses the fitted config: {rendered}"
        ours, (resolved, plans) = rendered
        assert set(ours) == set(theirs["benches"]), case.id
        home = Path(case.run_dir).parent / "home"
        for bench, files in theirs["benches"].items():
            bench_dir = Path(case.run_dir) / bench
            for sub in ("logs", "artifacts"):  # what both tools' submitters create before sbatch
                (bench_dir / sub).mkdir(parents=True, exist_ok=True)
            stage_secrets(home, plans[bench], resolved.secrets)
            jobs = []
            for tool, text in (("nemo-gym", files["job.sh"]), ("gymbuild", ours[bench]["job.sh"])):
                script = bench_dir.parent / f"{bench}-{tool}.sh"
                script.write_text(text)
                jobs.append(Job(tool, script))
            pairs.append(Pair(case.id if len(ours) == 1 else f"{case.id}/{bench}", *jobs))
    return pairs


def job_env(home: Path) -> dict[str, str]:
    """The submitting shell sbatch exports to the job: the fake programs on PATH, the tests' polls."""
    keep = ("GYM_POLL_SECONDS", "GYM_COLLECTOR_FLUSH_SECONDS", "SLURM_CONF", "LANG")
    return {
        **{k: os.environ[k] for k in keep if k in os.environ},
        **bh.SUBMIT_ENV,
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "USER": os.environ.get("USER", "root"),
    }


@pytest.fixture(scope="module")
def sample(
    cluster: Cluster, nemo_gym: NemoGym, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Pair]]:
    pairs = prepare(cluster, nemo_gym, tmp_path_factory.mktemp("slurm-sample"))
    jobs = [j for p in pairs for j in (p.theirs, p.ours)]
    try:
        for job in jobs:
            submit(job, job_env(job.script.parent / "home"))
        # One job at a time: NeMo Gym's servers take their configured ports, and a case's two jobs
        # share its bench dir, as in behaviour.py.
        for job in jobs:
            if not job.job_id:
                continue
            subprocess.run(["scontrol", "release", job.job_id], check=True, capture_output=True, timeout=30)
            job.state = cluster.wait_for_job(job.job_id, timeout=JOB_WAIT).state
            job.fields = scontrol(job.job_id)
            job.steps = steps(cluster, job)
        for pair in pairs:
            compare(pair)
        yield pairs
    finally:
        ids = [j.job_id for j in jobs if j.job_id]
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, timeout=60, check=False)


def known(text: str) -> str | None:
    return next((why for pattern, why in KNOWN if re.search(pattern, text)), None)


@pytest.mark.parametrize("config", list(SAMPLE))
def test_slurm_decides_the_same_for_both_scripts(sample: list[Pair], config: str) -> None:
    pairs = [p for p in sample if p.config.split("/")[0] == config]
    assert pairs and all(p.compared.get("job") for p in pairs)
    unexpected = [
        f"[{cat}] {text}" for p in pairs for cat, text in p.differences if known(f"{p.config} {text}") is None
    ]
    assert not unexpected, "\n".join(unexpected)


def test_every_known_difference_is_still_seen(sample: list[Pair]) -> None:
    seen = {
        pattern
        for p in sample
        for _, text in p.differences
        for pattern, _ in KNOWN
        if re.search(pattern, f"{p.config} {text}")
    }
    stale = [f"{pattern} ({why})" for pattern, why in KNOWN if pattern not in seen]
    assert not stale, "no longer differs: remove this entry\n" + "\n".join(stale)


def test_the_sample_compares_what_slurm_decided(sample: list[Pair], record_property: Any) -> None:
    """Every category was compared, and the steps of at least one job pair that both reached their
    driver (the python:3.12 step), so a sample whose jobs all die early cannot pass by comparing
    nothing; gymbuild's quoted comment reached Slurm as one value."""
    for p in sample:
        states = (
            f"{p.theirs.job_id or '-'} {p.theirs.state or p.theirs.refused} / {p.ours.job_id} {p.ours.state}"
        )
        print(
            f"{p.config}: NeMo Gym / gymbuild {states}; compared {p.compared}; "
            f"{len(p.differences)} differences"
        )
        record_property(p.config, p.compared)
    for category in ("job", "state", "steps"):
        assert sum(p.compared.get(category, 0) for p in sample) > 0, category
    assert any(DRIVER_IMAGE in p.theirs.steps and DRIVER_IMAGE in p.ours.steps for p in sample), (
        "no pair of jobs both reached the driver"
    )
    (spaced,) = [p for p in sample if p.config == "extra-args-with-space"]
    assert spaced.ours.fields.get("Comment") == "nightly eval", spaced.ours.fields
