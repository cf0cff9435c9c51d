"""The README's first command, as a new user runs it: a fresh virtual environment, a fresh copy of the
repository, `pip install . && gymbuild submit config=examples/local.yaml`, then `gymbuild status`
until the job has COMPLETED, and the example's result in the run directory.

Slow (a real `pip install` of gymbuild and its dependencies from the configured index) but it is the
promise the README makes, so it runs with the rest of the suite. The command is read from README.md
itself: change the README and this test runs what it now says.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def readme_command() -> str:
    """The first bash block of README.md's "Try it" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Try it", 1)[1]
    match = re.search(r"```bash\n(.*?)\n```", section, re.S)
    assert match, "README.md's Try it section has no bash block"
    return match.group(1).strip()


def fresh_copy(dest: Path) -> Path:
    """The repository as a fresh clone would have it: tracked and new files, nothing git ignores
    (no .gymbuild/ workspace, no gym-runs/, no build output)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        source = ROOT / rel
        if source.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / rel)
    return dest


@pytest.fixture
def shell_env(tmp_path: Path) -> dict[str, str]:
    """An activated new virtual environment, as after `python3 -m venv v && . v/bin/activate`; the
    local index (XDG_CACHE_HOME) in tmp_path so this user's records are its own."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["VIRTUAL_ENV"] = str(env_dir)
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}"
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")  # the workspaces
    # pip's own cache would follow XDG_CACHE_HOME: keep the machine's, as a user's pip would.
    env["PIP_CACHE_DIR"] = subprocess.run(
        [sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True, check=False
    ).stdout.strip() or str(tmp_path / "pip-cache")
    return env


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to list the repository's files")
def test_the_readme_first_command_runs_the_example_to_completion(tmp_path: Path, shell_env: dict) -> None:
    command = readme_command()
    assert command == "pip install . && gymbuild submit config=examples/local.yaml"
    repo = fresh_copy(tmp_path / "gymbuild")

    def sh(line: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", line],
            cwd=repo,
            env=shell_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    submitted = sh(command, timeout=900)
    assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]
    installed = sh('command -v gymbuild && cd / && python3 -c "import gymbuild; print(gymbuild.__file__)"')
    assert installed.stdout.startswith(str(tmp_path / "venv")), installed.stdout  # the new venv's, not ours
    assert "site-packages" in installed.stdout  # a real install, not the source tree

    # "The last lines name the run directory": beside the example config (job.output_path is the
    # relative `gym-runs`), writable by whoever cloned the repository.
    run_dir = Path(re.findall(r"^run dir: (.+)$", submitted.stdout, re.M)[-1])
    assert run_dir.parent == repo / "examples" / "gym-runs"
    assert re.search(r"^submitted demo -> local job \d+$", submitted.stdout, re.M), submitted.stdout

    deadline = time.monotonic() + 120
    while True:
        status = sh("gymbuild status config=examples/local.yaml")
        assert status.returncode == 0, status.stderr
        if "RUNNING" not in status.stdout or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert re.search(r"^demo\s+\d+\s+COMPLETED\s+0:0", status.stdout, re.M), status.stdout

    result = json.loads((run_dir / "demo" / "artifacts" / "result.json").read_text())
    assert result["total"] == result["correct"] == 3
    assert [r["answer"]["echo"]["prompt"] for r in result["results"]] == [
        r["prompt"] for r in result["results"]
    ]
    logs = {p.name.split("-")[0]: p.read_text() for p in (run_dir / "demo" / "logs").glob("*.log")}
    assert "gym: service echo is healthy" in logs["local"]
    assert logs["echo"].count('"POST /echo HTTP/1.1" 200') == 3
