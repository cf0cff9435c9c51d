"""What one run owns and settles once: its hold on the workspace, its early connection, and the order
of its steps, which the doit graph takes from the pipeline (submit/pipeline.py STEPS)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from gymbuild.cli import graph
from gymbuild.request.invocation import Invocation
from gymbuild.submit import pipeline
from gymbuild.submit.link import Link
from gymbuild.submit.session import Session

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _own_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def _invocation(tmp_path: Path, *verbs: str) -> Invocation:
    return Invocation.from_argv([*verbs, f"config={ROOT / 'examples/local.yaml'}", f"workspace={tmp_path}"])


def test_each_step_task_depends_on_the_pipelines_step_before_it(tmp_path: Path) -> None:
    """The doit graph's step tasks are made from STEPS: the same names, each after the one before."""
    namespace = graph.namespace(["list", f"config={ROOT / 'examples/local.yaml'}", f"workspace={tmp_path}"])
    for before, step in zip((None, *pipeline.STEPS), pipeline.STEPS, strict=False):
        creator = namespace[f"task_{step.name}"]
        assert callable(creator)
        made = creator()
        tasks = [made] if isinstance(made, dict) else list(made)
        assert tasks, step.name  # local.yaml has benchmarks: every step has a task
        for task in tasks:
            assert task["task_dep"][:1] == ([before.name] if before else []), (step.name, task)


def test_a_run_holds_its_workspace_until_it_closes_and_says_which_run_it_is(tmp_path: Path) -> None:
    first = Session(_invocation(tmp_path, "submit"))
    first.hold_workspace()
    lock = first.workspace.lock_dir / "lock"
    label = lock.read_text()
    assert "(gymbuild submit config=" in label and "pytest" not in label  # the invocation, not sys.argv
    first.close()
    second = Session(_invocation(tmp_path, "submit"))
    second.hold_workspace()  # no wait: the first run let go at close
    second.close()
    second.close()  # each task that ran closes the run: a second close is harmless


def test_a_guessed_host_that_is_not_the_runs_is_closed_and_the_right_one_opened(
    cluster: object, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console script guesses the host before doit is imported (Link.ahead); the run adopts the
    guess only when it is the host the run asks for, and leaves no SSH master behind either way."""
    sockets = Path(tempfile.mkdtemp(prefix="gb-"))  # short: a unix socket's path has ~100 bytes
    request.addfinalizer(lambda: shutil.rmtree(sockets, ignore_errors=True))
    monkeypatch.setattr(tempfile, "tempdir", str(sockets))  # the control sockets go here
    wrong = Link.ahead("gym-login")
    assert wrong.guessing
    conn = wrong.get(None)  # the run wants this machine
    assert conn.is_local and conn.run("true").ok
    assert list(sockets.glob("gymbuild-*.ssh")) == []
    wrong.close()
    right = Link.ahead("gym-login")
    conn = right.get("gym-login")
    assert conn.hostname == "gym-login" and conn.run("true").ok
    assert len(list(sockets.glob("gymbuild-*.ssh"))) == 1  # the guess's master, adopted: no second one
    right.close()
    assert list(sockets.glob("gymbuild-*.ssh")) == []
