"""The corpus of broken configs in tests/invalid/: each must fail with the messages its header names.

Each file starts with comment lines that say what to expect:

    # path: services.policy.port          the config path a problem must be reported at
    # expect: expected an integer         a fragment the error message must contain (repeatable)
    # forbid: hf_SECRET                   a fragment it must not contain (a secret, say)
    # override: +_x.y=1                   a Hydra override to pass (repeatable)
    # env: OTEL_TOKEN=x                   the environment the config is loaded with (repeatable)
    # config: no-such.yaml                load this path (relative to tests/invalid/) instead of the file

Every case runs in-process through `load_config`; a sample from each family also runs through the real
command line (`python -m gymbuild.cli.main resolve`), concurrently, to prove exit status 1, an empty stdout
and no traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gymbuild.config import load_config
from gymbuild.errors import ConfigError, printable

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parents[1] / "invalid"


@dataclass
class Case:
    file: Path
    config: Path
    path: str = ""
    expect: list[str] = field(default_factory=list)
    forbid: list[str] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.file.stem


def parse(file: Path) -> Case:
    case = Case(file=file, config=file)
    for line in file.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        key, sep, value = line.lstrip("# ").partition(": ")
        value = value.strip()
        if not sep:
            continue
        if key == "path":
            case.path = value
        elif key == "expect":
            case.expect.append(value)
        elif key == "forbid":
            case.forbid.append(value)
        elif key == "override":
            case.overrides.append(value)
        elif key == "env":
            name, _, text = value.partition("=")
            case.env[name] = text
        elif key == "config":
            case.config = (CORPUS / value).resolve()
    return case


CASES = [parse(f) for f in sorted(CORPUS.glob("*.yaml"))]

# One per family of mistakes: file, YAML, schema, override, interpolation, secrets, each rule group.
# Cases refused only where jobs are queued (README, "Secrets"): the command line runs them as submit.
QUEUING_ONLY = {"host-var-unset"}
# Over the reading limits (gymbuild/config/fastyaml.py `limits`): Hydra's own file source reads these
# without bound (the bomb grows until memory runs out), so only gymbuild's reading is compared on them.
READING_LIMITS = {"yaml-alias-bomb", "yaml-alias-self", "yaml-deep"}

CLI_SAMPLE = {
    "missing-file",
    "directory",
    "bad-yaml",
    "unknown-service-key",
    "wrong-type-port",
    "missing-account",
    "host-var-unset",
    "override-unknown-key",
    "override-scratch",
    "override-new-benchmark-half",
    "bad-interpolation",
    "pools-disagree-partition",
    "gpu-footprint-total",
    "policy-conflict",
    "env-bare-value",
    "walltime-syntax",
    "otel-no-endpoint",
    "mount-relative",
    "yaml-alias-bomb",
    "yaml-deep",
    "yaml-alias-self",
    "name-ansi",
    "walltime-huge",
    "command-shards",
}


def test_corpus_is_large_and_well_formed() -> None:
    assert len(CASES) >= 40
    for case in CASES:
        assert case.expect, f"{case.file.name} has no `# expect:` line"
    assert {c.name for c in CASES} >= CLI_SAMPLE


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_invalid_config_in_process(case: Case) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(case.config, case.overrides, environ=case.env)
    message = str(caught.value)
    assert str(case.config) in message
    for fragment in case.expect:
        assert fragment in message, f"{fragment!r} not in:\n{message}"
    for fragment in case.forbid:
        assert fragment not in message
    if case.path:
        paths = [printable(p.path, lines=False) for p in caught.value.problems]  # as the user reads it
        assert case.path in paths, f"no problem at {case.path}: {paths}"
    for problem in caught.value.problems:
        assert problem.fix, f"problem without a fix: {problem}"


def _run_cli(case: Case, workdir: Path) -> subprocess.CompletedProcess[str]:
    """The real command line, in a directory of its own (each run opens a workspace there)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GYMBUILD_TEST_")}
    env.update(case.env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    # An unset secret stops only a verb that queues: resolve shows `host:VAR` masked and warns.
    verb = "submit" if case.name in QUEUING_ONLY else "resolve"
    args = [sys.executable, "-m", "gymbuild.cli.main", verb, f"config={case.config}", *case.overrides]
    return subprocess.run(args, cwd=workdir, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def cli_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every sampled case through the CLI at once: the runs are independent, so they overlap."""
    sample = [c for c in CASES if c.name in CLI_SAMPLE]
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {c.name: pool.submit(_run_cli, c, tmp_path_factory.mktemp(c.name)) for c in sample}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("case", [c for c in CASES if c.name in CLI_SAMPLE], ids=lambda c: c.name)
def test_invalid_config_on_the_command_line(
    case: Case, cli_results: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    result = cli_results[case.name]
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert str(case.config) in result.stderr
    if case.path:
        assert f"{case.path}:" in result.stderr
    for fragment in case.expect:
        assert fragment in result.stderr
    for fragment in case.forbid:
        assert fragment not in result.stderr
