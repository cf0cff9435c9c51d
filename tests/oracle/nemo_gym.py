"""Where the oracle lives: nemo-gym 0.7.0 in its own Python 3.13 venv (tests/oracle/install).

Tests reach NeMo Gym only through subprocesses of that venv's interpreter: it is a different Python
from the one running pytest, and never a dependency of gymbuild itself.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

VERSION = "0.7.0"
NOT_INSTALLED = "nemo-gym 0.7.0 is not installed: run tests/oracle/install"


@dataclass(frozen=True)
class NemoGym:
    """The installed oracle."""

    venv: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def gym(self) -> Path:
        return self.venv / "bin" / "gym"

    @property
    def package_dir(self) -> Path:
        """nemo_gym/ inside the venv's site-packages (api.py, orchestration/executors/...)."""
        out = subprocess.run(
            [str(self.python), "-c", "import nemo_gym, os; print(os.path.dirname(nemo_gym.__file__))"],
            capture_output=True,
            text=True,
            check=True,
        )
        return Path(out.stdout.strip())

    def run_python(
        self, code: str, *args: str, timeout: float = 120, **kwargs
    ) -> subprocess.CompletedProcess:
        """Run `code` with the oracle's interpreter; text output captured."""
        return subprocess.run(
            [str(self.python), "-c", code, *args], capture_output=True, text=True, timeout=timeout, **kwargs
        )


def venv_path() -> Path:
    return Path(os.environ.get("GYMBUILD_NEMO_GYM_VENV", "/opt/nemo-gym-0.7.0"))


def find() -> tuple[NemoGym | None, str]:
    """The oracle, or None and why it is unusable."""
    venv = venv_path()
    python = venv / "bin" / "python"
    if not python.is_file():
        return None, f"{NOT_INSTALLED} (no {python})"
    probe = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('nemo-gym'))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    version = probe.stdout.strip()
    if probe.returncode != 0 or version != VERSION:
        return None, f"{NOT_INSTALLED} ({venv} has nemo-gym {version or 'missing'})"
    return NemoGym(venv), ""
