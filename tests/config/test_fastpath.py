"""A config file Hydra has nothing to do with is read without Hydra, to exactly the same result.

Composition was the largest cost of every command; `load_tree` now skips it for a plain file (no
overrides, no defaults list, no `hydra` node, no header, no resolver only Hydra registers). These tests
hold the fast path to Hydra's answer: every example, every broken config of tests/invalid/, and
generated YAML full of scalars the two YAML loaders and OmegaConf read in surprising ways. They also
check that the fast path is really taken, so the saving cannot quietly disappear.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gymbuild.config.load import load_tree
from gymbuild.config.source import check_source
from tests.config.test_invalid import CASES, Case

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [*sorted((ROOT / "examples").glob("*.yaml")), ROOT / "examples" / "composed" / "submit.yaml"]


def outcome(path: Path, overrides: list[str] | tuple[str, ...] = (), *, hydra: bool) -> str:
    """What loading gives, as text: the tree (repr keeps int/float/str and -0.0 apart) or the error."""
    try:
        return "tree " + repr(load_tree(path, overrides, hydra=hydra))
    except Exception as err:  # the error's type and text are part of what must be equal
        return f"{type(err).__name__}: {err}"


def fast_path_taken(path: Path) -> bool:
    """Whether loading `path` (no overrides) leaves Hydra unimported, in a fresh interpreter."""
    code = (
        "import sys; from pathlib import Path; from gymbuild.config.load import load_tree\n"
        "try:\n    load_tree(Path(sys.argv[1]))\nexcept Exception:\n    pass\n"
        "print('hydra' in sys.modules)"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    result = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    return result.stdout.strip() == "False"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_load_the_same_without_hydra(path: Path) -> None:
    fast = outcome(path, hydra=False)
    assert fast.startswith("tree "), fast
    assert fast == outcome(path, hydra=True)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_invalid_corpus_fails_the_same_without_hydra(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    assert outcome(case.config, case.overrides, hydra=False) == outcome(
        case.config, case.overrides, hydra=True
    )


def test_a_plain_config_never_imports_hydra(tmp_path: Path) -> None:
    interpolated = tmp_path / "interpolated.yaml"
    interpolated.write_text(
        (ROOT / "examples" / "minimal.yaml").read_text(encoding="utf-8")
        + "_scratch:\n  dir: /var/tmp\nextra: ${_scratch.dir}/x ${oc.env:HOME}\n",
        encoding="utf-8",
    )
    assert fast_path_taken(ROOT / "examples" / "minimal.yaml")
    assert fast_path_taken(interpolated)
    # and the check can fail: a defaults list is Hydra's work
    assert not fast_path_taken(ROOT / "examples" / "composed" / "submit.yaml")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("defaults:\n  - _self_\na: 1\n", "a defaults list"),
        ("hydra:\n  job:\n    name: x\na: 1\n", "a hydra node"),
        ("# @package foo\na: 1\n", "a package header"),
        ("a: ${hydra:runtime.cwd}\n", "Hydra's own resolver"),
        ("a: ${now:%Y}\n", "a resolver Hydra registers"),
        ("a: ${oc.decode:${oc.env:X,'1'}}\n", "a resolver that can make new interpolations"),
        ("a: &x {b: 1}\nc: *x\n", "a YAML alias (one object in two places)"),
        ("a: 1\na: 2\n", "a duplicate key only OmegaConf refuses"),
        ("1: a\n", "a key that is not a string"),
        ("a: !!binary aGk=\n", "a value that is not plain data"),
        ('a: "\\udb63"\n', "a lone surrogate, which libyaml refuses"),
    ],
)
def test_files_with_something_for_hydra_still_go_through_it(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text(text, encoding="utf-8")
    assert not fast_path_taken(path), why
    assert outcome(path, hydra=False) == outcome(path, hydra=True)


def test_overrides_go_through_hydra() -> None:
    minimal = ROOT / "examples" / "minimal.yaml"
    overrides = ["++compute.cluster.hostname=gym-login"]
    tree = load_tree(minimal, overrides)
    assert tree["compute"]["cluster"]["hostname"] == "gym-login"
    assert outcome(minimal, overrides, hydra=False) == outcome(minimal, overrides, hydra=True)


def test_a_date_the_safe_loader_refuses_is_still_refused(tmp_path: Path) -> None:
    """OmegaConf's loader reads `2001-13-45` as a string; the file check always refused it."""
    path = tmp_path / "cfg.yaml"
    path.write_text("a: 2001-13-45\n", encoding="utf-8")
    fast = outcome(path, hydra=False)
    assert "a tagged YAML value cannot be read" in fast
    assert fast == outcome(path, hydra=True)


# Scalars as they would be typed, unquoted: YAML 1.1 and OmegaConf disagree with intuition on many.
RAW = [
    "1e3", "1.5e-3", "1e+300", "0x10", "0o17", "017", "1_000", "12:30", "12:30.5", "2001-12-14",
    "yes", "No", "on", "off", "true", "False", "~", "null", "Null", ".inf", "-.inf", ".nan", "-0.0",
    "???", "${x}", "\\${x}", "${_s.v}", "${x} and ${_s.v}", "${oc.env:HOME}",
    "${oc.env:GYMBUILD_SURELY_UNSET_VAR,fallback}", "${oc.env:GYMBUILD_SURELY_UNSET_VAR}", "${nope}",
    "${oc.select:x,1}", "${oc.select:a.nokey,d}", "${a.nokey}", "${oc.dict.keys:a}", "${oc.dict.values:a}",
    "${a[0]}", "${.y}", "${..x}", "${now:%Y}", "${", "a:b", "''", '""', "'${x}'", "'???'", "[]", "{}",
    "123456789012345678901234567890", "-7", "x # comment", "é", "日本",
]  # fmt: skip
KEYS = ["x", "y", "a", "b", "_s", "v", "a.b", "é", "${x}", "???", ""]
# Top-level keys that send the file to Hydra: a defaults list, a hydra node, keys YAML reads as
# float/bool/None/int. At most one per file, so that most generated files take the fast path.
HYDRA_KEYS = ["defaults", "hydra", "1e3", "yes", "~", "12"]


def quoted(text: str) -> str:
    """Any string as a YAML double-quoted scalar: printable characters as they are, the rest escaped
    (`\\UXXXXXXXX` for one code point: YAML, unlike JSON, does not pair surrogate escapes)."""

    def char(c: str) -> str:
        if c in '"\\':
            return "\\" + c
        if c.isprintable() and c not in "\u2028\u2029\ufeff":
            return c
        return f"\\U{ord(c):08x}"

    return '"' + "".join(map(char, text)) + '"'


# Lone surrogates are left out: libyaml refuses them, which sends the whole file to Hydra.
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
scalars = st.one_of(
    st.sampled_from(RAW),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True).map(repr),
    texts.map(quoted),
    st.sampled_from(RAW).map(quoted),
)
keys = st.one_of(st.sampled_from(KEYS), texts)


def key_text(name: str) -> str:
    """A key as YAML: plain when it reads back as this very string (or is meant to be read as YAML),
    quoted otherwise. One spelling per name, so `x` and `"x"` never collide as duplicate keys."""
    return name if name in HYDRA_KEYS or re.fullmatch(r"[A-Za-z_é][\w.é]*", name) else quoted(name)


def trees(depth: int) -> st.SearchStrategy[Any]:
    if depth == 0:
        return scalars
    child = st.one_of(scalars, st.deferred(lambda: trees(depth - 1)))
    return st.one_of(
        st.dictionaries(keys, child, max_size=4),
        st.lists(child, max_size=4),
    )


def emit(node: Any, indent: int = 0) -> Iterator[str]:
    """Block-style YAML for a tree whose leaves are already YAML scalar text."""
    pad = " " * indent
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, (dict, list)) and value:
                yield f"{pad}{key_text(key)}:"
                yield from emit(value, indent + 2)
            else:
                yield f"{pad}{key_text(key)}: {leaf(value)}"
    else:
        for value in node:
            if isinstance(value, (dict, list)) and value:
                yield f"{pad}-"
                yield from emit(value, indent + 2)
            else:
                yield f"{pad}- {leaf(value)}"


def leaf(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example({"_s": "1", "x": "2"}, None, "1")  # scratch space is dropped on both paths
@example({"x": "???", "y": "1"}, None, "1")  # `???` is a missing value, not a string
@example({"a": {"x": "2001-13-45"}}, None, "1")  # a bad date to the safe loader, a string to OmegaConf
@given(
    st.dictionaries(keys, st.one_of(scalars, trees(2)), min_size=1, max_size=5),
    st.sampled_from([None] * 12 + HYDRA_KEYS),
    scalars,
)
def test_generated_plain_yaml_loads_the_same_without_hydra(
    top: dict[str, Any], extra: str | None, value: str
) -> None:
    if extra is not None:
        top = {**top, extra: value}
    text = "\n".join(emit(top)) + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cfg.yaml"
        path.write_text(text, encoding="utf-8")
        assert outcome(path, hydra=False) == outcome(path, hydra=True), text


def test_the_file_check_reads_the_file_once_for_a_plain_config(tmp_path: Path) -> None:
    """check_source hands back the tree it parsed, so loading does not parse the file again."""
    path = tmp_path / "cfg.yaml"
    path.write_text("a: 1e3\nb: '1e3'\nc: [yes, ~]\n", encoding="utf-8")
    assert check_source(path).tree == {"a": 1000.0, "b": "1e3", "c": [True, None]}


def test_a_file_named_like_a_hydra_store_entry_goes_through_hydra(tmp_path: Path) -> None:
    """Hydra's ConfigStore has a root config `_dummy_empty_config_`; it wins over a file so named."""
    path = tmp_path / "_dummy_empty_config_.yaml"
    path.write_text("a: 1\nb: ${a}\n", encoding="utf-8")
    assert outcome(path, hydra=True) == "tree {}"
    assert outcome(path, hydra=False) == "tree {}"
