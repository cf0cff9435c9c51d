"""`gymbuild results` on the real test cluster, over SSH: two runs of two policy models side by side.

Each run has a `command` benchmark that asks its policy (the cluster's vLLM stand-in) for its models
and writes a metrics.json whose score depends on the model it serves, and a benchmark that leaves the
real two-agent NeMo Gym aggregate from tests/data in its artifacts. A PATH wrapper around `ssh` copies
what gymbuild sends into its session: the first comparison costs one session with one status and one
metrics read for both runs; the second starts no ssh at all.
"""

from __future__ import annotations

import csv
import json
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from e2e_helpers import REPO, gymbuild, policy_service, slurm_config, user_env, write_config
from results_helpers import Sessions

if TYPE_CHECKING:
    from tests.conftest import Cluster

pytestmark = pytest.mark.cluster

AGGREGATE = REPO / "tests" / "data" / "nemo-gym-0.7.0-aggregate" / "run-a" / "weather" / "artifacts"
# The served model, from the policy itself; the score is 0.8 for the larger one, 0.6 otherwise.
ASK_MODEL = (
    "import json, sys, urllib.request; "
    'print(json.load(urllib.request.urlopen(sys.argv[1] + "/models"))["data"][0]["id"])'
)
SCORE = (
    f'served=$(python3 -c {shlex.quote(ASK_MODEL)} "$NEMO_GYM_POLICY_BASE_URL")'
    " && case $served in *32B) a=0.8 ;; *) a=0.6 ;; esac"
    ' && printf \'{"accuracy": %s, "answered": 5}\' "$a" > "$NEMO_GYM_BENCH_DIR/artifacts/metrics.json"'
)
BENCHMARKS = {
    "score": {"command": SCORE},
    "agg": {
        "command": f'cp {AGGREGATE / "rollouts_aggregate_metrics.json"} "$NEMO_GYM_BENCH_DIR/artifacts/"'
    },
}


def test_two_models_side_by_side_then_again_without_connecting(cluster: Cluster, tmp_path: Path) -> None:
    env = user_env(tmp_path)
    output = cluster.run_dir("results")
    ids = []
    for model in ("Qwen/Qwen3-8B", "Qwen/Qwen3-32B"):
        cfg = slurm_config(output, BENCHMARKS, services={"policy": policy_service(model=model)})
        path = write_config(tmp_path, cfg, f"{model.rsplit('-', 1)[1].lower()}.yaml")
        done = gymbuild("submit", f"config={path}", cwd=tmp_path, env=env)
        assert done.rc == 0, done.stdout + done.stderr
        status = json.loads(gymbuild("status", "json=1", f"config={path}", cwd=tmp_path, env=env).stdout)
        for bench in status["benchmarks"]:
            assert cluster.wait_for_job(bench["job_id"], timeout=240).state == "COMPLETED", bench
        ids.append(status["gym_job_id"])

    ssh = Sessions(tmp_path / "count", "ssh")
    counted = {**env, "PATH": f"{ssh.bin}{os.pathsep}{env['PATH']}"}
    first = gymbuild("results", f"run={','.join(ids)}", cwd=tmp_path, env=counted)
    assert first.rc == 0, first.stdout + first.stderr
    rows = [line.split() for line in first.stdout.splitlines()]
    assert rows[1] == ["BENCHMARK", "AGENT", "METRIC", "Qwen/Qwen3-8B", "Qwen/Qwen3-32B"]
    assert ["score", "-", "accuracy", "0.6", "0.8", "(+0.2)"] in rows
    assert ["answered", "5", "5", "(+0)"] in rows
    assert ["agg", "weather_agent_large", "mean/reward", "0.6667", "0.6667", "(+0)"] in rows
    assert "no metrics:" not in first.stdout
    # Both runs: one SSH session, in it one status (one squeue and one sacct) and one metrics read.
    assert len([call for call in ssh.invocations() if call.endswith("bash -s")]) == 1
    assert (len(ssh.status_reads()), len(ssh.metrics_reads())) == (1, 1)
    (status,) = ssh.status_reads()
    assert status.count("squeue ") == 1 and status.count("sacct ") == 1

    ssh.reset()
    again = gymbuild("results", f"run={','.join(ids)}", cwd=tmp_path, env=counted)
    assert (again.rc, again.stdout) == (0, first.stdout)
    assert ssh.invocations() == []  # every benchmark COMPLETED with metrics: all from the cache

    # One run alone, from its config's workspace: its policy model in the title, from the cache too.
    alone = gymbuild("results", f"config={tmp_path / '8b.yaml'}", "format=csv", cwd=tmp_path, env=counted)
    assert alone.rc == 0 and ssh.invocations() == []
    by_metric = {(r["benchmark"], r["metric"]): r for r in csv.DictReader(alone.stdout.splitlines())}
    score = by_metric[("score", "accuracy")]
    assert [score[k] for k in ("gym_job_id", "label", "agent", "state", "value", "delta")] == [
        ids[0], ids[0], "", "COMPLETED", "0.6", ""
    ]  # fmt: skip
