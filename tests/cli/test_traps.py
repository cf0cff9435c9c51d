"""Everyday use without traps (issue 26): gymbuild as a new user meets it, outside the checkout.

Every test runs the installed console script (e2e_helpers.gymbuild) in a directory of tmp_path, with
its own state and cache homes (user_env), on the local executor: what a user would notice, from the
state that follows the config file to NeMo Gym's flags and the messages a mistake produces.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_helpers import EXAMPLES, REPO, Run, gymbuild, gymbuild_argv, user_env, write_config

WALLTIME = "00:05:00"


def local_config(directory: Path, benchmarks: dict[str, Any], name: str = "eval.yaml") -> Path:
    return write_config(
        directory,
        {
            "services": {},
            "compute": {"here": {"type": "local", "walltime": WALLTIME}},
            "driver": {"benchmarks": benchmarks},
            "job": {"output_path": "runs"},
            "otel": {"enabled": False},
        },
        name,
    )


class User:
    """One user: a home (state and cache) and a few directories to type commands in."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = user_env(home)

    def run(self, *args: str, cwd: Path) -> Run:
        done = gymbuild(*args, cwd=cwd, env=self.env, timeout=120)
        assert "Traceback" not in done.stderr + done.stdout, done.stderr
        return done

    def ok(self, *args: str, cwd: Path) -> str:
        done = self.run(*args, cwd=cwd)
        assert done.rc == 0, done.stdout + done.stderr
        return done.stdout

    def status(self, config: Path, cwd: Path) -> dict[str, Any]:
        return json.loads(self.ok("status", f"config={config}", "json=1", cwd=cwd))

    def wait_ended(self, config: Path, cwd: Path, timeout: float = 90) -> dict[str, str]:
        """benchmark -> state, once no job is running (bounded: a broken job must not hang the test)."""
        deadline = time.monotonic() + timeout
        while True:
            rows = {r["benchmark"]: r["state"] for r in self.status(config, cwd)["benchmarks"]}
            if not {"RUNNING", "PENDING"} & set(rows.values()) or time.monotonic() > deadline:
                return rows
            time.sleep(0.5)


@pytest.fixture
def user(tmp_path: Path) -> User:
    return User(tmp_path / "home")


def dirs(tmp_path: Path, *names: str) -> list[Path]:
    made = [tmp_path / n for n in names]
    for d in made:
        d.mkdir(parents=True, exist_ok=True)
    return made


def test_the_state_follows_the_config_not_the_working_directory(tmp_path: Path, user: User) -> None:
    """Item 1: submitted from one directory, the same config is the same submission from any other:
    status finds it, a submit queues nothing again, and a second workspace refuses without new=1."""
    project, elsewhere = dirs(tmp_path, "project", "elsewhere")
    config = local_config(project, {"hello": {"command": "echo hello"}})
    first = user.ok("submit", "config=eval.yaml", cwd=project)
    assert "submitted hello -> local job" in first
    assert user.wait_ended(config, elsewhere) == {"hello": "COMPLETED"}
    again = user.ok("submit", f"config={config}", cwd=elsewhere)
    assert again.startswith("nothing to submit: the benchmark is queued")
    assert not list(elsewhere.iterdir()) and not (project / ".gymbuild").exists()  # no workspace here
    # A relative output_path of a local compute is beside the config, wherever the command ran.
    assert [p.parent for p in (project / "runs").glob("gym-job-*")] == [project / "runs"]

    other = user.run("submit", f"config={config}", f"workspace={tmp_path / 'ws2'}", cwd=elsewhere)
    assert other.rc == 1
    assert "was queued from the workspace" in other.stderr and "new=1" in other.stderr
    fresh = user.ok("submit", f"config={config}", f"workspace={tmp_path / 'ws2'}", "new=1", cwd=elsewhere)
    assert "submitted hello -> local job" in fresh
    assert len(list((project / "runs").glob("gym-job-*"))) == 2


def test_nemo_gyms_own_command_line_works(tmp_path: Path, user: User) -> None:
    """Item 3: `-c/--config`, `--dry-run`, `--resolve-only`, `--json` as `gym eval submit` reads them;
    a positional config; a key without its `=` gets "did you mean"; `run` alone is refused."""
    (cwd,) = dirs(tmp_path, "work")
    config = local_config(tmp_path, {"hello": {"command": "echo hello"}})
    dry = user.ok("submit", "-c", str(config), "--dry-run", cwd=cwd)
    assert dry.startswith("[dry-run] remote run dir: ") and "hello/job.sh" in dry
    assert user.ok("render", str(config), cwd=cwd) == dry  # positional: the same dry run
    resolved = json.loads(user.ok("submit", f"--config={config}", "--resolve-only", "--json", cwd=cwd))
    assert resolved["driver"]["benchmarks"]["hello"]["command"] == "echo hello"
    assert not (tmp_path / "runs").exists()  # neither flag submitted anything

    manifest = json.loads(user.ok("submit", "--config", str(config), "--json", cwd=cwd))  # `| jq` works
    assert [b["benchmark"] for b in manifest["benchmarks"]] == ["hello"]

    missing_eq = user.run("submit", f"config={config}", "compute.here.walltime", "00:10:00", cwd=cwd)
    assert missing_eq.rc == 1 and missing_eq.stdout == ""
    assert missing_eq.stderr.splitlines() == [
        "error: 'compute.here.walltime' is a config key without a value (an override is KEY=VALUE)",
        "    fix: did you mean compute.here.walltime=00:10:00?",
    ]
    unknown = user.run("submit", "--frobnicate", cwd=cwd)
    assert unknown.rc == 1 and unknown.stderr.startswith(
        "error: '--frobnicate' is not an option gymbuild knows"
    )
    run = user.run("run", f"config={config}", cwd=cwd)
    assert run.rc == 1 and "gymbuild submit config=FILE" in run.stderr and run.stdout == ""
    for verb in ("submit", "status", "runs", "list"):  # GNU --help on every verb, doit's commands too
        helped = user.run(verb, "--help", cwd=cwd)
        assert helped.rc == 0 and helped.stdout, verb


def test_a_missing_config_is_no_such_file_and_tilde_is_home(tmp_path: Path, user: User) -> None:
    """Item 3: day-two verbs on a config that is not there say so; `~` is the user's home."""
    (cwd,) = dirs(tmp_path, "work")
    for verb in ("status", "results", "logs", "cancel"):
        done = user.run(verb, "config=nosuch.yaml", cwd=cwd)
        assert done.rc == 1, verb
        assert done.stderr.startswith("error: nosuch.yaml: no such file"), (verb, done.stderr)
    home = tmp_path / "fakehome"
    local_config(home, {"hello": {"command": "echo hello"}})
    env = {**user.env, "HOME": str(home)}
    done = gymbuild("render", "config=~/eval.yaml", cwd=cwd, env=env)
    assert done.rc == 0, done.stderr


def test_runs_is_a_listing_with_each_runs_final_state(tmp_path: Path, user: User) -> None:
    """Item 4: a header; a run whose benchmark failed is FAILED (not "queued, 0 failed"); config=,
    limit= and state= filter; prune removes old index entries."""
    (cwd,) = dirs(tmp_path, "work")
    good = local_config(tmp_path / "a", {"fine": {"command": "echo fine"}}, "good.yaml")
    bad = local_config(tmp_path / "b", {"broken": {"command": "exit 3"}}, "bad.yaml")
    user.ok("submit", f"config={good}", cwd=cwd)
    user.ok("submit", f"config={bad}", cwd=cwd)
    assert user.wait_ended(good, cwd) == {"fine": "COMPLETED"}
    assert user.wait_ended(bad, cwd) == {"broken": "FAILED"}

    listed = user.ok("runs", cwd=cwd).splitlines()
    assert listed[0].split()[:4] == ["GYM_JOB_ID", "SUBMITTED", "WHERE", "STATE"]
    states = {line.split()[0]: line.split()[3] for line in listed[1:]}
    assert sorted(states.values()) == ["COMPLETED", "FAILED"]
    rows = json.loads(user.ok("runs", "json=1", cwd=cwd))
    # newest first (the two may share a second: then either order is newest first)
    assert [r["submitted_at"] for r in rows] == sorted((r["submitted_at"] for r in rows), reverse=True)
    by_config = {Path(r["config"]).name: r for r in rows}
    states = {name: r["state"] for name, r in by_config.items()}
    assert states == {"bad.yaml": "FAILED", "good.yaml": "COMPLETED"}
    assert by_config["bad.yaml"]["benchmarks"] == {"failed": 1}
    only_good = json.loads(user.ok("runs", f"config={good}", "json=1", cwd=cwd))
    assert [Path(r["config"]).name for r in only_good] == ["good.yaml"]
    assert len(json.loads(user.ok("runs", "limit=1", "json=1", cwd=cwd))) == 1
    failed = json.loads(user.ok("runs", "state=failed", "json=1", cwd=cwd))
    assert [r["gym_job_id"] for r in failed] == [by_config["bad.yaml"]["gym_job_id"]]
    assert user.run("runs", "state=sideways", cwd=cwd).stderr.startswith("error: state=sideways")

    assert json.loads(user.ok("runs", "prune=30", "json=1", cwd=cwd)) == {"pruned": []}  # all are new
    pruned = json.loads(user.ok("runs", "prune=0", "json=1", cwd=cwd))["pruned"]
    assert sorted(pruned) == sorted(r["gym_job_id"] for r in rows)
    assert user.ok("runs", cwd=cwd).startswith("no submissions in ")
    assert all(Path(r["run_dir"]).is_dir() for r in rows)  # run directories are left alone


def test_the_secrets_docs_say_where_host_values_go() -> None:
    """Item 5: no document says a `host:` value is written into job.sh (it is in no run-dir file)."""
    schema = json.loads((REPO / "schemas" / "submit-config.schema.json").read_text())
    texts = {
        "README.md": (REPO / "README.md").read_text(),
        "examples/secrets.yaml": (EXAMPLES / "secrets.yaml").read_text(),
        "schema": json.dumps(schema),
    }
    for name, text in texts.items():
        flat = " ".join(text.split())
        assert "only into the owner-only job.sh" not in flat, name
        assert "written only into the owner-only `job.sh`" not in flat, name
    assert "in no file of the run directory" in " ".join(texts["README.md"].split())


def test_the_readme_example_runs_from_a_venv_used_by_path(tmp_path: Path, user: User) -> None:
    """Item 6: gymbuild run by its path, its venv not on PATH (pipx does this): the demo's `python3`
    is the Python gymbuild runs on, so the example completes."""
    (cwd,) = dirs(tmp_path, "work")
    shutil.copy(EXAMPLES / "local.yaml", cwd / "local.yaml")
    exe = Path(gymbuild_argv()[0])
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != exe.parent)
    env = {**user.env, "PATH": path}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(
        [str(exe), "submit", "config=local.yaml"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert user.wait_ended(cwd / "local.yaml", cwd) == {"demo": "COMPLETED"}


def test_json_on_every_verb_and_no_float_noise(tmp_path: Path, user: User) -> None:
    """Item 7: cancel, logs and a resubmit with nothing to do answer json=1 with JSON; metrics come
    out as written, without binary noise."""
    (cwd,) = dirs(tmp_path, "work")
    metrics = '{"accuracy": 0.5760000000000001, "third": 0.3333333333333333}'
    config = local_config(
        tmp_path, {"m": {"command": f"echo '{metrics}' > \"$NEMO_GYM_BENCH_DIR/artifacts/metrics.json\""}}
    )
    user.ok("submit", f"config={config}", cwd=cwd)
    assert user.wait_ended(config, cwd) == {"m": "COMPLETED"}
    for verb in ("cancel", "resubmit", "logs", "status", "results", "runs", "resolve", "render", "submit"):
        done = user.run(verb, f"config={config}", "json=1", cwd=cwd)
        assert done.rc == 0, (verb, done.stderr)
        json.loads(done.stdout)  # JSON, and only JSON, on stdout
    results = json.loads(user.ok("results", f"config={config}", "json=1", cwd=cwd))
    assert results["runs"][0]["benchmarks"][0]["agents"][0]["key_metrics"] == {
        "accuracy": 0.576,
        "third": 0.3333333333333333,
    }
    csv = user.ok("results", f"config={config}", "format=csv", cwd=cwd)
    assert ",0.576," in csv and "0.5760000000000001" not in csv


def test_a_cancelled_benchmark_and_a_sweep_say_how_to_reach_them(tmp_path: Path, user: User) -> None:
    """Item 8: resubmit names the cancelled benchmark and `only=`; after a sweep, results points to
    multirun=1."""
    (cwd,) = dirs(tmp_path, "work")
    config = local_config(tmp_path, {"slow": {"command": "sleep 60"}})
    user.ok("submit", f"config={config}", cwd=cwd)
    assert "cancelled 1 job(s)" in user.ok("cancel", f"config={config}", cwd=cwd)
    assert user.wait_ended(config, cwd) == {"slow": "CANCELLED"}
    said = user.ok("resubmit", f"config={config}", cwd=cwd)
    assert "cancelled: slow" in said and "only=slow" in said

    swept = local_config(tmp_path / "s", {"hello": {"command": "echo ${_v}"}}, "sweep.yaml")
    tree = yaml.safe_load(swept.read_text())
    swept.write_text(yaml.safe_dump({**tree, "_v": "a"}))
    user.ok("submit", f"config={swept}", "multirun=1", "_v=a,b", cwd=cwd)
    done = user.run("results", f"config={swept}", cwd=cwd)
    assert done.rc == 1 and "multirun=1" in done.stderr


def test_errors_are_gymbuilds_own(tmp_path: Path, user: User) -> None:
    """Item 9: an empty file, Hydra's grammar and a list for a mapping: one message naming the
    override and the fix, never ANTLR's or OmegaConf's words."""
    (cwd,) = dirs(tmp_path, "work")
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n")
    done = user.run("render", f"config={empty}", cwd=cwd)
    assert done.rc == 1 and "the file is empty" in done.stderr and "NoneType" not in done.stderr
    config = local_config(tmp_path, {"hello": {"command": "echo hello"}})
    for override, says in (
        ("driver.x=[1,", "is not in Hydra's override grammar"),
        ("driver.benchmarks.hello.command=a b)", "is not in Hydra's override grammar"),
        ("compute=[a,b]", "`compute` is a mapping or a config group"),
    ):
        done = user.run("render", f"config={config}", override, cwd=cwd)
        assert done.rc == 1 and says in done.stderr, done.stderr
        for raw in ("LexerNoViableAlt", "no viable alternative", "Cannot merge", "Config group override"):
            assert raw not in done.stderr


def test_sigint_to_watch_outside_a_terminal_is_one_line(tmp_path: Path, user: User) -> None:
    """Item 9: SIGINT to `status watch=1` run from a script: one line on stderr, no traceback, and
    the job goes on."""
    (cwd,) = dirs(tmp_path, "work")
    config = local_config(tmp_path, {"slow": {"command": "sleep 60"}})
    user.ok("submit", f"config={config}", cwd=cwd)
    watching = subprocess.Popen(
        gymbuild_argv("status", f"config={config}", "watch=1"),
        cwd=cwd,
        env={**user.env, "GYMBUILD_WATCH_INTERVALS": "0.2"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        # Started when its first look is done: the job's status file shows it was asked about.
        while watching.poll() is None and time.monotonic() < deadline:
            if user.status(config, cwd)["benchmarks"][0]["state"] == "RUNNING":
                break
            time.sleep(0.2)
        watching.send_signal(signal.SIGINT)
        _, err = watching.communicate(timeout=60)
    finally:
        if watching.poll() is None:
            watching.kill()
        user.run("cancel", f"config={config}", cwd=cwd)
    assert watching.returncode in (1, 130), err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2, err
