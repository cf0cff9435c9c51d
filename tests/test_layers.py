"""gymbuild/ is one straight stack of folders, and no import climbs it (docs/architecture.md).

FLOORS lists the folders top to bottom; `ground` is the package root's own modules. A module
imports only from its own folder or from a floor below it: its folder is what it may assume, the
floors above are what may assume it. Plan and state share a floor and know nothing of each other.
demo/ is no floor: it runs inside jobs, as a script, and imports nothing of gymbuild.

Every import counts, also one inside a function or under TYPE_CHECKING: a lazy import hides a circle
or a climb from Python at start-up, not from the reader who follows it (and a type-only one still
ties the two modules' meanings together). A failure names the file, the line and the import.

The README's "How it is built" and docs/architecture.md list the same floors, in the same order,
and name only folders and root modules that exist (test_the_readme_*): the layout a newcomer
reads is the one this test holds.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gymbuild"

# Top to bottom. A floor of several folders is one set: its folders may not import each other.
FLOORS: tuple[frozenset[str], ...] = (
    frozenset({"cli"}),
    frozenset({"sweep"}),
    frozenset({"results"}),
    frozenset({"day_two"}),
    frozenset({"submit"}),
    frozenset({"render"}),
    frozenset({"executors"}),
    frozenset({"plan", "state"}),
    frozenset({"config", "request"}),
    frozenset({"ground"}),
)
# Package folders outside the stack: imported by nothing, importing nothing of gymbuild.
OUTSIDE = frozenset({"demo"})
# The package root holds the ground floor's few modules; a ninth belongs in a folder.
MAX_ROOT_MODULES = 8


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@dataclass(frozen=True)
class Import:
    """One import statement's tie from a module to another gymbuild module."""

    source: Path
    line: int
    target: str  # the gymbuild module imported


def import_ties(path: Path, modules: set[str], text: str | None = None) -> list[Import]:
    """The gymbuild modules `path` imports (or `text`, read as if it stood there), each with its line
    (a name imported from a package counts as its module when it is one, else as the package)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []
    for node in ast.walk(ast.parse(path.read_text() if text is None else text)):
        if isinstance(node, ast.Import):
            found += [Import(path, node.lineno, a.name) for a in node.names if a.name in modules]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in modules:
                    found.append(Import(path, node.lineno, sub))
                elif source in modules:
                    found.append(Import(path, node.lineno, source))
    return [tie for tie in dict.fromkeys(found) if tie.target != name]  # once a line and module


def imports(path: Path, modules: set[str]) -> set[str]:
    """The gymbuild modules `path` imports."""
    return {tie.target for tie in import_ties(path, modules)}


def folder_of(module: str) -> str:
    """The folder a module lives in: `gymbuild.executors.slurm` is in executors, `gymbuild.shell`
    and `gymbuild` itself in ground."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else "ground"


def floor_of(folder: str) -> int:
    """The folder's floor, counted from the top (0 is cli)."""
    return next(i for i, floor in enumerate(FLOORS) if folder in floor)


def climbs(ties: list[Import]) -> list[str]:
    """Each import that leaves its folder for one not below it, as `file:line: imports module (from
    a folder on floor N to one on floor M)`."""
    found = []
    for tie in ties:
        here, there = folder_of(module_name(tie.source)), folder_of(tie.target)
        if here == there:
            continue
        if here in OUTSIDE or there in OUTSIDE:
            reason = "demo/ runs in jobs and is tied to nothing of gymbuild"
        elif floor_of(there) <= floor_of(here):
            side = "above" if floor_of(there) < floor_of(here) else "beside"
            reason = f"{here}/ may not import {there}/, a floor {side} it"
        else:
            continue
        found.append(f"{tie.source.relative_to(ROOT)}:{tie.line}: imports {tie.target} ({reason})")
    return found


def package_modules() -> tuple[list[Path], set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    paths = [p for p in paths if "templates" not in p.relative_to(PACKAGE).parts]
    return paths, {module_name(p) for p in paths}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_circle_finder_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_gymbuild_has_no_import_circle() -> None:
    paths, modules = package_modules()
    graph = {module_name(p): imports(p, modules) for p in paths}
    assert len(graph) > 50 and graph["gymbuild.cli.main"], "the package was not read"
    found = circles(graph)
    ties = [" -> ".join(f"{m} (imports {', '.join(sorted(graph[m] & set(c)))})" for m in c) for c in found]
    assert not found, "import circles in gymbuild/:\n" + "\n".join(ties)


def test_the_climb_finder_finds_every_kind_of_climb() -> None:
    """A function-local import and a TYPE_CHECKING one climb as surely as a top-level one; an import
    of the own folder, of a floor below, or of ground does not; plan and state are beside each other."""
    source = PACKAGE / "plan" / "example.py"
    text = (
        "from typing import TYPE_CHECKING\n"
        "from gymbuild.plan import job\n"  # own folder
        "from gymbuild.config import model\n"  # below
        "from gymbuild import shell\n"  # ground
        "if TYPE_CHECKING:\n"
        "    from gymbuild.submit.session import Session\n"  # above, type-only
        "def f():\n"
        "    from gymbuild.render import templates\n"  # above, function-local
        "    import gymbuild.state.records\n"  # beside
    )
    modules = {
        "gymbuild.plan.example",
        "gymbuild.plan.job",
        "gymbuild.config.model",
        "gymbuild.shell",
        "gymbuild.submit.session",
        "gymbuild.render",
        "gymbuild.state.records",
    }
    where = "gymbuild/plan/example.py"
    assert climbs(import_ties(source, modules, text)) == [
        f"{where}:6: imports gymbuild.submit.session (plan/ may not import submit/, a floor above it)",
        f"{where}:8: imports gymbuild.render (plan/ may not import render/, a floor above it)",
        f"{where}:9: imports gymbuild.state.records (plan/ may not import state/, a floor beside it)",
    ]


def test_no_module_imports_from_a_folder_above_its_own() -> None:
    paths, modules = package_modules()
    folders = {folder_of(m) for m in modules}
    assert folders == {f for floor in FLOORS for f in floor} | OUTSIDE, (
        "a folder is on no floor: add it to FLOORS"
    )
    ties = [tie for p in paths for tie in import_ties(p, modules)]
    assert len(ties) > 200, "the package's imports were not read"
    found = climbs(ties)
    assert not found, "imports that climb the floors (docs/architecture.md):\n" + "\n".join(found)


def test_the_package_root_holds_only_the_ground_floors_few_modules() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(root) <= MAX_ROOT_MODULES, (
        f"{len(root)} modules in gymbuild/ (at most {MAX_ROOT_MODULES}): {root}"
    )


# A module holds one subject; past this many lines it holds two (the house rules, docs/architecture.md).
MAX_MODULE_LINES = 500


def test_no_module_is_over_its_length() -> None:
    long = [
        f"{p.relative_to(ROOT)}: {n} lines"
        for p in sorted(PACKAGE.rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by subject): {long}"


def test_every_folder_says_what_it_is() -> None:
    """Each folder's __init__.py opens with a docstring: the first thing `ls` leads a reader to."""
    silent = [
        str(init.relative_to(ROOT))
        for init in sorted(PACKAGE.rglob("__init__.py"))
        if "templates" not in init.parts and not ast.get_docstring(ast.parse(init.read_text()))
    ]
    missing = [
        str(d.relative_to(ROOT)) for d in sorted(PACKAGE.iterdir()) if d.is_dir() and d.name != "__pycache__"
    ]
    missing = [d for d in missing if not (ROOT / d / "__init__.py").exists()]
    assert not silent and not missing, (
        f"folders without a docstring: {silent}; without __init__.py: {missing}"
    )


# The README's section and docs/architecture.md's stack: one line a floor, "- `folder/` ...".
STACK_LINE = re.compile(r"^\s*(?:\d+\.|-)\s+`(?:gymbuild/)?([a-z_]+)/?`")


def section(text: str, heading: str) -> str:
    """The Markdown section under `heading` up to the next heading of its level or above."""
    match = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, re.M)
    assert match, f"no section {heading!r}"
    level = len(match.group(1))
    rest = text[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def stack_of(text: str) -> list[str]:
    """The folders of the stack a doc lists, top to bottom ("ground" for the root's modules)."""
    lines = section(text, "The stack").splitlines()
    return [m.group(1) for line in lines if (m := STACK_LINE.match(line))]


def flat_floors() -> list[str]:
    return [f for floor in FLOORS for f in sorted(floor)]


def test_the_readme_and_the_architecture_doc_list_the_floors_this_test_holds() -> None:
    for doc in ("README.md", "docs/architecture.md"):
        stack = stack_of((ROOT / doc).read_text())
        assert stack == flat_floors(), f"{doc}'s stack {stack} is not the floors test's {flat_floors()}"


def exists(name: str) -> bool:
    """A path a doc names: under gymbuild/ (`submit/pipeline.py`, `slurm/`), a bare module found
    anywhere in it (`pipeline.py`), or a folder of the checkout (`schemas/`)."""
    bare = "/" not in name.rstrip("/")
    return (
        (PACKAGE / name).exists() or (ROOT / name).exists() or (bare and any(PACKAGE.rglob(name.rstrip("/"))))
    )


def test_the_readme_names_only_what_exists_and_every_folder() -> None:
    """Every path the README's "How it is built" names in backticks (`name.py`, `folder/`) exists,
    and every package folder and root module is named there."""
    text = section((ROOT / "README.md").read_text(), "How it is built")
    named = set(re.findall(r"`(?:gymbuild/)?([a-z_]+(?:/[a-z_]+)*(?:\.py|/))`", text))
    stale = sorted(n for n in named if not exists(n))
    assert not stale, f"README 'How it is built' names what the checkout does not hold: {stale}"
    folders = {d.name for d in PACKAGE.iterdir() if (d / "__init__.py").exists()}
    roots = {p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    unnamed = sorted({f"{f}/" for f in folders} - named) + sorted(roots - named)
    assert not unnamed, f"README 'How it is built' leaves out: {unnamed}"


# What a test under tests/<folder>/ may import from above its folder: the command line as a user
# types it (in this process), and, for the planner's tests, its input as the executors' registry
# gives it (the planner takes the traits as data and never imports them).
TESTS_MAY_REACH_UP = {
    "*": {"gymbuild.cli", "gymbuild.cli.main"},
    "tests/plan/test_planner.py": {"gymbuild.executors.base"},
}


def test_a_test_files_folder_says_what_it_tests() -> None:
    """A test under tests/<folder>/ imports nothing of gymbuild from a floor above that folder: were
    it to need one, what it tests lives there, and so should the test."""
    _, modules = package_modules()
    found = []
    for folder in flat_floors():
        for path in sorted((ROOT / "tests" / folder).glob("test_*.py")):
            name = str(path.relative_to(ROOT))
            allowed = TESTS_MAY_REACH_UP["*"] | TESTS_MAY_REACH_UP.get(name, set())
            as_module = PACKAGE / folder / path.name  # read as if it stood in the folder it tests
            for tie in import_ties(as_module, modules, path.read_text()):
                there = folder_of(tie.target)
                if there != folder and floor_of(there) <= floor_of(folder) and tie.target not in allowed:
                    found.append(f"{name}:{tie.line}: imports {tie.target} (a floor above {folder}/)")
    assert len(list((ROOT / "tests").glob("*/test_*.py"))) > 50, "the test folders were not read"
    assert not found, "tests that import from above the folder they test:\n" + "\n".join(found)


# The folders above submit/ act on jobs that already exist, through the Executor protocol
# (executors/base.py): none names an executor's own folder, so a third executor needs no change there.
THROUGH_THE_PROTOCOL = frozenset({"day_two", "results", "sweep", "cli"})


def test_day_two_and_above_reach_an_executor_only_through_the_protocol() -> None:
    paths, modules = package_modules()
    own = tuple(f"gymbuild.executors.{name}" for name in ("slurm", "local"))
    found = [
        f"{tie.source.relative_to(ROOT)}:{tie.line}: imports {tie.target}"
        for p in paths
        if folder_of(module_name(p)) in THROUGH_THE_PROTOCOL
        for tie in import_ties(p, modules)
        if tie.target.startswith(own)
    ]
    assert not found, "ask executor_for(...) and the Executor protocol instead:\n" + "\n".join(found)
