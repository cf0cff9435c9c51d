"""Whatever a user writes, the config layer answers with problems, never with a crash.

Three generators: arbitrary YAML-able trees, valid example configs with random damage (which reaches
the cross-field rules with half-valid input, where a crash is likeliest), and arbitrary YAML text
through the whole loader.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gymbuild.config import load_config
from gymbuild.config.validate import validate
from gymbuild.errors import Problem, UserError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

FIELD_NAMES = [
    "services", "compute", "driver", "job", "otel", "type", "vllm", "vllm_pd", "ray", "command", "slurm",
    "local", "container", "model", "port", "node_pool", "node_pools", "placement", "env", "mounts",
    "prefill", "decode", "benchmarks", "run", "resumable", "policy_model", "walltime", "gpus_per_node",
    "nodes", "partition", "health_check", "timeout_seconds", "enabled", "endpoint", "gym_install",
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(FIELD_NAMES),
    st.sampled_from(["lit:x", "host:1X", "runtime:", "/a:/b:ro", "04:00:00", "1-2", "a b"]),
)
keys = st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=8), st.integers(0, 3))
trees = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=5)),
    max_leaves=40,
)


def _assert_answers(tree: Any) -> None:
    result = validate(tree)
    assert all(isinstance(p, Problem) and isinstance(p.path, str) and p.message for p in result.problems)
    assert all(isinstance(w, str) for w in result.warnings)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(keys, trees, max_size=6))
def test_validate_never_raises_on_arbitrary_trees(tree: dict[Any, Any]) -> None:
    _assert_answers(tree)


def _example_trees() -> list[dict[str, Any]]:
    env = {"OTEL_TOKEN": "t", "HF_TOKEN": "h", "WANDB_API_KEY": "w"}
    return [yaml.safe_load(yaml.safe_dump(_thaw(load_config(p, environ=env).tree))) for p in EXAMPLES]


def _thaw(value: Any) -> Any:
    from gymbuild.config.model import thaw

    return thaw(value)


VALID = _example_trees()


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


@st.composite
def damaged(draw: st.DrawFn) -> dict[str, Any]:
    """A valid config with a few values replaced, keys removed or unknown keys added."""
    tree = copy.deepcopy(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(tree) if p]
        path = draw(st.sampled_from(paths))
        parent: Any = tree
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(trees)
        elif action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(keys)] = draw(trees)
    return tree


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_validate_never_raises_on_damaged_configs(tree: dict[str, Any]) -> None:
    _assert_answers(tree)


yaml_texts = st.one_of(
    st.text(max_size=200),
    trees.map(lambda t: yaml.safe_dump(t, allow_unicode=True)),
    damaged().map(lambda t: yaml.safe_dump(t, sort_keys=False)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(yaml_texts)
def test_load_config_raises_only_user_errors(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "submit.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            load_config(path, environ={})
        except UserError as err:
            assert str(err)


text_trees = st.recursive(
    st.one_of(scalars, st.text()),  # any unicode: control characters, emoji, line breaks
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)
YAML_OPTIONS = {"sort_keys": False, "allow_unicode": True, "width": 1000}


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), text_trees, max_size=6))
def test_resolved_yaml_from_libyaml_reads_back_as_the_same_config(tree: dict[str, Any]) -> None:
    """`resolve` and the run dir's resolved-config.yaml are written by libyaml when it is there. Its
    spelling of an odd key can differ from PyYAML's (an empty key is written `? ''`), so what must
    hold for any tree is that it reads back as the same data; for real configs the text is the same
    (test_examples_resolve_to_the_same_text_with_libyaml)."""
    from gymbuild.config.output import DUMPER

    assert DUMPER is yaml.CSafeDumper
    assert yaml.safe_load(yaml.dump(tree, Dumper=DUMPER, **YAML_OPTIONS)) == tree


@pytest.mark.parametrize("path", [*EXAMPLES, ROOT / "examples" / "composed" / "submit.yaml"], ids=str)
def test_examples_resolve_to_the_same_text_with_libyaml(path: Path) -> None:
    from gymbuild.config.load import escape_interpolations
    from gymbuild.config.model import thaw
    from gymbuild.config.output import dump_tree

    env = {"HF_TOKEN": "x", "WANDB_API_KEY": "y", "GYM_OTEL_TOKEN": "z", "OTEL_TOKEN": "t"}
    tree = load_config(path, environ=env).tree
    pure = yaml.dump(escape_interpolations(thaw(tree)), Dumper=yaml.SafeDumper, **YAML_OPTIONS)
    assert dump_tree(tree) == pure
