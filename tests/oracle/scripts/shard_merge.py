"""Merge a benchmark's shards with gymbuild's shard driver, and score the unsharded rollouts, both with
NeMo Gym 0.7.0's own aggregation (run by its venv); write what each gave to OUT_DIR/result.json.

    /opt/nemo-gym-0.7.0/bin/python tests/oracle/scripts/shard_merge.py OUT_DIR SHARD_MODULE K...

For the rollouts of aggregate_metrics.py (mcqa: one agent, 4 tasks x 2 repeats; weather: two agents
behind two environment servers, 3 tasks), each benchmark is laid out as K shard jobs leave it: the
benchmark's materialized inputs, and per shard `shards/<k>/artifacts/rollouts.jsonl` holding the rows
of its slice (`shard_rows`). gymbuild_shard's `_merge` (what the last shard runs) merges them into
the benchmark's rollouts.jsonl and its aggregate metrics; the same rows unsharded are scored by
`RolloutAggregationHelper` directly. The servers are NeMo Gym's own resources servers on loopback,
as in aggregate_metrics.py.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

from aggregate_metrics import (  # the same directory: sys.path[0]
    MCQA,
    WEATHER,
    _mcqa_rows,
    _weather_rows,
    aggregate,
    serving,
)

INPUT_KEYS = (
    "_ng_task_index",
    "_ng_rollout_index",
    "agent_ref",
    "_ng_environment_server",
    "responses_create_params",
)


def _module(path: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gymbuild_shard", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lines(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def _case(out: Path, shard, rows: list[dict], servers: dict, counts: list[int]) -> dict:  # type: ignore[no-untyped-def]
    written = await aggregate(out / "unsharded", rows, servers)  # NeMo Gym's score of the rows unsharded
    found: dict = {
        "unsharded": {
            "rows": _read(written.parent / "rollouts.jsonl"),
            "metrics": json.loads(written.read_text()),
        }
    }
    with serving(servers):
        inputs = [{k: r[k] for k in INPUT_KEYS if k in r} for r in rows]
        for count in counts:
            bench = out / f"shards-{count}"
            (bench / "artifacts").mkdir(parents=True)
            lines = [json.dumps(r).encode() for r in inputs]
            (bench / "artifacts" / shard.INPUTS).write_bytes(b"".join(line + b"\n" for line in lines))
            sizes = []
            for k, shard_dir in enumerate(shard.shard_dirs(bench, count)):
                mine = {
                    (json.loads(line)["_ng_task_index"], json.loads(line)["_ng_rollout_index"])
                    for line in shard.shard_rows(lines, k, count)
                }
                slice_rows = [r for r in rows if (r["_ng_task_index"], r["_ng_rollout_index"]) in mine]
                (shard_dir / "artifacts").mkdir(parents=True)
                (shard_dir / "artifacts" / "rollouts.jsonl").write_text(_lines(slice_rows))
                sizes.append(len(slice_rows))
            config = SimpleNamespace(count_failure_classes_as_zero=[], count_missing_rollouts_as_zero=False)
            written = await shard._merge(config, bench, count)
            found[f"shards-{count}"] = {
                "sizes": sizes,
                "rows": _read(bench / "artifacts" / "rollouts.jsonl"),
                "metrics": json.loads(Path(written).read_text()),
            }
    return found


async def main(out: Path, module_path: str, counts: list[int]) -> None:
    shard = _module(module_path)
    cases = {
        "mcqa": (_mcqa_rows(), MCQA),
        "weather": (_weather_rows([1.0, 0.0, 0.0], [1.0, 1.0, 0.0]), WEATHER),
    }
    results = {}
    for name, (rows, servers) in cases.items():
        shutil.rmtree(out / name, ignore_errors=True)
        results[name] = await _case(out / name, shard, rows, servers, counts)
    (out / "result.json").write_text(json.dumps(results))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], [int(k) for k in sys.argv[3:]]))
