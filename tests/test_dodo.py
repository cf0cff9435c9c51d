"""dodo.py: `doit list` in the checkout shows the project's tasks, `doit info` their real file_dep
and targets, and `doit` re-runs a task only when one of its files changed.

Everything runs the real `doit` on a copy of the checkout (its files git does not ignore), so the
checkout's own `.doit.db` and stamps are never touched. Only the docs task is run: it takes a
second; the test tasks would run this file again.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TASKS = {"typecheck", "lint", "docs", "test_quick", "test_full", "goldens", "bench"}


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The checkout's files (tracked, and new ones git does not ignore) in a fresh directory."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tmp_path / name)
    return tmp_path


def doit(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The venv's doit, as a developer types it in the checkout."""
    exe = Path(sys.executable).with_name("doit")
    command = [str(exe) if exe.exists() else (shutil.which("doit") or "doit"), *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def section(info: str, title: str) -> list[str]:
    """The ` - item` lines of one section (`file_dep`, `targets`) of `doit info`'s output."""
    lines = info.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    items = []
    for line in lines[start + 1 :]:
        if not line.startswith(" - "):
            break
        items.append(line[3:])
    return items


def test_doit_list_in_the_checkout_shows_each_task_with_its_doc(copy: Path) -> None:
    listed = doit(copy, "list")
    assert listed.returncode == 0, listed.stderr
    rows = dict(line.split(None, 1) for line in listed.stdout.splitlines())
    assert set(rows) == TASKS
    assert all(len(doc) > 20 for doc in rows.values()), rows
    assert "bench/run.py" in rows["bench"] and "not cluster and not oracle" in rows["test_quick"]


def test_doit_info_shows_real_file_dep_and_targets(copy: Path) -> None:
    docs = doit(copy, "info", "docs").stdout
    assert {"README.md", "docs/compatibility.md", "tools/check_docs.py", "pyproject.toml"} <= set(
        section(docs, "file_dep")
    )
    assert ".ci/run" in section(docs, "file_dep")  # a file the README links to
    assert section(docs, "targets") == ["build/doit/docs.stamp"]
    quick = section(doit(copy, "info", "test_quick").stdout, "file_dep")
    package = {
        "gymbuild/cli/main.py",
        "gymbuild/render/templates/job.sh.j2",
        "schemas/submit-config.schema.json",
    }
    assert package | {
        "tests/cli/test_main.py",
        "examples/local.yaml",
        "tests/golden/local/demo/job.sh",
    } <= set(quick)
    assert not [path for path in quick if "__pycache__" in path or path.startswith(".")]
    goldens = doit(copy, "info", "goldens").stdout
    assert "gymbuild/render/templates/job.sh.j2" in section(goldens, "file_dep")
    # The goldens are the tests' input, never a target doit would rewrite before a test run.
    assert section(goldens, "targets") == ["build/doit/goldens.stamp"]
    assert section(doit(copy, "info", "bench").stdout, "targets") == [
        "build/bench/results.json",
        "build/bench/results.md",
    ]


def test_a_second_run_is_up_to_date_until_a_dependency_changes(copy: Path) -> None:
    first = doit(copy, "docs")
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.splitlines() == [".  docs"]
    assert (copy / "build/doit/docs.stamp").is_file()
    assert "docs" in json.loads((copy / ".doit.db").read_text())  # the json backend, not dbm

    assert doit(copy, "docs").stdout.splitlines() == ["-- docs"]

    with (copy / "docs" / "compare.md").open("a", encoding="utf-8") as doc:
        doc.write("\nOne more line.\n")
    assert doit(copy, "docs").stdout.splitlines() == [".  docs"]
    assert doit(copy, "docs").stdout.splitlines() == ["-- docs"]


def test_moving_a_file_the_docs_link_to_reruns_the_check_and_fails_it(copy: Path) -> None:
    assert doit(copy, "docs").returncode == 0
    (copy / "tests/oracle/README.md").rename(copy / "tests/oracle/NOTES.md")
    moved = doit(copy, "docs")
    assert moved.returncode != 0
    assert "README.md:" in moved.stderr and "link 'tests/oracle/README.md': no such file" in moved.stderr


def test_git_ignores_what_doit_writes_in_the_checkout() -> None:
    ignored = subprocess.run(
        ["git", "check-ignore", ".doit.db", "build/doit/docs.stamp", "build/bench/results.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ignored.stdout.split() == [".doit.db", "build/doit/docs.stamp", "build/bench/results.json"]
