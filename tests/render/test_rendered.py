"""Rendered jobs: golden files, bash -n and shellcheck, quoting, secrets, and real runs of job.sh.

Golden files: `tests/golden/<example>/<bench>/job.sh` (+ `otel/collector.yaml`), the masked rendering
(what `render` prints) of every example with a fixed run dir and gym_job_id, compared byte for byte.
After an intended change, rewrite them with `GYMBUILD_UPDATE_GOLDEN=1 pytest tests/render/test_rendered.py`
and review the diff like code.

The run tests execute a rendered job.sh with real bash on this machine, with stand-ins for `srun`
(runs the step's command locally), `vllm` (records argv and environment, then serves HTTP) and `gym`
(records argv and environment): quoting, secret passing, runtime ports, health checks and the
monitor loop are checked by what actually ran, not by matching strings.
"""

from __future__ import annotations

import copy
import os
import shlex
import socket
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import shellcheck
from hydra.core.override_parser.overrides_parser import OverridesParser
from hypothesis import given, settings
from hypothesis import strategies as st

from gymbuild.config import load_config
from gymbuild.config.build import build_config
from gymbuild.config.model import Config
from gymbuild.config.validate import validate
from gymbuild.executors.base import planning_traits
from gymbuild.plan import plan_benchmark, plan_submission
from gymbuild.render import _ENV, dry_run_chunks, mask_secrets, render_job, secret_values, sh
from gymbuild.shell import quote
from tests.script_runs import run_job_script, stage_secrets

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parents[1] / "golden"
RUN_DIR = "/runs/gym-job-20260101T000000Z-abcdef"
JOB_ID = "gym-job-20260101T000000Z-abcdef"
FAKE_ENV = {"OTEL_TOKEN": "otel-token-value", "HF_TOKEN": "hf-token-value", "WANDB_API_KEY": "wandb-value"}
EXAMPLES = [*sorted((ROOT / "examples").glob("*.yaml")), ROOT / "examples" / "composed" / "submit.yaml"]
NASTY = 'it\'s "q" $(touch CANARY) `touch CANARY` ; a  b\nline2 \\ end $HOME ${HOME}'


def example_name(path: Path) -> str:
    return "composed" if path.parent.name == "composed" else path.stem


def rendered_examples() -> list[tuple[str, str, dict[str, str]]]:
    """(example, bench, {relative path: masked text}) for every example's every benchmark."""
    out = []
    for path in EXAMPLES:
        resolved = load_config(path, environ=FAKE_ENV)
        plans = plan_submission(
            resolved.config, planning_traits(resolved.config), run_dir=RUN_DIR, gym_job_id=JOB_ID
        )
        for bench, plan in plans.items():
            job = render_job(plan, mask_secrets(plan.secrets))
            out.append((example_name(path), bench, {k: f.text for k, f in job.files.items()}))
    return out


RENDERED = rendered_examples()
IDS = [f"{e}/{b}" for e, b, _ in RENDERED]
RENDERED_BY_ID = {f"{e}/{b}": files for e, b, files in RENDERED}


def config(t: dict[str, Any]) -> Config:
    checked = validate(copy.deepcopy(t))
    assert not checked.problems, [p.render() for p in checked.problems]
    return build_config(checked.tree)


# --- golden files, bash -n, shellcheck -----------------------------------------------------------------


@pytest.mark.parametrize(("example", "bench", "files"), RENDERED, ids=IDS)
def test_golden(example: str, bench: str, files: dict[str, str]) -> None:
    for rel, text in files.items():
        golden = GOLDEN / example / bench / rel
        if os.environ.get("GYMBUILD_UPDATE_GOLDEN") == "1":
            # CI proves the goldens; rewriting them there would pass whatever was rendered.
            assert os.environ.get("CI") != "true", "GYMBUILD_UPDATE_GOLDEN=1 is refused in CI"
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_text(text, encoding="utf-8")
        assert golden.is_file(), f"no golden file {golden}; run with GYMBUILD_UPDATE_GOLDEN=1"
        assert text == golden.read_text(encoding="utf-8"), f"{golden} differs"


def test_rendering_in_another_order_gives_the_same_files() -> None:
    """Parts a submission's jobs share are rendered once per process (render.once); what one config
    left behind must never reach another's job: every example again, in reverse, against the above."""
    for path in reversed(EXAMPLES):
        resolved = load_config(path, environ=FAKE_ENV)
        for bench, p in reversed(
            plan_submission(
                resolved.config, planning_traits(resolved.config), run_dir=RUN_DIR, gym_job_id=JOB_ID
            ).items()
        ):
            files = {k: f.text for k, f in render_job(p, mask_secrets(p.secrets)).files.items()}
            assert files == RENDERED_BY_ID[f"{example_name(path)}/{bench}"]


def test_parts_rendered_once_keep_value_types_apart() -> None:
    """A health check's attempts of 5 and 5.0 are equal in Python but render differently; a part
    rendered once for one must not be reused for the other."""
    t = _run_tree(18000)
    p = plan_submission(config(t), planning_traits(config(t)), run_dir="/r", gym_job_id="j")["runb"]
    step = p.services[0]
    assert step.health is not None
    texts = []
    for attempts in (5, 5.0, 5):
        other = replace(p, services=(replace(step, health=replace(step.health, attempts=attempts)),))
        texts.append(render_job(other, mask_secrets(other.secrets)).files["job.sh"].text)
    assert texts[0] == texts[2] != texts[1]
    assert " 5.0 " in texts[1] and " 5.0 " not in texts[0]


def test_every_example_has_golden_files() -> None:
    assert {e for e, _, _ in RENDERED} >= {"minimal", "collector", "vllm-pd", "ray", "resumable", "secrets"}


@pytest.mark.parametrize(("example", "bench", "files"), RENDERED, ids=IDS)
def test_bash_n_and_shellcheck(example: str, bench: str, files: dict[str, str], tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text(files["job.sh"])
    subprocess.run(["bash", "-n", str(script)], check=True)
    result = subprocess.run([shellcheck(), "--shell=bash", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("path", EXAMPLES, ids=[example_name(p) for p in EXAMPLES])
def test_step_scripts_pass_shellcheck(path: Path, tmp_path: Path) -> None:
    """The scripts inside `bash -c` are quoted in job.sh, so shellcheck sees them only here."""
    shellcheck()
    resolved = load_config(path, environ=FAKE_ENV)
    for plan in plan_submission(
        resolved.config, planning_traits(resolved.config), run_dir=RUN_DIR, gym_job_id=JOB_ID
    ).values():
        scripts = [_ENV.get_template("step.sh.j2").module.service_script(s) for s in plan.services]
        scripts.append(_ENV.get_template("driver.sh.j2").module.driver_script(plan.driver))
        for i, text in enumerate(scripts):
            script = tmp_path / f"step{i}.sh"
            script.write_text("#!/bin/bash\n" + text)
            subprocess.run(["bash", "-n", str(script)], check=True)
            # SC2154: GYM_* and SLURM_* come from the step's environment (exported by job.sh / srun).
            result = subprocess.run(
                ["shellcheck", "--exclude=SC2154", str(script)], capture_output=True, text=True
            )
            assert result.returncode == 0, result.stdout + text


# --- quoting -------------------------------------------------------------------------------------------


@given(st.text() | st.text(alphabet="abZ09_@%+=:,./-'\" $\n"))
@settings(max_examples=500, deadline=None)
def test_quote_leaves_bare_exactly_the_words_shlex_leaves_bare(value: str) -> None:
    """shell.quote returns safe words without calling shlex; the words and their quoting must be the
    ones shlex.quote gives (which the bash round trip below checks), for any text."""
    assert quote(value) == shlex.quote(value)
    assert sh(value) == sh((value,)) == shlex.quote(value)


@pytest.mark.parametrize("value", [NASTY, "", "-n", "a'b", "\\", "\t\n", "ünï ¢ødé", "*?[a]~"])
def test_sh_filter_reaches_bash_byte_exact(value: str, tmp_path: Path) -> None:
    out = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {sh(value)} {sh(('pre-', value, '-post'))}"],
        cwd=tmp_path,
        capture_output=True,
        check=True,
    ).stdout
    assert out.split(b"\0")[:2] == [value.encode(), f"pre-{value}-post".encode()]
    assert not (tmp_path / "CANARY").exists()


def test_directive_values_with_spaces_are_grouped_for_sbatch() -> None:
    t = _run_tree(19500)
    t["compute"]["c"]["extra_args"] = {"comment": "a b ' $(x) ;`y`"}
    plan = plan_benchmark(config(t), planning_traits(config(t)), "runb", run_dir="/r", gym_job_id="j")
    text = render_job(plan, {"SECRET_TOKEN": "s"}).files["job.sh"].text
    assert '#SBATCH --comment="a b \' $(x) ;`y`"\n' in text


def test_directive_numbers_are_written_as_they_read() -> None:
    """sbatch refuses `--cpus-per-task=16.0`: an integer stays an integer, a fraction a fraction."""
    t = _run_tree(19500)
    t["compute"]["c"]["extra_args"] = {"cpus-per-task": 16, "mem-per-gpu": 1.5}
    plan = plan_benchmark(config(t), planning_traits(config(t)), "runb", run_dir="/r", gym_job_id="j")
    text = render_job(plan, {"SECRET_TOKEN": "s"}).files["job.sh"].text
    assert "#SBATCH --cpus-per-task=16\n" in text
    assert "#SBATCH --mem-per-gpu=1.5\n" in text


# --- secrets -------------------------------------------------------------------------------------------


def test_masked_rendering_prints_no_secret() -> None:
    for path in EXAMPLES:
        resolved = load_config(path, environ=FAKE_ENV)
        plans = plan_submission(
            resolved.config, planning_traits(resolved.config), run_dir=RUN_DIR, gym_job_id=JOB_ID
        )
        jobs = {b: render_job(p, mask_secrets(p.secrets)) for b, p in plans.items()}
        text = "".join(dry_run_chunks(RUN_DIR, jobs))
        assert text.startswith(f"[dry-run] remote run dir: {RUN_DIR}\n")
        for value in FAKE_ENV.values():
            assert value not in text


def test_secret_values_are_not_in_job_sh_but_in_its_secrets_file() -> None:
    """Slurm keeps every batch script: job.sh names its secrets file, reads it into unexported
    variables, and hands each value to its step by a prefix assignment (issue 19)."""
    resolved = load_config(ROOT / "examples" / "secrets.yaml", environ=FAKE_ENV)
    for plan in plan_submission(
        resolved.config, planning_traits(resolved.config), run_dir=RUN_DIR, gym_job_id=JOB_ID
    ).values():
        text = render_job(plan, resolved.secrets).files["job.sh"].text
        assert f"__gym_secrets_file=~/.gymbuild-secrets/{JOB_ID}/{plan.bench}\n" in text
        wanted = {f"__gym_secret_{n}": FAKE_ENV[n] for n in plan.secrets}
        assert secret_values(plan, resolved.secrets) == wanted
        for name in plan.secrets:
            assert FAKE_ENV[name] not in text
            assert f"    __gym_secret_{name}) __gym_secret_{name}=$__gym_value ;;" in text
            assert f'{name}="${{__gym_secret_{name}}}" \\' in text


def test_collector_token_is_never_written() -> None:
    resolved = load_config(ROOT / "examples" / "collector.yaml", environ=FAKE_ENV)
    for plan in plan_submission(
        resolved.config, planning_traits(resolved.config), run_dir=RUN_DIR, gym_job_id=JOB_ID
    ).values():
        job = render_job(plan, resolved.secrets)
        assert job.files["job.sh"].mode == 0o600 and job.files["otel/collector.yaml"].mode == 0o644
        for f in job.files.values():
            assert FAKE_ENV["OTEL_TOKEN"] not in f.text
        assert "Bearer ${env:OTEL_TOKEN}" in job.files["otel/collector.yaml"].text


# --- real runs of job.sh -------------------------------------------------------------------------------

FAKE_SRUN = r"""#!/bin/bash
# Records its argv, then runs the step's command (from `bash` on) locally.
printf '%s\0' "$@" >"$(mktemp "$GYM_BENCH_DIR/calls/srun.XXXXXX")"
while [[ $# -gt 0 && $1 != bash ]]; do shift; done
exec "$@"
"""
FAKE_VLLM = r"""#!/bin/bash
printf '%s\0' "$@" >"$GYM_BENCH_DIR/calls/vllm.argv"
env -0 >"$GYM_BENCH_DIR/calls/vllm.env"
prev= port=
for arg; do [[ $prev == --port ]] && port=$arg; prev=$arg; done
if [[ -n ${FAKE_VLLM_EXIT:-} ]]; then exit 3; fi
if [[ -n ${FAKE_VLLM_DIE_AFTER:-} ]]; then (sleep "$FAKE_VLLM_DIE_AFTER"; kill $$) & fi
exec python3 -m http.server --bind 127.0.0.1 --directory "$GYM_BENCH_DIR/calls/www" "$port"
"""
FAKE_GYM = r"""#!/bin/bash
printf '%s\0' "$@" >"$GYM_BENCH_DIR/calls/gym-$2.argv"
env -0 >"$GYM_BENCH_DIR/calls/gym-$2.env"
sleep "${FAKE_GYM_SLEEP:-0}"
"""


def _run_tree(port: int) -> dict[str, Any]:
    return {
        "services": {
            "policy": {
                "type": "vllm",
                "container": "img",
                "model": "m",
                "port": port,
                "env": {
                    "NASTY_LIT": f"lit:{NASTY}",
                    "SECRET_TOKEN": "host:SECRET_TOKEN",
                    "R": "runtime:HOME",
                },
                "mounts": ['/data/it\'s "q" $(x) ;a b:/dst'],
                "pre_command": f"export PRE_SEEN={shlex.quote(NASTY)}",
                "extra_args": f"--nasty {shlex.quote(NASTY)} --plain x",
                "health_check": {"timeout_seconds": 60},
            },
            "judge": {
                "type": "command",
                "container": "img",
                "port": port + 50,
                "command": (
                    f'printf %s {shlex.quote(NASTY)} >"$GYM_BENCH_DIR/calls/command.out"\n'
                    'exec python3 -m http.server --bind 127.0.0.1 "$GYM_PORT"'
                ),
                "health_check": {"path": "/", "timeout_seconds": 60},
            },
        },
        "compute": {"c": {"type": "slurm", "account": "acct"}},
        "driver": {
            "policy_model": "policy",
            "env": {"DRIVER_LIT": f"lit:{NASTY}"},
            "benchmarks": {
                "runb": {"run": {"nasty": NASTY, "n": {"list": [1, "two words", None, True]}}},
                "cmdb": {"command": f'printf %s {shlex.quote(NASTY)} >"$NEMO_GYM_BENCH_DIR/calls/bench.out"'},
            },
        },
        "job": {"output_path": "/runs"},
        "otel": {"enabled": False},
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1] // 100 * 100 % 40000 + 20000


def _run_job(tmp_path: Path, bench: str, port: int, **fake: str) -> tuple[subprocess.CompletedProcess, Path]:
    cfg = config(_run_tree(port))
    plan = plan_benchmark(
        cfg, planning_traits(cfg), bench, run_dir=str(tmp_path / "run"), gym_job_id="gym-job-t"
    )
    secrets = {"SECRET_TOKEN": NASTY + "-secret"}
    job = render_job(plan, secrets)
    stage_secrets(tmp_path / "home", plan, secrets)
    bench_dir = Path(plan.bench_dir)
    (bench_dir / "calls" / "www").mkdir(parents=True)
    (bench_dir / "calls" / "www" / "health").write_text("ok")
    script = bench_dir / "job.sh"
    script.write_text(job.files["job.sh"].text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("srun", FAKE_SRUN), ("vllm", FAKE_VLLM), ("gym", FAKE_GYM)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "4242", **fake}
    env["HOME"] = str(tmp_path / "home")  # where the job finds its secrets file
    return run_job_script(script, cwd=tmp_path, env=env), bench_dir


def _nul(path: Path) -> list[str]:
    return path.read_bytes().decode().split("\0")[:-1]


def _env_of(path: Path) -> dict[str, str]:
    return dict(item.split("=", 1) for item in _nul(path))


def test_job_runs_with_values_byte_exact_and_ports_settled_at_run_time(tmp_path: Path) -> None:
    port = _free_port()
    with socket.socket() as taken:  # another job already serves on the policy's configured port
        taken.bind(("", port))
        taken.listen()
        result, bench = _run_job(tmp_path, "runb", port)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not list(tmp_path.rglob("CANARY")) and not Path("CANARY").exists()
    settled = int((bench / ".gym_ports" / "policy-4242").read_text())
    assert settled == port + 1  # the next free port, not the judge's (port + 50)

    argv = _nul(bench / "calls" / "vllm.argv")
    assert argv[argv.index("--port") + 1] == str(settled)
    assert argv[argv.index("--nasty") + 1] == NASTY and argv[-2:] == ["--plain", "x"]
    env = _env_of(bench / "calls" / "vllm.env")
    assert env["NASTY_LIT"] == NASTY and env["PRE_SEEN"] == NASTY
    assert env["SECRET_TOKEN"] == NASTY + "-secret"
    assert env["R"] == str(tmp_path / "home")  # runtime:HOME: the job's HOME
    assert (bench / "calls" / "command.out").read_text() == NASTY

    gym = _nul(bench / "calls" / "gym-run.argv")
    parsed = {
        o.key_or_group: o.value()
        for o in OverridesParser.create().parse_overrides([a for a in gym if "=" in a])
    }
    assert parsed["nasty"] == NASTY
    assert parsed["n.list"] == [1, "two words", None, True]
    assert parsed["policy_base_url"] == f"http://localhost:{settled}/v1"
    assert _env_of(bench / "calls" / "gym-run.env")["DRIVER_LIT"] == NASTY

    srun_calls = [_nul(p) for p in sorted((bench / "calls").glob("srun.*"))]
    assert any(
        f'--container-mounts=/data/it\'s "q" $(x) ;a b:/dst,{bench}/.gym_ports:{bench}/.gym_ports' in c
        for c in srun_calls
    )
    for call in srun_calls:  # a secret is never on a command line
        assert not any("-secret" in arg for arg in call)
    assert "gym: service policy is healthy" in result.stdout


def test_command_benchmark_gets_its_script_and_environment(tmp_path: Path) -> None:
    result, bench = _run_job(tmp_path, "cmdb", _free_port())
    assert result.returncode == 0, result.stdout + result.stderr
    assert (bench / "calls" / "bench.out").read_text() == NASTY
    assert not list(tmp_path.rglob("CANARY"))


def test_a_service_that_dies_during_the_run_stops_the_driver_and_fails_the_job(tmp_path: Path) -> None:
    start = time.monotonic()
    result, _ = _run_job(tmp_path, "runb", _free_port(), FAKE_VLLM_DIE_AFTER="15", FAKE_GYM_SLEEP="100")
    assert result.returncode == 1
    assert "service step policy exited while the driver was running" in result.stderr
    assert time.monotonic() - start < 60


def test_a_service_that_exits_before_it_is_healthy_fails_the_job(tmp_path: Path) -> None:
    result, bench = _run_job(tmp_path, "runb", _free_port(), FAKE_VLLM_EXIT="1")
    assert result.returncode == 1
    assert "service policy exited before it was ready" in result.stderr
    assert not (bench / "calls" / "gym-run.argv").exists()


# --- scale ---------------------------------------------------------------------------------------------


def test_render_1000_benchmarks(record_property: Any) -> None:
    """Measured, not asserted (DESIGN: performance is judged by bench/ scripts against a floor)."""
    t = _run_tree(18000)
    t["driver"]["benchmarks"] = {
        f"b{i:04d}": {"run": {"i": i, "config_paths": ["x.yaml"]}} for i in range(1000)
    }
    cfg = config(t)
    start = time.perf_counter()
    plans = plan_submission(cfg, planning_traits(cfg), run_dir=RUN_DIR, gym_job_id=JOB_ID)
    planned = time.perf_counter()
    jobs = {b: render_job(p, mask_secrets(p.secrets)) for b, p in plans.items()}
    done = time.perf_counter()
    assert len(jobs) == 1000
    record_property("plan_seconds", round(planned - start, 3))
    record_property("render_seconds", round(done - planned, 3))
    print(f"\n1000 benchmarks: plan {planned - start:.3f} s, render {done - planned:.3f} s")
