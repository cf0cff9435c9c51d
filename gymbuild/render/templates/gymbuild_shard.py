"""gymbuild's shard driver: one slice of a sharded benchmark (`shards: K`), run inside `gym eval run`.

A sharded benchmark is K jobs. Each runs `gym eval run` with its own bench dir
(`<benchmark>/shards/<k>`) and `+rollout_collection_driver=gymbuild_shard:collect`, the hook NeMo Gym
0.7.0 gives for a custom collection: `gym eval run` prepares the data and starts its servers as
always, then awaits `collect` instead of its own single pass. The job's driver step writes this file
into `<bench dir>/.gym_shard/` and puts that on PYTHONPATH, so the driver's image needs nothing of
gymbuild. Everything that collects, scores and merges is NeMo Gym's own code:

1. The benchmark's inputs are materialized ONCE, by the first shard to get there (under a lock in the
   benchmark's artifacts dir), with NeMo Gym's own preprocessing: a collection whose dispatch budget
   is 0 writes `rollouts_materialized_inputs.jsonl` (task and rollout indices, repeats, agent
   routing) and starts no rollout. The file is then `<benchmark>/artifacts/
   rollouts_materialized_inputs.jsonl`, exactly what the unsharded run would have written.
2. Each shard takes its slice of those rows (`shard_rows`: whole tasks, contiguous, every row in
   exactly one slice), writes it as its own materialized inputs and runs NeMo Gym's collection with
   `resume_from_cache`, so a shard rerun in its directory asks only for what its slice still lacks.
3. The shard that finds every slice complete merges them, while its servers are still up, with
   NeMo Gym's `RolloutAggregationHelper` (what `gym eval aggregate` runs): the benchmark's one
   `rollouts.jsonl` and `rollouts_aggregate_metrics.json`, scored over the union of the slices.

`shard_rows` and `task_order` are plain Python (gymbuild's tests import this file to search them);
NeMo Gym is imported only inside `collect`.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROLLOUTS = "rollouts.jsonl"
INPUTS = "rollouts_materialized_inputs.jsonl"  # NeMo Gym's materialized_path_for(rollouts.jsonl)
METRICS = "rollouts_aggregate_metrics.json"  # its aggregate_metrics_path_for(rollouts.jsonl)
TASK = "_ng_task_index"
ROLLOUT = "_ng_rollout_index"


def task_order(lines: Sequence[bytes]) -> list[Any]:
    """The task index of each materialized row, in file order."""
    return [json.loads(line)[TASK] for line in lines]


def shard_rows(lines: Sequence[bytes], index: int, count: int) -> list[bytes]:
    """The rows of shard `index` of `count`: the tasks at positions [index*n/count, (index+1)*n/count)
    of the n distinct tasks in order of first appearance, each with all its rows (its repeats, its
    agents), in file order. The slices partition the rows: none lost, none in two shards; their task
    counts differ by at most one. A shard past the last task (count > n) has no rows."""
    if not 0 <= index < count:
        raise ValueError(f"shard {index} of {count}")
    tasks = task_order(lines)
    distinct = list(dict.fromkeys(tasks))
    n = len(distinct)
    mine = set(distinct[index * n // count : (index + 1) * n // count])
    return [line for line, task in zip(lines, tasks, strict=True) if task in mine]


def _rows(path: Path) -> list[bytes]:
    if not path.exists():
        return []
    return [line for line in path.read_bytes().splitlines() if line.strip()]


def _keys(path: Path) -> set[tuple[Any, Any]]:
    """(task, rollout) of every row a rollouts file holds (a torn last line is not a row yet)."""
    keys = set()
    for line in _rows(path):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        keys.add((row.get(TASK), row.get(ROLLOUT)))
    return keys


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """flock(2) on `path`: the shards of one benchmark materialize and merge one at a time."""
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _write(path: Path, data: bytes) -> None:
    """Atomically: a shard killed mid-write leaves the old file or the new one."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def shard_dirs(bench_dir: Path, count: int) -> list[Path]:
    return [bench_dir / "shards" / str(k) for k in range(count)]


async def _materialize(config: Any, inputs: Path) -> None:
    """The benchmark's materialized inputs, by NeMo Gym's own collection with a dispatch budget of 0:
    it preprocesses and writes every row (indices, repeats, routing), then starts none. It ends by
    saying no rollout produced a result, which is the point: the file is what is wanted."""
    from nemo_gym.path_utils import materialized_path_for
    from nemo_gym.rollout_collection import RolloutCollectionHelper

    scratch = inputs.parent / ".gym_materialize" / ROLLOUTS
    shutil.rmtree(scratch.parent, ignore_errors=True)
    probe = config.model_copy(
        update={
            "output_jsonl_fpath": str(scratch),
            "resume_from_cache": False,
            "dispatch_budget_s": 0.0,
            "drain_margin_s": None,
            "num_samples_in_parallel": config.num_samples_in_parallel or 1,
            "disable_aggregation": True,
            "require_complete": False,
            "count_missing_rollouts_as_zero": False,
            "count_failure_classes_as_zero": [],
        }
    )
    written = materialized_path_for(scratch)
    try:
        await RolloutCollectionHelper().run_from_config(probe)
    except RuntimeError:
        if not written.exists():
            raise
    os.replace(written, inputs)
    shutil.rmtree(scratch.parent, ignore_errors=True)


async def _merge(config: Any, bench_dir: Path, count: int) -> Path:
    """The slices, merged and scored by NeMo Gym's aggregation (its servers are this run's)."""
    from nemo_gym.rollout_collection import RolloutAggregationConfig, RolloutAggregationHelper

    outs = [d / "artifacts" / ROLLOUTS for d in shard_dirs(bench_dir, count)]
    merge = RolloutAggregationConfig(
        # Each path a literal pattern; ',' cannot be in a run dir (gymbuild refuses it).
        input_glob=",".join(glob.escape(str(p)) for p in outs if p.exists()),
        output_jsonl_fpath=str(bench_dir / "artifacts" / ROLLOUTS),
        merge_shards=True,
        count_failure_classes_as_zero=list(config.count_failure_classes_as_zero),
        count_missing_rollouts_as_zero=config.count_missing_rollouts_as_zero,
        disable_health_check=True,  # each shard's own rows were checked by its gym eval run
    )
    return Path(await RolloutAggregationHelper().run_from_config(merge))


async def collect(config: Any, global_config_dict: Any) -> None:
    """Run this job's slice of the benchmark, then merge the slices if this is the last to complete."""
    from nemo_gym.path_utils import materialized_path_for
    from nemo_gym.rollout_collection import RolloutCollectionHelper

    index, count = int(os.environ["GYM_SHARD_INDEX"]), int(os.environ["GYM_SHARD_COUNT"])
    bench_dir = Path(os.environ["GYM_SHARD_OF"])
    artifacts = bench_dir / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    inputs = artifacts / INPUTS
    lock = artifacts / ".gym_shards.lock"
    with _locked(lock):
        if not inputs.exists():
            print(f"gym: shard {index} of {count}: materializing the benchmark's inputs", flush=True)
            await _materialize(config, inputs)
    everything = _rows(inputs)
    mine = shard_rows(everything, index, count)
    own = Path(config.output_jsonl_fpath)
    own.parent.mkdir(parents=True, exist_ok=True)
    own_inputs = materialized_path_for(own)
    text = b"".join(line + b"\n" for line in mine)
    if not own_inputs.exists() or own_inputs.read_bytes() != text:
        _write(own_inputs, text)
    own.touch()  # resume_from_cache continues from this file: an empty one on the first run
    print(f"gym: shard {index} of {count}: {len(mine)} of {len(everything)} rows", flush=True)
    if mine:
        await RolloutCollectionHelper().run_from_config(
            config.model_copy(update={"resume_from_cache": True, "disable_aggregation": True})
        )
    wanted = {(json.loads(line)[TASK], json.loads(line)[ROLLOUT]) for line in everything}
    with _locked(lock):
        done = set().union(*(_keys(d / "artifacts" / ROLLOUTS) for d in shard_dirs(bench_dir, count)))
        missing = len(wanted - done)
        if missing:
            print(f"gym: shard {index} of {count} complete; {missing} rows of other shards still to come")
        elif _keys(artifacts / ROLLOUTS) != wanted or not (artifacts / METRICS).exists():
            print(f"gym: shard {index} of {count}: every shard complete, merging", flush=True)
            written = await _merge(config, bench_dir, count)
            print(
                f"gym: merged {len(wanted)} rows into {artifacts / ROLLOUTS} (metrics: {written})", flush=True
            )
