"""Sweeps (issue 21) on the real test cluster, over SSH: a grid grows, a failed cell is re-queued alone,
a checkpoint glob picks up each new checkpoint once, and results show one column per combination.

Every job is a `command` benchmark that asks its policy (the cluster's vLLM stand-in) which model it
serves and writes `{"score": $SCORE}` to metrics.json, unless a flag file named after the model and
the score exists in the test's directory on the cluster's file system: then it exits 3 (FAILED). So a
test fails exactly the cell it wants, and lets it pass again by deleting the file.

The cost is counted from the outside (tests/results_helpers.py's `ssh` wrapper, first on PATH): the
ssh processes gymbuild starts (one master; rsync's transport says how many copies ran) and the text
sent into the run's one session (each queued job is one `sbatch --parsable` in it).
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from e2e_helpers import Run, gymbuild, policy_service, slurm_config, user_env, write_config
from results_helpers import Sessions

if TYPE_CHECKING:
    from tests.conftest import Cluster

pytestmark = pytest.mark.cluster

ASK_MODEL = (
    "import json, sys, urllib.request; "
    'print(json.load(urllib.request.urlopen(sys.argv[1] + "/models"))["data"][0]["id"])'
)
SCORE = (
    f'served=$(python3 -c {shlex.quote(ASK_MODEL)} "$NEMO_GYM_POLICY_BASE_URL") || exit 4\n'
    'if [ -e "$FLAGS/$(basename "$served")-$SCORE" ]; then echo "failing as asked" >&2; exit 3; fi\n'
    'printf \'{"score": %s}\' "$SCORE" > "$NEMO_GYM_BENCH_DIR/artifacts/metrics.json"'
)


class Sweeper:
    """gymbuild in one directory with one config, its ssh calls counted."""

    def __init__(self, cluster: Cluster, tmp_path: Path, name: str, command: str = SCORE) -> None:
        self.dir = tmp_path
        self.flags = cluster.run_dir(f"{name}-flags")
        self.output = cluster.run_dir(name)
        driver = {"env": {"SCORE": "lit:0", "FLAGS": f"lit:{self.flags}"}}
        services = {"policy": policy_service(model="m1")}
        cfg = slurm_config(self.output, {"score": {"command": command}}, services=services, driver=driver)
        self.config = write_config(tmp_path, cfg, "eval.yaml")
        self.ssh = Sessions(tmp_path / "count", "ssh")
        env = user_env(tmp_path)
        self.env = {**env, "PATH": f"{self.ssh.bin}{os.pathsep}{env['PATH']}"}

    def run(self, *args: str) -> Run:
        self.ssh.reset()
        return gymbuild(*args, f"config={self.config}", "multirun=1", cwd=self.dir, env=self.env, timeout=240)

    def ok(self, *args: str) -> str:
        done = self.run(*args)
        assert done.rc == 0, f"gymbuild {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def costs(self) -> tuple[int, int, int]:
        """(ssh masters, rsync copies, sbatch calls) of the last command."""
        starts = self.ssh.invocations()
        masters = [s for s in starts if " -M " in f" {s} "]
        copies = [s for s in starts if "rsync --server" in s]
        sbatch = sum(c.count("sbatch --parsable") for c in self.ssh.commands())
        return len(masters), len(copies), sbatch

    def status(self, *args: str) -> dict[str, dict[str, Any]]:
        """label -> the cell's status document."""
        doc = json.loads(self.ok("status", "json=1", *args))
        return {cell["label"]: cell for cell in doc["cells"]}

    def wait_all(self, cluster: Cluster, *args: str) -> dict[str, str]:
        """Wait for every job of the sweep; label -> its one benchmark's final state."""
        states = {}
        for label, cell in self.status(*args).items():
            (bench,) = cell["status"]["benchmarks"]
            states[label] = cluster.wait_for_job(bench["job_id"], timeout=300).state
        return states


def labels(models: list[str], scores: list[int]) -> list[str]:
    return [f"model={m} SCORE=lit:{s}" for m in models for s in scores]


def test_a_grid_grows_a_failed_cell_is_resubmitted_alone_and_results_show_a_column_each(
    cluster: Cluster, tmp_path: Path
) -> None:
    sweeper = Sweeper(cluster, tmp_path, "sweep-grid")
    (sweeper.flags / "m2-3").touch()  # the one cell (m2, 3) that fails
    scores = "driver.env.SCORE=lit:1,lit:2,lit:3"

    out = sweeper.ok("submit", "services.policy.model=m1,m2", scores)
    assert sweeper.costs() == (1, 1, 6)  # one connection, one copy of the six run dirs, six sbatch
    assert out.count("submitted score -> Slurm job") == 6
    first = sweeper.status()
    assert list(first) == labels(["m1", "m2"], [1, 2, 3])
    assert len({cell["gym_job_id"] for cell in first.values()}) == 6  # six submissions
    # Each in a run directory of its own, whose resolved config names its values.
    for label, cell in first.items():
        run_dir = sweeper.output / cell["gym_job_id"]
        resolved = (run_dir / "resolved-config.yaml").read_text()
        model, score = label.split()
        assert f"services.policy.model={model.split('=')[1]}" in resolved
        assert f"model: {model.split('=')[1]}" in resolved and f"SCORE: {score.split('=', 1)[1]}" in resolved

    # The same sweep again: nothing new, so nothing copied, queued or even connected.
    again = sweeper.ok("submit", "services.policy.model=m1,m2", scores)
    assert sweeper.costs() == (0, 0, 0)
    assert again.count("nothing to submit") == 6

    # One more model: its three cells only, in one copy.
    grown = sweeper.ok("submit", "services.policy.model=m1,m2,m3", scores)
    assert sweeper.costs() == (1, 1, 3)
    assert grown.count("submitted score -> Slurm job") == 3 and grown.count("nothing to submit") == 6
    states = sweeper.wait_all(cluster)  # no overrides: the config's latest sweep
    (look,) = sweeper.ssh.status_reads()  # nine combinations, one look: one squeue and one sacct
    assert look.count("squeue ") == 1 and look.count("sacct ") == 1
    assert list(states) == labels(["m1", "m2", "m3"], [1, 2, 3])
    assert {label for label, state in states.items() if state != "COMPLETED"} == {"model=m2 SCORE=lit:3"}
    assert states["model=m2 SCORE=lit:3"] == "FAILED"

    # resubmit re-queues the failed cell alone, in its own run directory (same gym_job_id).
    (sweeper.flags / "m2-3").unlink()
    redo = sweeper.ok("resubmit", "services.policy.model=m1,m2,m3", scores)
    assert sweeper.costs() == (1, 0, 1)  # its job script is already there: nothing to copy
    assert redo.count("submitted score -> Slurm job") == 1 and "== model=m2 SCORE=lit:3" in redo
    after = sweeper.status()
    assert after["model=m2 SCORE=lit:3"]["gym_job_id"] == first["model=m2 SCORE=lit:3"]["gym_job_id"]
    assert set(sweeper.wait_all(cluster).values()) == {"COMPLETED"}

    # results: one column per combination, labelled by its values; only= still narrows.
    table = sweeper.ok("results")
    rows = [line.split("  ") for line in table.splitlines()]
    head = [cell.strip() for cell in rows[1] if cell.strip()]
    assert head == ["BENCHMARK", "AGENT", "METRIC", *labels(["m1", "m2", "m3"], [1, 2, 3])]
    values = table.splitlines()[2].split()
    assert values[:4] == ["score", "-", "score", "1"]
    assert values[4:] == ["2", "(+1)", "3", "(+2)", *["1", "(+0)", "2", "(+1)", "3", "(+2)"] * 2]
    refused = sweeper.run("results", "only=nope")
    assert refused.rc == 1 and "only= names benchmark(s) the sweep does not have: nope" in refused.stderr


def test_paths_picks_up_each_new_checkpoint_exactly_once(cluster: Cluster, tmp_path: Path) -> None:
    """The cron line: the glob is expanded on the cluster in one round trip; a checkpoint that
    appears between two runs is the only thing the second run queues."""
    sweeper = Sweeper(cluster, tmp_path, "sweep-paths")
    ckpts = cluster.run_dir("sweep-ckpts")
    for name in ("iter_200", "iter_1000"):
        (ckpts / name).mkdir()
        (ckpts / name / "config.json").write_text("{}")  # complete: its ready marker is in it
    line = f"services.policy.model=paths({ckpts}/iter_*)"

    out = sweeper.ok("submit", line)
    assert sweeper.costs() == (1, 1, 2)
    assert len([c for c in sweeper.ssh.commands() if "__gym_g=" in c]) == 1  # one round trip for the glob
    assert out.count("submitted score -> Slurm job") == 2
    assert list(sweeper.status(line)) == [f"model={ckpts}/iter_200", f"model={ckpts}/iter_1000"]

    (ckpts / "iter_1200").mkdir()
    (ckpts / "iter_1200" / "config.json").write_text("{}")
    (ckpts / "not-a-checkpoint").mkdir()
    newer = sweeper.ok("submit", line)
    assert sweeper.costs() == (1, 1, 1)
    assert newer.count("submitted score -> Slurm job") == 1
    assert f"== model={ckpts}/iter_1200" in newer

    nothing = sweeper.ok("submit", line)
    assert sweeper.costs() == (1, 0, 0)  # the glob's one round trip, nothing copied or queued
    assert nothing.count("nothing to submit") == 3
    states = sweeper.wait_all(cluster, line)
    assert list(states) == [f"model={ckpts}/iter_{n}" for n in (200, 1000, 1200)]
    assert set(states.values()) == {"COMPLETED"}


def test_a_bad_sweep_expression_is_one_message_and_nothing_queued(cluster: Cluster, tmp_path: Path) -> None:
    sweeper = Sweeper(cluster, tmp_path, "sweep-bad")
    done = sweeper.run("submit", "services.policy.model=m1,,m2", "driver.env.SCORE=lit:1,lit:2")
    assert done.rc == 1 and "Traceback" not in done.stderr
    assert f"error: {sweeper.config}: 1 problem in the config" in done.stderr
    assert "services.policy.model: override 'services.policy.model=m1,,m2'" in done.stderr
    assert "fix: a sweep value is a,b,c" in done.stderr
    assert sweeper.costs() == (0, 0, 0) and not list(sweeper.output.iterdir())
    # A value the config refuses, in one combination: every combination's problem, nothing queued.
    typo = sweeper.run("submit", "services.policy.modle=m1,m2")
    assert typo.rc == 1 and "services.policy.modle" in typo.stderr and "Traceback" not in typo.stderr
    assert sweeper.costs() == (0, 0, 0) and not list(sweeper.output.iterdir())


def test_cancel_of_the_sweep_cancels_every_combination_s_jobs(cluster: Cluster, tmp_path: Path) -> None:
    sweeper = Sweeper(cluster, tmp_path, "sweep-cancel", command="sleep 300")
    sweeper.ok("submit", "services.policy.model=m1,m2")
    ids = [cell["status"]["benchmarks"][0]["job_id"] for cell in sweeper.status().values()]
    assert len(ids) == 2 and all(ids)
    out = sweeper.ok("cancel", "services.policy.model=m1,m2")
    assert sweeper.costs()[0] == 1  # one connection for both combinations
    assert out.count("cancelled 1 job(s) of") == 2
    for job_id in ids:
        assert job_id in out
        assert cluster.wait_for_job(job_id, timeout=120).state == "CANCELLED"
    states = {label: cell["status"]["benchmarks"][0]["state"] for label, cell in sweeper.status().items()}
    assert states == {"model=m1": "CANCELLED", "model=m2": "CANCELLED"}


def test_a_sweep_of_shared_jobs_shows_each_member_beside_its_job_as_status_run_does(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Two benchmarks share one job in each combination; one of them fails. `status multirun=1`
    shows every member's own state with the JOB STATE column, exactly as `status run=<id>` shows the
    same combination's jobs."""
    benchmarks = {
        "ok": {"command": 'echo "$SCORE" >"$NEMO_GYM_BENCH_DIR/artifacts/out"'},
        "broken": {"command": "exit 3"},
    }
    driver = {"benchmarks_per_job": "all", "env": {"SCORE": "lit:0"}}
    cfg = slurm_config(cluster.run_dir("sweep-shared"), benchmarks, driver=driver)
    config = write_config(tmp_path, cfg, "eval.yaml")
    env = user_env(tmp_path)

    def run(*args: str) -> str:
        done = gymbuild(*args, f"config={config}", cwd=tmp_path, env=env, timeout=240)
        assert done.rc == 0, f"gymbuild {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    sweep = ("multirun=1", "driver.env.SCORE=lit:1,lit:2")
    run("submit", *sweep)
    cells = json.loads(run("status", "json=1", *sweep))["cells"]
    jobs = {cell["gym_job_id"]: {b["job_id"] for b in cell["status"]["benchmarks"]} for cell in cells}
    assert len(jobs) == 2 and all(len(ids) == 1 for ids in jobs.values())  # one shared job per cell
    for (job_id,) in jobs.values():
        assert cluster.wait_for_job(job_id, timeout=300).state == "FAILED"

    cells = json.loads(run("status", "json=1", *sweep))["cells"]
    for cell in cells:
        rows = {r["benchmark"]: (r["state"], r.get("job_state")) for r in cell["status"]["benchmarks"]}
        assert rows == {"ok": ("COMPLETED", "FAILED"), "broken": ("FAILED", "FAILED")}
        alone = json.loads(run("status", "json=1", f"run={cell['gym_job_id']}"))
        assert alone["benchmarks"] == cell["status"]["benchmarks"]
    table = run("status", *sweep)
    heads = [line.split() for line in table.splitlines() if line.startswith("BENCHMARK")]
    assert heads == [["BENCHMARK", "JOB", "STATE", "EXIT", "JOB", "STATE", "ELAPSED", "NODES"]] * 2
