"""The queue pipeline's error policy and crash recovery, in this process: no gymbuild subprocess, no
cluster, a second or two a test.

`gymbuild submit` runs through main.main here, with the real Slurm executor (its attempt protocol,
queue log, revocation and lookup by name) in a real bash session on this machine. Only the scheduler
is a stand-in: `sbatch`, `squeue` and `sacct` are bash functions exported into that session, keeping
their queue in a file, so what was queued can be counted. A crash is the executor's `send` (the
Executor protocol's member) raising once some attempts are in the shell's input, as a killed submit
leaves them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import slurm_config, write_config

from gymbuild.cli import main
from gymbuild.executors import slurm

# sbatch --parsable SCRIPT: queues it (an id from a counter, `id|name|workdir` in jobs), or refuses a
# job name listed in `refused` as sbatch refuses a bad request. A job name listed in `lose-answer` is
# queued, then the session's shell dies ($$ is it, even in a command substitution) before answering.
_SBATCH = r"""() {
  local script=${@: -1} d=$GYM_TEST_SCHED name dir id
  name=$(sed -n 's/^#SBATCH --job-name=//p' "$script"); dir=$(sed -n 's/^#SBATCH --chdir=//p' "$script")
  if grep -qxF -- "$name" "$d/refused" 2>/dev/null; then
    echo "sbatch: error: Batch job submission failed: Invalid qos specification" >&2; return 1
  fi
  id=$(( $(cat "$d/next" 2>/dev/null || echo 4000) + 1 )); echo "$id" > "$d/next"
  printf '%s|%s|%s\n' "$id" "$name" "$dir" >> "$d/jobs"
  if grep -qxF -- "$name" "$d/lose-answer" 2>/dev/null; then kill -KILL $$; fi
  echo "$id"
}"""
# squeue -h -t all -o '%i|%Z' -n NAME: the jobs of that name (ended ones too) with their work dirs.
_SQUEUE = r"""() {
  local name=; while [ $# -gt 0 ]; do [ "$1" = -n ] && name=$2; shift; done
  awk -F'|' -v n="$name" '$2 == n { print $1 "|" $3 }' "$GYM_TEST_SCHED/jobs" 2>/dev/null; true
}"""

BENCHES = ("alpha", "beta", "gamma", "delta")


class Crash(BaseException):
    """What a kill is to the submit: nothing after it runs (not an Exception doit would report)."""


def scheduler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in scheduler's directory, its sbatch/squeue/sacct exported into the session's bash."""
    sched = tmp_path / "sched"
    sched.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("GYM_TEST_SCHED", str(sched))
    for name, body in (("sbatch", _SBATCH), ("squeue", _SQUEUE), ("sacct", "() { true; }")):
        monkeypatch.setenv(f"BASH_FUNC_{name}%%", body)
    return sched


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    sched = scheduler(tmp_path, monkeypatch)
    run = {"config_paths": ["benchmarks/gpqa/config.yaml"]}
    config = slurm_config(tmp_path / "runs", {b: {"run": run} for b in BENCHES}, hostname=None)
    return {"config": write_config(tmp_path, config), "sched": sched, "runs": tmp_path / "runs"}


def _submit(user: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main.main(["submit", f"config={user['config']}"])
    out, err = capsys.readouterr()
    return rc, out, err


def _queued(user: dict[str, Any]) -> dict[str, list[str]]:
    """Job name -> the ids the scheduler holds for it."""
    jobs = user["sched"] / "jobs"
    found: dict[str, list[str]] = {}
    for line in jobs.read_text().splitlines() if jobs.exists() else []:
        job_id, name, _ = line.split("|")
        found.setdefault(name, []).append(job_id)
    return found


def _record(user: dict[str, Any]) -> dict[str, str | None]:
    import json

    (manifest,) = user["runs"].glob("gym-job-*/gym-job.json")
    return {j["benchmark"]: j["job_id"] for j in json.loads(manifest.read_text())["benchmarks"]}


def killed_after_two_sends(user: dict[str, Any], capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A submit killed once two attempts are in the shell's input, unanswered; the rest never sent."""
    real_send = slurm.send
    sent: list[str] = []

    def send_then_crash(conn: Any, script: str, environment: Any, attempt: str) -> Any:
        if len(sent) == 2:
            raise Crash
        sent.append(script)
        return real_send(conn, script, environment, attempt)

    monkeypatch.setattr(slurm, "send", send_then_crash)
    with pytest.raises(Crash):
        _submit(user, capsys)
    capsys.readouterr()
    monkeypatch.setattr(slurm, "send", real_send)


def test_a_refused_benchmark_fails_alone_and_the_next_submit_queues_only_it(user, capsys) -> None:
    (user["sched"] / "refused").write_text("gym-beta\n")
    rc, out, err = _submit(user, capsys)
    assert rc == 1 and "Traceback" not in err
    assert "failed beta: sbatch: error: Batch job submission failed: Invalid qos specification" in out
    for bench in ("alpha", "gamma", "delta"):
        assert f"submitted {bench} -> Slurm job" in out
    queued = _queued(user)
    assert sorted(queued) == ["gym-alpha", "gym-delta", "gym-gamma"]
    assert _record(user)["beta"] is None

    (user["sched"] / "refused").write_text("")
    rc, out, err = _submit(user, capsys)
    assert rc == 0, err
    assert "submitted beta -> Slurm job" in out and "submitted alpha" not in out
    after = _queued(user)
    assert {name: len(ids) for name, ids in after.items()} == {f"gym-{b}": 1 for b in BENCHES}
    assert _record(user) == {b: after[f"gym-{b}"][0] for b in BENCHES}


def test_a_submit_killed_mid_queue_leaves_each_benchmark_queued_exactly_once(
    user, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    killed_after_two_sends(user, capsys, monkeypatch)
    # The killed run's shell ran what it had been sent; their answers were never read.
    assert sorted(_queued(user)) == ["gym-alpha", "gym-beta"]
    assert not list(user["runs"].glob("gym-job-*/gym-job.json"))

    rc, _, err = _submit(user, capsys)
    assert rc == 0 and "Traceback" not in err, err
    queued = _queued(user)
    # The two sent attempts ran in the killed run's shell and are adopted, not queued again; the
    # others were revoked and queued afresh.
    assert {name: len(ids) for name, ids in queued.items()} == {f"gym-{b}": 1 for b in BENCHES}
    assert _record(user) == {b: queued[f"gym-{b}"][0] for b in BENCHES}


def test_an_answer_lost_with_the_shell_is_found_by_name_and_not_queued_again(user, capsys) -> None:
    (user["sched"] / "lose-answer").write_text("gym-beta\n")
    rc, _, err = _submit(user, capsys)
    assert rc == 1 and "Traceback" not in err
    assert "error: lost the connection to this machine" in err
    assert "gym-beta" in _queued(user)  # queued, though no answer came back

    (user["sched"] / "lose-answer").write_text("")
    rc, _, err = _submit(user, capsys)
    assert rc == 0 and "Traceback" not in err, err
    queued = _queued(user)
    assert {name: len(ids) for name, ids in queued.items()} == {f"gym-{b}": 1 for b in BENCHES}
    assert _record(user) == {b: queued[f"gym-{b}"][0] for b in BENCHES}
