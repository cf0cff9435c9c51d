"""Shell injection, tried for real: hostile values in every config field that reaches bash.

One submission over `ssh gym-login` carries payloads built to break out of quoting (quotes, `$()`,
backticks, `;`, `&&`, `|`, newlines, globs, backslashes, `$VAR`, `${VAR}`, a leading `-`, unicode)
in: the `lit:` env of two services and of the driver, a benchmark's `run` overrides (strings, nested
keys, list items) and `prepare` overrides, service and driver mounts (real directories with hostile
names), a command benchmark's script, a command service's command, both services' pre_command, the
vLLM `extra_args` and served name, an sbatch directive from `compute.extra_args`, and the output path
itself. Each payload embeds `touch /tmp/gym-canary-<uuid>-<tag>`: after render and after the jobs ran
no such file may exist (the nodes share this machine's filesystem). What the receiving side got is
dumped by it (the fake vllm's argv file, a recording `gym` shim first on the driver's PATH, the
scripts' own `printf '%s'`, fake pyxis's records, Slurm's own copy of the directive) and compared
byte for byte.

Fields holding shell text by contract (pre_command, command, extra_args) are evaluated exactly once,
on the node: the payloads go into them shell-quoted, and must come out as the very words quoted.
Fields the config rules restrict (names, env keys, override keys, sbatch directives, mounts) are also
tried with what they refuse: the refusal, one clear message at render time, is the defence.
"""

from __future__ import annotations

import glob
import re
import shlex
import uuid
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import (
    DRIVER_IMAGE,
    gymbuild,
    job_ids,
    manifest,
    policy_service,
    pyxis_steps,
    read_jsonl,
    run_dir,
    slurm_config,
    user_env,
    wait_for_jobs,
    write_config,
)
from hydra.core.override_parser.overrides_parser import OverridesParser
from reliability_helpers import cancel

from gymbuild.config import load_config

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Records the words and the P_* environment `gym` was started with, then runs the real (fake) gym.
GYM_SHIM = """#!/usr/bin/python3
import json, os, sys
record = {"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items() if k.startswith("P_")}}
with open(os.path.join(os.environ["GYM_BENCH_DIR"], "recv", "gym.jsonl"), "a", encoding="utf-8") as f:
    f.write(json.dumps(record, ensure_ascii=False) + "\\n")
os.execv("/usr/local/bin/gym", ["gym", *sys.argv[1:]])
"""

# Dumps every P_* variable of the shell it runs in to recv/<prefix>-<NAME>, byte for byte.
DUMP_ENV = 'for __v in "${{!P_@}}"; do printf \'%s\' "${{!__v}}" >"$GYM_BENCH_DIR/recv/{prefix}-$__v"; done'


def payloads(canary: str) -> dict[str, str]:
    """name -> a hostile value; every way out of quoting runs `touch <canary>-<tag>`."""

    def t(tag: str) -> str:
        return f"touch {canary}-{tag}"

    return {
        "mixed": f'it\'s "q" $({t("dollar")}) `{t("tick")}` ; {t("semi")} && {t("and")} | {t("pipe")} '
        f"|| {t('or')} & {t('bg')} > {canary}-redirect",
        "newline": f"line1\n{t('nl')}\n\r\t{t('cr')}\n",
        "glob": f"* ? [a-z] ~ {{a,b}} {canary}-* /tmp/gym-canary-*",
        "backslash": f"\\ \\\\ \\' \\\" \\$({t('bs')}) \\`{t('bstick')}\\` end\\",
        "vars": f"$HOME ${{HOME}} $0 $$ $? $@ ${{IFS}} $((1+1)) !! $'\\x41' $({t('vars')})",
        "dash": f"--help; {t('dash')}",
        "single": f"'$({t('single')})'",
        "unicode": f"ünïcødé 日本語 🚀 \u200b $({t('unicode')})",
    }


def literal(value: Any) -> Any:
    """A config value as OmegaConf reads back the same text: `${` is its interpolation, so escaped."""
    if isinstance(value, str):
        return value.replace("${", "\\${")
    if isinstance(value, dict):
        return {k: literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [literal(v) for v in value]
    return value


def env_name(name: str) -> str:
    return f"P_{name.upper()}"


def writes(payload: dict[str, str], prefix: str, var: str = "GYM_BENCH_DIR") -> str:
    """Shell text writing each payload, shell-quoted, to recv/<prefix>-<name>."""
    return "\n".join(
        f"printf '%s' {shlex.quote(v)} >\"${var}/recv/{prefix}-{n}\"" for n, v in payload.items()
    )


def canaries(canary: str) -> list[str]:
    return glob.glob(glob.escape(canary) + "*")


def hostile_dir(parent: Path, tag: str, canary: str) -> Path:
    """A real directory whose name holds everything a mount may (no ',' or ':', no newline)."""
    name = (
        f'{tag} it\'s "q" $(touch {canary}-{tag}) `touch {canary}-{tag}t` ; & | * ? [a] \\ $HOME ${{HOME}} é'
    )
    path = parent / name
    path.mkdir(parents=True)
    return path


@pytest.fixture(scope="module")
def injected(cluster, tmp_path_factory):
    home = tmp_path_factory.mktemp("injection")
    canary = f"/tmp/gym-canary-{uuid.uuid4()}"
    p = payloads(canary)
    base = Path(cluster.run_dir("injection"))
    # no quote here either (the fake gym would write its rollouts under the escaped name)
    output = base / f"out $(touch {canary}-out) `touch {canary}-outt` ; & | * ? [a] $HOME é"
    shim = base / "shim"
    shim.mkdir()
    (shim / "gym").write_text(GYM_SHIM)
    (shim / "gym").chmod(0o755)
    mounts = {tag: hostile_dir(base, tag, canary) for tag in ("policy", "probe", "driver")}
    dst = f"/dst it's $(touch {canary}-dst) é"
    mount_of = {tag: f"{path}:{dst}" for tag, path in mounts.items()}
    lit_env = {env_name(n): f"lit:{v}" for n, v in p.items()}
    # no quote in the served name: the fake gym strips Hydra's quotes but not its `\'` escapes (real
    # gym parses with Hydra, whose reading of quotes is checked on the words gym received, below)
    model_name = f"served $(touch {canary}-model) `x` ; & * é"
    sbatch_comment = f"it's $(touch {canary}-sbatch) `touch {canary}-sbt` ; && | * ? [a] $HOME # é -x"
    extra_words = [w for n, v in p.items() for w in (f"--gym-probe-{n}", v)]
    mkdir = 'mkdir -p "$GYM_BENCH_DIR/recv"'
    policy = policy_service(
        served_model_name=model_name,
        env=lit_env,
        mounts=[mount_of["policy"]],
        pre_command="\n".join(
            [
                mkdir,
                'export FAKE_VLLM_ARGV_FILE="$GYM_BENCH_DIR/recv/vllm-argv.jsonl"',
                DUMP_ENV.format(prefix="policy-env"),
                writes(p, "policy-pre"),
            ]
        ),
        extra_args=shlex.join(extra_words),
    )
    probe = {
        "type": "command",
        "container": DRIVER_IMAGE,
        "port": 18950,
        "env": lit_env,
        "mounts": [mount_of["probe"]],
        "pre_command": f"{mkdir}\n{writes(p, 'probe-pre')}",
        "command": "\n".join(
            [
                DUMP_ENV.format(prefix="probe-env"),
                writes(p, "probe-command"),
                'exec python3 -m http.server --bind 127.0.0.1 "$GYM_PORT"',
            ]
        ),
        "health_check": {"path": "/", "timeout_seconds": 60},
    }
    nested = {"deep": dict(p)}
    benchmarks = {
        "runb": {
            "run": {
                "fake_num_calls": 1,
                **{f"s_{n}": v for n, v in p.items()},
                "nested": nested,
                "items": list(p.values()),
            },
            "prepare": {**{f"p_{n}": v for n, v in p.items()}, "pn": nested, "pitems": list(p.values())},
        },
        "cmdb": {
            "command": "\n".join(
                [
                    mkdir,
                    DUMP_ENV.format(prefix="driver-env"),
                    writes(p, "bench-command", "NEMO_GYM_BENCH_DIR"),
                ]
            )
        },
    }
    data = slurm_config(
        output,
        benchmarks,
        services={"policy": policy, "probe": probe},
        extra_args={"comment": sbatch_comment},
        driver={"env": {**lit_env, "PATH": f"lit:{shim}:{SYSTEM_PATH}"}, "mounts": [mount_of["driver"]]},
    )
    config = write_config(home, literal(data))
    env = user_env(home)
    resolved = load_config(config, environ={}).tree
    rendered = gymbuild("render", f"config={config}", cwd=home, env=env)
    after_render = canaries(canary)
    submitted = gymbuild("submit", f"config={config}", cwd=home, env=env)
    assert submitted.rc == 0, submitted.stdout + submitted.stderr
    ids = job_ids(manifest(output))
    try:
        results = wait_for_jobs(cluster, list(ids.values()), timeout=240)
        yield {
            "canary": canary,
            "payloads": p,
            "resolved": resolved,
            "rendered": rendered,
            "after_render": after_render,
            "ids": ids,
            "results": results,
            "run_dir": run_dir(output),
            "mounts": mount_of,
            "model_name": model_name,
            "sbatch_comment": sbatch_comment,
            "extra_words": extra_words,
        }
    finally:
        cancel(list(ids.values()))


def recv(injected: dict[str, Any], bench: str) -> Path:
    return injected["run_dir"] / bench / "recv"


def read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


@pytest.mark.cluster
def test_config_layer_keeps_every_payload(injected) -> None:
    """The precondition: what the loader resolved is the payloads themselves (OmegaConf escapes undone)."""
    p = injected["payloads"]
    tree = injected["resolved"]
    assert tree["driver"]["benchmarks"]["runb"]["run"]["nested"]["deep"] == p
    assert {k: v for k, v in tree["driver"]["env"].items() if k.startswith("P_")} == {
        env_name(n): f"lit:{v}" for n, v in p.items()
    }


@pytest.mark.cluster
def test_render_and_the_jobs_ran_no_canary(injected) -> None:
    assert injected["rendered"].rc == 0, injected["rendered"].stderr
    assert injected["after_render"] == []
    states = {j: (r.state, r.exit_code) for j, r in injected["results"].items()}
    assert all(s == ("COMPLETED", 0) for s in states.values()), states
    assert canaries(injected["canary"]) == []
    # nor anywhere the jobs could write relative to their working directories
    assert not [f for f in injected["run_dir"].rglob("*") if "gym-canary" in f.name]


@pytest.mark.cluster
def test_lit_env_of_services_and_driver_arrives_byte_exact(injected) -> None:
    p = injected["payloads"]
    for bench in ("runb", "cmdb"):
        for prefix in ("policy-env", "probe-env"):
            got = {n: read(recv(injected, bench) / f"{prefix}-{env_name(n)}") for n in p}
            assert got == p, (bench, prefix)
    got = {n: read(recv(injected, "cmdb") / f"driver-env-{env_name(n)}") for n in p}
    assert got == p
    gym_env = [r["env"] for r in read_jsonl(recv(injected, "runb") / "gym.jsonl")]
    assert gym_env == [{env_name(n): v for n, v in p.items()}] * 2  # prepare, then run


@pytest.mark.cluster
def test_shell_text_fields_are_evaluated_exactly_once(injected) -> None:
    """pre_command, a command service's command and a command benchmark's script are shell text: a
    payload quoted in them comes out as the quoted words, neither expanded again nor split."""
    p = injected["payloads"]
    for bench in ("runb", "cmdb"):
        for prefix in ("policy-pre", "probe-pre", "probe-command"):
            assert {n: read(recv(injected, bench) / f"{prefix}-{n}") for n in p} == p, (bench, prefix)
    assert {n: read(recv(injected, "cmdb") / f"bench-command-{n}") for n in p} == p


@pytest.mark.cluster
def test_vllm_extra_args_and_served_name_arrive_as_the_words_written(injected) -> None:
    for bench in ("runb", "cmdb"):
        (argv,) = read_jsonl(recv(injected, bench) / "vllm-argv.jsonl")
        words = injected["extra_words"]
        assert argv[-len(words) :] == words
        assert argv[argv.index("--served-model-name") + 1] == injected["model_name"]
    # the fake gym asked for the hostile served name over HTTP and the fake vllm knew it
    (rollout,) = read_jsonl(injected["run_dir"] / "runb" / "artifacts" / "rollouts.jsonl")
    assert rollout["status"] == 200 and rollout["model"] == injected["model_name"]


def _hydra(words: list[str]) -> dict[str, Any]:
    overrides = OverridesParser.create().parse_overrides([w for w in words if w.startswith("+")])
    return {o.key_or_group: o.value() for o in overrides}


@pytest.mark.cluster
def test_run_and_prepare_overrides_parse_back_to_the_payloads(injected) -> None:
    """What gym's own parser (Hydra's) makes of the words gym received is the config's values."""
    p = injected["payloads"]
    prepare, run = read_jsonl(recv(injected, "runb") / "gym.jsonl")
    assert prepare["argv"][:2] == ["eval", "prepare"] and run["argv"][:2] == ["eval", "run"]
    got = _hydra(prepare["argv"][2:])
    assert {n: got[f"p_{n}"] for n in p} == p
    assert {n: got[f"pn.deep.{n}"] for n in p} == p
    assert got["pitems"] == list(p.values())
    got = _hydra(run["argv"][2:])
    assert {n: got[f"s_{n}"] for n in p} == p
    assert {n: got[f"nested.deep.{n}"] for n in p} == p
    assert got["items"] == list(p.values())
    bench_dir = str(injected["run_dir"] / "runb")
    assert got["output_jsonl_fpath"] == f"{bench_dir}/artifacts/rollouts.jsonl"
    assert got["model_call_capture_dir"] == f"{bench_dir}/model-calls"
    assert got["policy_model_name"] == injected["model_name"]


@pytest.mark.cluster
def test_mounts_with_hostile_names_arrive_as_given(injected) -> None:
    mounts = injected["mounts"]
    for bench, job_id in injected["ids"].items():
        seen = [
            m
            for records in pyxis_steps(injected["run_dir"] / bench, job_id).values()
            for r in records
            for m in r["mounts"]
        ]
        for tag in ("policy", "probe", "driver"):
            assert mounts[tag] in seen, (bench, tag, seen)


@pytest.mark.cluster
def test_sbatch_directive_value_arrives_as_one_value(injected, cluster) -> None:
    for job_id in injected["ids"].values():
        out = cluster.ssh(f"squeue -h -t all -j {job_id} -o %k").stdout
        assert out.rstrip("\n") == injected["sbatch_comment"]


# --- what the rules refuse: one clear message at render time, nothing run ------------------------------


def _refusal_cases(canary: str) -> list[tuple[str, Any, str]]:
    c = f"$(touch {canary}-refused)"
    return [
        ("benchmark-name", ("bench", f"a b;{c}"), "may only contain letters"),
        ("benchmark-name-backtick", ("bench", f"`touch {canary}-refused`"), "may only contain letters"),
        ("service-name", ("service", f"p'{c}"), "may only contain letters"),
        ("env-key", ("driver_env", {f"A;{c}": "lit:x"}), "environment variable name"),
        ("run-key", ("run", {f"k={c}": "x"}), "Hydra key"),
        ("nested-run-key", ("run", {"ok": {"a b": "x"}}), "Hydra key"),
        ("prepare-key", ("prepare", {"-x": "y"}), "Hydra key"),
        ("mount-comma-relative", ("mount", f"/tmp,{c}:/x"), "relative source"),
        ("mount-colon", ("mount", "/tmp:/x:ro:/y"), "src[:dst[:flags]]"),
        ("mount-relative", ("mount", f"{c}:/x"), "relative source"),
        ("mount-newline", ("mount", f"/tmp\n{c}"), "newline"),
        ("sbatch-double-quote", ("sbatch", {"comment": f'a" {c}'}), "#SBATCH directive"),
        ("sbatch-backslash", ("sbatch", {"comment": f"a\\ {c}"}), "#SBATCH directive"),
        ("sbatch-newline", ("sbatch", {"comment": f"a\n#SBATCH --wrap={c}"}), "#SBATCH directive"),
        ("sbatch-key", ("sbatch", {f"comment={c}": "x"}), "sbatch option name"),
        ("output-path-comma", ("output", f"/tmp/a,{c}"), "cannot contain"),
        ("output-path-double-quote", ("output", f'/tmp/a"{c}'), "#SBATCH directive"),
    ]


def _refused_config(output: Path, kind: str, value: Any) -> dict[str, Any]:
    bench: dict[str, Any] = {"run": {"fake_num_calls": 1}}
    data = slurm_config(output, {"gpqa": bench})
    if kind == "bench":
        data["driver"]["benchmarks"] = {value: bench}
    elif kind == "service":
        data["services"] = {value: policy_service()}
        data["driver"]["policy_model"] = value
    elif kind == "driver_env":
        data["driver"]["env"] = value
    elif kind in ("run", "prepare"):
        bench[kind] = value
    elif kind == "mount":
        data["driver"]["mounts"] = [value]
    elif kind == "sbatch":
        data["compute"]["cluster"]["extra_args"] = value
    elif kind == "output":
        data["job"]["output_path"] = value
    return data


def test_one_mounts_entry_with_a_comma_is_two_mounts(tmp_path: Path) -> None:
    """pyxis's --container-mounts is comma-separated and NeMo Gym passes such an entry as two mounts."""
    output = Path(f"/var/tmp/gymbuild-injection-comma-{uuid.uuid4().hex[:12]}")
    data = _refused_config(output, "mount", "/tmp,/etc:/x")
    config = write_config(tmp_path, literal(data), "mount-comma.yaml")
    run = gymbuild("render", f"config={config}", cwd=tmp_path, env=user_env(tmp_path))
    assert run.rc == 0, run.stderr
    steps = re.findall(r"--container-mounts=(\S+)", run.stdout)
    assert any({"/tmp", "/etc:/x"} <= set(w.split(",")) for w in steps), steps
    assert not output.exists()


def test_what_the_rules_refuse_is_refused_at_render_with_one_message(tmp_path: Path) -> None:
    canary = f"/tmp/gym-canary-{uuid.uuid4()}"
    env = user_env(tmp_path)
    failures = []
    # This test's own output path (a fixed one was shared by every concurrent run of the suite).
    refused_output = Path(f"/var/tmp/gymbuild-injection-refused-{uuid.uuid4().hex[:12]}")
    for label, (kind, value), expected in _refusal_cases(canary):
        data = _refused_config(refused_output, kind, value)
        config = write_config(tmp_path, literal(data), f"{label}.yaml")
        for verb in ("render", "submit"):
            run = gymbuild(verb, f"config={config}", cwd=tmp_path, env=env)
            ok = run.rc == 1 and "Traceback" not in run.stderr and expected in run.stderr + run.stdout
            if not ok:
                failures.append((label, verb, run.rc, run.stdout[-400:], run.stderr[-800:]))
    assert failures == []
    assert canaries(canary) == []
    assert not refused_output.exists()
