"""The commands as a user types them (`gymbuild VERB ...` in a subprocess), on any machine.

What needs a cluster is in the e2e tests; these cover the verbs that run without one: resolve and the
dry run (`render`), the workspace they leave behind, and the errors a user sees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import workspaces_home

ROOT = Path(__file__).resolve().parents[2]
SECRETS = {"HF_TOKEN": "hf-SEKRET-value-1", "WANDB_API_KEY": "wandb-SEKRET-value-2"}


def gymbuild(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the console script's code in a fresh process; the secrets are set only when passed."""
    base = {k: v for k, v in os.environ.items() if k not in SECRETS}
    return subprocess.run(
        [sys.executable, "-m", "gymbuild.cli.main", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_render_prints_each_script_with_secrets_masked_and_queues_nothing(tmp_path):
    done = gymbuild("render", f"config={ROOT / 'examples/secrets.yaml'}", cwd=tmp_path, env=SECRETS)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("[dry-run] remote run dir: /")
    # the script reads HF_TOKEN from its secrets file (issue 19): the dry run shows where, never the value
    assert "__gym_secrets_file=~/.gymbuild-secrets/" in done.stdout
    assert 'HF_TOKEN="${__gym_secret_HF_TOKEN}"' in done.stdout
    for value in SECRETS.values():
        assert value not in done.stdout + done.stderr
    staged = next(workspaces_home().glob("secrets-*/draft/stage"))
    job = next(staged.glob("*/job.sh"))
    assert SECRETS["HF_TOKEN"] not in job.read_text()  # the real script is the one printed ...
    assert job.stat().st_mode & 0o777 == 0o600  # ... and still only its owner can read it
    assert not (staged.parent / "outcomes").exists()  # nothing was queued


def test_the_staged_tree_is_readable_by_the_cluster_whatever_the_umask(tmp_path):
    """A collection job under another account reads the run dir, so staged dirs are 0755 and the
    collector's config 0644 even for a user whose umask is 077; job.sh alone is owner-only."""
    config = f"config={ROOT / 'examples/collector.yaml'}"
    done = subprocess.run(
        [
            "bash",
            "-c",
            'umask 077 && exec "$@"',
            "-",
            sys.executable,
            "-m",
            "gymbuild.cli.main",
            "render",
            config,
        ],
        cwd=tmp_path,
        env={**os.environ, "OTEL_TOKEN": "otel-token"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    staged = next(workspaces_home().glob("collector-*/draft/stage"))
    modes = {p.relative_to(staged).as_posix(): p.stat().st_mode & 0o777 for p in staged.rglob("*")}
    benches = [rel for rel in modes if "/" not in rel and (staged / rel).is_dir()]
    assert benches and all(modes[b] == 0o755 and modes[f"{b}/job.sh"] == 0o600 for b in benches), modes
    assert all(modes[f"{b}/otel"] == 0o755 and modes[f"{b}/otel/collector.yaml"] == 0o644 for b in benches)


def test_render_is_incremental_and_keeps_its_run_dir(tmp_path):
    config = f"config={ROOT / 'examples/minimal.yaml'}"
    first = gymbuild("render", config, cwd=tmp_path)
    job = next(workspaces_home().glob("minimal-*/draft/stage/gpqa/job.sh"))
    rendered_at = job.stat().st_mtime_ns
    second = gymbuild("render", config, cwd=tmp_path)
    assert first.stdout == second.stdout  # same submission id, same scripts
    assert job.stat().st_mtime_ns == rendered_at  # unchanged plan: not rendered again
    changed = gymbuild("render", config, "compute.cluster.walltime=00:30:00", cwd=tmp_path)
    assert "#SBATCH --time=00:30:00" in changed.stdout
    assert "--time=00:30:00" in job.read_text()


def test_render_rewrites_exactly_the_scripts_whose_inputs_changed(tmp_path):
    """A benchmark's own entry changes its script alone; a shared value changes every script. A secret
    is in no script: each queue writes the shell's current value to the secrets file (issue 19)."""
    config = f"config={ROOT / 'examples/resumable.yaml'}"

    def render(*args: str, env: dict[str, str] | None = None) -> dict[str, int]:
        done = gymbuild("render", config, *args, cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        stage = next(workspaces_home().glob("resumable-*/draft/stage"))
        return {b: (stage / b / "job.sh").stat().st_mtime_ns for b in ("aime25", "livecodebench")}

    first = render()
    assert render() == first
    one = render("driver.benchmarks.aime25.run.num_repeats=8")
    assert one["aime25"] != first["aime25"] and one["livecodebench"] == first["livecodebench"]
    shared = render("driver.benchmarks.aime25.run.num_repeats=8", "compute.cluster.walltime=01:00:00")
    assert all(shared[b] != one[b] for b in shared)

    secret = f"config={ROOT / 'examples/secrets.yaml'}"
    gymbuild("render", secret, cwd=tmp_path, env=SECRETS)
    job = next(workspaces_home().glob("secrets-*/draft/stage/ifeval/job.sh"))
    assert SECRETS["HF_TOKEN"] not in job.read_text() and "__gym_secret_HF_TOKEN" in job.read_text()
    gymbuild("render", secret, cwd=tmp_path, env={**SECRETS, "HF_TOKEN": "hf-rotated"})
    assert "hf-rotated" not in job.read_text() and SECRETS["HF_TOKEN"] not in job.read_text()


def test_render_json_is_one_object(tmp_path):
    done = gymbuild("render", f"config={ROOT / 'examples/minimal.yaml'}", "json=1", cwd=tmp_path)
    payload = json.loads(done.stdout)
    assert payload["run_dir"].startswith("/var/tmp/gymbuild-runs/gym-job-")
    assert "#SBATCH --job-name=gym-gpqa" in payload["benchmarks"]["gpqa"]["job.sh"]


def test_a_dry_run_of_a_fresh_submission_keeps_its_draft_and_starts_nothing(tmp_path):
    """Nothing submitted yet: render and render new=1 show the same provisional run dir (a second
    dry run renders nothing again), and neither makes a submission (the submit settles its id)."""
    config = f"config={ROOT / 'examples/minimal.yaml'}"
    first = json.loads(gymbuild("render", config, "json=1", cwd=tmp_path).stdout)["run_dir"]
    fresh = json.loads(gymbuild("render", config, "json=1", "new=1", cwd=tmp_path).stdout)["run_dir"]
    assert first == fresh
    assert not list(workspaces_home().glob("minimal-*/submission*"))


def test_resolve_output_is_a_config_that_resolves_to_itself(tmp_path):
    first = gymbuild("resolve", f"config={ROOT / 'examples/secrets.yaml'}", cwd=tmp_path, env=SECRETS)
    assert first.returncode == 0, first.stderr
    assert "host:HF_TOKEN" in first.stdout and SECRETS["HF_TOKEN"] not in first.stdout
    (tmp_path / "again.yaml").write_text(first.stdout)
    second = gymbuild("resolve", "config=again.yaml", cwd=tmp_path, env=SECRETS)
    assert second.stdout == first.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["config=missing.yaml"], "no such config file"),
        (["config=examples/minimal.yaml", "only=nope"], "only= names benchmark(s) the config does not have"),
        (["config=examples/minimal.yaml", "driver.nope=1"], "driver.nope"),
    ],
)
def test_user_errors_are_one_message_without_traceback(args, fragment, tmp_path):
    for verb in ("resolve", "render", "submit"):
        done = gymbuild(verb, *[a.replace("examples/", f"{ROOT}/examples/") for a in args], cwd=tmp_path)
        assert done.returncode == 1, (verb, done.stdout, done.stderr)
        assert fragment in done.stderr
        assert "Traceback" not in done.stderr
        assert done.stdout == ""


def test_an_unset_host_variable_stops_submit_but_not_the_dry_runs(tmp_path):
    """Issue 40, item 10: examples/secrets.yaml can be resolved and dry-run without its secrets (what
    they print masks them anyway), each naming the unset variable on stderr; submit still refuses it
    with the config's one message, and queues nothing."""
    config = f"config={ROOT / 'examples/secrets.yaml'}"
    resolved = gymbuild("resolve", config, cwd=tmp_path)
    assert resolved.returncode == 0, resolved.stderr
    assert "HF_TOKEN: host:HF_TOKEN" in resolved.stdout
    rendered = gymbuild("render", config, cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    assert rendered.stdout.startswith("[dry-run] remote run dir: /")
    assert 'HF_TOKEN="${__gym_secret_HF_TOKEN}"' in rendered.stdout
    assert "unset>" not in rendered.stdout  # the stand-in value is no more shown than a real one
    for done in (resolved, rendered):
        warned = [line for line in done.stderr.splitlines() if "host:HF_TOKEN is not set" in line]
        assert warned and all(
            line.startswith("warning: ") and "`submit` refuses it" in line for line in warned
        )
    submitted = gymbuild("submit", config, cwd=tmp_path)
    assert submitted.returncode == 1 and submitted.stdout == ""
    assert "host:HF_TOKEN is not set in this shell" in submitted.stderr
    assert "export HF_TOKEN=" in submitted.stderr and "Traceback" not in submitted.stderr
    assert not list(workspaces_home().glob("*/outcomes/*"))  # nothing queued


def test_doit_in_the_project_root_runs_the_same_tasks(tmp_path):
    done = subprocess.run(
        ["doit", "resolve", "config=examples/minimal.yaml", f"workspace={tmp_path}", "json=1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["driver"]["policy_model"] == "policy"


def test_doit_commands_still_work(tmp_path):
    listed = gymbuild("list", cwd=tmp_path)
    assert listed.returncode == 0
    for verb in ("resolve", "render", "submit", "status", "resubmit", "logs", "cancel", "runs"):
        assert f"\n{verb} " in "\n" + listed.stdout
