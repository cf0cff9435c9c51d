"""Behaviour parity: NeMo Gym 0.7.0's batch script and gymbuild's job.sh, run side by side.

For each accepted config and allocation layout, both scripts are written into the same bench dir
and run with bash under the recording stubs of tests/parity/stubs (srun, vllm, gym, ... on a PATH
this module controls), on a simulated Slurm allocation of one or several nodes. What they did is
reduced to what a user (or the cluster) would notice, per category:

  directives  the effective `#SBATCH` values
  steps       the srun steps started: nodes, task count, container, mounts, and each task's program
              and its arguments as that program reads them
  env         the environment each step's program sees (the config's env, HEAD_NODE_IP,
              RAY_HEAD_NODE_IP, GYM_POOL_*, GYM_RAY_*, NEMO_GYM_*, OTEL_*, VLLM_*)
  overrides   `gym eval run` / `gym eval prepare` overrides as Hydra's parser reads them (the
              oracle's Hydra: the same keys, kinds, values and types)
  collector   otel/collector.yaml, parsed
  status      the job's exit status, and what ran, when a stub fails (gym exits 3, a service dies,
              prepare fails) and at each turn of a resume chain (sacct's answers)
  resume      the successor's sbatch and the chain's counter files

Only what must differ is normalized, each item in NORMALIZATIONS with its reason (the same list is
in docs/compatibility.md, "Behaviour"). Every other difference is reported; the known ones that
belong to another part of the work are listed in test_behaviour.py's KNOWN with the reason they are
still open, and those that stay on purpose in differences.yaml (`behaviour`) with theirs.
"""

from __future__ import annotations

import contextlib
import copy
import getpass
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import yaml

from tests.parity.cases import ENV as CORPUS_ENV
from tests.script_runs import stage_secrets

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
STUBS = HERE / "stubs"
ORACLE_SCRIPT = HERE / "behaviour_oracle.py"
GYM_JOB_ID = "gym-job-20260101T000000Z-abcdef"
JOB_ID = "4242"
OUTPUT_TAIL = 40  # lines of a job's output shown when the two tools' exit statuses differ
PREV_JOB_ID = "4100"
# The environment a submitter has: what the corpus reads (${oc.env:...}, host:), host: secrets and
# the otel token (examples and the corpus use these).
SUBMIT_ENV = {
    **CORPUS_ENV,
    "HF_TOKEN": "hf-token-value",
    "WANDB_API_KEY": "wandb-value",
    "OTEL_TOKEN": "otel-token-value",
    "OTEL_EXPORTER_OTLP_TOKEN": "otel-token-value",
    "GYM_OTEL_TOKEN": "otel-token-value",
    "NEMO_GYM_OTEL_TOKEN": "otel-token-value",
}
_ENVIRON_LOCK = threading.Lock()
CATEGORIES = ("directives", "steps", "env", "overrides", "collector", "status", "resume")

# What is normalized before comparing, and why (docs/compatibility.md, "Behaviour", lists the same).
NORMALIZATIONS = {
    "ports": "gymbuild settles each port at run time on its node (the configured port first, then the "
    "next free one), so two jobs on one node never collide; a port it took is compared as the "
    "configured port it stands for",
    "monitor": "gymbuild's monitor loop: services run with srun --kill-on-bad-exit=1 --wait=1 and the "
    "driver step is named gym-driver so the loop can stop it; NeMo Gym has no monitor",
    "logs": "step logs: NeMo Gym passes srun --output=logs/<step>-$SLURM_JOB_ID.log, gymbuild redirects "
    "the step's output to the same file; #SBATCH --output=logs/slurm-%j.log keeps the batch log there too",
    "vllm-defaults": "vllm serve flags at vLLM's own defaults (--pipeline-parallel-size 1, --host 0.0.0.0, "
    "which is what vLLM binds without --host) are written by gymbuild and not by NeMo Gym",
    "install-quiet": "gym_install: gymbuild's git/uv calls add --quiet (and git --, -c advice.detachedHead="
    "false); the repository, ref, venv and installed target are compared",
    "sbatch-parsable": "the resume successor: gymbuild asks sbatch --parsable to read the job id",
    "scancel-successor": "gymbuild cancels the queued successor itself once a job completes; NeMo Gym "
    "leaves it to Slurm (the afternotok dependency can no longer be met)",
    "token-scope": "the collector's ingest token reaches only the collector step in gymbuild (NeMo Gym "
    "exports it to the batch shell, so every step sees it): a secret kept away from user code",
    "tmp": "temporary directories (mktemp) differ between runs",
    "gateway": "the Ray Serve gateway is gymbuild's own file with NeMo Gym's command line: the `ray "
    "symmetric-run` entrypoint that writes and starts it is compared by the gateway's command line "
    "(python3 ray_serve_gateway.py ...), which the stub records in both",
    "collector-env": "collector.yaml is compared as the collector reads it: each ${env:VAR} is the value "
    "of VAR in the collector's environment (gymbuild's listening ports, settled at run time, and the "
    "job's $USER are references there; NeMo Gym writes the numbers and the submitting user)",
    "collector-targets": "gymbuild's scrape jobs read file_sd target files that job.sh writes once each "
    "service has its port (relabelled with gym_service); they are compared as the static targets and "
    "labels those files hold at the end of the run, NeMo Gym's static_configs",
}


@dataclass(frozen=True)
class Case:
    """One config in one allocation layout."""

    id: str
    config: Path  # the file both tools read (a layout variant is written next to the original)
    source: Path  # the config as found (examples/, the corpus, behaviour-cases/)
    layout: str  # "as-written" or "scaled" (every node pool's nodes doubled)
    run_dir: str  # relative when the config's job.output_path is: then taken from submit_dir
    submit_dir: str = ""  # where sbatch ran (SLURM_SUBMIT_DIR): a relative --chdir is resolved from it


@dataclass
class Run:
    """What one script did: the stubs' records, its exit status and the files it left."""

    status: int | str
    records: list[dict[str, Any]]
    files: dict[str, str]
    stdout: str = ""


@dataclass
class Result:
    """Both tools' runs of one case, per benchmark and scenario, and what differs."""

    case: Case
    skipped: str = ""  # why the case was not compared (NeMo Gym refuses it, gymbuild refuses it)
    compared: dict[str, int] = field(default_factory=dict)  # comparisons made, per category
    differences: list[tuple[str, str]] = field(default_factory=list)  # (category, what differs)
    # where the exit statuses differ, the end of both batch scripts' output: why one of them failed
    outputs: list[str] = field(default_factory=list)


# --- cases ----------------------------------------------------------------------------------------


def config_files() -> list[Path]:
    """Every config the suite compares: the accept corpus, the examples and the suite's own cases."""
    files = sorted((HERE / "corpus" / "accept").glob("*.yaml"))
    files += sorted((ROOT / "examples").glob("*.yaml"))
    files += [ROOT / "examples" / "composed" / "submit.yaml"]
    files += sorted((HERE / "behaviour-cases").glob("*.yaml"))
    return [f for f in files if f.is_file()]


def case_name(path: Path) -> str:
    if path.parent.name == "accept":
        return f"accept/{path.stem}"
    if path.parent.name == "behaviour-cases":
        return f"case/{path.stem}"
    return f"example/{'composed' if path.parent.name == 'composed' else path.stem}"


def scaled(tree: dict[str, Any]) -> dict[str, Any] | None:
    """The config on twice the nodes (every pool's `nodes` doubled), or None when it has no pools."""
    out = copy.deepcopy(tree)
    changed = False
    for compute in (out.get("compute") or {}).values():
        if not isinstance(compute, dict):
            continue
        for pool in (compute.get("node_pools") or {}).values():
            if isinstance(pool, dict):
                pool["nodes"] = 2 * int(pool.get("nodes", 1) or 1)
                changed = True
    return out if changed else None


def cases(work: Path, *, write: bool = True) -> list[Case]:
    """Each config as written and, where it has node pools, on twice the nodes (`write`: write the
    variants' files; without it only the cases are named, as pytest's collection needs)."""
    out = []
    for path in config_files():
        name = case_name(path)
        slug = re.sub(r"[^A-Za-z0-9]+", "-", name)
        tree = yaml.safe_load(path.read_text())
        output = ((tree.get("job") or {}).get("output_path") if isinstance(tree, dict) else None) or "/"

        def where(n: int, output: str = str(output), slug: str = slug) -> dict[str, str]:
            # A relative output path is the submitting shell's: both tools' run dirs are relative, and
            # the job starts where sbatch resolved them from (its home on a cluster).
            if output.startswith(("/", "$")):
                return {"run_dir": f"{work}/{slug}-{n}/{GYM_JOB_ID}"}
            return {"run_dir": f"{output.rstrip('/')}/{GYM_JOB_ID}", "submit_dir": f"{work}/{slug}-{n}"}

        out.append(Case(f"{name}@as-written", path, path, "as-written", **where(1)))
        if not isinstance(tree, dict) or "defaults" in tree:
            continue  # a composed config: its parts are other files
        bigger = scaled(tree)
        if bigger is None:
            continue
        variant = work / "configs" / slug / path.name
        if write:
            variant.parent.mkdir(parents=True, exist_ok=True)
            variant.write_text(yaml.safe_dump(bigger, sort_keys=False))
        out.append(Case(f"{name}@scaled", variant, path, "scaled", **where(2)))
    return out


# --- the two tools' scripts -----------------------------------------------------------------------


def oracle(python: Path, request: dict[str, Any]) -> dict[str, Any]:
    """One request to NeMo Gym's interpreter (behaviour_oracle.py)."""
    request = {"environ": SUBMIT_ENV, **request}
    env = {**os.environ, **SUBMIT_ENV}
    proc = subprocess.run(
        [str(python), str(ORACLE_SCRIPT)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the oracle failed: {proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def oracle_stream(python: Path, asks: list[dict[str, str]]) -> Iterable[dict[str, Any]]:
    """NeMo Gym's scripts for `asks`, one case's answer at a time as the oracle composes it."""
    if not asks:
        return
    env = {**os.environ, **SUBMIT_ENV}
    with subprocess.Popen(
        [str(python), str(ORACLE_SCRIPT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        assert proc.stdin and proc.stdout and proc.stderr
        proc.stdin.write(json.dumps({"environ": SUBMIT_ENV, "stream_scripts": asks}))
        proc.stdin.close()
        for line in proc.stdout:
            yield json.loads(line)
        err = proc.stderr.read()
        if proc.wait() != 0:
            raise RuntimeError(f"the oracle failed: {err[-3000:]}")


def gymbuild_files(case: Case) -> tuple[dict[str, dict[str, str]], Any] | str:
    """job.sh (and collector.yaml) per benchmark as gymbuild renders them, or why it refuses."""
    from gymbuild.config import load_config
    from gymbuild.errors import UserError
    from gymbuild.executors.base import planning_traits
    from gymbuild.plan import plan_submission
    from gymbuild.render import render_job

    try:
        # Cases render in threads: patch.dict saves and restores the whole environment, so two
        # patches at once would leave the submit-time values (tokens) in pytest's environment.
        with _ENVIRON_LOCK, mock.patch.dict(os.environ, SUBMIT_ENV):
            resolved = load_config(case.config, environ={**os.environ, **SUBMIT_ENV})
        plans = plan_submission(
            resolved.config, planning_traits(resolved.config), run_dir=case.run_dir, gym_job_id=GYM_JOB_ID
        )
        out = {}
        for bench, plan in plans.items():
            job = render_job(plan, resolved.secrets)
            out[bench] = {path: f.text for path, f in job.files.items()}
        return out, (resolved, plans)
    except (UserError, ValueError) as err:
        return f"{type(err).__name__}: {err}"


# --- running a script -----------------------------------------------------------------------------


def stub_bin(work: Path) -> Path:
    """The PATH directory: every stubbed command (sleep too) a link to stubs/stub.py, and bash."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gym_parity_stub", STUBS / "stub.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    with mock.patch("sys.argv", ["stub"]):
        spec.loader.exec_module(module)
    bin_dir = work / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in (*module.STUBBED, "python"):
        link = bin_dir / name
        if not link.exists():
            link.symlink_to(STUBS / "stub.py")
    if not (bin_dir / "bash").exists():
        (bin_dir / "bash").symlink_to(STUBS / "bash")
    return bin_dir


def allocation(nodes: int, script: str = "") -> dict[str, str]:
    """The environment Slurm starts a batch script in: the allocation its own effective `#SBATCH`
    directives ask for (the last of a repeated one, as sbatch reads them; `nodes` without one). Each
    tool's script runs on what it asked for, so a directive that loses to another shows."""
    asked = directives(script)
    nodes = _count(asked.get("nodes"), nodes)
    per_node = _count(asked.get("ntasks-per-node"), 1)
    names = [f"node{i}" for i in range(1, nodes + 1)]
    # sbatch sets the job's task count only when the job asks for tasks, and srun then takes it as
    # every step's count unless the step names --ntasks (stubs/stub.py, layout)
    tasks: dict[str, str] = {}
    if asked.get("ntasks-per-node"):
        tasks = {"SLURM_NTASKS": str(nodes * per_node), "SLURM_NTASKS_PER_NODE": str(per_node)}
    if asked.get("ntasks"):
        tasks["SLURM_NTASKS"] = str(_count(asked.get("ntasks"), nodes * per_node))
    return {
        **tasks,
        "STUB_NODES": ",".join(names),
        "SLURM_JOB_ID": JOB_ID,
        "SLURM_JOBID": JOB_ID,
        "SLURM_JOB_NAME": "gym-bench",
        "SLURM_JOB_NODELIST": f"node[1-{nodes}]" if nodes > 1 else "node1",
        "SLURM_NODELIST": f"node[1-{nodes}]" if nodes > 1 else "node1",
        "SLURM_NNODES": str(nodes),
        "SLURM_JOB_NUM_NODES": str(nodes),
        "SLURM_TASKS_PER_NODE": f"{per_node}(x{nodes})" if nodes > 1 else str(per_node),
        "SLURM_CPUS_ON_NODE": "16",
        "SLURM_GPUS_ON_NODE": str(_count(asked.get("gpus-per-node"), 8)),
        "SLURMD_NODENAME": names[0],
        "HOSTNAME": names[0],  # the batch shell runs on the first node (bash reads it from here)
        "STUB_INDEX_NODE": names[0],
        "SLURM_NODEID": "0",
    }


def _count(value: str | None, default: int) -> int:
    return int(value) if value and value.isdigit() and int(value) > 0 else default


@dataclass(frozen=True)
class Scenario:
    name: str
    env: Mapping[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    files: Mapping[str, str] = field(default_factory=dict)  # written into the bench dir first


def run_script(
    text: str,
    bench_dir: Path,
    bin_dir: Path,
    home: Path,
    nodes: int,
    scenario: Scenario,
    job_env: Mapping[str, str],
    extra_files: Mapping[str, str] | None = None,
) -> Run:
    """Run one batch script as Slurm would start it (cwd = its --chdir) and collect what it did."""
    if bench_dir.exists():
        shutil.rmtree(bench_dir)
    (bench_dir / "logs").mkdir(parents=True)
    (bench_dir / "artifacts").mkdir()
    for rel, content in scenario.files.items():
        (bench_dir / rel).write_text(content)
    for rel, content in (extra_files or {}).items():  # the collector's config, staged beside job.sh
        (bench_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (bench_dir / rel).write_text(content)
    script = bench_dir / "job.sh"
    script.write_text(text)
    log = bench_dir.parent / f".stub-{bench_dir.name}.jsonl"
    log.unlink(missing_ok=True)
    # The simulated nodes' servers and port claims (stub.py): each run starts on idle nodes
    shutil.rmtree(f"{log}.servers", ignore_errors=True)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(home),
        "USER": getpass.getuser(),  # the job runs as the user who submitted it (NeMo Gym's `user`)
        "LANG": "C.UTF-8",
        "STUB_LOG": str(log),
        **allocation(nodes, text),
        **job_env,  # what the submitter's sbatch passes on: the collector's token
        **scenario.env,
    }
    out_path = bench_dir.parent / f".out-{bench_dir.name}"
    with open(out_path, "w") as out_file:
        proc = subprocess.Popen(
            ["/bin/bash", str(script), *scenario.args],
            cwd=bench_dir,
            env=env,
            stdout=out_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        status: int | str = proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        status = "timeout"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the job's servers: Slurm ends them with the job
        proc.wait()
    out = out_path.read_text(errors="replace")
    records = []
    if log.exists():
        for line in log.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                records.append(json.loads(line))
    files = {}
    for path in bench_dir.rglob("*"):
        rel = str(path.relative_to(bench_dir))
        if path.is_file() and rel.startswith((".gym", "logs/", "otel/")):
            with contextlib.suppress(UnicodeDecodeError):
                files[rel] = path.read_text()
    return Run(status, sorted(records, key=lambda r: r["t"]), files, out)


# --- reducing a run to what a user notices --------------------------------------------------------


def directives(text: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for line in text.splitlines():
        if line.startswith("#SBATCH "):
            words = shlex.split(line[len("#SBATCH ") :])
            for word in words:
                key, eq, value = word.partition("=")
                out[key.lstrip("-")] = value if eq else None
        elif line and not line.startswith("#"):
            break  # sbatch reads directives only before the first command
    if out.get("output") == "logs/slurm-%j.log":
        del out["output"]  # "logs"
    return out


SERVER_CMDS = ("vllm", "vllm-router", "ray", "otelcol-contrib", "python3")
ENV_PATTERN = re.compile(
    r"^(HEAD_NODE_IP|RAY_HEAD_NODE_IP|GYM_POOL_.*|GYM_RAY_.*|NEMO_GYM_.*|OTEL_.*|VLLM_.*)$"
)


def flags(words: list[str]) -> tuple[list[str], dict[str, list[str | None]]]:
    """Positional words and `--flag [value]` pairs, as an argparse-style program reads them."""
    positional: list[str] = []
    opts: dict[str, list[str | None]] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--"):
            key, eq, value = word.partition("=")
            if eq:
                opts.setdefault(key, []).append(value)
            elif i + 1 < len(words) and not words[i + 1].startswith("--"):
                opts.setdefault(key, []).append(words[i + 1])
                i += 1
            else:
                opts.setdefault(key, []).append(None)
        else:
            positional.append(word)
        i += 1
    return positional, opts


VLLM_DEFAULTS = {"--pipeline-parallel-size": ["1"], "--host": ["0.0.0.0"]}


def program(rec: dict[str, Any]) -> dict[str, Any]:
    """A server's invocation as the program reads it."""
    argv = rec["argv"]
    if rec["cmd"] == "vllm":
        positional, opts = flags(argv)
        for key, value in VLLM_DEFAULTS.items():
            if opts.get(key) == value:
                del opts[key]
        if "--kv-transfer-config" in opts:
            opts["--kv-transfer-config"] = [json.loads(v) if v else v for v in opts["--kv-transfer-config"]]
        return {"cmd": "vllm", "args": positional, "opts": opts}
    if rec["cmd"] == "ray":
        if (
            argv[:1] == ["symmetric-run"]
            and "--" in argv
            and argv[argv.index("--") + 1 : argv.index("--") + 2] != ["vllm"]
        ):
            # "gateway": the entrypoint writes and runs the Ray Serve gateway, compared as the stub
            # records the gateway's own command line (python3 ray_serve_gateway.py ...)
            argv = [*argv[: argv.index("--")], "--", "<gateway>"]
        positional, opts = flags(argv)
        if "--resources" in opts:
            opts["--resources"] = [json.loads(v) if v else v for v in opts["--resources"]]
        return {"cmd": "ray", "args": positional, "opts": opts}
    positional, opts = flags(argv)
    return {"cmd": rec["cmd"], "args": positional, "opts": opts}


def step_role(inner: list[dict[str, Any]]) -> str:
    cmds = [r["cmd"] for r in inner]
    if "otelcol-contrib" in cmds:
        return "collector"
    if "vllm-router" in cmds:
        return "router"
    for r in inner:
        argv = r["argv"]
        if r["cmd"] == "ray" and argv[:1] == ["symmetric-run"] and "--" in argv:
            argv = argv[argv.index("--") + 1 :]  # the program it runs on the head
            if argv[:1] != ["vllm"]:
                continue
            argv = argv[1:]
        elif r["cmd"] != "vllm":
            continue
        if argv[:1] == ["serve"]:
            _, opts = flags(argv)
            model = argv[1] if len(argv) > 1 else "?"
            return f"vllm:{(opts.get('--port') or ['?'])[0]}:{model}"
    if any(r["cmd"] == "python3" and r["argv"][:1] != ["-c"] for r in inner):
        return "ray-serve-gateway"
    for r in inner:
        if r["cmd"] == "ray" and r["argv"][:1] == ["start"]:
            return "ray-head" if "--head" in r["argv"] else "ray-workers"  # + the nodes (behaviour())
    if "gym" in cmds:
        return "driver"
    return "driver" if inner else "empty"


def interesting_env(env: Mapping[str, str], keys: set[str], drop: str = "") -> dict[str, str]:
    return {k: v for k, v in env.items() if k != drop and (k in keys or ENV_PATTERN.match(k))}


@dataclass
class Behaviour:
    directives: dict[str, str | None]
    steps: dict[str, dict[str, Any]]
    env: dict[str, dict[str, str]]  # per step role and task: the program's environment
    gym: list[dict[str, Any]]  # gym eval calls in order: subcommand, flags, overrides
    batch: list[dict[str, Any]]  # commands the batch shell ran itself (sbatch, sacct, scancel)
    status: int | str
    files: dict[str, str]
    collector: Any = None  # collector.yaml as the collector read it (None: no collector started)


PORT_FILE = re.compile(r"^\.gym_ports/(.+)-" + JOB_ID + "$")


def port_map(run: Run, plan: Any) -> dict[str, str]:
    """gymbuild's run-time ports back to the configured ones they stand for ("ports")."""
    if plan is None:
        return {}
    firsts: dict[str, int] = {}
    by_var: dict[str, int] = {}
    collector = plan.collector
    ports = [p for s in plan.services for p in ((s.port,) if s.port else ()) + s.aux_ports]
    if collector is not None:
        ports += [collector.grpc, collector.http, collector.health]
    for port in ports:
        firsts[port.key] = port.first
        by_var[port.var] = port.first
    out = {}
    for rel, text in run.files.items():
        m = PORT_FILE.match(rel)
        if m and m.group(1) in firsts and text.strip().isdigit() and int(text) != firsts[m.group(1)]:
            out[text.strip()] = str(firsts[m.group(1)])
    for rec in run.records:
        for var, first in by_var.items():
            value = rec["env"].get(var, "")
            if value.isdigit() and int(value) != first:
                out[value] = str(first)
    return out


def renumber(value: Any, ports: Mapping[str, str]) -> Any:
    if not ports:
        return value
    if isinstance(value, str):
        return re.sub(
            r"(?<![0-9])(" + "|".join(map(re.escape, ports)) + r")(?![0-9])",
            lambda m: ports[m.group(1)],
            value,
        )
    if isinstance(value, list):
        return [renumber(v, ports) for v in value]
    if isinstance(value, dict):
        return {k: renumber(v, ports) for k, v in value.items()}
    return value


def behaviour(
    run: Run, script: str, env_keys: set[str], plan: Any, bench_dir: str, token_env: str = ""
) -> Behaviour:
    ports = port_map(run, plan)
    records = [renumber(r, ports) for r in run.records]
    sruns = [r for r in records if r["cmd"] == "srun"]
    steps: dict[str, dict[str, Any]] = {}
    envs: dict[str, dict[str, str]] = {}
    gym = []
    for srun in sruns:
        inner = [r for r in records if r["step"] == str(srun["pid"])]
        role = step_role(inner)
        if role == "ray-workers":
            role = f"ray-workers:{','.join(srun['nodes'])}"
        n, base = 2, role
        while role in steps:
            role, n = f"{base}#{n}", n + 1
        opts = dict(srun["opts"])
        for key in (
            *("overlap", "output", "kill-on-bad-exit", "wait", "job-name"),
            *("nodes", "ntasks", "nodelist", "ntasks-per-node"),
        ):
            opts.pop(key, None)  # "monitor", "logs"; placement is compared as the nodes taken
        if opts.get("container-mounts"):
            mounts = [m.strip("'") for m in (opts["container-mounts"] or "").split(",")]
            # "ports": gymbuild's steps publish their ports in the bench dir's .gym_ports. The order is
            # kept: pyxis mounts in turn, so a later mount covers an earlier one under its path.
            opts["container-mounts"] = [m for m in mounts if not m.endswith("/.gym_ports")]
            if not opts["container-mounts"]:
                del opts["container-mounts"]
        tasks = {}
        for r in inner:
            # gym's own calls are compared as Hydra reads them ("overrides"); gym_install by what it does
            if r["cmd"] in SERVER_CMDS or (
                role == "driver" and r["cmd"] not in ("gym", "git", "uv", "curl", "pip")
            ):
                if r["cmd"] == "ray" and r["argv"][:1] == ["status"]:
                    continue
                tasks.setdefault(r["task"], []).append(program(r))
                # "token-scope": the collector's token is compared only where gymbuild passes it
                drop = "" if role == "collector" else token_env
                envs.setdefault(f"{role}/task{r['task']}", interesting_env(r["env"], env_keys, drop))
            if r["cmd"] == "gym":
                gym.append(r)
        steps[role] = {
            "nodes": srun["nodes"],
            "ntasks": srun["ntasks"],
            "srun": opts,
            "tasks": dict(sorted(tasks.items())),
            "install": install_calls(inner),
        }
    for r in records:  # a server the batch shell starts itself, without srun, is a step on its node
        if r["step"] == "" and r["cmd"] == "otelcol-contrib" and "collector" not in steps:
            steps["collector"] = {
                "nodes": [r["node"]],
                "ntasks": 1,
                "srun": {},
                "tasks": {"0": [program(r)]},
                "install": [],
            }
            envs["collector/task0"] = interesting_env(r["env"], env_keys)
    batch = [
        {"cmd": r["cmd"], "argv": r["argv"]}
        for r in records
        if r["step"] == "" and r["cmd"] in ("sbatch", "scancel")
    ]
    files = {
        k: v
        for k, v in run.files.items()
        if k in (".gym_infra_retries", ".gym_accumulated_walltime", ".gym_job_chain")
    }
    collector = collector_view(run, records, bench_dir, ports)
    return Behaviour(directives(script), steps, envs, gym_calls(gym), batch, run.status, files, collector)


ENV_REF = re.compile(r"\$\{env:(\w+)\}")


def collector_view(run: Run, records: list[dict[str, Any]], bench_dir: str, ports: Mapping[str, str]) -> Any:
    """The config the collector started with, as it reads it ("collector-env", "collector-targets")."""
    rec = next((r for r in records if r["cmd"] == "otelcol-contrib"), None)
    if rec is None:
        return None
    _, opts = flags(rec["argv"])
    path = (opts.get("--config") or [""])[0] or ""
    text = run.files.get(os.path.relpath(path, bench_dir)) if path.startswith(bench_dir + "/") else None
    if text is None:
        return {"error": f"the collector's --config {path!r} is not in the bench dir"}
    env = rec["env"]

    def resolve(node: Any) -> Any:
        if isinstance(node, str):
            return ENV_REF.sub(lambda m: env.get(m.group(1), m.group(0)), node)
        if isinstance(node, list):
            return [resolve(v) for v in node]
        if isinstance(node, dict):
            return {k: resolve(v) for k, v in node.items()}
        return node

    tree = resolve(yaml.safe_load(text))
    prometheus = (tree.get("receivers") or {}).get("prometheus") or {}
    scrape = (prometheus.get("config") or {}).get("scrape_configs")
    for job in scrape or []:
        if "file_sd_configs" not in job:
            continue
        targets: list[str] = []
        labels: dict[str, str] = {}
        for sd in job.pop("file_sd_configs"):
            for file in sd.get("files", []):
                for group in json.loads(run.files.get(os.path.relpath(file, bench_dir), "[]")):
                    targets += group.get("targets", [])
                    labels.update(group.get("labels", {}))
        kept = []
        for relabel in job.pop("relabel_configs", []):
            if set(relabel) == {"target_label", "replacement"}:
                labels[relabel["target_label"]] = relabel["replacement"]
            else:
                kept.append(relabel)
        if kept:
            job["relabel_configs"] = kept
        job["static_configs"] = [{"targets": targets, **({"labels": labels} if labels else {})}]
    return renumber(tree, ports)


def leaves(tree: Any, where: str = "") -> dict[str, Any]:
    """A parsed document as its leaves by path (`a.b[0].c`), so each value is one comparison."""
    out: dict[str, Any] = {}
    if isinstance(tree, dict) and tree:
        for k, v in tree.items():
            out.update(leaves(v, f"{where}.{k}" if where else str(k)))
    elif isinstance(tree, list) and tree:
        for i, v in enumerate(tree):
            out.update(leaves(v, f"{where}[{i}]"))
    else:
        out[where] = tree
    return out


def install_calls(inner: list[dict[str, Any]]) -> list[Any]:
    """gym_install as what it does: the repository cloned, the ref checked out, the target installed."""
    out: list[Any] = []
    for r in inner:
        words = [w for w in r["argv"] if not w.startswith("-") and w != "advice.detachedHead=false"]
        if r["cmd"] == "git" and words[:1] == ["clone"]:
            out.append(["clone", words[1]])
        elif r["cmd"] == "git" and words[:1] == ["checkout"]:
            out.append(["checkout", words[1]])
        elif r["cmd"] == "uv" and words[:2] == ["pip", "install"]:
            out.append(["install", *words[2:]])
        elif r["cmd"] == "uv" and words[:1] == ["venv"]:
            out.append(["venv", *[w for w in r["argv"] if w == "--seed"]])
    return out


def gym_calls(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in records:
        argv = r["argv"]
        sub = argv[:2]
        rest = argv[2:]
        opts: dict[str, str] = {}
        overrides: list[str] = []
        i = 0
        while i < len(rest):
            if rest[i].startswith("--"):
                opts[rest[i]] = rest[i + 1] if i + 1 < len(rest) else ""
                i += 2
                continue
            overrides.append(rest[i])
            i += 1
        out.append({"sub": " ".join(sub), "flags": opts, "overrides": overrides})
    return out


# --- comparing ------------------------------------------------------------------------------------


def diff_values(category: str, where: str, ours: Any, theirs: Any, out: list[tuple[str, str]]) -> None:
    if ours != theirs:
        out.append(
            (
                category,
                f"{where}: NeMo Gym {json.dumps(theirs, sort_keys=True)}"
                f" / gymbuild {json.dumps(ours, sort_keys=True)}",
            )
        )


def compare_mapping(
    category: str, where: str, ours: Mapping[str, Any], theirs: Mapping[str, Any], result: Result
) -> None:
    for key in sorted(set(ours) | set(theirs)):
        result.compared[category] = result.compared.get(category, 0) + 1
        diff_values(
            category,
            f"{where} {key}",
            ours.get(key, "<absent>"),
            theirs.get(key, "<absent>"),
            result.differences,
        )


def tool_env_keys(resolved: Any) -> set[str]:
    """The env names a config sets anywhere (services, tiers, driver) and the otel token's."""
    keys: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                if k == "env" and isinstance(v, Mapping):
                    keys.update(map(str, v))
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(resolved.tree)
    return keys


def hydra_pairs(parsed: Any) -> Any:
    if isinstance(parsed, dict) and "error" in parsed:
        return parsed
    return {p["key"]: {"kind": p["kind"], "value": p["value"]} for p in parsed}


def resume_scenarios(plan: Any) -> list[Scenario]:
    """Each turn of a resume chain NeMo Gym's prologue decides: sacct's answer for the previous job."""
    if plan is None or plan.resume is None:
        return []
    r = plan.resume
    prev = (PREV_JOB_ID,)
    out = [
        Scenario(
            "resume-completed", {"STUB_SACCT": json.dumps({"State": "COMPLETED", "ElapsedRaw": 100})}, prev
        ),
        Scenario(
            "resume-cancelled",
            {"STUB_SACCT": json.dumps({"State": "CANCELLED by 0", "ElapsedRaw": 100})},
            prev,
        ),
        Scenario("resume-timeout", {"STUB_SACCT": json.dumps({"State": "TIMEOUT", "ElapsedRaw": 100})}, prev),
        Scenario("resume-failed", {"STUB_SACCT": json.dumps({"State": "FAILED", "ElapsedRaw": 7})}, prev),
        Scenario(
            "resume-retries-cap",
            {"STUB_SACCT": json.dumps({"State": "NODE_FAIL" if False else "OUT_OF_MEMORY", "ElapsedRaw": 7})},
            prev,
            {".gym_infra_retries": f"{r.max_retries}\n"},
        ),
        Scenario("resume-sacct-silent", {"STUB_SACCT": "{}"}, prev),
        Scenario("resume-sbatch-fails", {"STUB_FAIL": "sbatch"}),
    ]
    # A job requeued by Slurm starts again under the same id, which the chain already holds.
    out.append(
        Scenario(
            "resume-requeued",
            {"STUB_SACCT": json.dumps({"State": "NODE_FAIL", "ElapsedRaw": 100})},
            prev,
            {".gym_job_chain": f"{PREV_JOB_ID}\n{JOB_ID}\n"},
        )
    )
    if r.max_walltime_seconds is not None:
        # The cap from both sides: reached, and 100 s short of it (where a cap read differently shows).
        caps = (("resume-walltime-cap", 50), ("resume-walltime-under", 200))
        for name, short in caps:
            used = r.max_walltime_seconds - short
            out.append(
                Scenario(
                    name,
                    {"STUB_SACCT": json.dumps({"State": "TIMEOUT", "ElapsedRaw": 100})},
                    prev,
                    {".gym_accumulated_walltime": f"{used}\n"},
                )
            )
    return out


def scenarios(plan: Any, bench_cfg: Any, layout: str, source: Path) -> list[Scenario]:
    """The run as is; then, for the config as written, each failing stub and each turn of a resume
    chain. The accept corpus varies fields, not failures: its configs run as is, in both layouts (the
    examples and behaviour-cases/ cover every failure path), which keeps the suite within minutes."""
    out = [Scenario("ok")]
    if layout != "as-written" or source.parent.name == "accept":
        return out
    if bench_cfg is not None and not bench_cfg.command:
        out.append(Scenario("gym-run-exits-3", {"STUB_EXIT": json.dumps({"gym eval run": 3})}))
    if bench_cfg is not None and bench_cfg.prepare:
        out.append(Scenario("gym-prepare-exits-2", {"STUB_EXIT": json.dumps({"gym eval prepare": 2})}))
    if plan is not None and plan.services:
        out.append(Scenario("service-dies", {"STUB_FAIL": "vllm,vllm-router,ray,curl"}))
    return out + resume_scenarios(plan)


@dataclass
class Pair:
    """Both tools' behaviours for one benchmark and scenario."""

    bench: str
    scenario: str
    theirs: Behaviour
    ours: Behaviour
    theirs_out: str
    ours_out: str


def run_case(
    case: Case, theirs_files: dict[str, dict[str, str]], work: Path, bin_dir: Path
) -> tuple[Result, list[Pair]]:
    result = Result(case)
    rendered = gymbuild_files(case)
    if isinstance(rendered, str):
        result.skipped = f"gymbuild refuses a config NeMo Gym accepts: {rendered}"
        return result, []
    ours_files, (resolved, plans) = rendered
    keys = tool_env_keys(resolved) | {resolved.config.otel.token_env}
    # A home per case: gymbuild's job removes its secrets file when it ends, and cases run in threads
    # with the same gym_job_id and benchmark names.
    base = Path(case.submit_dir) if case.submit_dir else Path(case.run_dir).parent
    home = base / "home"
    (home / ".local" / "bin").mkdir(parents=True, exist_ok=True)
    (home / ".local" / "bin" / "env").write_text("")  # what uv's installer leaves
    pairs = []
    nodes = max(resolved.config.compute.total_nodes, 1)
    otel = resolved.config.otel
    job_env = {otel.token_env: SUBMIT_ENV.get(otel.token_env, "otel-token-value")} if otel.enabled else {}
    for bench, files in theirs_files.items():
        if bench not in ours_files:
            result.differences.append(("steps", f"{bench}: gymbuild renders no job"))
            continue
        plan = plans[bench]
        bench_cfg = resolved.config.driver.benchmarks[bench]
        bench_dir = Path(case.submit_dir or "/") / case.run_dir / bench
        for scenario in scenarios(plan, bench_cfg, case.layout, case.source):
            runs = []
            for tool_files, the_plan in ((files, None), (ours_files[bench], plan)):
                text = tool_files["job.sh"]
                extra = {k: v for k, v in tool_files.items() if k != "job.sh"}
                env = job_env  # NeMo Gym's sbatch passes the token in the job's environment
                if the_plan is not None:  # gymbuild's job reads it, and its host: values, from a file
                    stage_secrets(home, the_plan, resolved.secrets)
                    env = {}
                env = {**env, "SLURM_SUBMIT_DIR": str(base)}
                run = run_script(text, bench_dir, bin_dir, home, nodes, scenario, env, extra)
                got = behaviour(
                    run, text, keys, the_plan, str(bench_dir), otel.token_env if otel.enabled else ""
                )
                runs.append((run, got, text))
            (t_run, t_beh, _), (o_run, o_beh, _) = runs
            pairs.append(Pair(bench, scenario.name, t_beh, o_beh, t_run.stdout, o_run.stdout))
    return result, pairs


def compare(result: Result, pairs: list[Pair], hydra: Mapping[str, Any]) -> None:
    """Every category of one case's runs; differences go to result.differences."""
    for pair in pairs:
        where = f"{pair.bench} [{pair.scenario}]"
        t, o = pair.theirs, pair.ours
        count = lambda cat, n=1: result.compared.__setitem__(cat, result.compared.get(cat, 0) + n)  # noqa: E731
        count("status")
        diff_values("status", f"{where} exit status", o.status, t.status, result.differences)
        if o.status != t.status:
            for tool, out in (("NeMo Gym", pair.theirs_out), ("gymbuild", pair.ours_out)):
                tail = "\n".join(out.splitlines()[-OUTPUT_TAIL:])
                result.outputs.append(f"--- {where}: the end of {tool}'s job output ---\n{tail}")
        count("status")
        both_failed = 0 not in (o.status, t.status)
        if pair.scenario == "ok" and not both_failed:
            diff_values(
                "status", f"{where} steps started", sorted(o.steps), sorted(t.steps), result.differences
            )
        else:  # a failing stub, or a job that failed anyway: whether the job went on to its driver
            # (which steps a failing job had started when it ended is a race with its exit)
            diff_values(
                "status",
                f"{where} driver started",
                "driver" in o.steps,
                "driver" in t.steps,
                result.differences,
            )
        if pair.scenario.startswith("resume") or pair.scenario == "ok":
            compare_mapping("resume", f"{where} file", o.files, t.files, result)
            count("resume")
            diff_values(
                "resume",
                f"{where} batch sbatch/scancel",
                normal_batch(o.batch),
                normal_batch(t.batch),
                result.differences,
            )
        if pair.scenario != "ok":
            continue
        compare_mapping("directives", f"{where} #SBATCH", o.directives, t.directives, result)
        if o.collector is not None or t.collector is not None:
            compare_mapping(
                "collector", f"{where} collector.yaml", leaves(o.collector), leaves(t.collector), result
            )
        for role in sorted(set(t.steps) | set(o.steps)):
            ts, os_ = t.steps.get(role), o.steps.get(role)
            count("steps")
            if ts is None or os_ is None:
                if both_failed:  # a race with the job's exit (above): only what both started is compared
                    continue
                diff_values(
                    "steps",
                    f"{where} step {role}",
                    "started" if os_ else "absent",
                    "started" if ts else "absent",
                    result.differences,
                )
                continue
            for key in ("nodes", "ntasks", "srun", "tasks", "install"):
                count("steps")
                diff_values("steps", f"{where} step {role} {key}", os_[key], ts[key], result.differences)
        for key in sorted(set(t.env) | set(o.env)):
            if key.rsplit("/", 1)[0] not in t.steps or key.rsplit("/", 1)[0] not in o.steps:
                continue
            compare_mapping("env", f"{where} env of {key}:", o.env.get(key, {}), t.env.get(key, {}), result)
        count("overrides")
        diff_values(
            "overrides",
            f"{where} gym calls",
            [g["sub"] for g in o.gym],
            [g["sub"] for g in t.gym],
            result.differences,
        )
        for i, (tg, og) in enumerate(zip(t.gym, o.gym, strict=False)):
            compare_mapping("overrides", f"{where} gym {tg['sub']} flag", og["flags"], tg["flags"], result)
            th = hydra_pairs(hydra[json.dumps(tg["overrides"])])
            oh = hydra_pairs(hydra[json.dumps(og["overrides"])])
            if "error" in th or "error" in oh:
                count("overrides")
                diff_values("overrides", f"{where} gym {tg['sub']} parse", oh, th, result.differences)
            else:
                compare_mapping("overrides", f"{where} gym {tg['sub']} override", oh, th, result)
            del i


def normal_batch(calls: list[dict[str, Any]]) -> list[Any]:
    out = []
    for c in calls:
        if c["cmd"] == "scancel":
            continue  # "scancel-successor"
        out.append([c["cmd"], *[a for a in c["argv"] if a != "--parsable"]])
    return out


# --- the whole suite ------------------------------------------------------------------------------


@dataclass
class Suite:
    results: list[Result]
    seconds: float = 0.0

    def by_id(self) -> dict[str, Result]:
        return {r.case.id: r for r in self.results}


def run_suite(
    python: Path, work: Path | None = None, only: Iterable[str] | None = None, threads: int = 6
) -> Suite:
    import time

    start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="gb-")) if work is None else work
    all_cases = [c for c in cases(work) if only is None or c.id in set(only)]
    bin_dir = stub_bin(work)
    (work / "home" / ".local" / "bin").mkdir(parents=True, exist_ok=True)
    (work / "home" / ".local" / "bin" / "env").write_text("")  # what uv's installer leaves
    by_id = {c.id: c for c in all_cases}

    def one(case_id: str, got: dict[str, Any]) -> tuple[Result, list[Pair]]:
        case = by_id[case_id]
        if "error" in got:
            return Result(case, skipped=f"NeMo Gym refuses it: {got['error']}"), []
        return run_case(case, got["benches"], work, bin_dir)

    # NeMo Gym's Hydra composition takes the time: two oracle processes answer one case at a time,
    # and each case's runs start as soon as its scripts are known. The cases with the most scenarios
    # (examples and behaviour-cases, as written) go first, so none of them is left for the end.
    asks = [
        {"id": c.id, "config": str(c.config), "run_dir": c.run_dir}
        for c in sorted(all_cases, key=lambda c: (c.source.parent.name == "accept", c.layout != "as-written"))
    ]
    futures: dict[str, Future[tuple[Result, list[Pair]]]] = {}
    failed: list[BaseException] = []
    with ThreadPoolExecutor(threads) as pool:

        def feed(part: list[dict[str, str]]) -> None:
            try:
                for got in oracle_stream(python, part):
                    futures[got["id"]] = pool.submit(one, got["id"], got)
            except BaseException as err:  # raised below, in the suite's thread
                failed.append(err)

        feeders = [threading.Thread(target=feed, args=(part,)) for part in (asks[0::2], asks[1::2])]
        for feeder in feeders:
            feeder.start()
        for feeder in feeders:
            feeder.join()
        if failed:
            raise failed[0]
        missing = sorted(set(by_id) - set(futures))
        if missing:
            raise RuntimeError(f"the oracle answered nothing for {missing}")
        runs = [futures[c.id].result() for c in all_cases]
    results: list[Result] = []
    lists: dict[str, list[str]] = {}
    for _, pairs in runs:
        for pair in pairs:
            for g in [*pair.theirs.gym, *pair.ours.gym]:
                lists[json.dumps(g["overrides"])] = g["overrides"]
    keys = list(lists)
    parsed = oracle(python, {"overrides": [lists[k] for k in keys]})["overrides"] if keys else []
    hydra = dict(zip(keys, parsed, strict=True))
    for result, pairs in runs:
        if not result.skipped:
            compare(result, pairs, hydra)
        results.append(result)
    if not os.environ.get("GYMBUILD_PARITY_KEEP"):
        shutil.rmtree(work, ignore_errors=True)
    return Suite(results, time.monotonic() - start)


def figures(suite: Suite) -> dict[str, Any]:
    """The suite's figures: cases compared, comparisons and differences per category."""
    compared = [r for r in suite.results if not r.skipped]
    comparisons: dict[str, int] = {}
    differences: dict[str, int] = {}
    for r in compared:
        for cat, n in r.compared.items():
            comparisons[cat] = comparisons.get(cat, 0) + n
        for cat, _ in r.differences:
            differences[cat] = differences.get(cat, 0) + 1
    return {
        "cases": len(suite.results),
        "cases_compared": len(compared),
        "configs_compared": len({r.case.source for r in compared}),
        "layouts": sorted({r.case.layout for r in compared}),
        "refused_by_nemo_gym": sum(r.skipped.startswith("NeMo Gym refuses") for r in suite.results),
        "refused_by_gymbuild_only": sum(r.skipped.startswith("gymbuild refuses") for r in suite.results),
        "otel_cases": sum(1 for r in compared if r.compared.get("collector")),
        "comparisons": comparisons,
        "differences": differences,
        "seconds": round(suite.seconds, 1),
    }


def report(suite: Suite) -> str:
    lines = [json.dumps(figures(suite), indent=1)]
    for r in suite.results:
        if r.skipped:
            lines.append(f"{r.case.id}: skipped: {r.skipped.splitlines()[0]}")
            continue
        lines.append(f"{r.case.id}: {sum(r.compared.values())} comparisons, {len(r.differences)} differences")
        lines += [f"  [{cat}] {text}" for cat, text in r.differences]
    return "\n".join(lines)
