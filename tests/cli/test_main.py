"""The command line a new user meets: help, version, an unknown verb, and where doit's commands went.

Each test runs the console script's code in a fresh process (as a shell would), in an empty
directory, and checks what lands on stdout and stderr, the exit status, and that nothing was left
behind: help and version must never create a workspace or touch a config.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from importlib.metadata import version as installed_version
from pathlib import Path

import pytest
from doit.doit_cmd import DoitMain
from e2e_helpers import workspaces_home

from gymbuild.cli.argv import DOIT_COMMANDS
from gymbuild.request import verbs
from gymbuild.request.invocation import Invocation

ROOT = Path(__file__).resolve().parents[2]
VERB_NAMES = [v.name for v in verbs.VERBS]


def gymbuild(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gymbuild.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def section(text: str, title: str) -> list[str]:
    """The indented lines under `title:` in a help text, up to the next blank line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    body = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        body.append(line)
    return body


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["help"]])
def test_help_says_what_gymbuild_is_its_verbs_arguments_overrides_and_examples(
    args: list[str], tmp_path: Path
) -> None:
    done = gymbuild(*args, cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    text = done.stdout
    assert "doit -- automation tool" not in text  # gymbuild's help, not doit's
    assert text.startswith("gymbuild: ")
    listed = {line.split()[0]: line.split(None, 1)[1] for line in section(text, "verbs:")}
    assert listed == {v.name: v.does for v in verbs.VERBS}
    # Every name the help lists as an argument is one gymbuild reads itself, never a config override,
    # and every such name is listed: the two sets are the same.
    arguments = {line.split()[0].split("=")[0] for line in section(text, "arguments")}
    assert arguments >= {"config", "json", "new", "only", "run", "workspace", "follow", "watch"}
    for name in arguments:
        assert Invocation.from_vars({name: verbs.argument(name).example}).overrides == (), name
    assert Invocation.from_vars({"anything.else": "1"}).overrides == ("anything.else=1",)
    assert {v for v in verbs.reserved()} == arguments
    forms = [line.split()[0] for line in section(text, "overrides")]
    assert forms == ["key=value", "+key=value", "++key=value"]
    examples = section(text, "examples:")
    assert len(examples) == 3 and all(e.strip().startswith("gymbuild ") for e in examples)
    assert "`gymbuild help doit`" in text
    assert not workspaces_home().exists()


def test_the_help_examples_are_commands_gymbuild_accepts() -> None:
    """Each example names a verb and only arguments that verb reads, or overrides of a verb that
    loads the config: copied into a shell, none of them would fail on its own spelling."""
    examples = [*verbs.EXAMPLES, *(e for v in verbs.VERBS for e in v.examples)]
    for example in examples:
        # A shell reads it: its syntax is sound (an unquoted `paths(/c*)` is not) and its words are
        # what the shell hands gymbuild.
        checked = subprocess.run(["bash", "-n", "-c", example], capture_output=True, text=True)
        assert checked.returncode == 0, f"{example}: {checked.stderr}"
        words = shlex.split(example, comments=True)
        assert words[0] == "gymbuild", example
        verb = verbs.verb(words[1])
        assert verb is not None, example
        for word in words[2:]:
            name = word.split("=", 1)[0]
            if name in verbs.reserved():
                assert name in dict(verb.arguments), f"{example}: {verb.name} does not read {name}="
            else:
                assert verb.overrides and re.fullmatch(r"\+{0,2}[a-z_][\w.]*=.+", word), example


@pytest.mark.parametrize("name", VERB_NAMES)
def test_help_of_a_verb_lists_its_arguments_and_examples(name: str, tmp_path: Path) -> None:
    verb = verbs.verb(name)
    assert verb is not None
    done = gymbuild("help", name, cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.splitlines()[:2] == [f"gymbuild {verb.usage}", f"  {verb.does}"]
    listed = [line.split()[0] for line in section(done.stdout, "arguments:")]
    expected = [verbs.argument(arg).usage_in(name) for arg, _ in verb.arguments]
    assert listed == expected + (["KEY=VALUE"] if verb.overrides else [])
    assert [line.strip() for line in section(done.stdout, "examples:")] == list(verb.examples)
    # `gymbuild VERB --help` is the same page, and runs nothing.
    assert gymbuild(name, "--help", "config=missing.yaml", cwd=tmp_path).stdout == done.stdout
    assert not workspaces_home().exists()


def test_every_verb_argument_is_a_reserved_argument() -> None:
    for verb in verbs.VERBS:
        for name, _ in verb.arguments:
            assert name in verbs.reserved(), f"{verb.name} reads {name}=, which verbs.ARGUMENTS lacks"


def test_every_doit_task_is_a_verb_with_help_or_a_pipeline_step(tmp_path: Path) -> None:
    """A new `task_<verb>` in tasks.py without its entry in verbs.py fails here: no verb ships
    without help (and `doit list` would show it without a line)."""
    listed = gymbuild("list", "--all", "--quiet", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    tasks = {line.split()[0] for line in listed.stdout.splitlines() if line.strip()}
    top = {t for t in tasks if ":" not in t}
    assert top - verbs.STEPS == set(VERB_NAMES), (
        "a task without help in gymbuild/request/verbs.py, or help without task"
    )
    assert top >= verbs.STEPS
    # doit's own list shows each verb with its line from the registry.
    shown = dict(line.split(None, 1) for line in gymbuild("list", cwd=tmp_path).stdout.splitlines())
    assert {name: shown[name].strip() for name in VERB_NAMES} == {v.name: v.does for v in verbs.VERBS}


def test_version_is_gymbuilds_then_doits(tmp_path: Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for flag in ("--version", "-V"):
        done = gymbuild(flag, cwd=tmp_path)
        assert done.returncode == 0 and done.stderr == ""
        assert done.stdout.splitlines() == [
            f"gymbuild {project['version']}",
            f"doit {installed_version('doit')}",
        ]


def test_an_unknown_verb_is_one_message_with_the_nearest_verb_and_the_help(tmp_path: Path) -> None:
    done = gymbuild("sumbit", "config=eval.yaml", cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    first, fix = done.stderr.splitlines()[:2]
    assert first == "error: 'sumbit' is not a gymbuild verb (did you mean submit?)"
    assert fix.strip().startswith("fix: use one of resolve, render, submit")
    assert section(done.stderr, "verbs:")  # the help follows
    assert "Traceback" not in done.stderr
    assert not workspaces_home().exists()
    nothing_near = gymbuild("help", "frobnicate", cwd=tmp_path)
    assert nothing_near.returncode == 1
    assert nothing_near.stderr.splitlines()[0] == "error: 'frobnicate' is not a gymbuild verb"


def test_doits_own_help_and_commands_are_still_there(tmp_path: Path) -> None:
    doit_help = gymbuild("help", "doit", cwd=tmp_path)
    assert doit_help.returncode == 0
    assert doit_help.stdout.startswith("doit -- automation tool")
    assert "gymbuild forget" in doit_help.stdout and "gymbuild list" in doit_help.stdout
    list_help = gymbuild("help", "list", cwd=tmp_path)
    assert list_help.returncode == 0 and "list tasks from dodo file" in list_help.stdout
    assert not workspaces_home().exists()  # help holds no workspace


def test_the_doit_commands_gymbuild_passes_on_are_doits() -> None:
    assert {cmd.get_name() for cmd in DoitMain.DOIT_CMDS} == DOIT_COMMANDS


def test_gymbuild_alone_is_the_dry_run_of_submit_yaml_or_the_help_without_one(tmp_path: Path) -> None:
    empty = gymbuild(cwd=tmp_path)
    assert empty.returncode == 0 and empty.stdout == gymbuild("--help", cwd=tmp_path).stdout
    assert not workspaces_home().exists()
    (tmp_path / "submit.yaml").write_text((ROOT / "examples/minimal.yaml").read_text())
    dry = gymbuild(cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("[dry-run] remote run dir: ")
    assert not list(workspaces_home().glob("*/outcomes"))  # nothing queued


def test_doit_runs_the_verbs_in_any_directory_with_the_one_installed_package(tmp_path: Path) -> None:
    """`doit submit config=F` and `doit render config=F` (the design card's commands) work in any
    directory, with no dodo.py: installing gymbuild registers its verbs as doit commands. `doit help`
    lists them beside doit's own, and doit imports the one gymbuild that `gymbuild` imports."""
    doit = shutil.which("doit")
    assert doit, "doit is not on PATH (pip install -e '.[test]')"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    helped = subprocess.run([doit, "help"], cwd=elsewhere, capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0 and helped.stdout.startswith("doit -- automation tool")
    assert f"doit submit            gymbuild: {verbs.verb('submit').does}" in helped.stdout
    config = ROOT / "examples" / "minimal.yaml"
    rendered = subprocess.run(
        [doit, "render", f"config={config}"], cwd=elsewhere, capture_output=True, text=True, timeout=120
    )
    assert rendered.returncode == 0, rendered.stderr
    assert rendered.stdout.startswith("[dry-run] remote run dir: ")
    assert rendered.stdout == gymbuild("render", f"config={config}", cwd=tmp_path).stdout  # the same run
    wrong = subprocess.run([doit, "submit", "-c"], cwd=elsewhere, capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 1 and wrong.stderr.startswith("error: -c needs the config file")
    assert not list(elsewhere.iterdir())  # nothing left in the directory it ran in


def test_every_verb_is_a_doit_command_entry_point() -> None:
    """pyproject.toml registers each verb of verbs.py as a doit command (gymbuild/cli/doit_plugin.py),
    and no other; the installed package's metadata, which is what doit loads, says the same (a verb
    added since the install needs `pip install -e .` again before `doit VERB` knows it)."""
    from doit.cmd_base import Command

    from gymbuild.cli import doit_plugin

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    points = project["entry-points"]["doit.COMMAND"]
    assert points == {v.name: f"gymbuild.cli.doit_plugin:{v.name.capitalize()}" for v in verbs.VERBS}
    for name, target in points.items():
        command = getattr(doit_plugin, target.split(":")[1])
        assert issubclass(command, Command) and command.name == name
    ours = [p for p in entry_points(group="doit.COMMAND") if p.module == "gymbuild.cli.doit_plugin"]
    installed = {p.name: p.value for p in ours}
    assert installed == points, "the installed entry points are stale: pip install -e . again"


def test_readme_command_table_is_the_help(tmp_path: Path) -> None:
    """README's table of commands lists the verbs `gymbuild --help` lists, in its order, each with
    the same line."""
    readme = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| `gymbuild ([^`]+)` \| (.+) \|$", readme, flags=re.MULTILINE)
    assert rows == [(v.usage, v.does) for v in verbs.VERBS], (
        "README's command table differs from gymbuild/request/verbs.py; it should read:\n"
        + "\n".join(f"| `gymbuild {v.usage}` | {v.does} |" for v in verbs.VERBS)
    )
    helped = gymbuild("--help", cwd=tmp_path).stdout
    assert [line.split()[0] for line in section(helped, "verbs:")] == [u.split()[0] for u, _ in rows]
