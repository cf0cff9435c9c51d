"""A BenchPlan in, the job's files out: Jinja2 templates behind a thin, pure Python layer.

Every value that reaches bash goes through one filter, `sh`: literal text is `shlex.quote`d, and the
only things left for a shell to expand are gymbuild's own variables (rendered `"${NAME}"`) and the
user's `runtime:VAR` (`"${VAR-}"`: empty when unset, as NeMo Gym reads it). Secret values (`host:`
values and the collector's ingest token) are in no file rendered here: Slurm keeps every batch script
and job environment, so the submitter writes them to an owner-only file outside the run directory
(`secrets_path`), which job.sh reads at start into unexported shell variables and hands to a step with
a prefix assignment (`HF_TOKEN="${__gym_secret_HF_TOKEN}" srun ...`): they reach that step's
environment and nothing else, and never a command line (DESIGN.md, Secrets).

The templates split what every executor shares (templates/lib.sh.j2: ports, health checks, monitor
loop; step.sh.j2 and driver.sh.j2: what runs inside a step) from what is an executor's own, which
lives in the executor's folder, executors/<name>/templates/parts.sh.j2 (Slurm's: directives, `srun`,
the resume prologue; local's: a process group on this machine), named by the plan's `executor`.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from jinja2 import (
    ChoiceLoader,
    Environment,
    FileSystemBytecodeCache,
    FileSystemLoader,
    PackageLoader,
    PrefixLoader,
    StrictUndefined,
)
from jinja2.environment import TemplateModule

from gymbuild.config.model import EnvValue
from gymbuild.errors import UserError
from gymbuild.executors.base import EXECUTORS, executor_templates
from gymbuild.plan import BenchPlan, Ref, canonical_json
from gymbuild.shell import SHELL_NAME, quote, secrets_path

__all__ = [
    "RenderedFile",
    "RenderedJob",
    "dry_run_chunks",
    "keep_compiled_templates",
    "mask_secrets",
    "render_job",
    "secret_values",
    "secrets_path",
    "sh",
]

_NAME = re.compile(rf"{SHELL_NAME}(\[[0-9]+\])?")  # a name, or one element of an array
_SBATCH_PLAIN = re.compile(r"^[A-Za-z0-9_./:%@+=,-]*$")
RULE = "=" * 100


@dataclass(frozen=True)
class RenderedFile:
    text: str
    mode: int


@dataclass(frozen=True)
class RenderedJob:
    """The files of one benchmark, keyed by path relative to its bench dir."""

    bench: str
    bench_dir: str
    files: Mapping[str, RenderedFile]


def secret_var(name: str) -> str:
    """The unexported batch-shell variable that holds a secret's value."""
    return f"__gym_secret_{name}"


OTEL_TOKEN_VAR = "__gym_otel_token"  # the batch-shell variable holding the collector's ingest token


def secret_vars(plan: BenchPlan) -> tuple[str, ...]:
    """The batch-shell variables the job reads from its secrets file, in the file's order."""
    return (*map(secret_var, sorted(plan.secrets)), *((OTEL_TOKEN_VAR,) if plan.collector else ()))


def secret_values(plan: BenchPlan, secrets: Mapping[str, str]) -> dict[str, str]:
    """What goes into the benchmark's secrets file: batch-shell variable -> value (empty: no file)."""
    values = {secret_var(name): secrets[name] for name in sorted(plan.secrets)}
    if plan.collector is not None:
        values[OTEL_TOKEN_VAR] = secrets[plan.collector.token_env]
    return values


def _ref(name: str, unset: str = "") -> str:
    """`"${name}"`; with `unset="-"`, `"${name-}"`: empty, not an error under `set -u`, when unset."""
    if not _NAME.fullmatch(name):  # names come from gymbuild or validated runtime:VAR; never user text
        raise ValueError(f"{name!r} is not a shell variable name")
    return f'"${{{name}{unset}}}"'


def sh(value: object) -> str:
    """The one quoting filter: any plan value as one bash word, expanding only variable references.

    A job quotes ~80 words; the common ones (a str, a word of one str) are taken first."""
    if type(value) is str:
        return quote(value)
    if type(value) is tuple and len(value) == 1 and type(value[0]) is str:
        return quote(value[0])
    if isinstance(value, Ref):
        return _ref(value.name)
    if isinstance(value, EnvValue):
        if value.kind == "lit":
            return quote(value.value)
        if value.kind == "runtime":
            # The job's environment at run time, empty when unset: as NeMo Gym reads `runtime:VAR`
            # (an unset one must not stop the job, whose own code runs under `set -u`).
            return _ref(value.value, "-")
        return _ref(secret_var(value.value))
    if isinstance(value, tuple):
        return "".join(map(sh, value)) or "''"
    if isinstance(value, bool) or value is None:
        raise TypeError(f"refusing to guess how {value!r} should reach bash")
    if isinstance(value, int | str):
        return quote(str(value))
    raise TypeError(f"cannot quote a {type(value).__name__} for bash")


def sh_words(words: Iterable[object]) -> str:
    return " ".join(map(sh, words))


def port_file(key: str) -> str:
    """Where a step publishes the port it settled: per job, so a resumed job never reads a stale one."""
    return sh((Ref("GYM_PORT_DIR"), f"/{key}-", Ref("GYM_JOB_ID")))


def log_file(name: str) -> str:
    """A step's log, relative to the bench dir; the job id keeps a resumed job's logs apart."""
    return sh((f"logs/{name}-", Ref("GYM_JOB_ID"), ".log"))


def sbatch_value(value: str) -> str:
    """sbatch parses `#SBATCH` lines itself and groups words in double quotes (the plan refused `"`)."""
    return value if _SBATCH_PLAIN.fullmatch(value) else f'"{value}"'


def yaml_str(value: object) -> str:
    """A YAML scalar for collector.yaml; `$` doubled because the collector expands `${...}` itself."""
    return json.dumps(str(value)).replace("$", "$$")


def _once_key(arg: object) -> str:
    """An argument of `once` as its canonical JSON; an executor's macros (a template module) by name."""
    return f"template:{arg.__name__}" if isinstance(arg, TemplateModule) else canonical_json(arg)


_ONCE: dict[tuple[object, ...], str] = {}
_ONCE_LIMIT = 1024  # entries kept before the cache starts over: a long process renders many configs


def once(macro: Callable[..., str], *args: object) -> str:
    """`macro(*args)`, rendered once for equal arguments (a template calls it for a part of the job).

    The parts of a job that depend on config-level plan parts only (a service step's script, the
    readiness checks) are the same for every benchmark of a submission, so they are rendered once,
    not once per benchmark. Arguments are compared by their canonical
    JSON, which keeps types apart (1, 1.0 and True render differently) and is kept on each plan
    part (gymbuild/plan), so a lookup costs little more than a dict access. Pure: macros do no I/O.
    """
    key = (macro, *map(_once_key, args))
    text = _ONCE.get(key)
    if text is None:
        if len(_ONCE) >= _ONCE_LIMIT:
            _ONCE.clear()
        text = _ONCE[key] = macro(*args)
    return text


def keep_compiled_templates(directory: Path) -> None:
    """Keep compiled templates in `directory` (the edge calls this; rendering itself does no I/O).

    Compiling the templates is a fixed cost of every render and submit. Jinja checks each entry against its
    template's source, so an edited template is compiled afresh; without a writable directory the
    templates are compiled every time.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    if os.access(directory, os.W_OK):
        _ENV.bytecode_cache = FileSystemBytecodeCache(str(directory))


@functools.cache
def ray_serve_gateway_b64() -> str:
    """gymbuild's Ray Serve gateway (templates/ray_serve_gateway.py), base64: a step that runs it
    writes it from its own script, so the model's container needs nothing of gymbuild. Read once."""
    source, _, _ = _ENV.loader.get_source(_ENV, "ray_serve_gateway.py")  # type: ignore[union-attr]
    return base64.b64encode(source.encode()).decode()


@functools.cache
def gymbuild_shard_b64() -> str:
    """gymbuild's shard driver (templates/gymbuild_shard.py), base64, for a shard's driver step."""
    source, _, _ = _ENV.loader.get_source(_ENV, "gymbuild_shard.py")  # type: ignore[union-attr]
    return base64.b64encode(source.encode()).decode()


def _executor_templates() -> PrefixLoader:
    """Each registered executor's templates (executors/<name>/templates/), under its name. Their
    folders, not their modules: rendering imports no executor."""
    return PrefixLoader({name: FileSystemLoader(executor_templates(name)) for name in EXECUTORS})


def _environment() -> Environment:
    env = Environment(
        # The shared templates by their names; an executor's as `<name>/parts.sh.j2`, from its folder.
        loader=ChoiceLoader([PackageLoader("gymbuild.render", "templates"), _executor_templates()]),
        undefined=StrictUndefined,
        autoescape=False,
        auto_reload=False,  # the templates ship with the package: no stat of each one per render
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        # bash's `${#array[@]}` would open a Jinja comment with the default `{#`.
        comment_start_string="{##",
        comment_end_string="##}",
    )
    env.filters.update(sh=sh, sh_words=sh_words, sbatch=sbatch_value, yaml=yaml_str)
    env.globals.update(
        secret_var=secret_var,
        secret_vars=secret_vars,
        secrets_path=secrets_path,
        port_file=port_file,
        log_file=log_file,
        once=once,
        ray_serve_gateway_b64=ray_serve_gateway_b64,
        gymbuild_shard_b64=gymbuild_shard_b64,
    )
    return env


_ENV = _environment()


def mask_secrets(names: Iterable[str]) -> dict[str, str]:
    """Stand-ins for secret values, so a dry run renders the real script and prints no secret."""
    return {name: f"<host:{name}>" for name in names}


def render_job(plan: BenchPlan, secrets: Mapping[str, str]) -> RenderedJob:
    """job.sh and, with the collector on, otel/collector.yaml. job.sh holds no secret value (the job
    reads them from its secrets file), so the dry run's text is the submitted text; it stays 0600 all
    the same. `secrets` must name every host: variable the plan uses (a dry run passes stand-ins)."""
    files = job_files(plan, secrets, "job.sh.j2", plan, f"benchmark {plan.bench}")
    return RenderedJob(plan.bench, plan.bench_dir, MappingProxyType(files))


def executor_template(executor: str) -> str:
    """The template of an executor's own parts of a job: in its folder (executors/base.py)."""
    return f"{executor}/parts.sh.j2"


def job_files(
    plan: BenchPlan, secrets: Mapping[str, str], template: str, subject: object, who: str
) -> dict[str, RenderedFile]:
    """The files of a job: `template`'s `job(subject, executor)` macro as job.sh, and the
    collector's config when `plan` (the job as a whole) has one. `who` names the job in an error."""
    missing = [name for name in plan.secrets if name not in secrets]
    if missing:
        raise UserError(f"{who}: no value for host: variable(s) {', '.join(missing)}")
    executor = _ENV.get_template(executor_template(plan.executor)).module
    text = _ENV.get_template(template).module.job(subject, executor)  # type: ignore[attr-defined]
    files = {"job.sh": RenderedFile(text, 0o600)}
    if plan.collector is not None:
        text = _ENV.get_template("collector.yaml.j2").render(plan=plan, otel=plan.collector)
        files["otel/collector.yaml"] = RenderedFile(text, 0o644)
    return files


def dry_run_chunks(run_dir: str, jobs: Mapping[str, RenderedJob], notes: Iterable[str] = ()) -> Iterator[str]:
    """What `render` prints: the remote run dir, `notes` (a line each: what the jobs do together, e.g.
    a benchmark's shards), then every file between `=` rules. In pieces, so a thousand scripts are
    written out as they come rather than copied into one 11 MB string first."""
    yield f"[dry-run] remote run dir: {run_dir}\n"
    for note in notes:
        yield f"{note}\n"
    for bench, job in jobs.items():
        for path in ("job.sh", "otel/collector.yaml"):
            if path in job.files:
                text = job.files[path].text
                yield f"{RULE}\n{bench}/{path}\n{RULE}\n"
                yield text if text.endswith("\n") else f"{text}\n"
    yield f"{RULE}\n"
