"""Validated configs kept between runs (gymbuild.state.config_cache): a warm run gives exactly the cold run's
config, never a stale one, and keeps no secret and nothing that depends on the environment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gymbuild.config import load_config
from gymbuild.errors import ConfigError
from gymbuild.state.config_cache import ValidatedConfigs

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = ROOT / "examples" / "minimal.yaml"


def config_file(tmp_path: Path, **changes: object) -> Path:
    data = yaml.safe_load(MINIMAL.read_text())
    data["driver"].update(changes)
    path = tmp_path / "submit.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def entries(cache: ValidatedConfigs) -> list[Path]:
    return sorted(cache.directory.glob("*.json")) if cache.directory.exists() else []


def test_a_warm_load_is_the_cold_load_and_skips_validation(tmp_path: Path) -> None:
    cache = ValidatedConfigs(tmp_path / "cache")
    path = config_file(tmp_path)
    cold = load_config(path, environ={}, cache=cache)
    assert len(entries(cache)) == 1
    assert load_config(path, environ={}, cache=cache) == cold
    assert load_config(path, environ={}) == cold  # and both are what no cache gives
    # The point of the cache: a warm load imports neither jsonschema nor omegaconf.
    probe = (
        "import sys; from pathlib import Path; from gymbuild.state.config_cache import ValidatedConfigs; "
        "from gymbuild.config import load_config; "
        f"load_config({str(path)!r}, environ={{}}, cache=ValidatedConfigs(Path({str(cache.directory)!r}))); "
        "print(sorted(m for m in ('jsonschema', 'omegaconf', 'hydra') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_an_edited_file_is_validated_again_never_served_stale(tmp_path: Path) -> None:
    cache = ValidatedConfigs(tmp_path / "cache")
    path = config_file(tmp_path)
    before = load_config(path, environ={}, cache=cache)
    path.write_text(path.read_text().replace("gpqa", "gpqa2"))
    after = load_config(path, environ={}, cache=cache)
    assert list(after.config.driver.benchmarks) == ["gpqa2"] != list(before.config.driver.benchmarks)
    path.write_text(path.read_text() + "bogus: 1\n")
    with pytest.raises(ConfigError):  # now invalid: the error comes back every time, not a cached tree
        load_config(path, environ={}, cache=cache)
    with pytest.raises(ConfigError):
        load_config(path, environ={}, cache=cache)


def test_what_depends_on_the_environment_or_overrides_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ValidatedConfigs(tmp_path / "cache")
    path = tmp_path / "submit.yaml"
    path.write_text(MINIMAL.read_text().replace("Qwen/Qwen3-8B", "${oc.env:GYM_TEST_MODEL}"))
    monkeypatch.setenv("GYM_TEST_MODEL", "one/model")
    one = load_config(path, cache=cache)
    monkeypatch.setenv("GYM_TEST_MODEL", "other/model")
    other = load_config(path, cache=cache)
    assert one.tree["services"]["policy"]["model"] == "one/model"
    assert other.tree["services"]["policy"]["model"] == "other/model"
    plain = config_file(tmp_path)
    overridden = load_config(plain, ["job.output_path=/elsewhere"], environ={}, cache=cache)
    assert overridden.config.job.output_path == "/elsewhere"
    assert entries(cache) == []


def test_no_secret_is_kept_and_a_damaged_entry_is_ignored(tmp_path: Path) -> None:
    cache = ValidatedConfigs(tmp_path / "cache")
    path = config_file(tmp_path, env={"HF_TOKEN": "host:GYM_TEST_SECRET"})
    secret = "s3cr3t-value-0123456789"
    resolved = load_config(path, environ={"GYM_TEST_SECRET": secret}, cache=cache)
    assert dict(resolved.secrets) == {"GYM_TEST_SECRET": secret}
    (entry,) = entries(cache)
    assert secret not in entry.read_text()
    again = load_config(path, environ={"GYM_TEST_SECRET": "another"}, cache=cache)
    assert dict(again.secrets) == {"GYM_TEST_SECRET": "another"}  # read afresh every run
    entry.write_text('{"tree": [')
    assert load_config(path, environ={"GYM_TEST_SECRET": secret}, cache=cache) == resolved
