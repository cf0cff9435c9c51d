"""A sweep over `paths()` takes what is on disk as data (issue 45, item 4) and only what is complete
(issue 40, item 9).

Directory names are created on disk and the sweep is dry-run (`render multirun=1`) through the real
glob, Hydra, OmegaConf and the renderer: each job carries exactly its path (the shell word of
NEMO_GYM_POLICY_MODEL_NAME read back by shlex), and no environment variable's value appears anywhere
(a `${oc.env:...}` or `$VAR` in a name stays those characters). A name no job can carry is skipped
with one line naming it; the rest of the sweep goes on. Ready markers apply with or without follow=1:
the README's cron line takes a checkpoint once its config.json is there, never half-written.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import gymbuild_argv, kill_local_jobs, local_command_config, user_env, write_config
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gymbuild.errors import UserError
from gymbuild.request.invocation import Invocation
from gymbuild.request.verb_args import RenderArgs
from gymbuild.submit.session import Session
from gymbuild.sweep import batch, expand

SECRET = "s3cr3t-value-never-in-a-job"

POLICY_CONFIG = {
    "services": {"policy": {"type": "vllm", "container": "x", "model": "Qwen/Qwen3-8B"}},
    "compute": {"here": {"type": "local"}},
    "driver": {"policy_model": "policy", "benchmarks": {"demo": {"command": "true"}}},
    "job": {"output_path": "runs"},
    "otel": {"enabled": False},
}

# Names a file system takes (no `/`, no NUL), with what Hydra and OmegaConf read as syntax. (U+FFFD is
# how a name that is not UTF-8 reads here: such names are refused, tested below.)
SYNTAX = ["'", '"', "$", "${oc.env:GYM_TEST_SECRET}", "$GYM_TEST_SECRET", "\\", " ", ",", "[", "]", "{", "}"]
SYNTAX += ["=", "(", ")", ":", "~", "*", "?", "#", "%", "@", "`", "ü", "名", "\u00a0", "+", "!"]
piece = st.one_of(
    st.sampled_from(SYNTAX),
    st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\x00\ufffd"), max_size=4),
)
name = (
    st.lists(piece, min_size=1, max_size=6)
    .map("".join)
    # `*` does not match a hidden entry (as in the shell): a name starting with `.` is never swept.
    .filter(lambda n: not n.startswith(".") and len(n.encode()) < 200 and n.strip() == n and n)
)


def dry_run(home: Path, ckpts: Path, *args: str) -> tuple[dict, str]:
    """`render multirun=1` of the sweep over `ckpts/*`, in this process: (its JSON, its stderr)."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["render", f"config={home / 'eval.yaml'}", "multirun=1", "json=1", *args]
    s = Session(Invocation.from_argv([*argv, f"services.policy.model=paths({ckpts}/*)"]))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            batch.render(s, RenderArgs.of(s.inv))
    finally:
        s.close()
    return json.loads(out.getvalue()), err.getvalue()


def carried(doc: dict) -> list[str]:
    """Each rendered job's policy model, read back as bash reads its word."""
    found = []
    for cell in doc["cells"]:
        script = cell["dry_run"]["benchmarks"]["demo"]["job.sh"]
        line = next(ln for ln in script.splitlines() if ln.lstrip().startswith("NEMO_GYM_POLICY_MODEL_NAME="))
        found.append(shlex.split(line.strip().removesuffix("\\"))[0].split("=", 1)[1])
    return found


@settings(max_examples=25)
@example(["iter_${oc.env:GYM_TEST_SECRET}", "it's $GYM_TEST_SECRET", "a b,c=[d]{e}", "x\\${y}"])
@given(st.lists(name, min_size=1, max_size=4, unique=True))
def test_any_directory_name_reaches_the_job_exactly_and_no_variable_is_expanded(
    tmp_path_factory: pytest.TempPathFactory, names: list[str]
) -> None:
    home = tmp_path_factory.mktemp("names")
    os.environ["GYM_TEST_SECRET"] = SECRET
    try:
        write_config(home, POLICY_CONFIG, "eval.yaml")
        ckpts = home / "ckpts"
        ckpts.mkdir()
        for n in names:
            (ckpts / n).mkdir()
            (ckpts / n / "config.json").write_text("{}")
        doc, err = dry_run(home, ckpts)
    finally:
        del os.environ["GYM_TEST_SECRET"]
    assert sorted(carried(doc)) == sorted(str(ckpts / n) for n in names), err
    assert [c["label"] for c in doc["cells"]] == [f"model={p}" for p in carried(doc)]
    assert SECRET not in json.dumps(doc) and SECRET not in err
    for staged in (Path(os.environ["XDG_STATE_HOME"]) / "gymbuild").rglob("*"):
        if staged.is_file():
            assert SECRET not in staged.read_text(errors="replace"), staged


def test_a_name_no_job_can_carry_is_skipped_in_one_line_and_the_rest_goes_on(tmp_path: Path) -> None:
    write_config(tmp_path, POLICY_CONFIG, "eval.yaml")
    ckpts = tmp_path / "ckpts"
    ckpts.mkdir()
    for n in ("iter_1\nrm -rf ~", "iter_2", "it's ${oc.env:HOME}"):
        (ckpts / n).mkdir()
        (ckpts / n / "config.json").write_text("{}")
    os.mkdir(bytes(ckpts) + b"/iter_3\xff")  # not UTF-8
    (Path(os.fsdecode(bytes(ckpts) + b"/iter_3\xff")) / "config.json").write_text("{}")
    doc, err = dry_run(tmp_path, ckpts)
    assert sorted(carried(doc)) == [str(ckpts / "it's ${oc.env:HOME}"), str(ckpts / "iter_2")]
    assert f"warning: skipped {ckpts}/iter_1\\nrm -rf ~: its name holds a control character" in err
    assert f"warning: skipped {ckpts}/iter_3\ufffd: its name is not UTF-8" in err
    assert err.count("warning: skipped") == 2 and "\nrm -rf" not in err


def test_the_readme_cron_line_takes_a_checkpoint_only_once_its_marker_is_there(tmp_path: Path) -> None:
    """The reproduction: `submit multirun=1 'x=paths(.../iter_*)'` without follow=1 queued
    iter_0000800, which had no config.json yet."""
    ckpts = tmp_path / "ckpts"
    ckpts.mkdir()
    for step, ready in ((200, True), (800, False)):
        d = ckpts / f"iter_{step:07d}"
        d.mkdir()
        (d / "run").write_text("#!/bin/bash\ntrue\n")
        (d / "run").chmod(0o755)
        if ready:
            (d / "config.json").write_text("{}")
    write_config(tmp_path, local_command_config(), "eval.yaml")
    env = user_env(tmp_path, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    line = ["config=eval.yaml", "multirun=1", f"driver.benchmarks.demo.command=paths({ckpts}/iter_*/run)"]

    def submit(*extra: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            gymbuild_argv("submit", *line, *extra),
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
        return done

    try:
        first = submit()
        assert first.stdout.count("submitted demo -> local job") == 1
        assert f"== command={ckpts}/iter_0000200/run" in first.stdout and "iter_0000800" not in first.stdout
        assert f"waiting: {ckpts}/iter_0000800/run (no config.json or metadata.json in it yet" in first.stderr
        (ckpts / "iter_0000800" / "config.json").write_text("{}")
        second = submit()
        assert second.stdout.count("submitted demo -> local job") == 1
        assert f"== command={ckpts}/iter_0000800/run" in second.stdout and "waiting:" not in second.stderr
        # ready=none takes every match; a marker of one's own is honoured too.
        (ckpts / "iter_0001000").mkdir()
        (ckpts / "iter_0001000" / "run").write_text("#!/bin/bash\ntrue\n")
        (ckpts / "iter_0001000" / "run").chmod(0o755)
        held = submit("ready=DONE")
        assert held.stdout.count("submitted demo") == 0 and "(no DONE in it yet" in held.stderr
        taken = submit("ready=none")
        assert taken.stdout.count("submitted demo -> local job") == 1
    finally:
        kill_local_jobs(tmp_path / "runs")
    assert len(list((tmp_path / "runs").iterdir())) == 3


def test_ready_is_read_with_one_message_for_a_mistake() -> None:
    assert expand.ready_markers(None) == ("config.json", "metadata.json")
    assert expand.ready_markers("none") == () and expand.ready_markers("DONE, meta.json") == (
        "DONE",
        "meta.json",
    )
    with pytest.raises(UserError) as caught:
        expand.ready_markers("a/b")
    assert "a marker is a file name in the checkpoint, not a/b" in str(caught.value)


def test_a_checkpoint_whose_config_fails_is_skipped_and_the_rest_goes_on(tmp_path: Path) -> None:
    """The config mounts the checkpoint it evaluates: a name with `,` and `:` makes a mount the
    config rules refuse. That checkpoint is skipped with one line naming it; the other is rendered."""
    mounted = {**POLICY_CONFIG, "services": {"policy": {**POLICY_CONFIG["services"]["policy"]}}}
    mounted["services"]["policy"]["mounts"] = ["${services.policy.model}"]
    write_config(tmp_path, mounted, "eval.yaml")
    ckpts = tmp_path / "ckpts"
    ckpts.mkdir()
    for n in ("iter_1", "iter_2,x:y"):
        (ckpts / n).mkdir()
        (ckpts / n / "config.json").write_text("{}")
    doc, err = dry_run(tmp_path, ckpts)
    assert carried(doc) == [str(ckpts / "iter_1")]
    said = [line for line in err.splitlines() if line.startswith("warning: skipped")]
    assert said == [
        f"warning: skipped model={ckpts}/iter_2,x:y: its config does not load: services.policy.mounts[0]: "
        f"mount `{ckpts}/iter_2,x:y` has `x:y`, which has a relative source; it must be an absolute path "
        "on the cluster"
    ]


def test_only_a_failure_a_path_explains_is_skipped() -> None:
    """expand.blamed: a path's cell fails where its other values load elsewhere, or it has none; a typed
    value that fails everywhere, or one message every cell shares (the config's), is still an error."""
    cells = expand.expand(["m=paths(/c/*)", "t=1,bad"], "e.yaml", {"/c/*": ["/c/a", "/c/b"]})
    keys = expand.path_keys(["m=paths(/c/*)", "t=1,bad"], "e.yaml")
    assert keys == {"m"} and [c.values for c in cells][:2] == [("m=/c/a", "t=1"), ("m=/c/a", "t=bad")]
    # /c/b fails with t=1, which loads with /c/a: the path is to blame. t=bad fails with both paths.
    assert expand.blamed(cells, {1: "bad t", 2: "bad mount", 3: "bad t"}, keys) == [2]
    only = expand.expand(["m=paths(/c/*)"], "e.yaml", {"/c/*": ["/c/a", "/c/b"]})
    assert expand.blamed(only, {1: "bad mount"}, keys) == [1]
    assert expand.blamed(only, {0: "only=x: no such benchmark", 1: "only=x: no such benchmark"}, keys) == []


@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30))
def test_a_found_path_is_read_back_by_hydra_and_omegaconf_as_itself(text: str) -> None:
    """The mechanism, against the real parsers: whatever a path holds, the override its cell carries
    is parsed by Hydra and resolved by OmegaConf to exactly that path, and shown as it is."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    path = f"/ckpts/{text}"
    (cell,) = expand.expand(["m=paths(/ckpts/*)"], "e.yaml", {"/ckpts/*": [path]})
    (override,) = OverridesParser.create().parse_overrides(list(cell.overrides))
    assert OmegaConf.create({"m": override.value()}).m == path
    assert expand.unescaped(cell.values[0].split("=", 1)[1]) == path
