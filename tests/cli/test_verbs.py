"""The registry of verbs (gymbuild/request/verbs.py) is what the run does: each fact a verb declares there
(what it writes, whether it connects ahead, queues or works on a sweep) is the one the rest of
gymbuild acts on, and the parts that still name verbs themselves (sweep_day_two.VERBS, pyproject.toml's
entry points: tests/cli/test_main.py) name the registry's.

What a verb writes is proven the way a user meets it: while another run holds a config's workspace,
the verbs that write nothing in it answer, and those that write wait, then name the holder.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from e2e_helpers import gymbuild_argv, workspaces_home

from gymbuild.request import verbs
from gymbuild.state.workspace import Workspace, locked
from gymbuild.sweep import day_two as sweep_day_two

ROOT = Path(__file__).resolve().parents[2]
IN_USE = "is in use by"  # workspace.locked's message to a run that found the workspace held


def test_the_sweep_verbs_are_the_registrys() -> None:
    """batch.py keeps the sweep's own callables, named as the verbs they run: a verb marked as
    working on a sweep without one would fail with a KeyError mid-run, one with a callable but no
    mark would never reach it (task_kinds runs a sweep only for verbs.SWEEP_VERBS)."""
    assert set(sweep_day_two.VERBS) == verbs.SWEEP_VERBS
    assert {name: action.__name__ for name, action in sweep_day_two.VERBS.items()} == {
        n: n for n in sweep_day_two.VERBS
    }
    for name in verbs.SWEEP_VERBS:  # the help tells a user how to name the sweep
        verb = verbs.verb(name)
        assert verb and {"multirun", "sweep"} & {a for a, _ in verb.arguments}, (
            f"{name}'s help lacks multirun="
        )


def test_the_facts_a_verb_declares_agree() -> None:
    """The declarations that would contradict each other: a verb that queues without holding the
    submission; a dry run (render, resolve) that connects or queues; a handshake with a submission's
    host by a verb that does not read one (run=); a handshake with the config's host by a verb that
    would never use it to queue."""
    for v in verbs.VERBS:
        if v.queues:
            assert v.writes == "submission", f"{v.name} queues without holding the workspace"
        if v.writes == "draft":
            assert not v.queues and v.connects_ahead is None, f"{v.name} is a dry run"
        if v.connects_ahead == "submission":
            assert v.reads_only and "run" in {a for a, _ in v.arguments}, v.name
        if v.connects_ahead == "config":
            assert v.queues and v.overrides, v.name


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        gymbuild_argv(*args),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def test_what_a_verb_writes_is_the_lock_it_waits_for(tmp_path: Path) -> None:
    """While a run holds config A's submission, each verb that writes nothing there answers (whatever
    its answer: no submission yet) and render and resolve stage in the draft beside it; submit and
    resubmit wait and name the holder. While a run holds config B's draft, render and resolve wait.
    Every run starts at once, so the waits overlap (workspace.LOCK_WAIT_SECONDS each)."""
    configs = {}
    for name in ("a", "b"):
        configs[name] = tmp_path / f"{name}.yaml"
        shutil.copy(ROOT / "examples" / "local.yaml", configs[name])
    held_a = Workspace(workspaces_home(), configs["a"])
    held_b = Workspace(workspaces_home(), configs["b"]).as_draft()
    with locked(held_a.lock_dir, "the test's submit"), locked(held_b.lock_dir, "the test's render"):
        runs = {(v.name, "a"): _start([v.name, f"config={configs['a']}"], tmp_path) for v in verbs.VERBS}
        for v in verbs.VERBS:
            if v.writes == "draft":
                runs[v.name, "b"] = _start([v.name, f"config={configs['b']}"], tmp_path)
        said = {key: run.communicate(timeout=120) for key, run in runs.items()}
    for (name, config), (_, err) in said.items():
        assert "Traceback" not in err, (name, config, err)
        writes = verbs.verb(name).writes  # type: ignore[union-attr]
        waits = writes == "submission" if config == "a" else writes == "draft"
        assert (IN_USE in err) == waits, f"{name} config={config} (writes {writes}): {err}"
        if waits:
            assert "the test's" in err  # it names the holder


def test_the_entry_points_and_doit_commands_are_the_registrys() -> None:
    """pyproject.toml's `doit.COMMAND` entry points name one command class per verb of VERBS, each
    class in doit_plugin.py names its verb and shows its line in `doit help`, and no class of a
    verb is left out of the entry points; the console script is the one main."""
    import tomllib

    from gymbuild.cli import doit_plugin

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"gymbuild": "gymbuild.cli.main:main"}
    points = project["entry-points"]["doit.COMMAND"]
    assert list(points) == [v.name for v in verbs.VERBS]
    classes = {
        c.name: f"gymbuild.cli.doit_plugin:{c.__name__}"
        for c in vars(doit_plugin).values()
        if isinstance(c, type) and issubclass(c, doit_plugin._Verb) and c is not doit_plugin._Verb
    }
    assert classes == points
    for v in verbs.VERBS:
        command = getattr(doit_plugin, points[v.name].split(":")[1])
        assert command.doc_purpose == f"gymbuild: {v.does}"


def test_the_derived_sets_are_the_registrys() -> None:
    """Each set the run is shaped by is read from the verbs' declarations, not kept beside them."""
    from gymbuild.request import invocation

    by = {
        "READ_ONLY_VERBS": {v.name for v in verbs.VERBS if v.writes == "nothing"},
        "STAGE_ONLY_VERBS": {v.name for v in verbs.VERBS if v.writes == "draft"},
        "QUEUING_VERBS": {v.name for v in verbs.VERBS if v.queues},
        "AHEAD_OF_SUBMISSION": {v.name for v in verbs.VERBS if v.connects_ahead == "submission"},
        "AHEAD_OF_CONFIG": {v.name for v in verbs.VERBS if v.connects_ahead == "config"},
    }
    for name, expected in by.items():
        assert getattr(invocation, name) == expected, name
    assert {v.name for v in verbs.VERBS if v.sweeps} == verbs.SWEEP_VERBS
    assert {a.name for a in verbs.ARGUMENTS} == invocation.RESERVED
    for v in verbs.VERBS:  # a verb names only arguments the registry reads
        assert {a for a, _ in v.arguments} <= invocation.RESERVED, v.name


def test_doit_s_command_line_variables_are_read_in_order_and_checked() -> None:
    """The words doit took as variables, read from the command line in its order (an override's
    name is the user's: doit.get_var cannot list them), and refused when doit read another line."""
    from doit import doit_cmd

    from gymbuild.cli import doit_plugin

    line = ["-n", "2", "config=a.yaml", "submit", "x.y=1", "--verbose", "config=b.yaml", "+k=v=w"]
    doit_cmd.reset_vars()
    for word in line:
        if "=" in word and not word.startswith("-"):
            doit_cmd.set_var(*word.split("=", 1))  # as DoitMain.process_args does
    assert doit_plugin.command_line_variables(line) == ["config=a.yaml", "x.y=1", "config=b.yaml", "+k=v=w"]
    doit_cmd.set_var("config", "other.yaml")
    try:
        doit_plugin.command_line_variables(line)
    except LookupError as err:
        assert "config=" in str(err) and "fix:" in str(err)
    else:
        raise AssertionError("a command line doit did not read was taken as its")
    doit_cmd.reset_vars()


def test_a_verb_s_help_shows_only_the_values_it_reads(tmp_path: Path) -> None:
    """`gymbuild help VERB` lists, for an argument two verbs share (format=), the values that verb
    takes: a value it shows is never refused as a format by that verb, and one it leaves out (the
    default `table` aside) is, in one message naming it."""
    config = tmp_path / "eval.yaml"
    config.write_text((ROOT / "examples" / "local.yaml").read_text())
    for verb in ("results", "compare"):
        shown = subprocess.run([*gymbuild_argv(), "help", verb], capture_output=True, text=True, check=True)
        word = next(w for w in shown.stdout.split() if w.startswith("format="))
        values = word.removeprefix("format=").split("|")
        for value in ("csv", "markdown", "compact"):
            run = subprocess.run(
                [*gymbuild_argv(), verb, f"format={value}", f"config={config}"],
                capture_output=True,
                text=True,
            )
            assert run.returncode != 0  # nothing was submitted: every run stops here, for its own reason
            refused = f"format={value} " in run.stderr and "not a format" in run.stderr
            assert refused == (value not in values), (verb, value, run.stderr)
