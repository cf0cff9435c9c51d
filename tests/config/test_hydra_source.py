"""Hydra composes on libyaml (gymbuild/config/hydra_source.py) to exactly Hydra's own result.

Composition reads every file of a config directory; OmegaConf's pure-Python YAML scanner was half of
composing a large config. The libyaml source must change nothing but the time: the composed tree, or
the error's type and every word of its message, is compared with Hydra's own `file://` source on the
examples, the broken configs of tests/invalid/ (with their overrides), and generated YAML in both a
primary file and a group file. The source is also checked to be the one that really reads the files.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gymbuild.config import compose, hydra_source
from tests.config.test_fastpath import EXAMPLES, HYDRA_KEYS, emit, keys, scalars, trees
from tests.config.test_invalid import CASES, READING_LIMITS, Case


def composed(path: Path, overrides: list[str] | tuple[str, ...] = (), *, libyaml: bool) -> str:
    """What composing gives, as text (repr keeps int/float/str apart), or the error's type and text;
    `libyaml=False` composes with Hydra's own file source."""
    switch = contextlib.nullcontext if not libyaml else hydra_source.libyaml
    original = hydra_source.libyaml
    hydra_source.libyaml = switch  # type: ignore[assignment]
    try:
        from omegaconf import OmegaConf

        return "tree " + repr(OmegaConf.to_container(compose.compose(path, overrides)))
    except Exception as err:  # the error's type and text are part of what must be equal
        return f"{type(err).__name__}: {err}"
    finally:
        hydra_source.libyaml = original  # type: ignore[assignment]


def test_the_libyaml_source_reads_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []
    load = hydra_source.LibyamlConfigSource.load_config

    def recording(self: hydra_source.LibyamlConfigSource, config_path: str) -> Any:
        read.append(config_path)
        return load(self, config_path)

    monkeypatch.setattr(hydra_source.LibyamlConfigSource, "load_config", recording)
    (tmp_path / "grp").mkdir()
    (tmp_path / "grp" / "a.yaml").write_text("# @package _global_\nz: ${x}\n", encoding="utf-8")
    main = tmp_path / "main.yaml"
    main.write_text("defaults:\n  - grp: a\n  - _self_\nx: 1e3\n", encoding="utf-8")
    assert composed(main, ["x=5"], libyaml=True) == "tree {'z': '${x}', 'x': 5}"
    assert sorted(read) == ["grp/a", "main"]
    read.clear()
    assert composed(main, ["x=5"], libyaml=False) == "tree {'z': '${x}', 'x': 5}"
    assert read == []  # and the check can fail: Hydra's own source read them this time


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_compose_the_same(path: Path) -> None:
    fast = composed(path, ["++job.output_path=/var/tmp/gym-runs"], libyaml=True)
    assert fast.startswith("tree "), fast
    assert fast == composed(path, ["++job.output_path=/var/tmp/gym-runs"], libyaml=False)


@pytest.mark.parametrize("case", [c for c in CASES if c.name not in READING_LIMITS], ids=lambda c: c.name)
def test_invalid_corpus_fails_the_same(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    assert composed(case.config, case.overrides, libyaml=True) == composed(
        case.config, case.overrides, libyaml=False
    )


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\na: 2\n",  # a duplicate key, which only OmegaConf refuses
        "a: [1\n",  # a parse error: the message must be Hydra's alone, not libyaml's beside it
        "a: !!binary aGk=\n",  # a value that is not plain data
        'a: "\\udb63"\n',  # a lone surrogate, which libyaml refuses
        "- 1\n- 2\n",  # a list where a mapping belongs
        "just text\n",
        "",
    ],
)
def test_awkward_files_compose_the_same(tmp_path: Path, text: str) -> None:
    (tmp_path / "grp").mkdir()
    (tmp_path / "grp" / "a.yaml").write_text(text, encoding="utf-8")
    main = tmp_path / "main.yaml"
    main.write_text("defaults:\n  - grp: a\n  - _self_\nx: 1\n", encoding="utf-8")
    assert composed(main, libyaml=True) == composed(main, libyaml=False)
    main.write_text(text, encoding="utf-8")
    assert composed(main, libyaml=True) == composed(main, libyaml=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(keys, st.one_of(scalars, trees(2)), min_size=1, max_size=5),
    st.dictionaries(keys, st.one_of(scalars, trees(1)), max_size=3),
    st.sampled_from([None, *HYDRA_KEYS[2:]]),
)
def test_generated_yaml_composes_the_same(
    primary: dict[str, Any], group: dict[str, Any], extra: str | None
) -> None:
    if extra is not None:
        primary = {**primary, extra: "1"}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "grp").mkdir()
        (root / "grp" / "a.yaml").write_text("\n".join(emit(group)) + "\n", encoding="utf-8")
        main = root / "main.yaml"
        main.write_text(
            "defaults:\n  - grp: a\n  - _self_\n" + "\n".join(emit(primary)) + "\n", encoding="utf-8"
        )
        assert composed(main, libyaml=True) == composed(main, libyaml=False), main.read_text()
