"""Service steps as NeMo Gym 0.7.0 runs them: the argv and environment each server process receives.

A rendered job.sh runs with real bash on this machine over a simulated allocation: `scontrol` lists
fake hostnames, `getent` gives each an address, `srun` starts one copy of the step per task (with
SLURM_PROCID / SLURM_NODEID set, as Slurm does) and the servers (`vllm`, `vllm-router`, `ray`,
`otelcol-contrib`) and `gym` record their argv and environment and keep running until the job ends.
`curl` answers every health check. What each test asserts is what NeMo Gym's own job script
(nemo_gym/orchestration/executors/slurm_script.py) hands the same program for the same config.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_helpers import shellcheck

from gymbuild.config.build import build_config
from gymbuild.config.model import Config
from gymbuild.config.validate import validate
from gymbuild.executors.base import planning_traits
from gymbuild.plan import plan_benchmark
from gymbuild.render import _ENV, render_job
from tests.script_runs import run_job_script, stage_secrets

NODES = ("gpu-a", "gpu-b", "gpu-c", "gpu-d")
IPS = {name: f"10.9.0.{i + 11}" for i, name in enumerate(NODES)}

FAKE_SRUN = r"""#!/bin/bash
# One copy of the step per task, task i on node i of the step's node list (as --ntasks-per-node=1).
printf '%s\0' "$@" >"$(mktemp "$GYM_BENCH_DIR/calls/srun.XXXXXX")"
ntasks=1 nodelist=
while [[ $# -gt 0 && $1 != bash && $1 != otelcol-contrib ]]; do
  case $1 in
    --ntasks=*) ntasks=${1#--ntasks=} ;;
    --nodelist=*) nodelist=${1#--nodelist=} ;;
  esac
  shift
done
IFS=, read -r -a hosts <<<"$nodelist"
for ((i = 0; i < ntasks; i++)); do
  : >"$(mktemp "$GYM_BENCH_DIR/calls/launched.XXXXXX")"
  SLURM_PROCID=$i SLURM_NODEID=$i SLURMD_NODENAME=${hosts[i]:-gpu-a} FAKE_HOST=${hosts[i]:-gpu-a} "$@" &
done
wait
"""
FAKE_SCONTROL = r"""#!/bin/bash
printf '%s\n' $FAKE_NODES
"""
FAKE_GETENT = (
    r"""#!/bin/bash
case $2 in
"""
    + "".join(f"  {n}) echo '{ip}      {n}' ;;\n" for n, ip in IPS.items())
    + r"""
  *) exit 2 ;;
esac
"""
)
FAKE_HOSTNAME = r"""#!/bin/bash
echo "${FAKE_HOST:-gpu-a}"
"""
# A server: records what it was given, then runs until the job ends it.
FAKE_SERVER = r"""#!/bin/bash
f=$(mktemp "$GYM_BENCH_DIR/calls/$(basename "$0").XXXXXX")
printf '%s\0' "$@" >"$f.argv"
env -0 >"$f.env"
if [[ $(basename "$0") == ray && ${1:-} == symmetric-run && ${2:-} == --help ]]; then
  exit "${FAKE_NO_SYMMETRIC_RUN:-0}"
fi
if [[ $(basename "$0") == ray ]]; then  # `ray status` and a daemonising `ray start` return
  [[ ${1:-} == status || ( ${1:-} == start && " $* " != *" --block "* ) ]] && exit 0
fi
: >"$f.serving"
exec sleep 300
"""
FAKE_RECORD = r"""#!/bin/bash
f=$(mktemp "$GYM_BENCH_DIR/calls/$(basename "$0").XXXXXX")
printf '%s\0' "$@" >"$f.argv"
env -0 >"$f.env"
"""
FAKE_CURL = FAKE_RECORD  # every health check answers
# The driver: records, then waits (bounded) until every other task srun started serves. NeMo Gym's job
# health-checks a Ray head only, so its workers may still be starting when a driver that returns at
# once ends the job; a real driver runs for minutes. The wait keeps what a test reads from racing load.
FAKE_DRIVER = (
    FAKE_RECORD
    + r"""for ((i = 0; i < 600; i++)); do
  launched=$(compgen -G "$GYM_BENCH_DIR/calls/launched.*" | wc -l)
  serving=$(compgen -G "$GYM_BENCH_DIR/calls/*.serving" | wc -l)
  ((serving >= launched - 1)) && break
  sleep 0.1
done
"""
)
# gym_install without a network: a clone is an empty directory, a venv one with bin/
FAKE_GIT = '#!/bin/bash\nif [[ $1 == clone ]]; then mkdir -p "${!#}"; fi\n'
FAKE_UV = '#!/bin/bash\nif [[ $1 == venv ]]; then mkdir -p "${!#}/bin"; fi\n'


@dataclass(frozen=True)
class Call:
    program: str
    argv: list[str]
    env: dict[str, str]


def _nul(path: Path) -> list[str]:
    return path.read_bytes().decode().split("\0")[:-1]


def config(t: dict[str, Any]) -> Config:
    checked = validate(copy.deepcopy(t))
    assert not checked.problems, [p.render() for p in checked.problems]
    return build_config(checked.tree)


def lint(plan: Any, job_sh: str, where: Path) -> None:
    """bash -n and shellcheck on job.sh and on every step's script (quoted inside job.sh)."""
    where.mkdir()
    scripts = {"job.sh": (job_sh, [])}
    for step in plan.services:  # SC2154: GYM_* and SLURM_* come from the step's environment
        scripts[f"{step.name}.sh"] = (
            "#!/bin/bash\n" + _ENV.get_template("step.sh.j2").module.service_script(step),
            ["--exclude=SC2154"],
        )
    for name, (text, flags) in scripts.items():
        (where / name).write_text(text)
        subprocess.run(["bash", "-n", str(where / name)], check=True)
        out = subprocess.run(
            [shellcheck(), "--shell=bash", *flags, str(where / name)], capture_output=True, text=True
        )
        assert out.returncode == 0, out.stdout


def run_job(tmp_path: Path, t: dict[str, Any], **environ: str) -> tuple[subprocess.CompletedProcess, list]:
    """Render `t`'s only benchmark and run its job.sh; the job's calls of every server program."""
    cfg = config(t)
    bench = next(iter(cfg.driver.benchmarks))
    plan = plan_benchmark(
        cfg, planning_traits(cfg), bench, run_dir=str(tmp_path / "run"), gym_job_id="gym-job-t"
    )
    secrets = {name: f"secret-{name}" for name in plan.secrets}
    if plan.collector is not None:  # the token a submitter has goes to the file, not the job's environment
        secrets[plan.collector.token_env] = environ.pop(plan.collector.token_env, "otel-token-value")
    job = render_job(plan, secrets)
    stage_secrets(tmp_path / "home", plan, secrets)
    lint(plan, job.files["job.sh"].text, tmp_path / "lint")
    bench_dir = Path(plan.bench_dir)
    (bench_dir / "calls").mkdir(parents=True)
    for rel, rendered in job.files.items():
        (bench_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (bench_dir / rel).write_text(rendered.text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # python3 runs as itself (the job's port checks use it), but records and serves as the gateway
    python3 = shutil.which("python3")
    fake_python3 = f'#!/bin/bash\n[[ ${{1:-}} == ray_serve_gateway.py ]] || exec {python3} "$@"\n'
    stubs = {
        "python3": fake_python3 + FAKE_SERVER.removeprefix("#!/bin/bash\n"),
        "srun": FAKE_SRUN,
        "scontrol": FAKE_SCONTROL,
        "getent": FAKE_GETENT,
        "hostname": FAKE_HOSTNAME,
        "gym": FAKE_DRIVER,
        "pip": FAKE_RECORD,
        "curl": FAKE_CURL,
        "git": FAKE_GIT,
        "uv": FAKE_UV,
        **dict.fromkeys(("vllm", "vllm-router", "ray", "otelcol-contrib"), FAKE_SERVER),
    }
    for name, text in stubs.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NODELIST": "gpu-[a-d]",
        "FAKE_NODES": " ".join(NODES[: cfg.compute.total_nodes]),
        "HOME": str(tmp_path / "home"),  # where the job finds its secrets file
        **environ,
    }
    result = run_job_script(bench_dir / "job.sh", cwd=tmp_path, env=env)
    calls = []
    for path in sorted((bench_dir / "calls").glob("*.argv")):
        program = path.name.split(".")[0]
        env_path = path.with_suffix(".env")
        calls.append(Call(program, _nul(path), dict(e.split("=", 1) for e in _nul(env_path))))
    return result, calls


def settled(tmp_path: Path, key: str) -> str:
    """The port a step settled at run time (its first choice, unless something here holds that)."""
    return (tmp_path / "run" / "b" / ".gym_ports" / f"{key}-4242").read_text().strip()


def of(calls: list[Call], program: str, **env: str) -> list[Call]:
    """The calls of `program` whose environment has every `env` value."""
    return [c for c in calls if c.program == program and all(c.env.get(k) == v for k, v in env.items())]


def base_tree(*pools: tuple[str, int], **services: dict[str, Any]) -> dict[str, Any]:
    return {
        "services": services,
        "compute": {
            "c": {
                "type": "slurm",
                "account": "acct",
                "node_pools": {name: {"partition": "gpu", "nodes": n} for name, n in pools},
            }
        },
        "driver": {"benchmarks": {"b": {"run": {"x": 1}}}},
        "job": {"output_path": "/runs"},
        "otel": {"enabled": False},
    }


def vllm(**fields: Any) -> dict[str, Any]:
    return {"type": "vllm", "container": "img", "model": "m/q", "port": 28000, **fields}


# --- vllm -----------------------------------------------------------------------------------------------


def test_single_node_vllm_argv_is_nemo_gyms_in_its_order(tmp_path: Path) -> None:
    t = base_tree(
        ("gpu", 1),
        policy=vllm(
            served_model_name="q",
            tensor_parallel_size=2,
            pipeline_parallel_size=2,
            number_of_instances=2,
            trust_remote_code=True,
            extra_args="--max-model-len 8192",
        ),
    )
    result, calls = run_job(tmp_path, t)
    assert result.returncode == 0, result.stderr
    (call,) = of(calls, "vllm")
    port = call.argv[call.argv.index("--port") + 1]
    assert call.argv == [
        "serve", "m/q", "--port", port, "--tensor-parallel-size", "2", "--served-model-name", "q",
        "--pipeline-parallel-size", "2", "--max-model-len", "8192", "--data-parallel-size", "2",
        "--trust-remote-code",
    ]  # fmt: skip


def test_pipeline_parallel_1_and_host_are_left_to_vllms_defaults(tmp_path: Path) -> None:
    result, calls = run_job(tmp_path, base_tree(("gpu", 1), policy=vllm()))
    assert result.returncode == 0, result.stderr
    (call,) = of(calls, "vllm")
    assert call.argv == ["serve", "m/q", "--port", call.argv[3], "--tensor-parallel-size", "1"]


def test_multi_node_data_parallel_keeps_api_server_count_off_headless_workers(tmp_path: Path) -> None:
    t = base_tree(
        ("gpu", 2),
        policy=vllm(
            number_of_instances=4, extra_args="--api-server-count 4 --max-num-seqs 8 --api-server-count=2"
        ),
    )
    result, calls = run_job(tmp_path, t)
    assert result.returncode == 0, result.stderr
    (head,) = of(calls, "vllm", SLURM_PROCID="0")
    (worker,) = of(calls, "vllm", SLURM_PROCID="1")
    rpc = head.argv[head.argv.index("--data-parallel-rpc-port") + 1]
    dp = [
        "--data-parallel-size", "4", "--data-parallel-size-local", "2",
        "--data-parallel-address", IPS["gpu-a"], "--data-parallel-rpc-port", rpc,
    ]  # fmt: skip
    assert head.argv[4:] == [
        "--tensor-parallel-size", "1", "--api-server-count", "4", "--max-num-seqs", "8",
        "--api-server-count=2", *dp,
    ]  # fmt: skip
    assert worker.argv[4:] == [
        "--tensor-parallel-size", "1", "--max-num-seqs", "8", *dp,
        "--headless", "--data-parallel-start-rank", "2",
    ]  # fmt: skip


def test_pinned_multi_node_data_parallel_coordinates_on_its_pools_first_host(tmp_path: Path) -> None:
    t = base_tree(("a", 1), ("b", 2), policy=vllm(node_pool="b", number_of_instances=2))
    result, calls = run_job(tmp_path, t)
    assert result.returncode == 0, result.stderr
    for call in of(calls, "vllm"):
        assert call.argv[call.argv.index("--data-parallel-address") + 1] == "gpu-b"


def test_multi_node_single_instance_runs_through_ray_symmetric_run(tmp_path: Path) -> None:
    t = base_tree(("gpu", 2), policy=vllm(tensor_parallel_size=16, extra_args="--enforce-eager"))
    result, calls = run_job(tmp_path, t, SLURM_CPUS_ON_NODE="64", SLURM_GPUS_ON_NODE="8")
    assert result.returncode == 0, result.stderr
    runs = [c for c in of(calls, "ray") if c.argv[:1] == ["symmetric-run"] and "--help" not in c.argv]
    assert len(runs) == 2  # every node runs the same command; Ray runs vLLM on the head only
    address = f"{IPS['gpu-a']}:{settled(tmp_path, 'policy.ray')}"
    for call in runs:
        separator = call.argv.index("--")
        port = call.argv[separator + 5]
        assert call.argv[:separator] == [
            "symmetric-run", "--address", address, "--min-nodes", "2",
            "--num-cpus=64", "--num-gpus=8",
        ]  # fmt: skip
        assert call.argv[separator + 1 :] == [
            "vllm", "serve", "m/q", "--port", port, "--tensor-parallel-size", "16", "--enforce-eager",
            "--distributed-executor-backend", "ray",
        ]  # fmt: skip
        assert call.env["RAY_SYMMETRIC_RUN_CLUSTER_WAIT_TIMEOUT"] == "600"
        assert call.env["RAY_SERVE_QUEUE_LENGTH_RESPONSE_DEADLINE_S"] == "1.0"


def test_multi_node_single_instance_without_symmetric_run_starts_a_head_and_workers(tmp_path: Path) -> None:
    t = base_tree(("gpu", 2), policy=vllm(tensor_parallel_size=16))
    result, calls = run_job(
        tmp_path, t, FAKE_NO_SYMMETRIC_RUN="1", SLURM_CPUS_ON_NODE="64", SLURM_GPUS_ON_NODE="8"
    )
    assert result.returncode == 0, result.stderr
    starts = [c.argv for c in of(calls, "ray") if c.argv[:1] == ["start"]]
    ray_port = settled(tmp_path, "policy.ray")
    address = f"{IPS['gpu-a']}:{ray_port}"
    assert sorted(starts) == sorted(
        [
            ["start", "--head", f"--port={ray_port}", "--num-cpus=64", "--num-gpus=8"],
            ["start", f"--address={address}", "--num-cpus=64", "--num-gpus=8", "--block"],
        ]
    )
    (server,) = of(calls, "vllm")
    assert server.env["SLURM_PROCID"] == "0"
    assert server.argv[-2:] == ["--distributed-executor-backend", "ray"]


@pytest.mark.parametrize("nodes", [1, 2])
def test_head_node_ip_exports(tmp_path: Path, nodes: int) -> None:
    result, calls = run_job(tmp_path, base_tree(("gpu", nodes), policy=vllm(number_of_instances=nodes)))
    assert result.returncode == 0, result.stderr
    env = of(calls, "gym")[0].env
    if nodes == 1:
        assert "HEAD_NODE_IP" not in env and "RAY_HEAD_NODE_IP" not in env
    else:
        assert env["HEAD_NODE_IP"] == IPS["gpu-a"]
        assert env["RAY_HEAD_NODE_IP"] == f"{IPS['gpu-a']}:6379"


GATEWAY = Path(__file__).resolve().parents[2] / "gymbuild" / "render" / "templates" / "ray_serve_gateway.py"


def test_use_ray_serve_runs_the_gateway_with_nemo_gyms_command_line(tmp_path: Path) -> None:
    t = base_tree(
        ("gpu", 1),
        policy=vllm(
            use_ray_serve=True,
            number_of_instances=2,
            tensor_parallel_size=2,
            served_model_name="q",
            trust_remote_code=True,
            extra_args="--max-model-len 4096",
        ),
    )
    t["compute"]["c"]["node_pools"]["gpu"]["gpus_per_node"] = 4
    result, calls = run_job(tmp_path, t)
    assert result.returncode == 0, result.stderr
    (gateway,) = of(calls, "python3")
    port = gateway.argv[gateway.argv.index("--port") + 1]
    assert gateway.argv == [
        "ray_serve_gateway.py", "--model", "m/q", "--port", port, "--tensor-parallel-size", "2",
        "--pipeline-parallel-size", "1", "--number-of-instances", "2", "--gpus-per-node", "4",
        "--trust-remote-code", "--served-model-name", "q", "--extra-args", "--max-model-len 4096",
    ]  # fmt: skip
    assert not of(calls, "vllm")  # the gateway starts the instances itself
    assert [c.argv for c in of(calls, "pip")] == [["install", "--quiet", "aiohttp"]]
    written = tmp_path / "run" / "b" / "ray_serve_gateway.py"  # the step's working directory
    assert written.read_text() == GATEWAY.read_text()
    compile(written.read_text(), str(written), "exec")


def test_instances_larger_than_a_node_run_behind_ray_serve_over_the_ray_cluster(tmp_path: Path) -> None:
    t = base_tree(("gpu", 4), policy=vllm(tensor_parallel_size=16, number_of_instances=2))
    t["compute"]["c"]["node_pools"]["gpu"]["gpus_per_node"] = 8
    result, calls = run_job(tmp_path, t, SLURM_CPUS_ON_NODE="64", SLURM_GPUS_ON_NODE="8")
    assert result.returncode == 0, result.stderr
    runs = [c.argv for c in of(calls, "ray") if c.argv[:1] == ["symmetric-run"] and "--help" not in c.argv]
    assert len(runs) == 4
    address = f"{IPS['gpu-a']}:{settled(tmp_path, 'policy.ray')}"
    for argv in runs:
        separator = argv.index("--")
        assert argv[:separator] == [
            "symmetric-run", "--address", address, "--min-nodes", "4", "--num-cpus=64", "--num-gpus=8",
        ]  # fmt: skip
        assert argv[separator + 1 : separator + 3] == ["python3", "ray_serve_gateway.py"]
        assert argv[-6:] == [
            "--pipeline-parallel-size",
            "1",
            "--number-of-instances",
            "2",
            "--gpus-per-node",
            "8",
        ]


# --- vllm_pd --------------------------------------------------------------------------------------------


def pd_tree(prefill_nodes: int = 1, decode_nodes: int = 1, **pd: Any) -> dict[str, Any]:
    t = base_tree(("prefill", prefill_nodes), ("decode", decode_nodes))
    t["services"]["policy"] = {
        "type": "vllm_pd",
        "container": "img",
        "model": "m/q",
        "served_model_name": "q",
        "port": 28000,
        "prefill": {"node_pool": "prefill", "tensor_parallel_size": 8},
        "decode": {"node_pool": "decode", "number_of_instances": 2},
        **pd,
    }
    t["driver"]["policy_model"] = "policy"
    return t


def test_vllm_pd_tiers_and_router_run_as_nemo_gyms(tmp_path: Path) -> None:
    result, calls = run_job(tmp_path, pd_tree())
    assert result.returncode == 0, result.stderr
    (prefill,) = of(calls, "vllm", FAKE_HOST="gpu-a")
    (decode,) = of(calls, "vllm", FAKE_HOST="gpu-b")
    ports = {c.env["FAKE_HOST"]: c.argv[c.argv.index("--port") + 1] for c in (prefill, decode)}
    kv = '{{"kv_connector":"NixlConnector","kv_role":"{}","kv_load_failure_policy":"fail"}}'
    assert prefill.argv == [
        "serve", "m/q", "--port", ports["gpu-a"], "--tensor-parallel-size", "8", "--served-model-name", "q",
        "--kv-transfer-config", kv.format("kv_producer"),
    ]  # fmt: skip
    assert decode.argv == [
        "serve", "m/q", "--port", ports["gpu-b"], "--tensor-parallel-size", "1", "--served-model-name", "q",
        "--data-parallel-size", "2", "--kv-transfer-config", kv.format("kv_consumer"),
    ]  # fmt: skip
    # NIXL's side channel: the node's own name, prefill's port and decode's the next one
    for call, host, port in ((prefill, "gpu-a", "5600"), (decode, "gpu-b", "5601")):
        assert call.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == host
        assert call.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] == port
    (router,) = of(calls, "vllm-router")
    assert router.env["FAKE_HOST"] == "gpu-a"  # beside the driver
    port = router.argv[router.argv.index("--port") + 1]
    assert router.argv == [
        "--prefill-policy", "cache_aware", "--decode-policy", "cache_aware", "--vllm-pd-disaggregation",
        "--prefill", f"http://gpu-a:{ports['gpu-a']}", "--decode", f"http://gpu-b:{ports['gpu-b']}",
        "--host", "0.0.0.0", "--port", port, "--intra-node-data-parallel-size", "1",
        "--request-timeout-secs", "86400", "--log-level", "error",
    ]  # fmt: skip
    # every server, the router too, is health-checked on /health before the driver starts
    checked = {c.argv[-1] for c in of(calls, "curl")}
    assert {f"http://gpu-a:{ports['gpu-a']}/health", f"http://gpu-b:{ports['gpu-b']}/health"} <= checked
    assert f"http://gpu-a:{port}/health" in checked


def test_vllm_pd_router_flags_and_a_server_on_every_node(tmp_path: Path) -> None:
    t = pd_tree(
        prefill_nodes=2,
        decode_nodes=2,
        server_per_node=True,
        prefill_policy="round_robin",
        decode_policy="power_of_two",
        intra_node_data_parallel_size=2,
        request_timeout_secs=600,
        log_level="debug",
        kv_load_failure_policy="recompute",
    )
    t["services"]["policy"]["decode"]["number_of_instances"] = 1
    result, calls = run_job(tmp_path, t)
    assert result.returncode == 0, result.stderr
    servers = {c.env["FAKE_HOST"]: c for c in of(calls, "vllm")}
    assert servers.keys() == set(NODES)
    for call in servers.values():  # one single-node server per node, no data parallel across them
        assert not [a for a in call.argv if a.startswith("--data-parallel")]
        assert "recompute" in call.argv[-1]
    port = {h: c.argv[c.argv.index("--port") + 1] for h, c in servers.items()}
    (router,) = of(calls, "vllm-router")
    assert router.argv[:5] == [
        "--prefill-policy", "round_robin", "--decode-policy", "power_of_two", "--vllm-pd-disaggregation",
    ]  # fmt: skip
    assert router.argv[5:13] == [
        "--prefill", f"http://gpu-a:{port['gpu-a']}", "--prefill", f"http://gpu-b:{port['gpu-b']}",
        "--decode", f"http://gpu-c:{port['gpu-c']}", "--decode", f"http://gpu-d:{port['gpu-d']}",
    ]  # fmt: skip
    assert router.argv[17:] == [
        "--intra-node-data-parallel-size", "2", "--request-timeout-secs", "600", "--log-level", "debug",
    ]  # fmt: skip


def test_a_router_on_every_node_of_its_pool_publishes_only_the_first_nodes_port(tmp_path: Path) -> None:
    """Pinned to a two-node pool, NeMo Gym's router runs on both nodes. The job waits on, checks and
    hands the driver the first node's; the second copy, on a port of its own, must not replace it
    (both tasks writing one port file also failed the step, now and then, on the file's rename)."""
    t = pd_tree(prefill_nodes=2)
    t["services"]["policy"]["node_pool"] = "prefill"
    result, calls = run_job(tmp_path, t)
    assert result.returncode == 0, result.stderr
    routers = {c.env["FAKE_HOST"]: c.argv[c.argv.index("--port") + 1] for c in of(calls, "vllm-router")}
    assert routers.keys() == {"gpu-a", "gpu-b"}
    assert routers["gpu-a"] != routers["gpu-b"]  # one machine here: the second copy took the next port
    assert settled(tmp_path, "policy") == routers["gpu-a"]
    (driver,) = of(calls, "gym")
    assert f"+policy_base_url=http://localhost:{routers['gpu-a']}/v1" in driver.argv


def test_multi_node_decode_tier_coordinates_on_its_own_rpc_port(tmp_path: Path) -> None:
    t = pd_tree(prefill_nodes=2, decode_nodes=2)
    t["services"]["policy"]["prefill"]["number_of_instances"] = 2
    result, calls = run_job(tmp_path, t)
    assert result.returncode == 0, result.stderr
    servers = {c.env["FAKE_HOST"]: c.argv for c in of(calls, "vllm")}
    rpc = {host: argv[argv.index("--data-parallel-rpc-port") + 1] for host, argv in servers.items()}
    address = {host: argv[argv.index("--data-parallel-address") + 1] for host, argv in servers.items()}
    assert address == {"gpu-a": "gpu-a", "gpu-b": "gpu-a", "gpu-c": "gpu-c", "gpu-d": "gpu-c"}
    # prefill's 13345 and decode's 13346 (NeMo Gym's default), each where free
    assert rpc["gpu-a"] == rpc["gpu-b"] and rpc["gpu-c"] == rpc["gpu-d"] and rpc["gpu-a"] != rpc["gpu-c"]
    plan = plan_benchmark(config(t), planning_traits(config(t)), "b", run_dir="/runs/x", gym_job_id="x")
    assert [s.aux_ports[0].first for s in plan.services[:2]] == [13345, 13346]


# --- ray ------------------------------------------------------------------------------------------------


def ray_tree(*pools: tuple[str, int], policy_pool: str, **ray: Any) -> dict[str, Any]:
    t = base_tree(
        *pools,
        policy=vllm(node_pool=policy_pool),
        sandbox={"type": "ray", "container": "ray-img", "port": 26379, **ray},
    )
    t["driver"]["policy_model"] = "policy"
    return t


def test_ray_head_beside_the_driver_workers_elsewhere_without_the_head_only_flags(tmp_path: Path) -> None:
    t = ray_tree(
        ("policy", 1),
        ("workers", 2),
        policy_pool="policy",
        node_pools=["policy", "workers"],
        num_cpus=32,
        resources={"workers": {"code_sandbox": 16, "frac": 0.5}},
        extra_args="--port 6379 --include-dashboard=false --object-store-memory 100",
    )
    result, calls = run_job(tmp_path, t)
    assert result.returncode == 0, result.stderr
    (head,) = [c for c in of(calls, "ray") if "--head" in c.argv]
    port = head.argv[head.argv.index("--port") + 1]
    address = f"{IPS['gpu-a']}:{port}"
    assert head.argv == [
        "start", "--block", "--head", "--port", port, "--node-ip-address", IPS["gpu-a"], "--num-cpus", "32",
        "--port", "6379", "--include-dashboard=false", "--object-store-memory", "100",
    ]  # fmt: skip
    assert head.env["FAKE_HOST"] == "gpu-a"
    workers = [c for c in of(calls, "ray") if c.argv[:1] == ["start"] and "--head" not in c.argv]
    assert sorted(c.env["FAKE_HOST"] for c in workers) == ["gpu-b", "gpu-c"]
    for worker in workers:
        assert worker.argv == [
            "start", "--block", "--address", address, "--num-cpus", "32",
            '--resources={"code_sandbox": 16, "frac": 0.5}', "--object-store-memory", "100",
        ]  # fmt: skip
    for call in [head, *workers, *of(calls, "gym")]:
        assert call.env["GYM_RAY_ADDRESS_SANDBOX"] == address
        assert call.env["GYM_RAY_SANDBOX_WORKERS_WORKERS"] == "gpu-b,gpu-c"
    # the workers wait for the head before they join it
    waits = [c.argv for c in of(calls, "ray") if c.argv[:1] == ["status"]]
    assert waits == [["status", "--address", address]] * 2


def test_ray_head_follows_a_pinned_policy_and_takes_resources_only_of_a_spanned_pool(tmp_path: Path) -> None:
    t = ray_tree(
        ("aux", 1),
        ("policy", 1),
        ("workers", 1),
        policy_pool="policy",
        node_pools=["aux", "workers"],
        resources={"aux": {"x": 1}},
    )
    result, calls = run_job(tmp_path, t)
    assert result.returncode == 0, result.stderr
    (head,) = [c for c in of(calls, "ray") if "--head" in c.argv]
    assert head.env["FAKE_HOST"] == "gpu-b"
    assert head.argv[head.argv.index("--node-ip-address") + 1] == IPS["gpu-b"]
    assert not any(a.startswith("--resources") for a in head.argv)
    workers = {c.env["FAKE_HOST"]: c.argv for c in of(calls, "ray") if c.argv[:2] == ["start", "--block"]}
    assert workers.keys() == {"gpu-a", "gpu-b", "gpu-c"}
    assert '--resources={"x": 1}' in workers["gpu-a"] and "--resources" not in " ".join(workers["gpu-c"])


# --- otel -----------------------------------------------------------------------------------------------

NEMO_GYM_COLLECTOR = """
import json, sys
from pathlib import Path
import yaml
from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.executors.otel import render_collector_config
config = SubmitConfig.model_validate(json.loads(sys.argv[1]))
print(json.dumps(yaml.safe_load(render_collector_config(config, "b", Path(sys.argv[2])))))
"""


def otel_tree(**otel: Any) -> dict[str, Any]:
    t = base_tree(
        ("gpu", 1),
        policy=vllm(served_model_name="q"),
        judge=vllm(model="j", port=28100),
    )
    t["driver"].update(policy_model="policy", container="python:3.12")
    t["driver"]["gym_install"] = {"repo": "https://github.com/NVIDIA-NeMo/Gym.git", "ref": "v0.7.0"}
    # component set: its default is the config's business (gymbuild's was "nemo-gym")
    t["otel"] = {"endpoint": "https://otlp.example", "service_name": "svc", "component": "gym-vllm", **otel}
    return t


def test_collector_config_is_nemo_gyms_but_for_ports_and_targets_settled_at_run_time(nemo_gym: Any) -> None:
    t = otel_tree()
    cfg = config(t)
    plan = plan_benchmark(cfg, planning_traits(cfg), "b", run_dir="/runs/gym-job-t", gym_job_id="gym-job-t")
    ours = yaml.safe_load(render_job(plan, {}).files["otel/collector.yaml"].text)
    out = nemo_gym.run_python(NEMO_GYM_COLLECTOR, json.dumps(t), plan.bench_dir)
    assert out.returncode == 0, out.stderr
    theirs = json.loads(out.stdout)

    # Ports: NeMo Gym's fixed numbers are the first choices of the ports job.sh settles.
    otel = plan.collector
    ports = {f"${{env:{p.var}}}": str(p.first) for p in (otel.grpc, otel.http, otel.health)}
    text = json.dumps(ours)
    for ref, number in ports.items():
        text = text.replace(ref, number)
    ours = json.loads(text)

    # Scrape targets: the same jobs, intervals and labels, from files job.sh writes with each port.
    def jobs(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
        out = []
        for job in doc["receivers"]["prometheus"]["config"]["scrape_configs"]:
            labels = {r["target_label"]: r["replacement"] for r in job.get("relabel_configs", [])}
            for static in job.get("static_configs", []):
                labels.update(static.get("labels", {}))
            out.append((job["job_name"], job["scrape_interval"], labels))
        return out

    assert (
        jobs(ours)
        == jobs(theirs)
        == [
            ("gym-vllm/policy", "15s", {"gym_service": "policy"}),
            ("gym-vllm/judge", "15s", {"gym_service": "judge"}),
            ("dcgm", "15s", {}),
            ("node", "15s", {}),
        ]
    )
    for doc in (ours, theirs):
        del doc["receivers"]["prometheus"]
    # The submitting user (NeMo Gym, at submit) is the job's user (gymbuild, at run time).
    user = next(a for a in theirs["processors"]["resource"]["attributes"] if a["key"] == "user")
    user["value"] = "${env:USER}"
    assert ours == theirs


def test_collector_scrapes_no_node_exporter_whose_port_is_null() -> None:
    t = otel_tree(gpu_metrics_port=None, node_metrics_port=None)
    plan = plan_benchmark(
        config(t), planning_traits(config(t)), "b", run_dir="/runs/gym-job-t", gym_job_id="gym-job-t"
    )
    job = render_job(plan, {})
    doc = yaml.safe_load(job.files["otel/collector.yaml"].text)
    names = [j["job_name"] for j in doc["receivers"]["prometheus"]["config"]["scrape_configs"]]
    assert names == ["gym-vllm/policy", "gym-vllm/judge"]
    assert "targets/dcgm.json" not in job.files["job.sh"].text


@pytest.mark.parametrize("container", [None, "otel/otelcol-contrib:0.120.0"])
def test_collector_step_gets_the_token_its_ports_and_the_job_id(tmp_path: Path, container: str | None):
    t = otel_tree(container=container)
    result, calls = run_job(tmp_path, t, OTEL_TOKEN="ingest-token")
    assert result.returncode == 0, result.stderr
    (collector,) = of(calls, "otelcol-contrib")
    assert collector.argv == ["--config", str(tmp_path / "run" / "b" / "otel" / "collector.yaml")]
    assert collector.env["OTEL_TOKEN"] == "ingest-token"
    assert collector.env["SLURM_JOB_ID"] == "4242"
    for name in ("GRPC", "HTTP", "HEALTH"):
        assert 0 < int(collector.env[f"GYM_PORT_OTEL_{name}"]) < 65536
    for call in calls:  # no other step inherits the token
        if call is not collector:
            assert "ingest-token" not in call.env.values(), call.program
    (driver,) = of(calls, "gym")
    env = driver.env
    grpc, http = collector.env["GYM_PORT_OTEL_GRPC"], collector.env["GYM_PORT_OTEL_HTTP"]
    assert {k: env[k] for k in env if k.startswith(("OTEL_", "NEMO_GYM_OTEL_"))} == {
        "NEMO_GYM_OTEL_ENABLED": "1",
        "NEMO_GYM_OTEL_RUN_ID": "gym-job-t",
        "NEMO_GYM_OTEL_SPAN_GROUPS": "default,verify",
        "NEMO_GYM_OTEL_LOGS_ENABLED": "1",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://localhost:{http}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": f"http://localhost:{grpc}",
    }


def test_without_gym_telemetry_the_driver_gets_no_otel_environment(tmp_path: Path) -> None:
    result, calls = run_job(tmp_path, otel_tree(gym_telemetry=False), OTEL_TOKEN="ingest-token")
    assert result.returncode == 0, result.stderr
    (driver,) = of(calls, "gym")
    assert not [k for k in driver.env if k.startswith(("OTEL_", "NEMO_GYM_OTEL_"))]


def test_ray_without_node_pools_is_a_single_node_cluster_beside_the_driver(tmp_path: Path) -> None:
    t = base_tree(("gpu", 1), sandbox={"type": "ray", "container": "ray-img", "port": 26379})
    result, calls = run_job(tmp_path, t)
    assert result.returncode == 0, result.stderr
    (head,) = of(calls, "ray")
    port = head.argv[head.argv.index("--port") + 1]
    ip = head.argv[head.argv.index("--node-ip-address") + 1]
    assert head.argv == ["start", "--block", "--head", "--port", port, "--node-ip-address", ip]
    (driver,) = of(calls, "gym")
    assert driver.env["GYM_RAY_ADDRESS_SANDBOX"] == head.env["GYM_RAY_ADDRESS_SANDBOX"] == f"{ip}:{port}"


GATEWAY_PARITY = """
import importlib.util, json, sys, types
# The venv's Ray lacks Serve's extras: its decorators stand aside here (only the pure parts are compared).
serve = types.ModuleType("ray.serve")
serve.deployment = lambda cls: cls
serve.ingress = lambda app: (lambda cls: cls)
sys.modules["ray.serve"] = serve
import ray
ray.serve = serve
from nemo_gym.orchestration import ray_serve_gateway as theirs
spec = importlib.util.spec_from_file_location("gymbuild_gateway", sys.argv[1])
ours = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ours)
out = []
for argv in json.loads(sys.argv[2]):
    a, b = ours.parse(argv), theirs.parse_args(argv)
    out.append({
        "args": [vars(a), vars(b)],
        "command": [
            ours.vllm_command(a, 4321),
            theirs.build_instance_command(
                b.model, b.tensor_parallel_size, b.pipeline_parallel_size, b.trust_remote_code, 4321,
                b.served_model_name, b.extra_args,
            ),
        ],
        "per_node": [
            ours.replicas_per_node(a),
            theirs.max_replicas_per_node(b.tensor_parallel_size, b.pipeline_parallel_size, b.gpus_per_node),
        ],
    })
print(json.dumps(out))
"""


def test_gateway_reads_nemo_gyms_command_line_and_starts_the_same_vllm(nemo_gym: Any) -> None:
    """Our gateway, imported where Ray Serve is installed (the oracle's venv), beside NeMo Gym's."""
    argvs = [
        ["--model", "m/q", "--port", "8000"],
        ["--model", "m", "--port", "1", "--tensor-parallel-size", "16", "--number-of-instances", "2",
         "--gpus-per-node", "8", "--pipeline-parallel-size", "2", "--trust-remote-code",
         "--served-model-name", "q", "--extra-args", "--max-model-len 4096 --hf-overrides '{\"a\": 1}'"],
        ["--model", "m", "--port", "1", "--tensor-parallel-size", "2", "--gpus-per-node", "8"],
    ]  # fmt: skip
    out = nemo_gym.run_python(GATEWAY_PARITY, str(GATEWAY), json.dumps(argvs))
    assert out.returncode == 0, out.stderr
    for case in json.loads(out.stdout):
        for ours, theirs in case.values():
            assert ours == theirs
