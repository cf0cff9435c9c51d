"""Make `rollouts_aggregate_metrics.json` files with NeMo Gym 0.7.0's own aggregation (run by its venv).

`gym eval aggregate` (RolloutAggregationHelper.run_from_config) reads a rollouts.jsonl, POSTs each
environment server's rollouts to that server's `/aggregate_metrics` and writes the file gymbuild's
`results` reads. Here the servers are NeMo Gym's own resources servers (mcqa, example_single_tool_call)
served by uvicorn on loopback ports in this process, instead of processes `gym env start` spawns with
their own venvs (which need the network); everything from the rollouts file to the metrics file is
NeMo Gym's code. The only thing replaced is how the aggregation finds its servers: it is handed a
ServerClient over the global config made here rather than fetching one from a head server.

    /opt/nemo-gym-0.7.0/bin/python tests/oracle/scripts/aggregate_metrics.py OUT_DIR

writes OUT_DIR/<run>/<benchmark>/artifacts/{rollouts.jsonl,rollouts_aggregate_metrics.json}: in
run-a, `mcqa` (one agent; MCQA's own key metrics: pass@k, majority@k) and `weather` (two agents, each
behind its own environment server; the default key metrics, mean/*); in run-b, `weather` again with
better rewards, for a comparison.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import uvicorn
from nemo_gym.rollout_collection import (
    RolloutAggregationConfig,
    RolloutAggregationHelper,
    RolloutCollectionHelper,
)
from nemo_gym.server_utils import (
    GlobalAIOHTTPAsyncClientConfig,
    ServerClient,
    is_global_aiohttp_client_setup,
    set_global_aiohttp_client,
)
from omegaconf import OmegaConf
from resources_servers.example_single_tool_call.app import (
    SimpleWeatherResourcesServer,
    SimpleWeatherResourcesServerConfig,
)
from resources_servers.mcqa.app import MCQAResourcesServer, MCQAResourcesServerConfig


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answer(text: str) -> dict:
    """A Responses API response whose one output message says `text`."""
    return {
        "id": "resp",
        "created_at": 0,
        "model": "policy",
        "object": "response",
        "output": [
            {
                "id": "msg",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 40,
            "output_tokens": len(text.split()),
            "total_tokens": 40 + len(text.split()),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _row(agent: str, server: str, task: int, rollout: int, reward: float, text: str, **extra: object) -> dict:
    """One line of rollouts.jsonl as `gym eval run` writes it: the verify response and its routing keys."""
    return {
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "agent_ref": {"name": agent},
        "_ng_environment_server": server,
        "responses_create_params": {"input": [{"role": "user", "content": f"question {task}"}]},
        "response": _answer(text),
        "reward": reward,
        **extra,
    }


def _mcqa_rows() -> list[dict]:
    """4 tasks x 2 repeats of multiple choice: gold answers A, B, C, D."""
    answers = (
        [("A", "A"), ("B", "C"), ("C", "C"), ("D", None)],
        [("A", "A"), ("B", "B"), ("C", "A"), ("D", None)],
    )
    rows = []
    for rollout, picks in enumerate(answers):
        for task, (gold, got) in enumerate(picks):
            text = f"Answer: {got}" if got else "I cannot tell."
            rows.append(
                _row(
                    "mcqa_simple_agent",
                    "mcqa_env",
                    task,
                    rollout,
                    float(got == gold),
                    text,
                    expected_answer=gold,
                    extracted_answer=got,
                )
            )
    return rows


def _weather_rows(small: list[float], large: list[float]) -> list[dict]:
    """Two agents on the same tasks, each through its own environment server."""
    rows = []
    for agent, server, rewards in (
        ("weather_agent_small", "weather_env_small", small),
        ("weather_agent_large", "weather_env_large", large),
    ):
        for task, reward in enumerate(rewards):
            rows.append(_row(agent, server, task, 0, reward, "Sunny." if reward else "No idea."))
    return rows


def _serve(server_cls, config_cls, name: str, port: int, client: ServerClient) -> uvicorn.Server:
    config = config_cls(host="127.0.0.1", port=port, entrypoint="app.py", name=name, domain="agent")
    app = server_cls(config=config, server_client=client).setup_webserver()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.02)
    return server


def _env_block(agent: str, port: int) -> dict:
    return {
        "environment_servers": {
            "legacy_agent": {
                "entrypoint": "app.py",
                "host": "127.0.0.1",
                "port": port,
                "agent_server": {"type": "responses_api_agents", "name": agent},
            }
        }
    }


async def aggregate(bench_dir: Path, rows: list[dict], servers: dict[str, tuple[type, type, str]]) -> Path:
    """Write `rows` as the benchmark's rollouts.jsonl and aggregate them with NeMo Gym's code.

    `servers`: environment server name -> (resources server class, its config class, agent name)."""
    artifacts = bench_dir / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    rollouts = artifacts / "rollouts.jsonl"
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with serving(servers):
        config = RolloutAggregationConfig(
            input_glob=str(rollouts),
            output_jsonl_fpath=str(rollouts),
            merge_shards=False,
            disable_health_check=True,
        )
        written = await RolloutAggregationHelper().run_from_config(config)
    return Path(written)


@contextlib.contextmanager
def serving(servers: dict[str, tuple[type, type, str]]) -> Iterator[ServerClient]:
    """`servers` served on loopback while the block runs, and NeMo Gym's aggregation pointed at them.

    `servers`: environment server name -> (resources server class, its config class, agent name)."""
    ports = {name: _free_port() for name in servers}
    tree = {"head_server": {"host": "127.0.0.1", "port": _free_port()}}
    tree |= {name: _env_block(agent, ports[name]) for name, (_, _, agent) in servers.items()}
    client = ServerClient(head_server_config=tree["head_server"], global_config_dict=OmegaConf.create(tree))
    if not is_global_aiohttp_client_setup():
        set_global_aiohttp_client(
            cfg=GlobalAIOHTTPAsyncClientConfig.model_validate(client.global_config_dict)
        )
    running = [_serve(cls, cfg, name, ports[name], client) for name, (cls, cfg, _) in servers.items()]
    RolloutCollectionHelper.setup_server_client = lambda self, head_server_config=None: client
    try:
        yield client
    finally:
        for server in running:
            server.should_exit = True


# The resources servers (and the agent each answers for) of the two benchmarks the fixtures use.
MCQA = {"mcqa_env": (MCQAResourcesServer, MCQAResourcesServerConfig, "mcqa_simple_agent")}
WEATHER = {
    f"weather_env_{size}": (
        SimpleWeatherResourcesServer,
        SimpleWeatherResourcesServerConfig,
        f"weather_agent_{size}",
    )
    for size in ("small", "large")
}


async def main(out: Path) -> None:
    runs = (
        ("run-a/mcqa", _mcqa_rows(), MCQA),
        ("run-a/weather", _weather_rows([1.0, 0.0, 0.0], [1.0, 1.0, 0.0]), WEATHER),
        ("run-b/weather", _weather_rows([1.0, 1.0, 0.0], [1.0, 1.0, 1.0]), WEATHER),
    )
    for bench, rows, servers in runs:
        print(await aggregate(out / bench, rows, servers))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
