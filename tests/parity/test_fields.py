"""Field parity with NeMo Gym 0.7.0: every field of its config models, probed through both tools.

NeMo Gym's models are introspected inside its own venv (oracle_fields.py: each model's fields with
annotation, default, constraints and validators, and what pydantic's lax mode makes of typical
values). Then every field is probed: left out (its default), and set to values a YAML file or an
`${oc.env:...}` can give it ("8001", 8001.0, "yes", null, ...). Each probe is one small config that
NeMo Gym validates with SubmitConfig (one process for all of them, oracle_verdicts.py) and gymbuild
with its schema and rules. Both must accept the same probes and read the same value, except where
gymbuild extends the format (x-gymbuild-extensions in the schema, "gymbuild's extensions" in
docs/compatibility.md) or refuses a value whose job cannot run (differences.yaml, `fields`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from gymbuild.config import lax
from gymbuild.config.derived import pd_tier_trees
from gymbuild.config.validate import _known_keys, _resolve_ref, validate
from gymbuild.resources import load_schema
from tests.oracle.nemo_gym import NemoGym
from tests.parity.cases import differences
from tests.parity.conftest import run_oracle_split

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "compatibility.md"
SCHEMA = load_schema("submit-config.schema.json")
OMIT = "<omitted>"

# One config holding every model NeMo Gym's users write, each at a place the probes can reach.
BASE: dict[str, Any] = {
    "services": {
        "policy": {"type": "vllm", "container": "c", "model": "m", "health_check": {}},
        "pd": {
            "type": "vllm_pd",
            "container": "c",
            "model": "m",
            "port": 9000,
            "prefill": {"node_pool": "a"},
            "decode": {"node_pool": "b"},
        },
        "ray": {"type": "ray", "container": "r", "node_pools": ["a"]},
    },
    "compute": {
        "cluster": {
            "type": "slurm",
            "account": "gym",
            "node_pools": {"a": {"partition": "gpu"}, "b": {"partition": "gpu"}},
        }
    },
    "driver": {"gym_install": {"ref": "v0.7.0"}, "benchmarks": {"b": {"resumable": {}}}},
    "job": {"output_path": "/var/tmp/gymbuild-runs"},
    "otel": {"enabled": False, "endpoint": "https://otlp.example.com", "service_name": "s"},
}
# model -> (where it sits in BASE, the same path with map keys as `*`, as the schema's lists write it)
LOCATIONS: dict[str, list[tuple[tuple[str, ...], str]]] = {
    "SubmitConfig": [((), "")],
    "VllmServiceConfig": [
        (("services", "policy"), "services.*"),
        (("services", "pd", "prefill"), "services.*.prefill"),
    ],
    "VllmPDServiceConfig": [(("services", "pd"), "services.*")],
    "RayServiceConfig": [(("services", "ray"), "services.*")],
    "HealthCheckConfig": [(("services", "policy", "health_check"), "services.*.health_check")],
    "SlurmComputeConfig": [(("compute", "cluster"), "compute.*")],
    "NodePool": [(("compute", "cluster", "node_pools", "a"), "compute.*.node_pools.*")],
    "DriverConfig": [(("driver",), "driver")],
    "GymInstallConfig": [(("driver", "gym_install"), "driver.gym_install")],
    "BenchmarkRunConfig": [(("driver", "benchmarks", "b"), "driver.benchmarks.*")],
    "ResumeConfig": [(("driver", "benchmarks", "b", "resumable"), "driver.benchmarks.*.resumable")],
    "JobConfig": [(("job",), "job")],
    "OtelConfig": [(("otel",), "otel")],
}
# Abstract bases (their fields are probed through the subclasses) and the tier NeMo Gym builds itself.
NOT_WRITTEN = {"_StrictModel", "BaseComputeConfig", "BaseServiceConfig", "BaseModelServiceConfig"}
# What NeMo Gym's VllmPDTierConfig adds to a tier: gymbuild's typed tier carries the same attributes.
TIER_ONLY = {"nixl_side_channel_port", "server_per_node", "kv_transfer_config"}
# Set on the vllm_pd service, never on a tier (NeMo Gym refuses them there, as gymbuild's rules do).
TIER_REFUSED = {"nixl_side_channel_port", "server_per_node"}

INTS = [OMIT, 7, "8001", " 12 ", 8001.0, True, 1.5, "abc", None, 0, -1, "1_000", "1e3"]
PROBES: dict[str, list[Any]] = {
    "int": INTS,
    "int | None": INTS,
    "bool": [OMIT, True, False, "yes", "Off", 1, 0, 2, 1.0, "maybe", None],
    "str": [OMIT, "x", "", 5, True, None],
    "str | None": [OMIT, "x", None, 5],
    "dict[str, str]": [OMIT, {}, {"K": "lit:v"}, {"K": 5}, {"K": True}, "x", None],
    "list[str]": [OMIT, [], ["a"], [5], "x", None],
    "dict[str, Any]": [OMIT, {}, {"a": 1, "b": {"c": [1]}}, "x", None],
    "dict[str, dict[str, float]]": [
        OMIT,
        {},
        {"a": {"x": 1}},
        {"a": {"x": "2.5"}},
        {"a": {"x": "many"}},
        {"a": 1},
    ],
    "bool | ResumeConfig": [OMIT, True, False, "yes", 1, 0, {}, None, "x", 2],
}
MODEL_PROBES = [OMIT, None, {}, "x"]  # a field whose type is a model (or a map of models)


def _probes(annotation: str) -> list[Any]:
    if annotation.startswith("Literal["):
        return [OMIT]  # the discriminator: another value is another model
    return PROBES.get(annotation, MODEL_PROBES)


def _set(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    tree = copy.deepcopy(tree)
    node = tree
    for part in path[:-1]:
        node = node[part]
    if value == OMIT:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return tree


def _at(tree: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(tree, Mapping) or part not in tree:
            return None
        tree = tree[part]
    return tree


def _as_nemo_dumps(tree: dict[str, Any]) -> dict[str, Any]:
    """gymbuild's filled tree with what NeMo Gym's model validators settle inside the model (and
    gymbuild in its typed Config) written back: health-check ports, the vllm_pd tiers' inherited
    values, env values resolved. Tiers' `placement` is dropped: NeMo Gym fills it on the tiers it
    deploys, not on the ones its dump shows."""
    tree = copy.deepcopy(tree)

    def vllm(svc: dict[str, Any]) -> None:
        check = svc.get("health_check")
        if check is None:
            svc["health_check"] = {"path": "/health", "port": svc.get("port"), "timeout_seconds": 60}
        elif isinstance(check, dict) and check.get("port") is None:
            check["port"] = svc.get("port")

    def env(unit: dict[str, Any]) -> None:
        if isinstance(unit.get("env"), dict):
            unit["env"] = {
                k: v[4:] if isinstance(v, str) and v.startswith("lit:") else v for k, v in unit["env"].items()
            }

    for svc in (tree.get("services") or {}).values():
        if not isinstance(svc, dict):
            continue
        env(svc)
        if svc.get("type") in ("vllm", "vllm_pd"):
            vllm(svc)
        if svc.get("type") == "vllm_pd" and all(isinstance(svc.get(t), dict) for t in ("prefill", "decode")):
            for name, tier in pd_tier_trees(svc).items():
                vllm(tier)
                env(tier)
                tier.pop("placement", None)
                svc[name] = tier
    if isinstance(tree.get("driver"), dict):
        env(tree["driver"])
    return tree


def _comparable(value: Any) -> Any:
    """A tier's `placement` is left out of the comparison (see _as_nemo_dumps)."""
    if isinstance(value, dict):
        return {
            k: _comparable(v)
            for k, v in value.items()
            if not (k == "placement" and value.get("type") == "vllm" and "node_pool" in value and v is None)
        }
    return value


def _extensions() -> list[dict[str, str]]:
    return SCHEMA["x-gymbuild-extensions"]


def _extension_paths() -> set[str]:
    return {e["path"] for e in _extensions()}


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same type: the probes tell 1 from True and "1" from 1."""
    return a == b and type(a) is type(b)


def _listed(row: dict[str, Any]) -> dict[str, Any] | None:
    """The differences.yaml entry that explains a probe the two tools judge differently, if any."""
    nemo = "accept" if row["nemo_ok"] else "refuse"
    ours = "accept" if row["ours_ok"] else "refuse"
    for entry in differences()["fields"]:
        verdicts = (entry["nemo_gym"], entry["gymbuild"])
        if (
            entry["path"] == row["field"]
            and verdicts == (nemo, ours)
            and any(_same(row["value"], v) for v in entry["values"])
        ):
            return entry
    return None


@pytest.fixture(scope="module")
def probes(nemo_fields: dict[str, Any]) -> list[tuple[str, tuple[str, ...], Any]]:
    """(field as the schema's lists write it, its path in BASE, value) for every field of every model."""
    out = []
    for model, places in LOCATIONS.items():
        for base_path, pattern in places:
            for name, info in nemo_fields["models"][model]["fields"].items():
                if model == "VllmServiceConfig" and pattern.endswith("prefill") and name == "type":
                    continue
                where = f"{pattern}.{name}" if pattern else name
                out += [(where, (*base_path, name), value) for value in _probes(info["annotation"])]
    return out


@pytest.fixture(scope="module")
def verdicts(nemo_gym: NemoGym, probes: list[tuple[str, tuple[str, ...], Any]]) -> list[dict[str, Any]]:
    """Per probe: NeMo Gym's verdict and value, and gymbuild's."""
    trees = [_set(BASE, path, value) for _where, path, value in probes]
    requests = [{"tree": t, "path": list(p)} for t, (_w, p, _v) in zip(trees, probes, strict=True)]
    nemo = run_oracle_split(nemo_gym, "oracle_verdicts.py", "trees", requests)
    rows = []
    for (where, path, value), tree, answer in zip(probes, trees, nemo, strict=True):
        checked = validate(tree)
        ours = None if checked.problems else _at(_as_nemo_dumps(checked.tree), path)
        rows.append(
            {
                "field": where,
                "value": value,
                "nemo_ok": answer["ok"],
                "nemo_value": answer["value"],
                "nemo_error": answer["error"],
                "ours_ok": not checked.problems,
                "ours_value": ours,
                "ours_error": [p.render() for p in checked.problems][:2],
            }
        )
    return rows


def test_every_model_nemo_gym_users_write_is_probed(nemo_fields: dict[str, Any]) -> None:
    models = nemo_fields["models"]
    assert sorted(set(models) - set(LOCATIONS) - NOT_WRITTEN - {"VllmPDTierConfig"}) == []
    # the abstract bases' fields are all probed through a subclass
    for base in NOT_WRITTEN:
        subclasses = [m for m in LOCATIONS if base in models[m]["bases"]]
        assert base == "_StrictModel" or subclasses, base
        for sub in subclasses:
            assert set(models[base]["fields"]) <= set(models[sub]["fields"])
    # the built tier adds exactly what gymbuild's typed tier carries
    tier = set(models["VllmPDTierConfig"]["fields"]) - set(models["VllmServiceConfig"]["fields"])
    assert tier == TIER_ONLY
    from gymbuild.config.model import VllmService

    assert set(VllmService.__dataclass_fields__) >= TIER_ONLY


def _shown(why: str, row: dict[str, Any]) -> str:
    def said(who: str, key: str) -> str:
        return (
            f"{who} reads {row[key + '_value']!r}"
            if row[key + "_ok"]
            else f"{who} refuses: {row[key + '_error']}"
        )

    nemo, ours = said("NeMo Gym", "nemo"), said("gymbuild", "ours")
    return f"{why}: {row['field']} = {row['value']!r}; {nemo}; {ours}"


def test_both_tools_accept_the_same_values_and_read_them_alike(verdicts: list[dict[str, Any]]) -> None:
    extensions = _extension_paths()
    unexplained = []
    for row in verdicts:
        if row["nemo_ok"] and row["ours_ok"]:
            if _comparable(row["ours_value"]) != _comparable(row["nemo_value"]):
                unexplained.append(_shown("read differently", row))
        elif row["nemo_ok"] != row["ours_ok"] and _listed(row) is None:
            if row["ours_ok"] and row["field"] in extensions:
                continue
            unexplained.append(_shown("judged differently, and not listed in differences.yaml", row))
    assert unexplained == []


def test_every_listed_field_difference_still_differs(verdicts: list[dict[str, Any]]) -> None:
    for entry in differences()["fields"]:
        assert entry["reason"] and entry["kind"] in ("cannot-run", "nemo-bug"), entry
        for value in entry["values"]:
            rows = [r for r in verdicts if r["field"] == entry["path"] and _same(r["value"], value)]
            assert rows, f"{entry['path']}: no probe has the value {value!r}"
            assert any(_listed(r) is entry for r in rows), (entry, rows)


def test_defaults_are_nemo_gyms(verdicts: list[dict[str, Any]], nemo_fields: dict[str, Any]) -> None:
    """Every field of every model is probed left out: the probe above compares the defaults both
    tools fill in; here, both give the same verdict, and a required field is required by both."""
    omitted = {r["field"]: r for r in verdicts if r["value"] == OMIT}
    for model, places in LOCATIONS.items():
        for _path, pattern in places:
            for name, info in nemo_fields["models"][model]["fields"].items():
                where = f"{pattern}.{name}" if pattern else name
                if model == "VllmServiceConfig" and pattern.endswith("prefill") and name == "type":
                    continue
                row = omitted[where]
                assert row["ours_ok"] == row["nemo_ok"], row
                inherited = pattern.endswith("prefill") and name in ("container", "model")
                if info["required"] and not inherited:
                    assert not row["ours_ok"], row


def _walk_schema(schema: Any, instance: Any) -> list[Any]:
    """The schema and every subschema that applies to `instance` ($ref, allOf, the chosen if-branch)."""
    out: list[Any] = []
    stack = [schema]
    from gymbuild.config.validate import _plain

    while stack:
        node = stack.pop()
        if not isinstance(node, Mapping):
            continue
        out.append(node)
        if "$ref" in node:
            stack.append(_resolve_ref(node["$ref"]))
        stack.extend(node.get("allOf", []))
        if "if" in node:
            chosen = "then" if _plain().evolve(schema=node["if"]).is_valid(instance) else "else"
            stack.append(node.get(chosen))
    return out


def _schema_at(path: tuple[str, ...]) -> tuple[Any, Any]:
    """(subschema, BASE's instance) at a concrete path of BASE."""
    schema: Any = SCHEMA
    instance: Any = BASE
    for part in path:
        nodes = _walk_schema(schema, instance)
        found = [n["properties"][part] for n in nodes if part in n.get("properties", {})]
        if not found:
            found = [
                n["additionalProperties"] for n in nodes if isinstance(n.get("additionalProperties"), Mapping)
            ]
        schema, instance = found[0], instance[part]
    return schema, instance


def test_gymbuild_has_every_field_and_lists_each_one_it_adds(nemo_fields: dict[str, Any]) -> None:
    extensions = _extension_paths()
    added = set()
    for model, places in LOCATIONS.items():
        nemo = set(nemo_fields["models"][model]["fields"])
        for path, pattern in places:
            schema, instance = _schema_at(path)
            ours = set(_known_keys(schema, instance))
            assert sorted(nemo - ours) == [], model
            if pattern.endswith("prefill"):
                ours -= TIER_REFUSED  # known to the tier's schema only for the rules to refuse them
            added |= {f"{pattern}.{k}" if pattern else k for k in ours - nemo}
    # the discriminators: the types gymbuild adds to NeMo Gym's
    service_types = set(_resolve_ref("#/$defs/service")["properties"]["type"]["enum"])
    compute_types = set(_resolve_ref("#/$defs/compute")["properties"]["type"]["enum"])
    nemo_service = set(
        re.findall(
            r"(\w+)ServiceConfig", nemo_fields["models"]["SubmitConfig"]["fields"]["services"]["annotation"]
        )
    )
    assert nemo_service == {"Vllm", "Ray", "VllmPD"}
    added |= {f"services.*.type={t}" for t in service_types - {"vllm", "ray", "vllm_pd"}}
    added |= {f"compute.*.type={t}" for t in compute_types - {"slurm"}}
    assert sorted(added - extensions) == []
    # and the list names nothing that is not gymbuild's own: value-level extensions (typed
    # extra_args) are fields NeMo Gym has, whose probes only gymbuild accepts
    assert all(e["what"] for e in _extensions())


def test_only_listed_extensions_accept_more(verdicts: list[dict[str, Any]]) -> None:
    """A field in x-gymbuild-extensions that NeMo Gym also has must be one whose values gymbuild widens."""
    widened = {r["field"] for r in verdicts if r["ours_ok"] and not r["nemo_ok"]}
    fields = {r["field"] for r in verdicts}
    stale = [p for p in _extension_paths() if p in fields and p not in widened]
    assert stale == []


def test_lax_scalars_are_read_as_pydantic_reads_them(nemo_fields: dict[str, Any]) -> None:
    kinds = {
        "int": ["integer"],
        "bool": ["boolean"],
        "float": ["number"],
        "str": ["string"],
        "int | None": ["integer", "null"],
        "str | None": ["string", "null"],
        "bool | ResumeConfig": ["boolean", "object"],
    }
    assert set(nemo_fields["lax"]) == set(kinds)
    wrong = []
    for kind, rows in nemo_fields["lax"].items():
        for row in rows:
            value = row["value"]
            if isinstance(value, dict | list):
                continue  # objects are the schema's business, not lax coercion's
            got = lax.coerce(kinds[kind], value)
            ok = any(lax._is(t, got) for t in kinds[kind])
            if ok != row["ok"] or (ok and (got != row["result"] or type(got) is not type(row["result"]))):
                wrong.append((kind, value, row, got))
    assert wrong == []


def _docs_extensions() -> set[str]:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("## gymbuild's extensions\n")
    end = text.find("\n## ", start + 1)
    return set(re.findall(r"^- `([^`]+)`", text[start:end], re.MULTILINE))


def test_the_schema_and_the_docs_list_the_same_extensions() -> None:
    assert _docs_extensions() == _extension_paths()
