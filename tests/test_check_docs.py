"""tools/check_docs.py (dodo.py's `docs` task): a doc's dead link or unknown verb is one line naming
the file, the line and what is wrong, with status 1; the checkout's own docs pass.

Each test writes a small checkout (the real pyproject.toml and dodo.py, so the verbs and tasks are
the real ones) and runs the checker on it as `doit docs` does, as a script.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.check_docs import anchors, slug

ROOT = Path(__file__).resolve().parent.parent
CHECKER = ROOT / "tools" / "check_docs.py"


def checkout(tmp_path: Path, readme: str, **docs: str) -> Path:
    """A checkout of the README, docs/<name>.md for each keyword, and the real verbs and tasks."""
    for name in ("pyproject.toml", "dodo.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "README.md").write_text(readme, encoding="utf-8")
    (tmp_path / "docs").mkdir()
    for name, text in docs.items():
        (tmp_path / "docs" / f"{name}.md").write_text(text, encoding="utf-8")
    return tmp_path


def doc(*lines: str) -> str:
    """A Markdown file of these lines."""
    return "\n".join([*lines, ""])


def check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECKER), str(root)], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_checkouts_docs_link_to_what_exists_and_name_verbs_that_exist() -> None:
    done = check(ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith("docs: the links and example commands of ")


def test_a_link_to_a_missing_file_is_one_line_with_its_place(tmp_path: Path) -> None:
    root = checkout(
        tmp_path,
        "# Title\n\nSee [the guide](docs/guide.md) and [the old one](docs/gone.md).\n",
        guide="# Guide\n\nBack to [the README](../README.md), and [nowhere](../../outside.md).\n",
    )
    (root / "tests" / "cluster").mkdir(parents=True)
    (root / "tests" / "cluster" / "README.md").write_text("# Cluster\n\n[up](up) [the docs](../../docs/)\n")
    done = check(root)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "README.md:3: link 'docs/gone.md': no such file or folder in the checkout",
        "docs/guide.md:3: link '../../outside.md': no such file or folder in the checkout",
        "tests/cluster/README.md:3: link 'up': no such file or folder in the checkout",
        "fix: correct the 3 place(s) above (the link's path or heading, or the verb)",
    ]


def test_an_anchor_must_name_a_heading_of_the_linked_file(tmp_path: Path) -> None:
    readme = doc(
        "# Tool",
        "## `doit` in the checkout: why?",
        "## Notes",
        "## Notes",
        "```bash",
        "# not a heading",
        "```",
        "[ok](#doit-in-the-checkout-why) [second](#notes-1) [ok too](docs/a.md#the-a-part)",
        "[no such](#not-a-heading) [nor](docs/a.md#the-b-part) [third](#notes-2)",
    )
    done = check(checkout(tmp_path, readme, a="# The A part\n"))
    assert done.returncode == 1
    assert done.stderr.splitlines()[:3] == [
        "README.md:9: link '#not-a-heading': this file has no heading #not-a-heading",
        "README.md:9: link 'docs/a.md#the-b-part': docs/a.md has no heading #the-b-part",
        "README.md:9: link '#notes-2': this file has no heading #notes-2",
    ]


def test_urls_and_links_shown_as_code_are_not_checked(tmp_path: Path) -> None:
    readme = (
        "# T\n\n[site](https://example.org/x.md) [mail](mailto:me@example.org) `[a](missing.md)`\n"
        "```markdown\n[b](missing-too.md)\n```\n"
    )
    done = check(checkout(tmp_path, readme))
    assert done.returncode == 0, done.stderr


def test_an_example_command_with_an_unknown_verb_is_reported(tmp_path: Path) -> None:
    readme = doc(
        "# T",
        "Run `gymbuild submit config=F`, `gymbuild VERB --help`, `gymbuild --version`, `doit docs`.",
        "```bash",
        "pip install . && gymbuild sumbit config=examples/local.yaml",
        "GYM_POLL_SECONDS=1 doit list && doit test_quick",
        "```",
        "Or `doit frobnicate` (not a task) and `gymbuild help submit`.",
        "```text",
        "gymbuild output that is no command",
        "```",
    )
    done = check(checkout(tmp_path, readme))
    assert done.returncode == 1
    assert done.stderr.splitlines()[:2] == [
        "README.md:4: `gymbuild sumbit`: 'sumbit' is no gymbuild verb, command or task",
        "README.md:7: `doit frobnicate`: 'frobnicate' is no doit verb, command or task",
    ]
    assert len(done.stderr.splitlines()) == 3  # and the fix


def test_a_task_of_dodo_py_is_a_doit_word_but_no_gymbuild_verb(tmp_path: Path) -> None:
    done = check(checkout(tmp_path, "# T\n\n`doit typecheck` and `gymbuild typecheck`\n"))
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == (
        "README.md:3: `gymbuild typecheck`: 'typecheck' is no gymbuild verb, command or task"
    )


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Run the tests", "run-the-tests"),
        ("From a training run's checkpoints to the curve", "from-a-training-runs-checkpoints-to-the-curve"),
        ("`doit` in the checkout", "doit-in-the-checkout"),
        ("The [config](x.md) file", "the-config-file"),
        ("snake_case and dash-case", "snake_case-and-dash-case"),
    ],
)
def test_anchors_are_githubs(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor
    assert anchors(f"# {heading}\n# {heading}\n") == {anchor, f"{anchor}-1"}
