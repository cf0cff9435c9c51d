"""Sweeps (multirun=1): one config, Hydra's sweep syntax in the overrides, one submission per combination.

`key=a,b,c`, `range(...)`, `choice(...)` and several such keys (their product) are read by Hydra's own
override parser and expanded the way its BasicSweeper expands them for `hydra -m`; gymbuild adds one
sweep function, `paths(GLOB)`: the paths the glob matches on the submit target (where checkpoints
live), found in one round trip over the run's connection, in natural order (iter_200 before
iter_1000). Each combination (a "cell") is a submission of its own, with its own gym_job_id, run
directory and workspace corner under the config's (`<config corner>/cells/<key>`), keyed by its
overrides, so running the same sweep again, or the sweep with one value more, queues only the cells
and benchmarks that have no job id yet. The sweep record (`<config corner>/sweeps/<id>.json`) lists
the combinations and their gym_job_ids; status, results, cancel and resubmit read it.

A path `paths()` finds is data, never config: it reaches Hydra as a quoted string with OmegaConf's
interpolations escaped (`data_value`), so a directory named `iter_${oc.env:SECRET}`, `it's` or
`a,b=[c]` is that path in the job and nothing else. A checkpoint is taken once one of its ready
markers is in it (`ready=`, default config.json or metadata.json; `ready=none`: every match), with
or without follow=1; the others are named as waiting. A name no job can carry (a control character,
bytes that are not UTF-8) is skipped with one line naming it; the rest of the sweep goes on.

The cost rules of one submit hold for the whole sweep: one connection, one copy (rsync) of every run
directory that needs one (they sit side by side under job.output_path), one sbatch per job queued.
The expansion is pure; the record is the workspace's. The verbs that act on a sweep's combinations
as a batch are in sweep/batch.py.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gymbuild.errors import ConfigError, Problem, printable
from gymbuild.request.arguments import argument
from gymbuild.shell import quote
from gymbuild.state.workspace import digest

if TYPE_CHECKING:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import Override


PATHS = "paths"
DEFAULT_READY = ("config.json", "metadata.json")  # what a trainer writes last (Megatron, NeMo, HF)
SYNTAX_FIX = (
    "a sweep value is a,b,c  range(start,stop[,step])  choice(a,b)  or paths(GLOB); "
    "quote the override for the shell: 'key=paths(/lustre/ckpts/iter_*)'"
)


# --- the expansion (pure) ------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One combination: every override it is submitted with, and the swept ones among them."""

    overrides: tuple[str, ...]
    values: tuple[str, ...]  # the swept `key=value`s, in the order of the command line

    @property
    def key(self) -> str:
        """The cell's name in the workspace: its overrides, so one more value leaves the rest alone."""
        return digest(list(self.overrides))[:12]


def _parser(found: Mapping[str, Sequence[str]] | None, seen: list[str] | None = None) -> OverridesParser:
    """Hydra's override parser with its functions, and `paths(GLOB)`: the paths `found` for the glob
    (while only looking for globs, `seen` collects them and each stands for itself)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser, create_functions
    from hydra.core.override_parser.types import ChoiceSweep, Quote, QuotedString

    functions = create_functions()

    def paths(pattern: str) -> ChoiceSweep:
        if seen is not None:
            seen.append(pattern)
            return ChoiceSweep(list=[pattern])
        values = [
            p if _PLAIN_PATH(p) else QuotedString(text=data_value(p), quote=Quote.single)
            for p in (found or {}).get(pattern, ())
        ]
        return ChoiceSweep(list=values)  # type: ignore[arg-type]

    # Hydra checks each argument against the annotations, which must be types, not strings.
    paths.__annotations__ = {"pattern": str, "return": ChoiceSweep}
    functions.register(name=PATHS, func=paths)
    return OverridesParser(functions)


def _key_of(text: str) -> str:
    return text.split("=", 1)[0].lstrip("+~")


def _parse(overrides: Sequence[str], source: str, parser: OverridesParser) -> list[Override]:
    """Each override as Hydra reads it; a mistake is one ConfigError naming every bad override."""
    from hydra.errors import HydraException

    parsed: list[Override] = []
    problems: list[Problem] = []
    for text in overrides:
        try:
            parsed.extend(parser.parse_overrides([text]))
        except HydraException as err:
            lines = [line for line in str(err).splitlines() if line.strip() and "hydra.cc" not in line]
            detail = " ".join(lines[1:]) or lines[0] if lines else "Hydra could not read it"
            problems.append(
                Problem(_key_of(text), f"override {text!r} is not a sweep Hydra reads: {detail}", SYNTAX_FIX)
            )
    if problems:
        raise ConfigError(source, problems)
    return parsed


def globs(overrides: Sequence[str], source: str) -> list[str]:
    """The globs of the overrides' `paths(...)` values, in order, each once."""
    seen: list[str] = []
    _parse(overrides, source, _parser(None, seen))
    return list(dict.fromkeys(seen))


def expand(
    overrides: Sequence[str], source: str, found: Mapping[str, Sequence[str]] | None = None
) -> list[Cell]:
    """The combinations, as `hydra -m` makes them (BasicSweeper.split_arguments): each sweep's values,
    a later override of a key replacing an earlier one, the product in command-line order. An override
    that sweeps nothing is kept as typed (Hydra would write `~key` back as `~key=null`)."""
    problems: list[Problem] = []
    per_key: dict[str, tuple[bool, list[str]]] = {}
    for override in _parse(overrides, source, _parser(found or {})):
        key = override.get_key_element()
        if not override.is_sweep_override():
            typed = override.input_line
            assert typed is not None  # parse_overrides sets it on every override (Hydra asserts so too)
            per_key[key] = (False, [typed])
            continue
        if not override.is_discrete_sweep():
            problems.append(
                Problem(
                    override.key_or_group,
                    f"override {override.input_line!r} is a continuous interval: it has no values to submit",
                    "sweep discrete values: range(0,1,0.25) or 0,0.5,1",
                )
            )
            continue
        try:
            values = [f"{key}={value}" for value in override.sweep_string_iterator()]
        except Exception as err:  # glob() (config group options) needs Hydra's config loader
            problems.append(
                Problem(
                    override.key_or_group,
                    f"override {override.input_line!r} cannot be expanded: {err}",
                    SYNTAX_FIX,
                )
            )
            continue
        per_key[key] = (True, values)
    if problems:
        raise ConfigError(source, problems)
    cells = []
    for combo in itertools.product(*(values for _, values in per_key.values())):
        swept = tuple(text for (sweeps, _), text in zip(per_key.values(), combo, strict=True) if sweeps)
        cells.append(Cell(tuple(combo), swept))
    return list({cell.key: cell for cell in cells}.values())


def probe_overrides(overrides: Sequence[str], source: str) -> list[str]:
    """The overrides with each sweep at its first value (a glob at itself): a config that tells
    where the sweep goes (its compute host) before its globs are expanded there."""
    patterns = globs(overrides, source)
    cells = expand(overrides, source, {p: [p] for p in patterns})
    return list(cells[0].overrides) if cells else list(overrides)


def labels(cells: Sequence[Cell]) -> list[str]:
    """Each cell's name in tables: its swept values, keys shortened to their last part where that is
    still unambiguous (`model=/ckpts/iter_2 temperature=0.5`)."""
    keys = list(dict.fromkeys(_key_of(v) for cell in cells for v in cell.values))
    last = [k.rsplit(".", 1)[-1] for k in keys]
    short = {k: (s if last.count(s) == 1 else k) for k, s in zip(keys, last, strict=True)}
    out = []
    for cell in cells:
        parts = [f"{short[_key_of(v)]}={unescaped(v.split('=', 1)[1])}" for v in cell.values]
        out.append(" ".join(parts) or "(no swept key)")
    return out


# A path Hydra reads back as itself, unquoted, as sweeps before the quoting wrote it: its cell keeps
# its key (a cron line's checkpoints are not queued again). The `/` keeps it a string, never `true`
# or `1200`.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_.-]*/[A-Za-z0-9_./-]*").fullmatch
_INTERPOLATION = re.compile(r"(\\*)\$\{")


def data_value(text: str) -> str:
    """`text` as an OmegaConf string that resolves to exactly `text`: every `${` escaped (OmegaConf
    reads 2k+1 backslashes before `${` as k backslashes and a literal `${`). Hydra then carries it in
    single quotes (QuotedString.with_quotes escapes the quotes and backslashes its grammar reads), so
    no character of a path found on disk is syntax to Hydra or OmegaConf."""
    return _INTERPOLATION.sub(lambda m: "\\" * (2 * len(m[1]) + 1) + "${", text)


def _unquoted(value: str) -> str:
    """A single-quoted Hydra value (data_value's, as `with_quotes` writes it) read back."""
    out, i, body = [], 0, value[1:-1]
    while i < len(body):
        run = len(body[i:]) - len(body[i:].lstrip("\\"))
        if run and (i + run == len(body) or body[i + run] == "'"):
            out.append("\\" * (run // 2) + ("'" if i + run < len(body) else ""))
            i += run + 1
            continue
        out.append(body[i])
        i += 1
    return _INTERPOLATION.sub(lambda m: "\\" * (len(m[1]) // 2) + "${", "".join(out))


def header(cell: Cell, ident: str) -> str:
    """The comment heading a combination's resolved-config.yaml (a control character escaped: a
    value's newline must not end the comment)."""
    values = "\n".join(f"#   {printable(v, lines=False)}" for v in cell.values) or "#   (no swept key)"
    return f"# sweep {ident}, the combination:\n{values}\n"


def unescaped(value: str) -> str:
    """A value as the user reads it: a quoted path as found on disk; else without the backslashes
    Hydra writes before `:`, `,`, spaces..."""
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return _unquoted(value)
    return re.sub(r"\\(.)", r"\1", value)


def natural(path: str) -> list[int | str]:
    """Sort key: ASCII digits compared as numbers, so iter_200 comes before iter_1000 (other digits,
    such as a superscript, are text: int() does not read them all)."""
    return [int(part) if index % 2 else part for index, part in enumerate(re.split(r"([0-9]+)", path))]


def ready_markers(given: str | tuple[str, ...] | None) -> tuple[str, ...]:
    """`ready=`: marker file names (default DEFAULT_READY; `none` or empty: no marker, every match is
    taken). `given` as the command line's invocation holds it (read already), or as typed: read
    by its argument (arguments.py), a mistake is one message with the fix."""
    if given is None:
        return DEFAULT_READY
    return argument("ready").parse(given) if isinstance(given, str) else given


def glob_script(patterns: Sequence[str], ready: Sequence[str] = ()) -> str:
    """bash printing `<index>\\0<path>\\0` for every existing path each glob matches: one round trip
    for every glob. Word splitting is off (IFS empty), so a pattern with spaces stays one pattern;
    `~/` is the remote home. With `ready` (marker file names), a path counts only once one of them
    exists in it (beside it, when the glob matches files): one still being written is printed as
    `w<index>` instead, waiting for a later look."""
    lines = ["(", "shopt -s nullglob; IFS="]
    check = "true"
    if ready:
        markers = " || ".join(f'[ -e "$__gym_d"/{quote(name)} ]' for name in ready)
        check = f'{{ __gym_d=$__gym_f; [ -d "$__gym_d" ] || __gym_d=${{__gym_f%/*}}; {markers}; }}'
    for index, pattern in enumerate(patterns):
        value = f'"$HOME"/{quote(pattern[2:])}' if pattern.startswith("~/") else quote(pattern)
        lines.append(
            f'__gym_g={value}; for __gym_f in $__gym_g; do [ -e "$__gym_f" ] || continue; '
            f'__gym_w=w; {check} && __gym_w=; printf \'%s%s\\0%s\\0\' "$__gym_w" {index} "$__gym_f"; done'
        )
    lines.append("true )")
    return "\n".join(lines)


def path_keys(overrides: Sequence[str], source: str) -> set[str]:
    """The keys the overrides sweep over `paths(...)`."""
    return {_key_of(text) for text in overrides if globs([text], source)}


def blamed(cells: Sequence[Cell], errors: Mapping[int, str], keys: set[str]) -> list[int]:
    """The cells (by index) whose config failed (`errors`: index -> message) because of a path found
    on disk, to be skipped while the rest of the sweep goes on: a cell with a path value whose other
    swept values load in another cell, or that has none (the config with the glob in place of the
    path loaded: expand_for_submit's probe). One message shared by every cell is the config's own."""
    if len(errors) == len(cells) and len(set(errors.values())) == 1:
        return []

    def typed(cell: Cell) -> tuple[str, ...]:
        return tuple(v for v in cell.values if _key_of(v) not in keys)

    good = {typed(cell) for i, cell in enumerate(cells) if i not in errors}
    return [
        i
        for i in errors
        if any(_key_of(v) in keys for v in cells[i].values)
        and (not typed(cells[i]) or typed(cells[i]) in good)
    ]


def unusable(path: str) -> str | None:
    """Why no job can carry `path` exactly (None: one can): a control character (a newline would
    end a line of the job's YAML or script), or bytes that are not UTF-8 (read here as U+FFFD)."""
    if "\ufffd" in path:
        return "its name is not UTF-8"
    if not path.isprintable() and any(unicodedata.category(ch) == "Cc" for ch in path):
        return "its name holds a control character"
    return None


@dataclass(frozen=True)
class Globbed:
    """What the globs found: per glob the paths to take, in natural order; the paths waiting for a
    ready marker; and the paths refused (path, why)."""

    found: dict[str, list[str]]
    waiting: list[str]
    refused: list[tuple[str, str]]

    def said(self, ready: Sequence[str], target: str, *, quiet: bool = False) -> list[str]:
        """Its lines for stderr: each name refused (escaped); unless `quiet` (the follower's every
        poll), each path waiting for its marker and each glob with nothing ready."""
        out = [
            f"warning: skipped {printable(p, lines=False)}: {why}; rename it to evaluate it"
            for p, why in self.refused
        ]
        if not quiet:
            markers = " or ".join(ready)
            out += [f"waiting: {p} (no {markers} in it yet; ready=none takes it)" for p in self.waiting]
            out += [
                f"note: paths({g}) matches nothing ready on {target} yet"
                for g, p in self.found.items()
                if not p
            ]
        return out


def parse_globbed(stdout: str, patterns: Sequence[str]) -> Globbed:
    found: dict[str, list[str]] = {p: [] for p in patterns}
    waiting: list[str] = []
    refused: list[tuple[str, str]] = []
    fields = stdout.split("\0")
    for index, path in zip(fields[0::2], fields[1::2], strict=False):
        number = index.removeprefix("w")
        if not number.isdigit() or int(number) >= len(patterns):
            continue
        why = unusable(path)
        if why is not None:
            refused.append((path, why))
        elif index.startswith("w"):
            waiting.append(path)
        else:
            found[patterns[int(number)]].append(path)
    return Globbed(
        {p: sorted(set(paths), key=natural) for p, paths in found.items()},
        sorted(set(waiting), key=natural),
        sorted(set(refused), key=lambda r: natural(r[0])),
    )


# --- the sweep record (the workspace) ------------------------------------------------------------
