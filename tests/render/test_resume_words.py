"""The driver's `gym eval run` words when a benchmark is queued again in its own directory: the
rendered driver script run by real bash, with a `gym` on PATH that writes down the words it got.

A first job finds no rollouts and runs gym's own command line (no resume_from_cache: gym's default
for a job that is not resumable); a resubmitted one finds the rollouts and materialized inputs its
earlier job wrote and adds +resume_from_cache=True; a resumable benchmark has it always, once (Hydra
refuses a key given twice). The real gym's resume is tested in tests/e2e/test_resume_real_driver.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from script_runs import step_lib

from gymbuild.config import load_config
from gymbuild.executors.base import planning_traits
from gymbuild.plan import plan_submission
from gymbuild.render import _ENV

ROOT = Path(__file__).resolve().parents[2]
FAKE_ENV = {"OTEL_TOKEN": "t", "HF_TOKEN": "h", "WANDB_API_KEY": "w"}


def gym_words(tmp_path: Path, example: str, bench: str, *, rollouts: int | None) -> list[str]:
    """The words the driver script of `bench` hands `gym`, its bench dir holding `rollouts` lines of
    rollouts (and as many materialized inputs plus one) or, with None, nothing."""
    run_dir = tmp_path / "run"
    config = load_config(ROOT / "examples" / f"{example}.yaml", environ=FAKE_ENV).config
    plans = plan_submission(config, planning_traits(config), run_dir=str(run_dir), gym_job_id="gym-job-x")
    artifacts = run_dir / bench / "artifacts"
    artifacts.mkdir(parents=True)
    if rollouts is not None:
        (artifacts / "rollouts.jsonl").write_text("{}\n" * rollouts)
        (artifacts / "rollouts_materialized_inputs.jsonl").write_text("{}\n" * (rollouts + 1))
    script = _ENV.get_template("driver.sh.j2").module.driver_script(plans[bench].driver)  # type: ignore[attr-defined]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "gym").write_text('#!/bin/bash\nprintf "%s\\n" "$@" >"$GYM_WORDS"\n')
    (bin_dir / "gym").chmod(0o755)
    words = tmp_path / "words"
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "GYM_WORDS": str(words),
        "GYM_POLICY_PORT": "8000",
        "GYM_STEP_LIB": step_lib(),
    }
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return words.read_text().splitlines()


def test_a_first_job_runs_gyms_own_command_line(tmp_path: Path) -> None:
    words = gym_words(tmp_path, "minimal", "gpqa", rollouts=None)
    assert words[:3] == ["eval", "run", f"+output_jsonl_fpath={tmp_path}/run/gpqa/artifacts/rollouts.jsonl"]
    assert not [w for w in words if "resume_from_cache" in w]


def test_a_job_that_finds_its_earlier_rollouts_continues_from_them(tmp_path: Path) -> None:
    words = gym_words(tmp_path, "minimal", "gpqa", rollouts=3)
    assert words[-1] == "+resume_from_cache=True"
    assert [w for w in words if "resume_from_cache" in w] == ["+resume_from_cache=True"]


def test_empty_files_are_no_rollouts_to_continue_from(tmp_path: Path) -> None:
    """A job killed while gym wrote its first line leaves empty files: nothing to resume."""
    assert not [w for w in gym_words(tmp_path, "minimal", "gpqa", rollouts=0) if "resume" in w]


def test_a_resumable_benchmark_asks_for_resume_once(tmp_path: Path) -> None:
    words = gym_words(tmp_path, "resumable", "aime25", rollouts=3)
    assert [w for w in words if "resume_from_cache" in w] == ["+resume_from_cache=True"]
