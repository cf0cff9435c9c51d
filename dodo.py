"""gymbuild's own development tasks, for `doit` in the checkout (README, "Run the tests").

`doit list` shows them; `doit` runs the fast loop (typecheck, lint, docs, test_quick) and re-runs
only a task whose files changed since it last passed (doit compares their MD5s, kept in
`.doit.db`); `doit test_full` is the README's test command, `doit goldens` rewrites the rendered
scripts pinned in tests/golden/, `doit bench` runs bench/run.py on the test cluster.

The task names keep clear of the gymbuild verbs and doit's own commands (`list`, `run`, `clean`,
...): installing gymbuild makes each verb a doit command, and doit refuses a task named as a
command. This file imports nothing of gymbuild: it runs the tools, as a developer would.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from doit.action import CmdAction

from tools.check_docs import DOC_GLOBS, linked_files

ROOT = Path(__file__).resolve().parent
# Under build/, which git ignores: what a task with no file of its own leaves when it passed.
STAMPS = Path("build") / "doit"
# Folders of files no task reads: caches, run output, the test cluster's build.
SKIPPED = {"__pycache__", "build", ".hypothesis", ".pytest_cache", ".mypy_cache", ".ruff_cache", "gym-runs"}

DOIT_CONFIG: dict[str, Any] = {
    # json, not doit's default dbm: where Python has no gdbm that is dbm.dumb, which corrupts when
    # two doit runs write it at once. The file is git-ignored.
    "backend": "json",
    "dep_file": ".doit.db",
    # The fast loop; the cheap checks first, as doit stops at the first failure.
    "default_tasks": ["typecheck", "lint", "docs", "test_quick"],
}


def files(*patterns: str) -> list[str]:
    """The checkout's files matching the globs (from ROOT), sorted; caches and run output left out."""
    found = {
        path.relative_to(ROOT)
        for pattern in patterns
        for path in ROOT.glob(pattern)
        if path.is_file() and not SKIPPED & set(path.relative_to(ROOT).parts)
    }
    return sorted(path.as_posix() for path in found)


def tool(name: str) -> str:
    """The console script `name` of the Python running doit (its venv's), else the one on PATH."""
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else (shutil.which(name) or name)


def stamp(task: str) -> str:
    """The target of a task whose only product is having passed."""
    return (STAMPS / f"{task}.stamp").as_posix()


def make_parents(targets: list[str]) -> None:
    """A task's first action where its command writes its targets but makes no folder for them."""
    for target in targets:
        Path(target).parent.mkdir(parents=True, exist_ok=True)


def write_stamp(targets: list[str]) -> None:
    """A task's last action: its stamp, written only when every action before it passed."""
    make_parents(targets)
    for target in targets:
        Path(target).write_text("passed\n", encoding="utf-8")


PACKAGE = files("gymbuild/**/*.py", "gymbuild/**/*.j2", "schemas/*.json", "pyproject.toml")
DEV_CODE = files("dodo.py", "tools/*.py")
DOCS = files(*DOC_GLOBS)
# What the rendered scripts of tests/golden/ come from, besides the package.
RENDER_INPUTS = files("examples/**/*.yaml", "tests/render/test_rendered.py", "tests/conftest.py")
# tests/render/test_rendered.py's golden tests: with GYMBUILD_UPDATE_GOLDEN=1 they write each file, then compare.
GOLDEN_TESTS = [tool("pytest"), "-n", "0", "-q", "tests/render/test_rendered.py", "-k", "golden"]
GOLDEN_ENV = {**os.environ, "GYMBUILD_UPDATE_GOLDEN": "1"}
# What the tests read: the package, the examples, every file under tests/, the docs they quote.
TESTED = sorted({*PACKAGE, *DEV_CODE, *DOCS, *files("examples/**/*.yaml", "tests/**/*", "bench/*.py")})


def task_typecheck() -> dict[str, Any]:
    """mypy over gymbuild/ (the README's first step), then over dodo.py and tools/.

    `mypy` alone checks what pyproject.toml's [tool.mypy] names, gymbuild/; the dev code is held to
    the same settings by naming it."""
    return {
        "actions": [[tool("mypy")], [tool("mypy"), *DEV_CODE], write_stamp],
        "file_dep": PACKAGE + DEV_CODE,
        "targets": [stamp("typecheck")],
        "clean": True,
    }


def task_lint() -> dict[str, Any]:
    """ruff check and ruff format --check over the checkout's Python (the reviewers' rules)."""
    code = ["gymbuild", "tests", "bench", "tools", "dodo.py"]
    return {
        "actions": [[tool("ruff"), "check", *code], [tool("ruff"), "format", "--check", *code], write_stamp],
        "file_dep": files("gymbuild/**/*.py", "tests/**/*.py", "bench/*.py", "pyproject.toml") + DEV_CODE,
        "targets": [stamp("lint")],
        "clean": True,
    }


def task_docs() -> dict[str, Any]:
    """Check the docs' links and example commands against the checkout (tools/check_docs.py).

    Its file_dep includes the files the docs link to, so moving one re-runs the check."""
    return {
        "actions": [[sys.executable, "tools/check_docs.py"], write_stamp],
        "file_dep": sorted({*DOCS, *DEV_CODE, *files("pyproject.toml"), *linked_files(ROOT)}),
        "targets": [stamp("docs")],
        "clean": True,
    }


def task_test_quick() -> dict[str, Any]:
    """pytest -m "not cluster and not oracle": the README's loop while developing (minutes)."""
    return {
        "actions": [[tool("pytest"), "-m", "not cluster and not oracle"], write_stamp],
        "file_dep": TESTED,
        "targets": [stamp("test_quick")],
        "clean": True,
        "verbosity": 2,  # pytest's progress as it goes: the run takes minutes
    }


def task_test_full() -> dict[str, Any]:
    """The README's test command after its install: mypy (typecheck), then the whole pytest suite.

    Cluster and oracle tests skip with their reason where those are not set up (README)."""
    return {
        "actions": [[tool("pytest")], write_stamp],
        "file_dep": TESTED,
        "task_dep": ["typecheck"],
        "targets": [stamp("test_full")],
        "clean": True,
        "verbosity": 2,  # pytest's progress as it goes: the run takes minutes
    }


def task_goldens() -> dict[str, Any]:
    """Rewrite tests/golden/ from the templates after an intended change; review the diff.

    GYMBUILD_UPDATE_GOLDEN=1 with tests/render/test_rendered.py's golden tests. Not a default task, and its
    target is a stamp, not the goldens: doit runs the task that makes a file before any task that
    reads it, so the tests would pass on goldens rewritten from whatever the templates render."""
    return {
        "actions": [CmdAction(GOLDEN_TESTS, shell=False, env=GOLDEN_ENV), write_stamp],
        "file_dep": sorted({*PACKAGE, *RENDER_INPUTS}),
        "targets": [stamp("goldens")],
        "clean": True,
    }


def task_bench() -> dict[str, Any]:
    """bench/run.py on the test cluster (bench/README.md), its tables into build/bench/.

    About 10 minutes and it needs the cluster, so not a default task; `doit forget bench` makes it
    measure again with nothing changed."""
    results = ["build/bench/results.json", "build/bench/results.md"]
    return {
        "actions": [
            make_parents,
            [sys.executable, "bench/run.py", "--json", results[0], "--markdown", results[1]],
        ],
        "file_dep": sorted({*PACKAGE, *files("bench/*.py")}),
        "targets": results,
        "verbosity": 2,  # its progress and table as it goes
    }
