"""Sweeps (issue 21), the fast part: how `multirun=1` reads Hydra's sweep syntax, and paths() globs.

The expansion is Hydra's own parser and BasicSweeper's product; these tests pin what a user sees of
it: which combinations a command line makes, in which order, what each is called in a table, and the
one message a bad sweep expression gets. The glob script runs in a real bash on real directories.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gymbuild.errors import ConfigError
from gymbuild.results.table import CSV_FIELDS
from gymbuild.sweep import expand
from gymbuild.sweep import record as sweep_record


def values(cells: list[expand.Cell]) -> list[tuple[str, ...]]:
    return [cell.values for cell in cells]


def test_several_keys_give_their_product_in_command_line_order() -> None:
    cells = expand.expand(["a=1,2", "compute.c.walltime=01:00:00", "+b=x,y,z"], "eval.yaml")
    assert values(cells) == [
        ("a=1", "+b=x"),
        ("a=1", "+b=y"),
        ("a=1", "+b=z"),
        ("a=2", "+b=x"),
        ("a=2", "+b=y"),
        ("a=2", "+b=z"),
    ]
    # The override that sweeps nothing goes with every combination, as typed.
    assert all(cell.overrides[1] == "compute.c.walltime=01:00:00" for cell in cells)


def test_range_and_choice_are_read_as_hydra_reads_them() -> None:
    cells = expand.expand(["x=range(0,3)", "y=choice(low,high)"], "eval.yaml")
    assert values(cells) == [
        ("x=0", "y=low"),
        ("x=0", "y=high"),
        ("x=1", "y=low"),
        ("x=1", "y=high"),
        ("x=2", "y=low"),
        ("x=2", "y=high"),
    ]


def test_an_override_that_sweeps_nothing_keeps_its_interpolation_and_deletions() -> None:
    (cell,) = expand.expand(["a=${b}", "~c", "d=1"], "eval.yaml")
    assert cell.overrides == ("a=${b}", "~c", "d=1")
    assert cell.values == ()


def test_a_later_override_of_a_key_replaces_the_earlier_one() -> None:
    assert values(expand.expand(["a=1,2", "a=3,4,5"], "eval.yaml")) == [("a=3",), ("a=4",), ("a=5",)]


def test_one_more_value_keeps_every_earlier_combination_by_name() -> None:
    before = {cell.key for cell in expand.expand(["m=a,b", "t=1,2,3"], "eval.yaml")}
    after = {cell.key for cell in expand.expand(["m=a,b,c", "t=1,2,3"], "eval.yaml")}
    assert before < after and len(after - before) == 3


def test_paths_are_the_found_paths_of_each_glob() -> None:
    overrides = ["services.policy.model=paths(/lustre/ckpts/iter_*)", "t=0,1"]
    assert expand.globs(overrides, "eval.yaml") == ["/lustre/ckpts/iter_*"]
    found = {"/lustre/ckpts/iter_*": ["/lustre/ckpts/iter_2", "/lustre/ckpts/iter_10"]}
    cells = expand.expand(overrides, "eval.yaml", found)
    assert values(cells) == [
        ("services.policy.model=/lustre/ckpts/iter_2", "t=0"),
        ("services.policy.model=/lustre/ckpts/iter_2", "t=1"),
        ("services.policy.model=/lustre/ckpts/iter_10", "t=0"),
        ("services.policy.model=/lustre/ckpts/iter_10", "t=1"),
    ]
    # Nothing found yet (before the first checkpoint): no combination, and no error.
    assert expand.expand(overrides, "eval.yaml", {}) == []


def test_the_probe_puts_each_sweep_at_its_first_value_and_a_glob_at_itself() -> None:
    probe = expand.probe_overrides(["m=paths(/ck/*)", "t=3,4", "compute.c.hostname=login"], "e.yaml")
    assert probe == ["m='/ck/*'", "t=3", "compute.c.hostname=login"]  # data: quoted for Hydra


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("a=1,,2", "extraneous input"),
        ("a=range(1,x)", "range(1,x)"),
        ("a=nope(1)", "Unknown function 'nope'"),
        ("a=paths()", "missing a required argument"),
    ],
)
def test_a_bad_sweep_expression_is_one_message_with_the_file_the_key_and_the_fix(
    override: str, says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        expand.expand(["ok=1,2", override], "eval.yaml")
    text = str(caught.value)
    assert text.startswith("error: eval.yaml: 1 problem in the config")
    assert f"  - a: override {override!r}" in text and says in text
    assert "fix: a sweep value is a,b,c  range(start,stop[,step])  choice(a,b)  or paths(GLOB)" in text
    assert "Traceback" not in text and "hydra.cc" not in text


def test_a_continuous_interval_is_refused_with_discrete_values_as_the_fix() -> None:
    with pytest.raises(ConfigError) as caught:
        expand.expand(["lr=interval(0,1)"], "eval.yaml")
    assert "lr: override 'lr=interval(0,1)' is a continuous interval" in str(caught.value)
    assert "fix: sweep discrete values" in str(caught.value)


def test_labels_are_the_swept_values_with_short_keys_where_unambiguous() -> None:
    cells = expand.expand(
        [
            "services.policy.model=a,b",
            "driver.benchmarks.g.run.temperature=0.5",
            "x.limit=1,4",
            "y.limit=2,3",
        ],
        "eval.yaml",
    )
    assert expand.labels(cells)[:2] == ["model=a x.limit=1 y.limit=2", "model=a x.limit=1 y.limit=3"]
    (timed,) = expand.expand(["compute.c.walltime=01:00:00,01:00:00"], "eval.yaml")
    assert expand.labels([timed]) == ["walltime=01:00:00"]  # Hydra's escapes are not shown


def glob_with_bash(patterns: list[str]) -> dict[str, list[str]]:
    done = subprocess.run(
        ["bash", "-c", expand.glob_script(patterns)], capture_output=True, text=True, check=True
    )
    return expand.parse_globbed(done.stdout, patterns).found


def test_the_glob_script_finds_every_match_of_every_glob_in_natural_order(tmp_path: Path) -> None:
    for name in ("iter_1000", "iter_200", "iter_30", "other"):
        (tmp_path / "ckpts" / name).mkdir(parents=True)
    (tmp_path / "with space").mkdir()
    (tmp_path / "with space" / "a b").mkdir()
    ckpts, spaced, none = f"{tmp_path}/ckpts/iter_*", f"{tmp_path}/with space/*", f"{tmp_path}/nothing_*"
    found = glob_with_bash([ckpts, spaced, none])
    assert found[ckpts] == [f"{tmp_path}/ckpts/iter_{n}" for n in (30, 200, 1000)]
    assert found[spaced] == [f"{tmp_path}/with space/a b"]
    assert found[none] == []


def test_a_glob_naming_no_existing_path_finds_nothing_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    pattern = f"{tmp_path}/$(touch {marker})*"
    assert glob_with_bash([pattern, str(tmp_path / "absent")]) == {pattern: [], str(tmp_path / "absent"): []}
    assert not marker.exists()


def test_the_record_keeps_the_expansion_order_and_cells_no_longer_matched() -> None:
    first = expand.expand(["m=a,b"], "eval.yaml")
    record = sweep_record.merged(
        None, "sweep-x", Path("eval.yaml"), ["m=a,b"], [(c, f"id-{c.values[0]}") for c in first]
    )
    second = expand.expand(["m=c,b"], "eval.yaml")
    record = sweep_record.merged(
        record, "sweep-x", Path("eval.yaml"), ["m=c,b"], [(second[0], "id-c"), (second[1], None)]
    )
    assert [(c["values"], c["gym_job_id"]) for c in record["cells"]] == [
        (["m=c"], "id-c"),
        (["m=b"], "id-m=b"),
        (["m=a"], "id-m=a"),
    ]


def test_sweep_syntax_without_multirun_is_refused_with_multirun_as_the_fix(tmp_path: Path) -> None:
    from gymbuild.config import load_config

    with pytest.raises(ConfigError) as caught:
        load_config(
            Path(__file__).parents[2] / "examples" / "local.yaml", ["compute.workstation.walltime=1,2"]
        )
    assert "fix: to sweep over the values, pass multirun=1" in str(caught.value)


# --- the local executor: the glob expanded here, each checkpoint's job run once -----------------------

ARTIFACT = '"$NEMO_GYM_BENCH_DIR/artifacts/metrics.json"'
METRIC = f'printf \'{{"score": %s}}\' "$(basename "$0" | tr -dc 0-9)" > {ARTIFACT}\n'


def checkpoint(directory: Path, name: str) -> None:
    """A "checkpoint" the local job can evaluate: a script writing its number as the score."""
    script = directory / name
    script.write_text(f"#!/bin/bash\n{METRIC}")
    script.chmod(0o755)


def test_a_local_sweep_globs_here_and_evaluates_each_new_checkpoint_once(tmp_path: Path) -> None:
    import json
    import os
    import shutil
    import time

    from e2e_helpers import local_command_config, write_config

    ckpts = tmp_path / "ckpts"
    ckpts.mkdir()
    for name in ("iter_20", "iter_100"):
        checkpoint(ckpts, name)
    (ckpts / "config.json").write_text("{}")  # the ready marker, beside the files the glob matches
    write_config(tmp_path, local_command_config(), "eval.yaml")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    gym = shutil.which("gymbuild")
    assert gym
    line = ("config=eval.yaml", "multirun=1", f"driver.benchmarks.demo.command=paths({ckpts}/iter_*)")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [gym, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    # Before the first checkpoint: nothing to submit, and no error (the cron line runs again later).
    empty = run("submit", *line[:2], f"driver.benchmarks.demo.command=paths({ckpts}/nothing_*)", "json=1")
    assert json.loads(empty.stdout)["cells"] == []
    assert f"paths({ckpts}/nothing_*) matches nothing" in empty.stderr
    first = run("submit", *line)
    assert first.stdout.count("submitted demo -> local job") == 2
    checkpoint(ckpts, "iter_30")
    second = run("submit", *line)
    assert second.stdout.count("submitted demo -> local job") == 1
    assert f"== command={ckpts}/iter_30" in second.stdout
    assert len(list((tmp_path / "runs").iterdir())) == 3

    deadline = time.monotonic() + 90
    while True:
        doc = json.loads(run("status", "json=1", *line).stdout)
        states = [cell["status"]["benchmarks"][0]["state"] for cell in doc["cells"]]
        if all(state == "COMPLETED" for state in states) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert [cell["label"] for cell in doc["cells"]] == [f"command={ckpts}/iter_{n}" for n in (20, 30, 100)]
    assert states == ["COMPLETED"] * 3
    # The dry run of each combination names its own run directory.
    dry = json.loads(run("render", *line, "json=1").stdout)
    assert [c["dry_run"]["run_dir"] for c in dry["cells"]] == [
        str(tmp_path / "runs" / c["gym_job_id"]) for c in doc["cells"]
    ]
    # Logs are one submission's: the sweep names each combination's, to pick one with run=.
    logs = subprocess.run([gym, "logs", *line[:2]], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert logs.returncode == 1 and "Traceback" not in logs.stderr
    assert [ln.split(": run=")[0].strip() for ln in logs.stderr.splitlines() if ": run=" in ln] == [
        cell["label"] for cell in doc["cells"]
    ]
    picked = doc["cells"][0]["gym_job_id"]
    assert f"runs/{picked}/demo/logs/" in run("logs", *line[:2], f"run={picked}", "only=demo").stdout
    table = run("results", "config=eval.yaml", "multirun=1", "format=csv").stdout
    scores = [row.split(",") for row in table.splitlines() if ",score," in row]
    value = CSV_FIELDS.index("value")
    assert [(row[1].rsplit("/", 1)[-1], row[value]) for row in scores] == [
        ("iter_20", "20"),
        ("iter_30", "30"),
        ("iter_100", "100"),
    ]
