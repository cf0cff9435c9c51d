"""The parity corpus: configs NeMo Gym 0.7.0 accepts (corpus/accept/) and refuses (corpus/refuse/).

Shared by the acceptance suite and by the behaviour suites, which run every config both tools
accept. Each file starts with comment lines:

    # <what the config is>
    # covers: <NeMo Gym model or validator>, ...   what it exercises (the acceptance suite checks
                                                   every model and validator is covered)
    # path: <config path>                          (refused ones) where gymbuild must report it

Every config is loaded in the environment ENV (and only there), by both tools.
differences.yaml lists, with the reason, every config on which the two verdicts differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
DIFFERENCES = HERE / "differences.yaml"

# What the corpus configs read through ${oc.env:...}, host: and the collector's token_env. Names the
# corpus expects to be unset start with GYM_CORPUS_UNSET.
ENV = {
    "OTEL_TOKEN": "corpus-otel-token",
    "GYM_CORPUS_PORT": "8001",
    "GYM_CORPUS_TIMEOUT": "900",
    "GYM_CORPUS_HOST": "10.0.0.1",
    "GYM_CORPUS_HF_TOKEN": "hf_corpus_secret",
}


@dataclass(frozen=True)
class Case:
    path: Path
    about: str
    covers: tuple[str, ...] = ()
    where: str | None = None  # for a refused config: the config path gymbuild must name
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def nemo_gym_accepts(self) -> bool:
        """The directory is NeMo Gym's verdict (the acceptance suite checks it against NeMo Gym)."""
        return self.path.parent.name == "accept"


def _parse(path: Path) -> Case:
    about, covers, where = "", (), None
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("# ").rstrip()
        key, sep, value = text.partition(": ")
        if sep and key == "covers":
            covers = tuple(c.strip() for c in value.split(",") if c.strip())
        elif sep and key == "path":
            where = value.strip()
        elif not about:
            about = text
    return Case(path, about, covers, where)


@cache
def cases() -> tuple[Case, ...]:
    return tuple(_parse(p) for p in sorted(CORPUS.glob("*/*.yaml")))


def accepted() -> list[Case]:
    """The configs NeMo Gym accepts."""
    return [c for c in cases() if c.nemo_gym_accepts]


def refused() -> list[Case]:
    return [c for c in cases() if not c.nemo_gym_accepts]


@cache
def differences() -> dict[str, Any]:
    """differences.yaml: {"acceptance": {name: {nemo_gym, gymbuild, kind, reason}}, "fields": [...]}."""
    return yaml.safe_load(DIFFERENCES.read_text(encoding="utf-8"))


def accepted_by_both() -> list[Case]:
    """The configs both NeMo Gym and gymbuild accept: what the behaviour suites compare."""
    listed = differences()["acceptance"]
    return [c for c in accepted() if c.name not in listed]
