"""Submitting a sharded benchmark is refused until its jobs can be queued, recorded and followed as one
benchmark: one message naming the file, the config path and the fix, exit 1, nothing queued and no run
directory made (render shows the shards' jobs: tests/render/test_shards.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from e2e_helpers import gymbuild, user_env

ROOT = Path(__file__).resolve().parents[2]


def test_a_sharded_benchmark_is_not_submitted_and_nothing_is_made(tmp_path: Path) -> None:
    config = tmp_path / "local.yaml"
    shutil.copy(ROOT / "examples" / "local.yaml", config)
    shards = (
        "+driver.benchmarks.big.run.config_paths=benchmarks/gpqa/config.yaml",
        "+driver.benchmarks.big.shards=3",
    )
    done = gymbuild("submit", f"config={config}", *shards, cwd=tmp_path, env=user_env(tmp_path))
    assert done.rc == 1
    assert f"error: {config}: driver.benchmarks.big.shards:" in done.stderr
    assert "fix: remove shards from big" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "gym-runs").exists()  # the run dir: nothing copied, nothing queued
    # the benchmark that is not sharded is submitted alone, as the fix says
    alone = gymbuild("submit", f"config={config}", *shards, "only=demo", cwd=tmp_path, env=user_env(tmp_path))
    assert alone.rc == 0, alone.stderr
    assert "submitted demo" in alone.stdout
