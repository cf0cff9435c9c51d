"""Hostile input (issue 45): every string field of the schema against a matrix of payloads.

Each (field, payload) either is refused, every problem on one line with its control characters
escaped, or renders for its executor (Slurm and local) to scripts that `bash -n` accepts and in which
no injected command starts a line (tests/security_payloads.py has the matrix, walked from the schema).
A sample runs for real on the local executor with payloads that would touch a file: none may. Plus
the reading limits: an alias bomb, deep nesting and a self-referencing alias are refused in a second.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_helpers import kill_local_jobs, shellcheck
from hypothesis import given, settings
from hypothesis import strategies as st

from gymbuild.config import load_config
from gymbuild.config.validate import validate
from gymbuild.errors import ConfigError
from tests.security_payloads import (
    SHELL_TEXT,
    STAR,
    Field,
    bash_n,
    local_base,
    matrix,
    one_line_refusal,
    payloads,
    placement,
    probe,
    put,
    script_problem,
    shaped,
    slurm_base,
    string_fields,
)

ALWAYS_REFUSED = {"nul", "megabyte"}  # no field may carry these to a script


def test_every_string_field_of_the_schema_is_probed() -> None:
    """A field the base configs cannot hold would go unprobed: add it to tests/security_payloads.py."""
    fields = string_fields()
    assert len(fields) > 60  # the walk found the schema's strings, names included
    unprobed = [
        str(f) for f in fields if placement(slurm_base(), f) is None and placement(local_base(), f) is None
    ]
    assert not unprobed, f"no place in the base configs to probe: {unprobed}"
    for base in (slurm_base(), local_base()):
        outcome = probe(base)
        assert outcome.refused is None, outcome.refused
        assert outcome.files


@pytest.mark.parametrize("executor", ["slurm", "local"])
def test_every_payload_in_every_string_field_is_refused_in_one_line_or_renders_safely(
    executor: str, tmp_path: Path, record_property: Any
) -> None:
    failures: list[str] = []
    checked: dict[str, Path] = {}  # a file rendered the same way twice is checked once
    labels: dict[Path, str] = {}
    counts = {"probes": 0, "refused": 0, "rendered": 0}
    for base, field, where, name, tree in matrix():
        if base != executor:
            continue
        counts["probes"] += 1
        label = f"{executor} {field} @ {'.'.join(where)} <- {name}"
        outcome = probe(tree)
        if outcome.refused is not None:
            counts["refused"] += 1
            problem = one_line_refusal(outcome.refused)
            if problem:
                failures.append(f"{label}: {problem}")
            continue
        counts["rendered"] += 1
        if name in ALWAYS_REFUSED:
            failures.append(f"{label}: accepted")
        for file, text in outcome.files.items():
            digest = hashlib.sha256(f"{file}\0{text}".encode()).hexdigest()
            if digest in checked:
                continue
            checked[digest] = path = tmp_path / f"{len(checked)}.{file.rsplit('.', 1)[-1]}"
            problem = script_problem(file, text)
            if problem:
                failures.append(f"{label}: {problem}")
            if file.endswith(".sh"):
                path.write_text(text)
                labels[path] = f"{label}: {file}"
    for path, said in bash_n(list(labels)).items():
        failures.append(f"{labels[path]}: bash -n: {said[:300]}")
    counts["scripts"] = len(labels)
    for key, value in counts.items():
        record_property(key, value)
    assert counts["refused"] and counts["rendered"]
    assert not failures, "\n".join(failures[:30]) + f"\n({len(failures)} in all)"


SHELLCHECKED = [
    ("services", STAR, "model"),
    ("services", STAR, "env", STAR),
    ("services", STAR, "mounts", "[]"),
    ("driver", "benchmarks", STAR, "run", STAR),
    ("driver", "env", STAR),
    ("job", "output_path"),
    ("otel", "service_name"),
]


@pytest.mark.parametrize("payload", ["newline", "double-quote", "single-quote"])
def test_a_sample_of_rendered_payloads_passes_shellcheck(payload: str, tmp_path: Path) -> None:
    tool = shellcheck()
    base = slurm_base()
    value = payloads()[payload]
    for path in SHELLCHECKED:
        field = Field(path)
        where = placement(base, field)
        assert where is not None
        outcome = probe(put(base, field, where, shaped(field, value)))
        if outcome.refused is not None:
            continue
        script = tmp_path / "job.sh"
        script.write_text(outcome.files["b1/job.sh"])
        # SC1003: a Hydra override escapes its quote as \' inside the shell's single quotes, on purpose
        done = subprocess.run(
            [tool, "--shell=bash", "--exclude=SC1003", str(script)], capture_output=True, text=True
        )
        assert done.returncode == 0, f"{field} <- {payload}:\n{done.stdout}"


# --- for real, on the local executor ---------------------------------------------------------------------

MARKING = ["subst", "backticks", "semicolon", "single-quote", "double-quote", "newline", "lookalike"]
ECHO = 'exec python3 -m gymbuild.demo.echo_server --port "$GYM_PORT"'
FAKE_GYM = (
    '#!/bin/sh\nmkdir -p "$GYM_BENCH_DIR/calls" && printf "%s\\n" "$@" >>"$GYM_BENCH_DIR/calls/gym.argv"\n'
)


def _hostile_local_config(value: str) -> tuple[dict[str, Any], list[str]]:
    """The local base with `value` in every field that is not shell text by definition and takes it,
    all at once; and the fields it went into."""
    tree = local_base()
    service = tree["services"]["judge"]
    service.update(command=ECHO, health_check={"path": "/health"}, port=18900 + os.getpid() % 90)
    tree["driver"]["benchmarks"]["b2"]["command"] = "true"
    taken: list[str] = []
    for field in string_fields():
        if field.path in SHELL_TEXT or field.path[-1] == "path":  # the echo server answers /health only
            continue
        where = placement(tree, field)
        if where is None:
            continue
        candidate = put(tree, field, where, shaped(field, value))
        if probe(candidate).refused is None:
            tree, taken = candidate, [*taken, str(field)]
    return tree, taken


def _wait_done(run: Any, timeout: float = 120) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        done = run("status", "json=1")
        assert done.returncode == 0, done.stdout + done.stderr
        rows = {r["benchmark"]: r["state"] for r in json.loads(done.stdout)["benchmarks"]}
        if all(state != "RUNNING" for state in rows.values()) or time.monotonic() > deadline:
            return rows
        time.sleep(1)


@pytest.mark.skipif(sys.platform != "linux", reason="the local executor's process groups")
@pytest.mark.parametrize("payload", MARKING)
def test_payloads_that_would_leave_a_mark_leave_none_on_the_local_executor(
    payload: str, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    tree, taken = _hostile_local_config(payloads(str(marks))[payload])
    assert len(taken) >= 8, taken  # the payload went into many fields, not none
    config = tmp_path / "submit.yaml"
    config.write_text(yaml.safe_dump(tree, sort_keys=False, allow_unicode=True))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gym").write_text(FAKE_GYM)
    (bin_dir / "gym").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    exe = shutil.which("gymbuild")
    assert exe

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [exe, *args, f"config={config}", f"workspace={tmp_path / 'ws'}"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    try:
        done = run("submit")
        assert done.returncode == 0, done.stdout + done.stderr
        states = _wait_done(run)
    finally:
        for output in tmp_path.rglob("gym-job.json"):
            kill_local_jobs(output.parent.parent)
    assert set(states.values()) == {"COMPLETED"}, states  # the job ran, payloads and all
    assert not list(marks.iterdir()), f"{payload} left a mark through one of {taken}"


# --- the reading limits ------------------------------------------------------------------------------------

MINIMAL = (Path(__file__).resolve().parents[2] / "examples" / "minimal.yaml").read_text()


def _bomb_level(i: int) -> str:
    """Level i of nine: nine aliases of level i - 1 (level 0: nine strings)."""
    item = f"*{chr(96 + i)}" if i else '"x"'
    return f"_{chr(97 + i)}: &{chr(97 + i)} [{', '.join([item] * 9)}]\n"


BOMB = "".join(_bomb_level(i) for i in range(9))  # 700 bytes, 9**9 values expanded


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        (BOMB, "expands to more than"),
        ("_r: &r [*r]\n", "refers to a collection it is inside"),
        ("_d: " + "[" * 5000 + "]" * 5000 + "\n", "nests more than"),
        (
            "_d:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(200)) + "  " * 201 + "x\n",
            "nests more than",
        ),
        (f"_s: {'x' * (2 << 20)}\n", "a value longer than"),
    ],
    ids=["alias-bomb", "self-alias", "flow-depth", "block-depth", "huge-scalar"],
)
def test_yaml_over_the_reading_limits_is_refused_at_once(prefix: str, expected: str, tmp_path: Path) -> None:
    path = tmp_path / "submit.yaml"
    path.write_text(prefix + MINIMAL)
    start = time.process_time()
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert expected in str(caught.value)
    assert len(caught.value.problems) == 1
    # CPU time, not wall time: the bomb was refused before it was built (it grew for five minutes)
    assert time.process_time() - start < 5


def test_a_config_inside_the_limits_with_many_aliases_still_loads(tmp_path: Path) -> None:
    """The bound is on the expanded tree, not on aliases: a config that shares a block 200 times loads."""
    benches = "".join(f"    b{i}: *bench\n" for i in range(200))
    text = MINIMAL.replace(
        "  benchmarks:\n    gpqa:\n      run:\n        config_paths: benchmarks/gpqa/config.yaml\n", ""
    )
    text = "_bench: &bench {run: {config_paths: benchmarks/gpqa/config.yaml}}\n" + text
    text = text.replace(
        "driver:\n  policy_model: policy\n", f"driver:\n  policy_model: policy\n  benchmarks:\n{benches}"
    )
    path = tmp_path / "submit.yaml"
    path.write_text(text)
    assert len(load_config(path).config.driver.benchmarks) == 200


def test_workspace_naming_a_file_is_one_message(tmp_path: Path) -> None:
    config = tmp_path / "submit.yaml"
    config.write_text(MINIMAL)
    (tmp_path / "afile").write_text("")
    for verb in ("resolve", "status"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "gymbuild.cli.main",
                verb,
                f"config={config}",
                f"workspace={tmp_path / 'afile'}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            check=False,
        )
        assert done.returncode == 1, done.stderr
        assert "is a file, not a directory" in done.stderr and "Traceback" not in done.stderr


# --- names, searched -------------------------------------------------------------------------------------


def _named(where: str, name: str) -> dict[str, Any]:
    tree = yaml.safe_load(MINIMAL)
    if where == "service":
        tree["services"][name] = tree["services"].pop("policy")
        tree["driver"]["policy_model"] = name
    elif where == "benchmark":
        tree["driver"]["benchmarks"][name] = tree["driver"]["benchmarks"].pop("gpqa")
    else:
        tree["compute"]["cluster"]["node_pools"][name] = tree["compute"]["cluster"]["node_pools"].pop("gpu")
    return tree


NAME_CHARS = st.characters(codec="utf-8") | st.sampled_from(list("./-_\n\r\x00\x1b ;$`'\"a0"))


@settings(max_examples=300, deadline=None)
@given(
    where=st.sampled_from(["service", "benchmark", "pool"]),
    name=st.text(NAME_CHARS, min_size=1, max_size=120),
)
def test_every_name_validation_accepts_is_one_plain_path_component_and_one_shell_word(
    where: str, name: str
) -> None:
    """Whatever a name holds, validation accepts it only when it is safe everywhere a name goes: a
    file name inside the run directory, a shell word that needs no quoting, one printable line."""
    problems = validate(_named(where, name)).problems
    if any(p.path.endswith(name) and "name" in p.message for p in problems):
        return
    assert not problems, [p.render() for p in problems]
    assert name not in (".", "..") and "/" not in name and not name.startswith(("-", "."))
    assert name.isascii() and name.isprintable() and shlex.quote(name) == name and len(name) <= 100


# --- 45.8: composition and messages -----------------------------------------------------------------------

COMPOSED = Path(__file__).resolve().parents[2] / "examples" / "composed"


def test_a_group_override_cannot_compose_a_file_outside_the_config_directory(tmp_path: Path) -> None:
    config_dir = tmp_path / "cfg"
    shutil.copytree(COMPOSED, config_dir)
    (tmp_path / "evil.yaml").write_text("type: slurm\naccount: stolen\n")
    for option in ("../../evil", str(tmp_path / "evil"), "[local,../../evil]"):
        with pytest.raises(ConfigError) as caught:
            load_config(config_dir / "submit.yaml", [f"compute={option}"])
        assert "outside the config's directory" in str(caught.value)
    assert load_config(config_dir / "submit.yaml", ["compute=local"]).config.compute.type == "local"


def test_a_message_never_prints_a_value_read_with_oc_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GYMBUILD_TEST_TOKEN", "hf_not-a-walltime-0123")
    path = tmp_path / "submit.yaml"
    path.write_text(MINIMAL.replace('walltime: "04:00:00"', "walltime: ${oc.env:GYMBUILD_TEST_TOKEN}"))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "compute.cluster.walltime" in str(caught.value)
    assert "hf_not-a-walltime-0123" not in str(caught.value)
    assert "a value from the environment" in str(caught.value)
