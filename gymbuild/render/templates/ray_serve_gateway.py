"""gymbuild's Ray Serve gateway: several vLLM instances behind one port, for a vLLM service with
`use_ray_serve` (or one whose instances each need more GPUs than a node has, where NeMo Gym 0.7.0
switches to Ray Serve by itself).

A job step writes this file into its working directory and runs it where vLLM is installed. It joins
the Ray cluster the step started (or starts one on a single node) and deploys one Ray Serve
deployment with `--number-of-instances` replicas. Each replica starts its own `vllm serve` on a free
port of its node, with vLLM's Ray executor so an instance may span nodes, and forwards every request
it is routed to that server. Ray Serve places the replicas (`max_replicas_per_node` from the GPUs
of a node) and serves the gateway's port.

The command line is NeMo Gym's gateway's, so a config means the same job under either tool. Needs
ray[serve], fastapi and aiohttp in the image (the step installs aiohttp and ray when missing).
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import subprocess
import time
import urllib.error
import urllib.request

import aiohttp
import ray
from fastapi import FastAPI, Request, Response
from ray import serve

READY_TIMEOUT_SECONDS = 900.0  # a large model takes minutes to load
POLL_SECONDS = 5.0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Ray Serve gateway over several vLLM instances")
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True, help="the gateway's own port")
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    parser.add_argument("--pipeline-parallel-size", type=int, default=1)
    parser.add_argument("--number-of-instances", type=int, default=1)
    parser.add_argument("--gpus-per-node", type=int, default=None, help="bounds the replicas on one node")
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--extra-args", default="", help="further `vllm serve` flags, as shell words")
    return parser.parse_args(argv)


def vllm_command(args: argparse.Namespace, port: int) -> list[str]:
    """One instance's `vllm serve`, the flags in the order the service's own vLLM steps use."""
    command = ["vllm", "serve", args.model, "--port", str(port)]
    command += ["--tensor-parallel-size", str(args.tensor_parallel_size)]
    command += ["--distributed-executor-backend", "ray"]
    if args.served_model_name:
        command += ["--served-model-name", args.served_model_name]
    if args.pipeline_parallel_size > 1:
        command += ["--pipeline-parallel-size", str(args.pipeline_parallel_size)]
    if args.trust_remote_code:
        command.append("--trust-remote-code")
    return command + shlex.split(args.extra_args)


def replicas_per_node(args: argparse.Namespace) -> int | None:
    """How many instances fit a node's GPUs; None (no bound) when the node's GPUs are unknown."""
    if not args.gpus_per_node:
        return None
    return max(1, args.gpus_per_node // (args.tensor_parallel_size * args.pipeline_parallel_size))


def free_port() -> int:
    """A port nothing on this node listens on: replicas sharing a node cannot share one."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


api = FastAPI()


@serve.deployment
@serve.ingress(api)
class Instance:
    """One replica: one vLLM server of its own, to which it forwards what Ray Serve routes to it."""

    def __init__(self, args: argparse.Namespace) -> None:
        port = free_port()
        self.url = f"http://localhost:{port}"
        # vLLM's Ray executor joins this cluster rather than starting another one.
        env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
        self.server = subprocess.Popen(vllm_command(args, port), env=env)
        self.session = aiohttp.ClientSession()
        self.wait_ready()  # Ray Serve routes nothing to a replica before its constructor returns

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError(
                    f"vllm serve exited with status {self.server.returncode} before it was ready"
                )
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=5) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, TimeoutError, ConnectionError):
                pass
            time.sleep(POLL_SECONDS)
        raise TimeoutError(f"vllm serve at {self.url} was not ready within {READY_TIMEOUT_SECONDS:.0f} s")

    def check_health(self) -> None:
        """Ray Serve calls this periodically: a replica whose server died is replaced."""
        if self.server.poll() is not None:
            raise RuntimeError(f"vllm serve at {self.url} exited with status {self.server.returncode}")

    @api.get("/health")
    async def health(self) -> Response:
        return Response(status_code=200)

    @api.api_route("/{path:path}", methods=["GET", "POST"])
    async def forward(self, request: Request, path: str) -> Response:
        skip = {"host", "content-length"}
        headers = {k: v for k, v in request.headers.items() if k.lower() not in skip}
        async with self.session.request(
            request.method,
            f"{self.url}/{path}",
            params=request.query_params,
            data=await request.body(),
            headers=headers,
        ) as answer:
            body = await answer.read()
            kept = {k: v for k, v in answer.headers.items() if k.lower() != "content-length"}
            return Response(content=body, status_code=answer.status, headers=kept)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    # A replica's queue-length answer crosses nodes; Ray's default deadline is too tight for that.
    os.environ.setdefault("RAY_SERVE_QUEUE_LENGTH_RESPONSE_DEADLINE_S", "1.0")
    try:
        ray.init(address="auto")  # the cluster the job step started
    except ConnectionError:
        ray.init()  # a single node: a cluster of its own
    serve.start(http_options={"host": "0.0.0.0", "port": args.port})
    deployment = Instance.options(
        num_replicas=args.number_of_instances, max_replicas_per_node=replicas_per_node(args)
    )
    serve.run(deployment.bind(args))
    print(f"gateway: {args.number_of_instances} instance(s) behind port {args.port}", flush=True)
    while True:  # the step lives as long as the gateway
        time.sleep(3600)


if __name__ == "__main__":
    main()
