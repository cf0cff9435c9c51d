"""What the parity suites share: one oracle process per question, and the corpus environment."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.oracle.nemo_gym import NemoGym
from tests.parity.cases import ENV, cases

HERE = Path(__file__).resolve().parent


def corpus_environ() -> dict[str, str]:
    """The process environment the corpus is read in: ours plus ENV, minus anything it expects unset."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GYM_CORPUS_")}
    return {**env, **ENV}


def run_oracle(nemo_gym: NemoGym, script: str, request: Any) -> Any:
    """One of the oracle scripts beside this file, run by NeMo Gym's interpreter on a JSON request."""
    done = nemo_gym.run_python(
        (HERE / script).read_text(encoding="utf-8"),
        input=json.dumps(request),
        env=corpus_environ(),
        cwd=str(HERE),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def run_oracle_split(nemo_gym: NemoGym, script: str, key: str, items: list[Any], parts: int = 2) -> list[Any]:
    """run_oracle over `items` in `parts` processes at once (NeMo Gym's Hydra composition is what takes
    the time); the answers in the order of `items`."""
    with ThreadPoolExecutor(parts) as pool:
        futures = [pool.submit(run_oracle, nemo_gym, script, {key: items[i::parts]}) for i in range(parts)]
        answers = [f.result() for f in futures]
    merged: list[Any] = [None] * len(items)
    for i, part in enumerate(answers):
        merged[i::parts] = part
    return merged


_JOBS = ThreadPoolExecutor(2)


@pytest.fixture(scope="session")
def oracle_jobs(nemo_gym: NemoGym) -> dict[str, Future[Any]]:
    """The two oracle questions that depend on nothing, started together at the first need of either:
    NeMo Gym's models (oracle_fields.py) and its verdicts on the corpus (oracle_verdicts.py)."""
    files = [str(c.path) for c in cases()]
    return {
        "fields": _JOBS.submit(run_oracle, nemo_gym, "oracle_fields.py", {}),
        "corpus": _JOBS.submit(run_oracle_split, nemo_gym, "oracle_verdicts.py", "files", files),
    }


@pytest.fixture(scope="session")
def nemo_fields(oracle_jobs: dict[str, Future[Any]]) -> dict[str, Any]:
    """Every model and field of NeMo Gym's api.py, and pydantic's lax verdicts (oracle_fields.py)."""
    return oracle_jobs["fields"].result()


@pytest.fixture(scope="session")
def nemo_corpus_verdicts(oracle_jobs: dict[str, Future[Any]]) -> dict[str, dict[str, Any]]:
    """NeMo Gym's answer on each corpus config, by name (oracle_verdicts.py)."""
    return {Path(a["file"]).stem: a for a in oracle_jobs["corpus"].result()}


@pytest.fixture(scope="session")
def in_corpus_env() -> Iterator[None]:
    """os.environ as the corpus expects it while gymbuild loads configs in-process (${oc.env:...}
    reads the process environment)."""
    with pytest.MonkeyPatch.context() as patch:
        for key in [k for k in os.environ if k.startswith("GYM_CORPUS_")]:
            patch.delenv(key)
        for key, value in ENV.items():
            patch.setenv(key, value)
        yield
