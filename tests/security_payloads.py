"""The payload matrix of tests/reliability/test_security_payloads.py: every string field of the config schema,
found by walking schemas/submit-config.schema.json (so a field added to the schema is probed the day
it is added), the hostile strings put into each, and what a hostile string may end as.

Apart from the tests so the figures in docs/reliability.md can be counted by the same code
(`python -m tests.security_payloads`).
"""

from __future__ import annotations

import copy
import re
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gymbuild.config.build import build_config
from gymbuild.config.validate import validate
from gymbuild.errors import UserError, printable
from gymbuild.executors.base import planning_traits
from gymbuild.plan import plan_submission
from gymbuild.render import _ENV, mask_secrets, render_job
from gymbuild.resources import load_schema

Path_ = tuple[str, ...]
STAR, ITEM = "*", "[]"  # any key of a mapping, any item of a list
MARK_DIR = "/tmp/gymbuild-security-mark"  # what an injected command would touch (render-only checks)


def payloads(mark: str = MARK_DIR) -> dict[str, str]:
    """The hostile strings, by name; those that run a command touch a file under `mark`."""
    return {
        "subst": f"$(touch {mark}/subst)",
        "backticks": f"`touch {mark}/backticks`",
        "semicolon": f"x; touch {mark}/semicolon",
        "single-quote": f"x'; touch {mark}/single-quote; '",
        "double-quote": f'x"; touch {mark}/double-quote; "',
        "newline": f"x\ntouch {mark}/newline #",
        "backslash": "x\\",
        "percent": "%s%n%x%%",
        "jinja": "{{ 7*7 }}{% if true %}j{% endif %}{# c #}",
        "nul": "a\x00b",
        "control": "\x1b]0;owned\x07\x1b[2J\r\x7f\u202e",
        "lookalike": f"\uff04\uff08touch {mark}/lookalike\uff09 \u0430dmin",  # fullwidth $( ), Cyrillic a
        "megabyte": "A" * (1 << 20),
    }


# Fields that are shell text by definition (DESIGN.md): NeMo Gym evaluates them with bash, and so
# does gymbuild, on the node. A payload there runs by design; only the render is checked for them.
SHELL_TEXT = {
    ("services", STAR, "pre_command"),
    ("services", STAR, "prefill", "pre_command"),
    ("services", STAR, "decode", "pre_command"),
    ("services", STAR, "command"),
    ("services", STAR, "extra_args"),
    ("services", STAR, "prefill", "extra_args"),
    ("services", STAR, "decode", "extra_args"),
    ("driver", "benchmarks", STAR, "command"),
}


# --- the schema walk -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """A string in the config: a value at `path`, or (`key`) the name of an entry of the mapping there."""

    path: Path_
    key: bool = False

    def __str__(self) -> str:
        text = ".".join(self.path)
        return f"{text} (key)" if self.key else text


def _walk(schema: Any, defs: Mapping[str, Any], path: Path_, seen: frozenset[str]) -> Iterator[Field]:
    if not isinstance(schema, Mapping):
        return
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name not in seen:
            yield from _walk(defs[name], defs, path, seen | {name})
    types = schema.get("type")
    if types == "string" or (isinstance(types, list) and "string" in types):
        yield Field(path)
    for name, sub in schema.get("properties", {}).items():
        yield from _walk(sub, defs, (*path, name), seen)
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        yield Field((*path, STAR), key=True)
        yield from _walk(extra, defs, (*path, STAR), seen)
    elif (
        types == "object"
        and "properties" not in schema
        and extra is None
        and schema.get("maxProperties") != 0
    ):
        # free-form (`run:`): any key, any value
        yield Field((*path, STAR), key=True)
        yield Field((*path, STAR))
    if isinstance(schema.get("items"), Mapping):
        yield from _walk(schema["items"], defs, (*path, ITEM), seen)
    for word in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(word, []):
            yield from _walk(sub, defs, path, seen)
    for word in ("then", "else"):
        yield from _walk(schema.get(word), defs, path, seen)


def string_fields() -> list[Field]:
    """Every string of the config schema, values and names, in the schema's order, once each."""
    schema = load_schema("submit-config.schema.json")
    found = _walk(schema, schema["$defs"], (), frozenset())
    return [f for f in dict.fromkeys(found) if f.path[:1] != ("defaults",)]  # Hydra's, consumed first


# --- the configs the payloads go into ------------------------------------------------------------------


def _service_common() -> dict[str, Any]:
    return {
        "container": "img:1",
        "env": {"E": "lit:v"},
        "mounts": ["/data:/data"],
        "pre_command": "true",
    }


def slurm_base() -> dict[str, Any]:
    """A Slurm config with every section and one service of each type, every string field set."""
    pd = {
        "node_pool": "pd",
        "placement": "c",
        "env": {"E": "lit:v"},
        "mounts": ["/d:/d"],
        "pre_command": "true",
        "health_check": {"path": "/health"},
    }
    return {
        "services": {
            "policy": {
                **_service_common(),
                "type": "vllm",
                "model": "org/model",
                "served_model_name": "served",
                "node_pool": "gpu",
                "placement": "c",
                "extra_args": "--seed 1",
                "health_check": {"path": "/health"},
            },
            "pdsvc": {
                "type": "vllm_pd",
                "container": "img:1",
                "model": "org/model",
                "served_model_name": "served",
                "prefill_policy": "cache_aware",
                "decode_policy": "cache_aware",
                "log_level": "error",
                "kv_connector": "NixlConnector",
                "kv_load_failure_policy": "fail",
                "prefill": {**pd, "container": "img:2", "model": "org/m", "served_model_name": "s"},
                "decode": {**pd, "extra_args": "--seed 2"},
            },
            "sandbox": {
                **_service_common(),
                "type": "ray",
                "node_pools": ["ray"],
                "extra_args": "--num-cpus 1",
                "resources": {"ray": {"sandbox": 1}},
            },
            "judge": {
                **_service_common(),
                "type": "command",
                "command": "exec server",
                "port": 9000,
                "health_check": {"path": "/ok"},
            },
        },
        "compute": {
            "c": {
                "type": "slurm",
                "account": "acct",
                "hostname": "login",
                "walltime": "04:00:00",
                "extra_args": {"qos": "normal"},
                "node_pools": {
                    "gpu": {"partition": "gpu", "gpus_per_node": 1, "extra_args": {"constraint": "a"}},
                    "pd": {"partition": "gpu", "gpus_per_node": 1},
                    "ray": {"partition": "gpu", "gpus_per_node": 1},
                },
            }
        },
        "driver": {
            "container": "python:3.12",
            "gym_install": {"repo": "https://example.org/gym", "ref": "v0.7.0"},
            "policy_model": "policy",
            "policy_host": "localhost",
            "policy_model_type": "openai_model",
            "env": {"D": "lit:v"},
            "mounts": ["/m:/m"],
            "benchmarks": {  # one job for both (benchmarks_per_job): the same resumable setting
                "b1": {"prepare": {"p": "v"}, "run": {"k": "v"}, "resumable": {"max_walltime": "01:00:00"}},
                "b2": {"run": {"k": "v"}, "resumable": {"max_walltime": "01:00:00"}},
            },
            "benchmarks_per_job": "all",
            "resumable": {"max_walltime": "01:00:00"},  # gymbuild's switch: the benchmarks set their own
        },
        "job": {"output_path": "/runs"},
        "otel": {
            "enabled": True,
            "binary": "otelcol-contrib",
            "container": "otel:1",
            "endpoint": "https://otel.example.org",
            "service_name": "svc",
            "token_env": "OTEL_TOKEN",
            "component": "gym-vllm",
            "gym_span_groups": "default,verify",
        },
    }


def local_base() -> dict[str, Any]:
    """A local config: the fields a local compute takes, a command service and two benchmarks."""
    return {
        "services": {
            "judge": {
                "type": "command",
                "container": "img:1",
                "command": "exec server",
                "port": 9000,
                "env": {"E": "lit:v"},
                "mounts": ["/data:/data"],
                "pre_command": "true",
                "health_check": {"path": "/ok"},
            }
        },
        "compute": {"here": {"type": "local", "account": "acct", "walltime": "00:10:00"}},
        "driver": {
            "env": {"D": "lit:v"},
            "benchmarks": {"b1": {"run": {"k": "v"}}, "b2": {"command": "true"}},
        },
        "job": {"output_path": "runs"},
        "otel": {"enabled": False},
    }


def placements(tree: Any, field: Field, at: Path_ = ()) -> Iterator[Path_]:
    """The concrete paths of `field` in `tree`: `*` over existing keys, `[]` over existing items; the
    last step need not exist yet. For a key field, the path of the mapping whose keys are probed."""
    steps = field.path[:-1] if field.key else field.path
    yield from _expand(tree, steps, at, leaf_may_be_new=not field.key)


def _expand(node: Any, steps: Path_, at: Path_, *, leaf_may_be_new: bool) -> Iterator[Path_]:
    if not steps:
        yield at
        return
    head, rest = steps[0], steps[1:]
    if head == STAR and isinstance(node, dict):
        for key in node:
            yield from _expand(node[key], rest, (*at, key), leaf_may_be_new=leaf_may_be_new)
    elif head == ITEM and isinstance(node, list):
        for index, item in enumerate(node):
            yield from _expand(item, rest, (*at, str(index)), leaf_may_be_new=leaf_may_be_new)
    elif isinstance(node, dict) and head in node:
        yield from _expand(node[head], rest, (*at, head), leaf_may_be_new=leaf_may_be_new)
    elif isinstance(node, dict) and not rest and leaf_may_be_new and head not in (STAR, ITEM):
        yield (*at, head)


BENIGN = {"benchmarks_per_job": "all", "command": "true"}  # a value each field takes, where "x" is not


def benign(tree: dict[str, Any], field: Field, where: Path_) -> dict[str, Any]:
    """`tree` with a harmless value at `where`: what is there already, else one the field takes."""
    if field.key:
        return put(tree, field, where, "Benign_1")
    node: Any = tree
    for step in where:
        node = (
            node.get(step) if isinstance(node, dict) else node[int(step)] if isinstance(node, list) else None
        )
    value = node if isinstance(node, str) else BENIGN.get(where[-1], "x")
    return put(tree, field, where, value)


def placement(tree: dict[str, Any], field: Field) -> Path_ | None:
    """The first place of `field` in `tree` where a harmless value validates (a key field: the first
    place at all, since a copied entry may be refused for what it holds, e.g. a second compute)."""
    for where in placements(tree, field):
        if field.key or not validate(benign(tree, field, where)).problems:
            return where
    return None


def put(tree: dict[str, Any], field: Field, where: Path_, value: str) -> dict[str, Any]:
    """A copy of `tree` with `value` at `where` (a key field: a new entry named `value`, a copy of
    the mapping's first entry, or the one it is a list of)."""
    out = copy.deepcopy(tree)
    node: Any = out
    for step in where[:-1] if not field.key else where:
        node = node[int(step)] if isinstance(node, list) else node[step]
    if field.key:
        first = next(iter(node.values()), "lit:v")
        node[value] = copy.deepcopy(first)
    elif isinstance(node, list):
        node[int(where[-1])] = value
    else:
        node[where[-1]] = value
    return out


# --- one probe -----------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What became of one payload in one field: refused (with the message), or rendered (the files)."""

    refused: str | None
    files: dict[str, str]


def one_line_refusal(message: str) -> str | None:
    """What is wrong with a refusal as the user reads it (None: nothing): every control character
    escaped, each problem on its line and its fix on the next."""
    if printable(message) != message:
        return "a control character reaches the terminal"
    for line in message.splitlines()[1:]:
        if not line.startswith(("  - ", "    fix: ")):
            return f"a line that is neither a problem nor its fix: {line[:80]!r}"
    return None


def probe(tree: dict[str, Any]) -> Outcome:
    """Validate, plan and render `tree` as `render` does (masked secrets), in-process."""
    checked = validate(tree)
    if checked.problems:
        head = "error: submit.yaml: problems in the config"
        return Outcome("\n".join([head, *(f"  - {p.render()}" for p in checked.problems)]), {})
    try:
        config = build_config(checked.tree)
        plans = plan_submission(
            config, planning_traits(config), run_dir="/runs/gym-job-t", gym_job_id="gym-job-t"
        )
        files = {}
        for bench, plan in plans.items():
            job = render_job(plan, mask_secrets(plan.secrets))
            files.update({f"{bench}/{name}": f.text for name, f in job.files.items()})
            # the scripts job.sh runs inside `bash -c` are quoted there: bash -n sees them only alone
            steps = [_ENV.get_template("step.sh.j2").module.service_script(s) for s in plan.services]
            steps.append(_ENV.get_template("driver.sh.j2").module.driver_script(plan.driver))
            files.update({f"{bench}/step{i}.sh": text for i, text in enumerate(steps)})
    except UserError as err:
        return Outcome(str(err), {})
    return Outcome(None, files)


_INJECTED = re.compile(r"(^|[;&|(]|\bthen|\bdo)[ \t]*touch " + re.escape(MARK_DIR), re.MULTILINE)


def unquoted(text: str) -> str:
    """The shell text outside quotes and comments, newlines kept: where bash reads commands. A lexer
    of bash's quoting, enough for gymbuild's scripts (a `"$(...)"` holding quotes may pair them
    differently than bash does; its regions stay balanced, so what lies outside is unaffected)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            i = _after(text, i + 1, "'", escapes=text[i - 1 : i] == "$")
            continue
        if c == '"':
            i = _after(text, i + 1, '"', escapes=True)
            continue
        if c == "#" and (i == 0 or text[i - 1] in " \t\n;"):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _after(text: str, i: int, close: str, *, escapes: bool) -> int:
    """The index after the quote that closes a region begun before `i`."""
    while i < len(text):
        if escapes and text[i] == "\\":
            i += 2
        elif text[i] == close:
            return i + 1
        else:
            i += 1
    return i


def script_problem(name: str, text: str) -> str | None:
    """What is wrong with one rendered file, bash -n aside (`bash_n`): a shell file in which an
    injected command starts a line; a YAML file that does not parse."""
    if name.endswith((".yaml", ".yml")):
        try:
            yaml.safe_load(text)
        except yaml.YAMLError as err:
            return f"{name}: not YAML: {err}"
        return None
    if not name.endswith(".sh"):
        return None
    if _INJECTED.search(unquoted(text)):
        return f"{name}: an injected command starts a line"
    return None


def bash_n(paths: list[Path]) -> dict[Path, str]:
    """`bash -n` of each file, from one bash (a Python subprocess per file took a minute): what it
    said of each file it refused."""
    loop = 'for f; do out=$(bash -n "$f" 2>&1) || printf "%s\\0%s\\0" "$f" "$out"; done'
    done = subprocess.run(
        ["bash", "-c", loop, "_", *map(str, paths)], capture_output=True, text=True, check=True
    )
    parts = done.stdout.split("\0")
    return {Path(parts[i]): parts[i + 1] for i in range(0, len(parts) - 1, 2)}


def shaped(field: Field, value: str) -> str:
    """`value` in the shape its field asks for, so the payload gets past the syntax check to where
    it is used: an env value is `lit:<value>`, a mount or a health check path starts with '/'."""
    if field.key:
        return value
    if field.path[-2:-1] == ("env",):
        return f"lit:{value}"
    if field.path[-2:] in (("mounts", ITEM), ("health_check", "path")):
        return f"/{value}"
    return value


def matrix() -> Iterator[tuple[str, Field, Path_, str, dict[str, Any]]]:
    """(base, field, where, payload name, tree) of every probe: each field's first placement in each
    base config that has one, with every payload."""
    for base_name, base in (("slurm", slurm_base()), ("local", local_base())):
        for field in string_fields():
            where = placement(base, field)
            if where is None:
                continue
            for name, value in payloads().items():
                yield base_name, field, where, name, put(base, field, where, shaped(field, value))


if __name__ == "__main__":  # the figures of docs/reliability.md
    fields = string_fields()
    probes = list(matrix())
    print(f"{len(fields)} string fields, {len(payloads())} payloads, {len(probes)} probes")
