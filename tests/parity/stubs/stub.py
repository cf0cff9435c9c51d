#!/usr/bin/python3 -IS
"""One recording stand-in for every command a job script runs on a cluster (srun, vllm, gym, ...).

The behaviour suite (tests/parity/behaviour.py) links this file under each command's name into a
directory it puts first on PATH. Every call appends one JSON line to $STUB_LOG: the command, its
argv, its environment and which srun step, task and node it runs in. Then it behaves like the real
command as far as a job script can tell:

- srun parses its own options, picks its nodes from the simulated allocation (--nodelist, --nodes,
  --ntasks, or the whole allocation), and runs the step's command once per task, concurrently, with
  the environment srun gives a task (the caller's, as with the default --export=ALL, plus SLURM_PROCID,
  SLURM_NODEID, SLURMD_NODENAME, ...); --output, --kill-on-bad-exit and --wait as srun does them;
- servers (vllm serve, vllm-router, ray start --block, otelcol-contrib) keep running until they are
  killed, unless $STUB_FAIL names them: then they exit 1 at once;
- scontrol, sbatch, sacct, getent and hostname answer from the simulated allocation ($STUB_NODES) and
  the scenario ($STUB_SACCT, ...); gym exits with the status $STUB_EXIT gives its subcommand;
- curl answers health checks (0, or 7 when $STUB_FAIL has curl); git and uv leave the files a real
  clone and venv would, so the script's next `cd` and `source` work;
- sleep is short, but lasts while a step started so far is still starting (see sleep()).
Nothing here decides what a tool does; it only records what the job script asked for.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import time

SELF = os.path.realpath(__file__)
NAME = os.path.basename(sys.argv[0])
ARGS = sys.argv[1:]
ENV_DROP = ("GYM_STEP_LIB", "BASH_FUNC_")


def nodes() -> list[str]:
    return [n for n in os.environ.get("STUB_NODES", "node1").split(",") if n]


def record(**extra: object) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_DROP)}
    entry = {
        "cmd": NAME,
        "argv": ARGS,
        "env": env,
        "cwd": os.getcwd(),
        "step": os.environ.get("STUB_STEP", ""),
        "task": os.environ.get("STUB_TASK", ""),
        "node": os.environ.get("STUB_NODE", nodes()[0]),
        "pid": os.getpid(),
        "t": time.time_ns(),
        **extra,
    }
    line = (json.dumps(entry) + "\n").encode()
    fd = os.open(os.environ["STUB_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def failing(name: str) -> bool:
    return name in os.environ.get("STUB_FAIL", "").split(",")


def settled_dir() -> str:
    return os.environ["STUB_LOG"] + ".settled"


def settle(step: str, task: str) -> None:
    """Mark an srun task as settled: serving, or ended (what gym's driver waits for, see gym())."""
    if step:
        os.makedirs(settled_dir(), exist_ok=True)
        with open(f"{settled_dir()}/{step}.{task}", "w"):
            pass


def serve_forever() -> None:
    """A server: runs until it is killed (the job's end, or its srun stopping the step)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    settle(os.environ.get("STUB_STEP", ""), os.environ.get("STUB_TASK", ""))
    while True:
        time.sleep(3600)


def server_dir() -> str:
    return os.environ["STUB_LOG"] + ".servers"


def host_node(host: str) -> str:
    """The simulated node an address names: localhost is the caller's own node."""
    alloc = nodes()
    here = os.environ.get("STUB_NODE", alloc[0])
    if host in ("localhost", "127.0.0.1", "0.0.0.0", ""):
        return here
    if host.startswith("10.0.0.") and host[7:].isdigit() and 0 < int(host[7:]) <= len(alloc):
        return alloc[int(host[7:]) - 1]
    return host


def listen(port: str | None) -> None:
    """Mark this server as answering on its node's `port`, as long as it runs (what curl reads)."""
    if not port:
        return
    os.makedirs(server_dir(), exist_ok=True)
    with open(f"{server_dir()}/{host_node('')}:{port}", "w") as f:
        f.write(str(os.getpid()))


def answering(host: str, port: str) -> bool:
    try:
        with open(f"{server_dir()}/{host_node(host)}:{port}") as f:
            os.kill(int(f.read()), 0)
        return True
    except (OSError, ValueError):
        return False


def option(name: str) -> str | None:
    for i, arg in enumerate(ARGS):
        if arg == name and i + 1 < len(ARGS):
            return ARGS[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def collector_health_port() -> str | None:
    """The health_check extension's port in the collector's config (a literal or ${env:VAR})."""
    path = option("--config")
    try:
        with open(path or "") as f:
            text = f.read()
    except OSError:
        return None
    m = re.search(r"health_check:\s*\n\s*endpoint:\s*\"?[^\n\"]*:(\d+|\$\{env:(\w+)\})", text)
    if not m:
        return None
    return os.environ.get(m.group(2), "") if m.group(2) else m.group(1)


def server(name: str, port: str | None = None) -> None:
    record()
    if failing(name):
        sys.exit(1)
    listen(port)
    serve_forever()


# --- srun ----------------------------------------------------------------------------------------------


# Images with no shell in them (the official collector image has only otelcol-contrib): a step
# there must run the binary itself.
SHELL_LESS = ("otel/opentelemetry-collector-contrib",)


def parse_srun(args: list[str]) -> tuple[dict[str, str | None], list[str]]:
    opts: dict[str, str | None] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        key, eq, value = args[i].partition("=")
        opts[key.lstrip("-")] = value if eq else None
        i += 1
    return opts, args[i:]


def layout(opts: dict[str, str | None], alloc: list[str]) -> tuple[list[str], int]:
    """A step's nodes and task count as srun (Slurm 22.05) derives them inside a batch job, measured
    on the test cluster: --ntasks wins; else the job's own task count (SLURM_NTASKS, which sbatch
    sets only when the job asked for tasks) wins over --nodes and --ntasks-per-node; else
    --ntasks-per-node per node; else a task a node. The step spans --nodes, else the whole
    allocation, fewer when it has fewer tasks than that and no --nodes; --nodelist names nodes it
    must include, not the only ones (`srun --nodelist=node2` in a 2-node job runs on both)."""
    nodes_opt = int(opts["nodes"] or 1) if opts.get("nodes") else None
    listed = [n for n in (opts.get("nodelist") or "").split(",") if n]
    count = nodes_opt or max(len(alloc), len(listed))
    job_tasks = os.environ.get("SLURM_NTASKS", "")
    if opts.get("ntasks"):
        ntasks = int(opts["ntasks"] or 1)
    elif job_tasks.isdigit():
        ntasks = int(job_tasks)
    elif opts.get("ntasks-per-node"):
        ntasks = count * int(opts["ntasks-per-node"] or 1)
    else:
        ntasks = count
    if nodes_opt is None and ntasks < count:
        count = max(ntasks, len(listed))
    extra = [n for n in alloc if n not in listed][: max(count - len(listed), 0)]
    chosen = [n for n in alloc if n in listed or n in extra] + [n for n in listed if n not in alloc]
    return chosen, ntasks


def srun() -> None:
    opts, command = parse_srun(ARGS)
    chosen, ntasks = layout(opts, nodes())
    step = str(os.getpid())
    record(opts=opts, command=command, nodes=chosen, ntasks=ntasks)
    try:
        run_step(opts, command, chosen, ntasks, step)
    finally:  # however the step ends (its tasks, a signal, a program not found), none still starts
        for task in range(ntasks):
            settle(step, str(task))


def run_step(
    opts: dict[str, str | None], command: list[str], chosen: list[str], ntasks: int, step: str
) -> None:
    import subprocess  # only srun starts processes: every other stub starts faster without it

    per_node = max(1, -(-ntasks // max(len(chosen), 1)))
    image = opts.get("container-image") or ""
    if image.startswith(SHELL_LESS) and command and os.path.basename(command[0]) in ("bash", "sh"):
        # As pyxis does: the image has only its binary, so the step's program is not found.
        print(f"slurmstepd: error: execve(): {command[0]}: No such file or directory", file=sys.stderr)
        sys.exit(2)
    out = None
    if opts.get("output"):
        out = open(opts["output"].replace("%j", os.environ.get("SLURM_JOB_ID", "")), "ab")  # noqa: SIM115
    procs = []
    for task in range(ntasks):
        node_index = min(task // per_node, len(chosen) - 1)
        node = chosen[node_index]
        env = {
            **os.environ,
            "SLURM_PROCID": str(task),
            "SLURM_NODEID": str(node_index),
            "SLURM_LOCALID": str(task % per_node),
            "SLURMD_NODENAME": node,
            "HOSTNAME": node,  # bash takes $HOSTNAME from its environment: the task's node, as there
            "SLURM_STEP_NODELIST": ",".join(chosen),
            "SLURM_STEP_NUM_NODES": str(len(chosen)),
            "SLURM_STEP_NUM_TASKS": str(ntasks),
            "SLURM_NTASKS": str(ntasks),
            "SLURM_NNODES": str(len(chosen)),
            "SLURM_STEP_ID": step,
            "STUB_STEP": step,
            "STUB_TASK": str(task),
            "STUB_NODE": node,
        }
        procs.append(subprocess.Popen(command, env=env, stdout=out, stderr=out))

    def stop(*_: object) -> None:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        sys.exit(143)

    signal.signal(signal.SIGTERM, stop)
    kill_on_bad = opts.get("kill-on-bad-exit") not in (None, "0")
    wait = "wait" in opts
    first_end = None
    while True:
        codes = [p.poll() for p in procs]
        for task, code in enumerate(codes):
            if code is not None:
                settle(step, str(task))
        if all(c is not None for c in codes):
            break
        ended = [c for c in codes if c is not None]
        if ended and first_end is None:
            first_end = time.monotonic()
        if (kill_on_bad and any(c != 0 for c in ended)) or (
            wait and first_end is not None and time.monotonic() - first_end > 0.3
        ):
            for p in procs:
                if p.poll() is None:
                    p.kill()
        time.sleep(0.05)
    sys.exit(max(abs(c) for c in codes if c is not None))


# --- the others -------------------------------------------------------------------------------------------


def expand(nodelist: str) -> list[str]:
    """`node[1-3]`, `node[1,3]` or `a,b` as hostnames (the forms a simulated allocation uses)."""
    out: list[str] = []
    for prefix, rng, plain in re.findall(r"([^,\[]+)\[([^\]]+)\]|([^,\[\]]+)", nodelist):
        if plain:
            out.append(plain)
            continue
        for piece in rng.split(","):
            lo, _, hi = piece.partition("-")
            out += [f"{prefix}{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return out


def scontrol() -> None:
    record()
    if ARGS[:2] == ["show", "hostnames"]:
        names = expand(ARGS[2]) if len(ARGS) > 2 and ARGS[2] else nodes()
        print("\n".join(names))


def sbatch() -> None:
    record()
    if failing("sbatch"):
        print("sbatch: error: Batch job submission failed", file=sys.stderr)
        sys.exit(1)
    print("4243" if "--parsable" in ARGS else "Submitted batch job 4243")


def sacct() -> None:
    record()
    answer = json.loads(os.environ.get("STUB_SACCT", "{}"))
    if not answer:
        return
    fields = []
    for i, arg in enumerate(ARGS):
        if arg in ("-o", "--format"):
            fields = ARGS[i + 1].split(",")
        elif arg.startswith("--format="):
            fields = arg.split("=", 1)[1].split(",")
    print("|".join(str(answer.get(f, "")) for f in fields))


def getent() -> None:
    record()
    alloc = nodes()
    name = ARGS[-1] if ARGS else ""
    if name not in alloc:
        sys.exit(2)
    ip = f"10.0.0.{alloc.index(name) + 1}"
    if ARGS[0] == "hosts":
        print(f"{ip}       {name}")
    else:
        print(f"{ip}       STREAM {name}\n{ip}       DGRAM\n{ip}       RAW")


def _records() -> list[dict]:  # type: ignore[type-arg]
    """The log's whole lines (another stub may be writing the last one)."""
    try:
        with open(os.environ["STUB_LOG"]) as f:
            lines = f.readlines()
    except FileNotFoundError:  # nothing recorded yet
        return []
    out = []
    for line in lines:
        with contextlib.suppress(json.JSONDecodeError):
            out.append(json.loads(line))
    return out


def _unrecorded_sruns(recorded: set[str]) -> list[str]:
    """srun stubs of this run that are alive but have not recorded their step yet: started before
    the caller, and slower to start on a loaded machine than the caller was."""
    log = os.environ["STUB_LOG"].encode()
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit() and p not in recorded):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if not any(a.endswith(b"/srun") for a in argv[:3]):
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                if b"STUB_LOG=" + log + b"\0" in f.read():
                    found.append(f"{pid}.?")
        except OSError:  # gone meanwhile
            continue
    return found


def unsettled() -> list[str]:
    """The tasks of the other srun steps started so far that neither serve nor have ended, and the
    steps started but not yet recorded."""
    own = os.environ.get("STUB_STEP", "")
    sruns = [r for r in _records() if r["cmd"] == "srun" and str(r["pid"]) != own]
    done = set(os.listdir(settled_dir())) if os.path.isdir(settled_dir()) else set()
    waiting = [f"{r['pid']}.{t}" for r in sruns for t in range(r["ntasks"]) if f"{r['pid']}.{t}" not in done]
    # /proc is read only when every recorded step has settled: it is the slower look
    return waiting or _unrecorded_sruns({str(r["pid"]) for r in sruns} | {own, str(os.getpid())})


def gym() -> None:
    record()
    if ARGS[:2] == ["eval", "run"]:
        # A real eval runs for minutes, so every step started before it is serving (or has ended) by
        # the time it ends the job; this one returns at once, so it waits for that, bounded: otherwise
        # what a step's later tasks did would depend on the machine's load, not on the script.
        deadline = time.monotonic() + 60
        while unsettled() and time.monotonic() < deadline:
            time.sleep(0.05)
    sub = " ".join(a for a in ARGS[:2])
    codes = json.loads(os.environ.get("STUB_EXIT", "{}"))
    sys.exit(int(codes.get(f"gym {sub}", 0)))


# A poll's wait: `sleep N` lasts a fifth of N, at most 1 s (the length of a 5 s poll, the shortest
# the scripts count attempts by), so a job that would wait minutes on a cluster runs in seconds. But
# the scripts count a health check's budget in polls, and here a step's programs start as processes
# on two shared cores, which a loaded machine makes slow where a real node's start is minutes of
# model loading against 5 s polls. So a sleep also lasts while a task of another step started so far
# has neither begun serving nor ended (at most N, and at most STARTING_WAIT_S): a poll then sees the
# step as started, not still starting, whatever the load, and a step that dies or never answers
# still spends the budget as it would on a cluster.
STARTING_WAIT_S = 5.0


def sleep() -> None:
    text = (ARGS[0] if ARGS else "1").removesuffix("s")
    try:
        length = float(text)
    except ValueError:
        length = 1.0
    start = time.monotonic()
    time.sleep(min(length / 5, 1.0))
    deadline = start + min(length, STARTING_WAIT_S)
    while time.monotonic() < deadline and unsettled():
        time.sleep(0.05)


def ray() -> None:
    if ARGS[:1] == ["symmetric-run"]:
        if "--help" in ARGS:
            return
        record()
        if os.environ.get("SLURM_NODEID", "0") == "0":
            inner = ARGS[ARGS.index("--") + 1 :]
            os.execvp(inner[0], inner)
        serve_forever()
    if ARGS[:1] == ["start"] and "--block" in ARGS:
        server("ray")
    record()


def git() -> None:
    record()
    if ARGS[:1] == ["clone"]:
        words = [a for a in ARGS[1:] if not a.startswith("-")]
        dest = words[1] if len(words) > 1 else words[0].rstrip("/").split("/")[-1].removesuffix(".git")
        os.makedirs(dest, exist_ok=True)


def uv() -> None:
    record()
    if ARGS[:1] == ["venv"]:
        words = [a for a in ARGS[1:] if not a.startswith("-")]
        venv = os.path.abspath(words[0] if words else ".venv")
        os.makedirs(f"{venv}/bin", exist_ok=True)
        with open(f"{venv}/bin/activate", "w") as f:
            f.write(f'export VIRTUAL_ENV={venv}\nexport PATH="$VIRTUAL_ENV/bin:$PATH"\n')


def curl() -> None:
    record()
    if any(a.endswith("install.sh") for a in ARGS):
        print("true")  # the installer, piped to sh
        return
    urls = [a for a in ARGS if a.startswith("http://")]
    m = re.match(r"http://([^:/]+):(\d+)", urls[-1] if urls else "")
    if failing("curl") or not m or not answering(m.group(1), m.group(2)):
        sys.exit(7)  # connection refused


def claim_port(port: str, owner: str) -> None:
    """gymbuild's port probe (`python3 -c '...gym-port-...' PORT OWNER`) on the simulated node: each
    node has its own ports, as real nodes do (all of them share this machine's, where one node's claim
    or another test's server would push the next node's server off its first-choice port). A port is
    taken while a server of this run answers on it at this node, or a live process claimed it there."""
    if answering("", port):
        sys.exit(1)
    os.makedirs(server_dir(), exist_ok=True)
    path = f"{server_dir()}/claim-{host_node('')}:{port}"
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                with open(path) as f:
                    os.kill(int(f.read() or 0), 0)
                sys.exit(1)  # claimed by a live process
            except (OSError, ValueError):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)  # its claimer is gone: free again
                continue
        os.write(fd, owner.encode())
        os.close(fd)
        return


def python3() -> None:
    if ARGS[:1] == ["-c"] and "gym-port-" in ARGS[1] and len(ARGS) >= 4:
        claim_port(ARGS[2], ARGS[3])  # not recorded: gymbuild's own probe, not a program of the job
        return
    if ARGS[:1] and ARGS[0].endswith("ray_serve_gateway.py"):
        server("ray_serve_gateway", option("--port"))
    if ARGS[:1] == ["-c"] and "import ray" in ARGS[1]:
        record()  # a script asking the (simulated) Ray cluster whether its nodes have joined: they have
        return
    os.execv("/usr/bin/python3", ["python3", *ARGS])


def plain() -> None:
    record()


def pip() -> None:
    """Only the allocation's first node reaches a package index (STUB_INDEX_NODE): a worker node
    often has none, so an install a tool runs on every node fails there."""
    record()
    index = os.environ.get("STUB_INDEX_NODE")
    if index and os.environ.get("STUB_NODE", index) != index:
        print("ERROR: Could not find a version that satisfies the requirement (no index)", file=sys.stderr)
        sys.exit(1)


COMMANDS = {
    "srun": srun,
    "scontrol": scontrol,
    "sbatch": sbatch,
    "sacct": sacct,
    "getent": getent,
    "gym": gym,
    "ray": ray,
    "git": git,
    "uv": uv,
    "curl": curl,
    "python3": python3,
    "vllm": lambda: server("vllm", option("--port") or "8000") if ARGS[:1] == ["serve"] else plain(),
    "vllm-router": lambda: server("vllm-router", option("--port")),
    "otelcol-contrib": lambda: server("otelcol-contrib", collector_health_port()),
    "hostname": lambda: print(os.environ.get("STUB_NODE", nodes()[0])),
    "pip": pip,
    "sleep": sleep,
}
STUBBED = (*COMMANDS, "squeue", "scancel", "pkill")


if __name__ == "__main__":
    COMMANDS.get(NAME, plain)()
