"""A sharded benchmark (`shards: K`): the split of its materialized rows, and its K jobs' scripts.

The split is searched (hypothesis): whatever the number of tasks, their repeats (even per task, as a
dict-form num_repeats gives), their agents and their order (interleaved repeats), the K slices
partition the rows: no row lost or doubled, every task whole in one shard. The scripts are run by
real bash with a `gym` on PATH that writes down what it got: the shard driver module is there, on
PYTHONPATH, importable, and named to gym as its rollout_collection_driver. The merge with NeMo Gym's
own aggregation is tests/results/test_shard_merge.py; the real driver on the cluster,
tests/e2e/test_shards_real_driver.py.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

from e2e_helpers import gymbuild, user_env
from hypothesis import given, settings
from hypothesis import strategies as st
from script_runs import step_lib

from gymbuild.config import load_config
from gymbuild.executors.base import planning_traits
from gymbuild.plan import plan_shards, planner
from gymbuild.render import _ENV, render_job

ROOT = Path(__file__).resolve().parents[2]
SHARD_MODULE = ROOT / "gymbuild" / "render" / "templates" / "gymbuild_shard.py"


def shard_module() -> ModuleType:
    """The module a shard's job writes and gym imports (it imports NeMo Gym only inside collect)."""
    spec = importlib.util.spec_from_file_location("gymbuild_shard", SHARD_MODULE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SHARD = shard_module()


@st.composite
def materialized(draw: st.DrawFn) -> list[bytes]:
    """Materialized rows as gym writes them: tasks with their repeats (per task), per agent, in task
    order (aabbcc) or interleaved (abcabc)."""
    tasks = draw(st.integers(0, 40))
    repeats = draw(st.lists(st.integers(1, 5), min_size=tasks, max_size=tasks))
    agents = draw(st.sampled_from([("a",), ("a", "b")]))
    rows = [
        {"_ng_task_index": t, "_ng_rollout_index": r + i * n, "agent_ref": {"name": agent}}
        for t, n in enumerate(repeats)
        for i, agent in enumerate(agents)
        for r in range(n)
    ]
    if draw(st.booleans()):
        rows.sort(key=lambda row: row["_ng_rollout_index"])  # interleave_repeats: stable, round by round
    return [json.dumps(row).encode() for row in rows]


@settings(max_examples=300, deadline=None)
@given(rows=materialized(), count=st.integers(1, 12))
def test_the_shards_partition_the_rows_with_every_task_whole_in_one(rows: list[bytes], count: int) -> None:
    slices = [SHARD.shard_rows(rows, k, count) for k in range(count)]
    assert Counter(line for s in slices for line in s) == Counter(rows)  # none lost, none doubled
    owners: dict[int, set[int]] = {}
    for k, part in enumerate(slices):
        for task in SHARD.task_order(part):
            owners.setdefault(task, set()).add(k)
        assert part == [line for line in rows if line in set(part)]  # each slice keeps the file's order
    assert all(len(shards) == 1 for shards in owners.values())  # a task's repeats never straddle two
    tasks_per_shard = [len(set(SHARD.task_order(part))) for part in slices]
    assert max(tasks_per_shard) - min(tasks_per_shard) <= 1  # the work is spread evenly


def test_a_shard_past_the_last_task_has_no_rows() -> None:
    rows = [json.dumps({"_ng_task_index": t, "_ng_rollout_index": 0}).encode() for t in range(2)]
    assert [len(SHARD.shard_rows(rows, k, 4)) for k in range(4)] == [0, 1, 0, 1]


def _shard_plans(tmp_path: Path, count: int) -> tuple:
    config = load_config(
        ROOT / "examples" / "minimal.yaml", overrides=[f"+driver.benchmarks.gpqa.shards={count}"]
    ).config
    plan = planner(config, planning_traits(config), run_dir=str(tmp_path / "run"), gym_job_id="gym-job-x")
    return plan_shards(plan, config, "gpqa")


def test_each_shard_is_a_job_of_its_own_in_its_own_directory(tmp_path: Path) -> None:
    plans = _shard_plans(tmp_path, 3)
    assert [p.bench_dir for p in plans] == [f"{tmp_path}/run/gpqa/shards/{k}" for k in range(3)]
    scripts = [render_job(p, {}).files["job.sh"].text for p in plans]
    for k, text in enumerate(scripts):
        assert f"#SBATCH --job-name=gym-gpqa+shard{k}" in text
        assert f"GYM_SHARD_INDEX={k}" in text and "GYM_SHARD_COUNT=3" in text
        assert "+rollout_collection_driver=gymbuild_shard:collect" in text
        assert f"+output_jsonl_fpath={tmp_path}/run/gpqa/shards/{k}/artifacts/rollouts.jsonl" in text


def test_an_unsharded_benchmark_has_no_shard_jobs(tmp_path: Path) -> None:
    assert _shard_plans(tmp_path, 1) == ()


def test_the_shards_driver_step_hands_gym_the_shard_driver(tmp_path: Path) -> None:
    """The driver script, run by bash: gym gets the module on PYTHONPATH, importable by its name,
    and the benchmark's own directory (where the slices are merged) in GYM_SHARD_OF."""
    plans = _shard_plans(tmp_path, 2)
    script = _ENV.get_template("driver.sh.j2").module.driver_script(plans[1].driver)  # type: ignore[attr-defined]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gym").write_text(
        "#!/bin/bash\n"
        'printf "%s\\n" "$@" >"$GYM_WORDS"\n'
        'cd / && exec "$PYTHON" -c "import gymbuild_shard as m, os; '
        "print(m.__file__, os.environ['GYM_SHARD_OF'], os.environ['GYM_SHARD_INDEX'])\" >\"$GYM_SEEN\"\n"
    )
    (bin_dir / "gym").chmod(0o755)
    bench_dir = tmp_path / "run" / "gpqa" / "shards" / "1"
    bench_dir.mkdir(parents=True)
    words, seen = tmp_path / "words", tmp_path / "seen"
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "GYM_WORDS": str(words),
        "GYM_SEEN": str(seen),
        "PYTHON": sys.executable,
        "GYM_POLICY_PORT": "8000",
        "GYM_STEP_LIB": step_lib(),
        "GYM_BENCH_DIR": str(bench_dir),
        "GYM_SHARD_INDEX": "1",  # the step's env entries: the executor's launch sets them
    }
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "+rollout_collection_driver=gymbuild_shard:collect" in words.read_text().splitlines()
    assert not [w for w in words.read_text().splitlines() if "resume_from_cache" in w]  # the driver resumes
    module, shard_of, index = seen.read_text().split()
    assert Path(module) == bench_dir / ".gym_shard" / "gymbuild_shard.py"
    assert Path(module).read_text() == SHARD_MODULE.read_text()
    assert (shard_of, index) == (str(tmp_path / "run" / "gpqa"), "1")


def test_render_shows_the_shards_and_their_jobs(tmp_path: Path) -> None:
    config = f"config={ROOT / 'examples' / 'minimal.yaml'}"
    env = user_env(tmp_path)
    done = gymbuild("render", config, "+driver.benchmarks.gpqa.shards=2", cwd=tmp_path, env=env)
    assert done.rc == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].startswith("[dry-run] gpqa: 2 shards, one job each (gpqa/shards/0 .. gpqa/shards/1)")
    scripts = [line for line in lines if line.endswith("/job.sh")]
    assert scripts == ["gpqa/shards/0/job.sh", "gpqa/shards/1/job.sh"]
    shown = gymbuild("render", config, "json=1", "+driver.benchmarks.gpqa.shards=2", cwd=tmp_path, env=env)
    payload = json.loads(shown.stdout)
    assert payload["shards"] == {"gpqa": ["gpqa/shards/0", "gpqa/shards/1"]}
    assert sorted(payload["benchmarks"]) == ["gpqa/shards/0", "gpqa/shards/1"]


def test_a_resumable_sharded_benchmark_resumes_each_shard_in_its_own_chain(tmp_path: Path) -> None:
    """Each shard's successor runs that shard's own script, in its own directory, where its slice's
    rollouts are: a shard cut by its walltime continues its slice, never the whole benchmark."""
    config = load_config(
        ROOT / "examples" / "resumable.yaml", overrides=["+driver.benchmarks.aime25.shards=2"]
    ).config
    plan = planner(config, planning_traits(config), run_dir=str(tmp_path / "run"), gym_job_id="gym-job-x")
    for k, shard in enumerate(plan_shards(plan, config, "aime25")):
        assert shard.resume is not None
        assert shard.resume.script == f"{tmp_path}/run/aime25/shards/{k}/job.sh"
        text = render_job(shard, {}).files["job.sh"].text
        assert f"--kill-on-invalid-dep=yes {tmp_path}/run/aime25/shards/{k}/job.sh" in text
        # the shard driver resumes its slice itself; gym is not also told to
        assert "+resume_from_cache" not in text
