"""Check that the docs still describe this checkout (dodo.py's `docs` task; tests/test_check_docs.py).

Two ways a doc goes stale without any test noticing: a link whose file was moved or whose heading
was renamed, and an example command naming a verb that no longer exists. So, in the checkout's
Markdown (README.md, docs/, bench/, the READMEs under tests/: DOC_GLOBS):

- every relative link (`[text](path)`, `[text](path#anchor)`, `[text](#anchor)`, images too) names
  a file or folder of the checkout, and an anchor names a heading of that Markdown file (GitHub's
  anchors: lower case, punctuation dropped, spaces as hyphens, `-1`, `-2` for repeats);
- every `gymbuild WORD` and `doit WORD` at a command's start in their code (inline spans and
  bash/shell/console blocks) names a gymbuild verb (pyproject.toml's doit.COMMAND entry points),
  one of doit's own commands or, for doit, a task of dodo.py. Flags, `name=value` arguments and
  upper-case placeholders (`gymbuild VERB`) are not verbs and are passed over.

    python tools/check_docs.py [ROOT]    # ROOT: the checkout (default: this file's parent's parent)

Exit status 0 and a one-line count on stdout, or one line per problem on stderr and status 1.
Only the standard library and doit (for its command names) are imported: gymbuild is read, not run.
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
# gymbuild or doit where a command starts: the start of the code, or after a shell separator, a
# prompt or variable assignments; the next word is the verb.
COMMAND = re.compile(
    r"(?:^|&&|\|\||[;|(])\s*(?:\$\s+)?(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(gymbuild|doit)\s+([^\s`]+)"
)
# The checkout's Markdown: the README, docs/, and the READMEs of bench/ and of the tests' set-ups.
DOC_GLOBS = ("README.md", "docs/*.md", "bench/*.md", "tests/**/*.md")
SHELL_BLOCKS = {"", "bash", "sh", "shell", "console", "zsh"}


@dataclass(frozen=True)
class Problem:
    """One stale place in a doc: where it is and what is wrong, as the line printed for it."""

    file: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text (code spans and link targets dropped), lower case,
    every character but letters, digits, `_`, `-` and spaces removed, spaces as hyphens."""
    text = INLINE_CODE.sub(lambda m: m.group(2), heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def lines_outside_fences(text: str) -> Iterator[tuple[int, str, str | None]]:
    """Each line with its number and, inside a fenced block, the block's language ("" unnamed);
    None outside one. The fence lines themselves are left out."""
    fence: str | None = None
    language = ""
    for number, line in enumerate(text.splitlines(), start=1):
        opened = FENCE.match(line)
        if opened and (fence is None or opened.group(1) == fence):
            fence, language = (opened.group(1), opened.group(2).lower()) if fence is None else (None, "")
            continue
        yield number, line, (language if fence is not None else None)


def anchors(text: str) -> set[str]:
    """The anchors of a Markdown file's headings (code blocks' `#` lines are not headings)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line, block in lines_outside_fences(text):
        heading = HEADING.match(line) if block is None else None
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


@dataclass(frozen=True)
class Link:
    """A relative link of a doc: where it is, as written, and the file it resolves to."""

    line: int
    target: str
    linked: Path
    anchor: str


def headings_of(doc: Path) -> set[str]:
    """The anchors of a Markdown file's headings."""
    return anchors(doc.read_text(encoding="utf-8"))


def links(doc: Path) -> Iterator[Link]:
    """The relative links of a doc, outside code (a URL is not checked: the checkout is)."""
    for number, line, block in lines_outside_fences(doc.read_text(encoding="utf-8")):
        if block is not None:
            continue
        for target in LINK.findall(INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)):
            if not SCHEME.match(target):
                path_part, _, anchor = target.partition("#")
                yield Link(number, target, (doc.parent / path_part).resolve() if path_part else doc, anchor)


def check_links(root: Path, doc: Path) -> Iterator[Problem]:
    """The relative links of one doc whose file or heading is not in the checkout."""
    name = doc.relative_to(root).as_posix()
    for link in links(doc):
        if not link.linked.is_relative_to(root.resolve()) or not link.linked.exists():
            yield Problem(name, link.line, f"link {link.target!r}: no such file or folder in the checkout")
        elif link.anchor and link.linked.suffix == ".md" and link.anchor not in headings_of(link.linked):
            where = "this file" if link.linked == doc else link.linked.relative_to(root.resolve()).as_posix()
            yield Problem(name, link.line, f"link {link.target!r}: {where} has no heading #{link.anchor}")


def linked_files(root: Path) -> list[str]:
    """The checkout's files the docs link to (folders and missing ones left out), as paths from
    root: what dodo.py's `docs` task depends on besides the docs, so a moved file re-runs it."""
    base = root.resolve()
    found = {
        link.linked.relative_to(base).as_posix()
        for doc in docs_of(root)
        for link in links(doc)
        if link.linked.is_relative_to(base) and link.linked.is_file()
    }
    return sorted(found)


def code_of(text: str) -> Iterator[tuple[int, str]]:
    """The code a doc shows, with its line number: each inline code span outside blocks, and each
    line of a shell block (other blocks are output, YAML or text, not commands)."""
    for number, line, block in lines_outside_fences(text):
        if block is None:
            for span in INLINE_CODE.finditer(line):
                yield number, span.group(2).strip()
        elif block in SHELL_BLOCKS:
            yield number, line.strip()


def is_verb_position(word: str) -> bool:
    """Whether a command's first word is meant as a verb (not a flag, argument or placeholder)."""
    return not (word.startswith(("-", "<", "[", "$")) or "=" in word or word.isupper())


def check_commands(root: Path, doc: Path, known: dict[str, set[str]]) -> Iterator[Problem]:
    """The example commands of one doc naming a verb neither gymbuild nor doit has."""
    name = doc.relative_to(root).as_posix()
    for number, code in code_of(doc.read_text(encoding="utf-8")):
        for tool, word in COMMAND.findall(code):
            word = word.rstrip(".,;:)")
            if is_verb_position(word) and word not in known[tool]:
                yield Problem(name, number, f"`{tool} {word}`: {word!r} is no {tool} verb, command or task")


def known_words(root: Path) -> dict[str, set[str]]:
    """What may follow `gymbuild` and `doit`: the checkout's verbs (pyproject.toml's doit.COMMAND
    entry points), doit's own commands, and for doit the tasks of the checkout's dodo.py."""
    from doit.doit_cmd import DoitMain

    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    verbs = set(project.get("entry-points", {}).get("doit.COMMAND", {}))
    doits = {command.get_name() for command in DoitMain.DOIT_CMDS}
    dodo = root / "dodo.py"
    tasks = set(
        re.findall(r"^def task_(\w+)", dodo.read_text(encoding="utf-8"), re.M) if dodo.exists() else []
    )
    return {"gymbuild": verbs | doits, "doit": verbs | doits | tasks}


def docs_of(root: Path) -> list[Path]:
    """The docs checked: the Markdown files of DOC_GLOBS (a build folder's left out), sorted."""
    found = {
        doc
        for pattern in DOC_GLOBS
        for doc in root.glob(pattern)
        if "build" not in doc.relative_to(root).parts
    }
    return sorted(found)


def check(root: Path) -> list[Problem]:
    """Every problem of the checkout's docs, in file and line order."""
    known = known_words(root)
    problems: list[Problem] = []
    for doc in docs_of(root):
        problems += [*check_links(root, doc), *check_commands(root, doc, known)]
    return sorted(problems, key=lambda p: (p.file, p.line))


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent
    problems = check(root)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        fix = "the link's path or heading, or the verb"
        print(f"fix: correct the {len(problems)} place(s) above ({fix})", file=sys.stderr)
        return 1
    print(f"docs: the links and example commands of {len(docs_of(root))} files match the checkout")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
