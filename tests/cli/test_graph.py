"""doit's own commands on gymbuild's graph (info, list --status, clean), and the one submit pipeline
run in-process on the local executor.

`doit info` and `doit clean` are what a user reaches for to ask make-like questions ("what does this
step read and write?", "start the staging over"); they must tell the truth and never lose a job id.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from gymbuild.request.invocation import Invocation
from gymbuild.state.workspace import Workspace
from gymbuild.submit import pipeline
from gymbuild.submit.session import Session

ROOT = Path(__file__).resolve().parents[2]


def gymbuild(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("gymbuild")
    assert exe, "the gymbuild console script is not on PATH (pip install -e '.[test]')"
    env = {**os.environ, "XDG_CACHE_HOME": str(cwd / "cache"), "XDG_STATE_HOME": str(cwd / "state"), **extra}
    return subprocess.run(
        [exe, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


def workspaces(home: Path) -> Path:
    """The workspaces of `gymbuild(..., cwd=home)`: under its XDG_STATE_HOME, one per config."""
    return home / "state" / "gymbuild" / "workspaces"


def section(info: str, name: str) -> list[str]:
    """The ` - item` lines under `name :` in `doit info` output."""
    lines = info.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split(":")[0].strip() == name)
    items = []
    for line in lines[start + 1 :]:
        if not line.startswith(" - "):
            if items or line.strip():
                break
            continue
        items.append(line[3:].strip())
    return items


def test_info_of_a_queue_task_names_its_script_the_sync_and_its_outcome_file(tmp_path: Path) -> None:
    config = f"config={ROOT / 'examples/minimal.yaml'}"
    done = gymbuild("info", "queue:gpqa", config, cwd=tmp_path)
    assert done.stderr == "" and "up-to-date" not in done.stdout  # nothing is staged, nothing queued
    ws_rel = Workspace(workspaces(tmp_path), ROOT / "examples/minimal.yaml").config_dir
    reads = sorted(section(done.stdout, "file_dep"))
    assert reads == [f"{ws_rel}/stage/gpqa/job.sh", f"{ws_rel}/stamps/sync"]
    assert section(done.stdout, "task_dep") == ["sync"]
    assert section(done.stdout, "targets") == [f"{ws_rel}/outcomes/gpqa.json"]
    stage = gymbuild("info", "stage:gpqa", config, cwd=tmp_path).stdout
    assert f"{ws_rel}/stage/resolved-config.yaml" in section(stage, "file_dep")
    # the templates and modules that make scripts, as one digest file (not each template per benchmark)
    reads = sorted(section(stage, "file_dep"))
    assert reads == [f"{ws_rel}/script-code", f"{ws_rel}/stage/resolved-config.yaml"]
    code = gymbuild("info", "script_code", config, cwd=tmp_path).stdout
    assert section(code, "targets") == [f"{ws_rel}/script-code"]
    assert section(stage, "targets") == [f"{ws_rel}/stage/gpqa/job.sh"]
    sync = gymbuild("info", "sync", config, cwd=tmp_path).stdout
    assert f"{ws_rel}/stage/gpqa/job.sh" in section(sync, "file_dep")
    assert section(sync, "targets") == [f"{ws_rel}/stamps/sync"]


def test_info_of_a_task_the_config_lacks_says_so_in_one_line(tmp_path: Path) -> None:
    """A benchmark the config does not have (a typo, an escape in the name) is refused as `forget`
    refuses it: one line naming it, escaped, doit's status 3, no traceback."""
    config = f"config={ROOT / 'examples/minimal.yaml'}"
    for name, shown in (("queue:gpqa-typo", "queue:gpqa-typo"), ("stage:\x1b[31m", "stage:\\e[31m")):
        done = gymbuild("info", name, config, cwd=tmp_path)
        assert done.returncode == 3 and done.stdout == ""
        assert done.stderr == f"ERROR: '{shown}' is not a task; `gymbuild list` names them.\n"


def test_looking_at_the_graph_changes_nothing(tmp_path: Path) -> None:
    """`list --status` and `info` show what a submit would do: no submission is started, no record
    or local index entry written, so the next submit is the first (issue 26, item 10)."""
    config = f"config={ROOT / 'examples/minimal.yaml'}"
    for args in (("list", "--status", "--all"), ("info", "submit"), ("info", "queue:gpqa")):
        done = gymbuild(*args, config, cwd=tmp_path)  # (info's status is 1 for a task not up to date)
        assert done.stdout and done.stderr == "", done.stderr
    assert not list(tmp_path.rglob("submission.json")) and not list(tmp_path.rglob("submissions.jsonl"))
    assert not (tmp_path / "cache" / "nemo-gym").exists()  # no local index entry


def test_clean_removes_the_staged_scripts_and_the_next_render_makes_them_again(tmp_path: Path) -> None:
    config = f"config={ROOT / 'examples/collector.yaml'}"
    token = {"OTEL_TOKEN": "otel-token"}
    first = gymbuild("render", config, cwd=tmp_path, **token)
    assert first.returncode == 0, first.stderr
    (stage,) = workspaces(tmp_path).glob("collector-*/draft/stage")
    staged = sorted(p.relative_to(stage).as_posix() for p in stage.rglob("*") if p.is_file())
    assert any(p.endswith("/job.sh") for p in staged) and any(p.endswith("collector.yaml") for p in staged)

    cleaned = gymbuild("clean", config, cwd=tmp_path, **token)  # the default task (render) and its steps
    assert cleaned.returncode == 0, cleaned.stderr
    assert not [p for p in stage.rglob("*") if p.is_file()]  # every staged file went, nothing else
    assert (stage.parent / "submission.json").exists()  # the draft's provisional submission
    assert not (stage.parent.parent / "submission.json").exists()  # a dry run and its clean start none

    again = gymbuild("render", config, cwd=tmp_path, **token)
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout  # the same submission, the same scripts
    assert sorted(p.relative_to(stage).as_posix() for p in stage.rglob("*") if p.is_file()) == staged


def local_config(home: Path) -> Path:
    config = yaml.safe_load((ROOT / "examples/local.yaml").read_text())
    demo = config["driver"]["benchmarks"]["demo"]
    config["driver"]["benchmarks"] = {"demo": demo, "demo2": demo}
    config["job"]["output_path"] = str(home / "runs")
    path = home / "submit.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def wait_done(home: Path, config: Path) -> dict[str, Any]:
    """`status json=1` once no job runs any more (the bound only keeps a broken job from hanging)."""
    deadline = time.monotonic() + 90
    while True:
        done = gymbuild("status", "json=1", f"config={config}", cwd=home)
        assert done.returncode == 0, done.stderr
        rows = {r["benchmark"]: r for r in json.loads(done.stdout)["benchmarks"]}
        if (
            all(r["state"] not in ("RUNNING", "PENDING") for r in rows.values())
            or time.monotonic() > deadline
        ):
            return rows
        time.sleep(1)


def test_clean_after_a_submit_keeps_every_job_id_and_what_the_jobs_run(tmp_path: Path) -> None:
    config = local_config(tmp_path)
    submitted = gymbuild("submit", f"config={config}", cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    before = wait_done(tmp_path, config)
    assert all(row["job_id"] for row in before.values())
    (ws,) = workspaces(tmp_path).glob("submit-*")
    kept = [*ws.glob("outcomes/*.json"), *ws.glob("stage/*/job.sh"), ws / "gym-job.json"]
    assert len(kept) == 5

    cleaned = gymbuild("clean", "--clean-all", f"config={config}", cwd=tmp_path)
    assert cleaned.returncode == 0, cleaned.stderr
    assert all(p.exists() for p in kept), "clean removed an outcome or a queued job's script"
    after = wait_done(tmp_path, config)
    assert {b: r["job_id"] for b, r in after.items()} == {b: r["job_id"] for b, r in before.items()}
    again = gymbuild("submit", f"config={config}", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.startswith("nothing to submit"), again.stdout
    listed = gymbuild("list", "--status", "--all", f"config={config}", cwd=tmp_path).stdout
    status = dict(line.split()[1::-1] for line in listed.splitlines())
    assert status["queue:demo"] == status["queue:demo2"] == status["record"] == "U", listed


@pytest.fixture
def local_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A run context for a local config in `tmp_path`, as `gymbuild VERB config=...` would build it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    config = local_config(tmp_path)
    opened: list[Session] = []

    def make(*verbs: str) -> Session:
        ctx = Session(Invocation.from_argv([*verbs, f"config={config}"]))
        opened.append(ctx)
        return ctx

    yield make
    for ctx in opened:
        ctx.close()


def test_the_pipeline_queues_records_and_then_has_nothing_to_do(local_run: Any, tmp_path: Path) -> None:
    ctx = local_run("submit")
    pipeline.run(ctx)
    assert sorted(ctx.queued_now) == ["demo", "demo2"]
    outcomes = ctx.workspace.outcomes()
    assert all(outcomes[b].job_id for b in ("demo", "demo2"))
    manifest = json.loads(Path(ctx.submission().run_dir, "gym-job.json").read_text())
    assert {j["benchmark"]: j["job_id"] for j in manifest["benchmarks"]} == {
        b: outcomes[b].job_id for b in ("demo", "demo2")
    }
    assert json.loads((ctx.workspace.dir / "gym-job.json").read_text()) == manifest  # record's target

    again = local_run("submit")
    pipeline.run(again)
    assert again.queued_now == []
    assert not again.link.used  # a no-op opens no connection


def test_the_pipeline_for_some_benchmarks_requeues_only_those(local_run: Any) -> None:
    """What resubmit does: a released benchmark goes through the same pipeline, alone."""
    ctx = local_run("submit")
    pipeline.run(ctx)
    first = ctx.workspace.outcomes()
    ctx.close()  # the submit's process is over: its shell no longer holds the run dir's queue lock
    later = local_run("resubmit")
    later.workspace.release("demo2", "FAILED")
    pipeline.run(later, ["demo2"])
    assert later.queued_now == ["demo2"]
    outcomes = later.workspace.outcomes()
    assert outcomes["demo"] == first["demo"]
    assert outcomes["demo2"].job_id and outcomes["demo2"].job_id != first["demo2"].job_id
    assert outcomes["demo2"].previous_job_ids == (first["demo2"].job_id,)
    manifest = json.loads(Path(later.submission().run_dir, "gym-job.json").read_text())
    assert {j["benchmark"]: j["job_id"] for j in manifest["benchmarks"]}["demo2"] == outcomes["demo2"].job_id
