"""The code digest that tells a staged job.sh is stale after gymbuild changes (RunPlans.stage_digest).

A staged script is reused while its inputs and this digest are unchanged, so a gymbuild upgrade that
changes how scripts are made must change the digest, or `submit` would queue a script the new
gymbuild would not write. The digest reads whole package directories; these tests check that
everything rendering really uses lies in them, and that an edit anywhere in them is seen.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gymbuild.config import load_config
from gymbuild.config.model import thaw
from gymbuild.resources import code_digest, script_code_digest, script_code_files

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gymbuild"
EXAMPLES = [*sorted((ROOT / "examples").glob("*.yaml")), ROOT / "examples" / "composed" / "submit.yaml"]
FAKE_ENV = {"OTEL_TOKEN": "otel-token-value", "HF_TOKEN": "hf-token-value", "WANDB_API_KEY": "wandb-value"}

# In a fresh interpreter: build each resolved tree's Config, plan and render every benchmark, then
# name the file of every gymbuild module that got imported and every template the renderer can load.
_RENDER_ALL = """
import json, sys
from gymbuild.config.build import build_config
from gymbuild.executors.base import planning_traits
from gymbuild.plan import plan_submission
from gymbuild.render import _ENV, mask_secrets, render_job

for tree in json.load(sys.stdin):
    config = build_config(tree)
    plans = plan_submission(config, planning_traits(config), run_dir="/runs/r", gym_job_id="gym-job-r")
    for plan in plans.values():
        render_job(plan, mask_secrets(plan.secrets))
modules = [m.__file__ for name, m in sorted(sys.modules.items()) if name.split(".")[0] == "gymbuild"]
# (not Python's byte-code of the embedded gateway, which an install or a test run may leave there)
names = [name for name in _ENV.loader.list_templates() if "__pycache__" not in name]
templates = [_ENV.loader.get_source(_ENV, name)[1] for name in names]
print(json.dumps({"modules": modules, "templates": templates}))
"""


def test_every_module_and_template_rendering_uses_is_in_the_digest() -> None:
    trees = [thaw(load_config(path, environ=FAKE_ENV).tree) for path in EXAMPLES]
    done = subprocess.run(
        [sys.executable, "-c", _RENDER_ALL],
        input=json.dumps(trees),
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    used = json.loads(done.stdout)
    covered = {path.resolve() for path in script_code_files()}
    modules = [Path(f).resolve() for f in used["modules"]]
    assert any(path.name == "job.sh.j2" for path in map(Path, used["templates"]))
    assert len(modules) > 10  # the renderer, the planner's modules, the config model, ...
    missing = [
        str(p.relative_to(PACKAGE))
        for p in [*modules, *map(Path, used["templates"])]
        if p.resolve() not in covered
    ]
    assert not missing, f"the script-code digest does not read {missing} (gymbuild/resources.py)"


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    """A copy of gymbuild's package directory, to edit without touching the checkout."""
    copy = tmp_path / "gymbuild"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    assert code_digest(copy) == script_code_digest()  # the same files give the same digest anywhere
    return copy


@pytest.mark.parametrize(
    "edited",
    [
        "render/templates/job.sh.j2",
        "executors/slurm/templates/parts.sh.j2",
        "executors/local/__init__.py",  # its traits shape the plan
        "render/templates/step.sh.j2",
        "render/templates/ray_serve_gateway.py",  # carried inside the job script
        "plan/services.py",
        "config/model.py",
        "shell.py",
    ],
)
def test_editing_script_code_changes_the_digest(package_copy: Path, edited: str) -> None:
    before = code_digest(package_copy)
    path = package_copy / edited
    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert code_digest(package_copy) != before


def test_a_new_module_or_template_is_covered_without_a_list_to_update(package_copy: Path) -> None:
    before = code_digest(package_copy)
    (package_copy / "plan" / "brand_new.py").write_text('"""new"""\n', encoding="utf-8")
    after_module = code_digest(package_copy)
    (package_copy / "render" / "templates" / "extra.sh.j2").write_text("echo\n", encoding="utf-8")
    assert len({before, after_module, code_digest(package_copy)}) == 3


def test_code_that_makes_no_script_leaves_staged_scripts_current(package_copy: Path) -> None:
    """Changing the CLI or the day-two verbs does not restage every unqueued benchmark."""
    before = code_digest(package_copy)
    for name in ("cli/main.py", "state/records.py", "state/workspace.py"):
        path = package_copy / name
        path.write_text(path.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    assert code_digest(package_copy) == before
