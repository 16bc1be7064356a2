"""Every reference between the repository's Markdown files lands: a relative link names a file that exists, a
`#anchor` names a heading of its target (GitHub's anchors), and the prose references the docs use name a heading,
a numbered section or a runbook step that is there:

- `deploy.md, "Who starts training"`, `[deploy.md](deploy.md), "Container runtime"`, `README "Settings"`,
  `cluster.md ("Lost nodes")`: a heading of that file starts with the quoted words (any numbering left out);
- `contracts.md section 2`, `[contracts.md](contracts.md), section 5`: that file has a heading numbered 2 (`## 2. ...`);
- `README's runbook, step 3`, `README step 3`: README's "Runbook" has a step 3.

A section renamed or renumbered without its references is reported with the file and line that point at it.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = ("shared/",)  # another project's files, mounted beside ours: not this repository's docs

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$", re.M)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
NUMBERED = re.compile(r"^(\d+)\.\s")
STEP = re.compile(r"^(\d+)\.\s")
# A file named in prose: a link to it, or its name (in backticks or not); README also without ".md".
FILE = r"(?:\[[^\]]*\]\((?P<link>[^)#\s]+\.md)(?:#[^)]*)?\)|`?(?P<name>(?<![\w/.-])[\w./-]*\w\.md|README)`?)"
QUOTED = re.compile(FILE + r"(?:'s)?,?[ \t]*\n?[ \t]*\(?\"(?P<quote>[^\"\n]+)\"")
SECTION = re.compile(FILE + r",?\s+section\s+(?P<section>\d+)")
RUNBOOK_STEP = re.compile(r"\bREADME(?:\.md)?`?(?:'s)?(?:\s+runbook)?,?\s+step\s+(?P<step>\d+)")


@dataclass(frozen=True)
class Heading:
    line: int
    level: int
    text: str  # as written, markup included


@dataclass(frozen=True)
class Doc:
    path: Path
    lines: tuple[str, ...]  # fenced code blanked out: what it shows is not a link or a heading

    @property
    def prose(self) -> str:
        return "\n".join(self.lines)


def load(path: Path) -> Doc:
    out: list[str] = []
    fence = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = ""
            out.append("")
        elif m:
            fence = m.group(1)
            out.append("")
        else:
            out.append(line)
    return Doc(path, tuple(out))


def headings(doc: Doc) -> list[Heading]:
    found = []
    for i, line in enumerate(doc.lines, 1):
        m = HEADING.match(line)
        if m:
            found.append(Heading(i, len(m.group(1)), m.group(2)))
    return found


def plain(text: str) -> str:
    """A heading's text as GitHub shows it: links as their text, no code ticks or emphasis, no HTML tags (but
    `<stamp>` inside a code span is text)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    parts = re.split(r"(`[^`]*`)", text)
    text = "".join(p[1:-1] if p.startswith("`") else re.sub(r"<[^>]+>|\*", "", p) for p in parts)
    return text.strip()


def slug(text: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped but - and _, each space a -."""
    return re.sub(r"[^\w\- ]", "", plain(text).lower()).replace(" ", "-")


def anchors(doc: Doc) -> set[str]:
    """Every heading's anchor; the second of a name gets -1, the third -2, ..."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for h in headings(doc):
        base = slug(h.text)
        n = seen.get(base, 0)
        seen[base] = n + 1
        name = base if n == 0 else f"{base}-{n}"
        while name in out:  # a heading literally named "x-1" before the second "x"
            n += 1
            name = f"{base}-{n}"
        out.add(name)
    return out


def runbook_steps(doc: Doc) -> set[int]:
    """The numbered steps of the "Runbook" section (items at the start of a line)."""
    steps: set[int] = set()
    inside = False
    for line in doc.lines:
        m = HEADING.match(line)
        if m:
            inside = plain(m.group(2)).lower() == "runbook"
            continue
        s = STEP.match(line)
        if inside and s:
            steps.add(int(s.group(1)))
    return steps


def line_of(doc: Doc, offset: int) -> int:
    return doc.prose.count("\n", 0, offset) + 1


class Checker:
    """The problems of a set of Markdown files under root, each as `file:line: what`."""

    def __init__(self, root: Path, files: list[Path]) -> None:
        self.root = root
        self.files = files
        self.docs: dict[Path, Doc] = {}

    def doc(self, path: Path) -> Doc:
        path = path.resolve()
        if path not in self.docs:
            self.docs[path] = load(path)
        return self.docs[path]

    def where(self, doc: Doc, offset: int) -> str:
        return f"{doc.path.relative_to(self.root)}:{line_of(doc, offset)}"

    def named(self, doc: Doc, name: str) -> Path | None:
        """The file a prose reference names: beside the doc, then from the root, then in docs/."""
        name = "README.md" if name == "README" else name
        for base in (doc.path.parent, self.root, self.root / "docs"):
            candidate = base / name
            if candidate.is_file():
                return candidate
        return None

    def foreign(self, doc: Doc, name: str) -> bool:
        """A file of another project (`docs/feature_guides/x.md` of an upstream repository): no folder of ours
        would hold it. A file of ours renamed or removed still has its folder, and is reported."""
        return not any((base / name).parent.is_dir() for base in (doc.path.parent, self.root, self.root / "docs"))

    def problems(self) -> list[str]:
        found: list[str] = []
        for path in self.files:
            doc = self.doc(path)
            found += self.links(doc)
            found += self.prose_refs(doc)
        return found

    def links(self, doc: Doc) -> list[str]:
        found: list[str] = []
        text = re.sub(r"`[^`\n]*`", lambda m: " " * len(m.group()), doc.prose)  # code spans hold no links
        targets = [(m.start(), m.group(1)) for m in LINK.finditer(text)]
        targets += [(m.start(), m.group(1)) for m in REF_DEF.finditer(text)]
        for offset, target in targets:
            if not target or SCHEME.match(target) or target.startswith("//"):
                continue
            file_part, _, anchor = target.partition("#")
            dest = (doc.path.parent / file_part).resolve() if file_part else doc.path
            if not dest.exists():
                found.append(f"{self.where(doc, offset)}: link to {target}: {file_part} does not exist")
                continue
            if anchor and dest.is_file() and dest.suffix == ".md" and anchor not in anchors(self.doc(dest)):
                found.append(
                    f"{self.where(doc, offset)}: link to {target}: {dest.name} has no heading #{anchor}; "
                    f"its anchors: {', '.join(sorted(anchors(self.doc(dest))))}"
                )
        return found

    def target(self, doc: Doc, m: re.Match[str]) -> Path | None:
        if m.group("link"):
            dest = (doc.path.parent / m.group("link")).resolve()
            return dest if dest.is_file() else None
        return self.named(doc, m.group("name"))

    def prose_refs(self, doc: Doc) -> list[str]:
        found: list[str] = []
        for m in QUOTED.finditer(doc.prose):
            dest = self.target(doc, m)
            if dest is None and m.group("name") and self.foreign(doc, m.group("name")):
                continue
            if dest is None:
                found.append(f"{self.where(doc, m.start())}: {m.group()!r} names no file")
                continue
            quote = " ".join(m.group("quote").split()).lower()
            titles = [NUMBERED.sub("", plain(h.text)).lower() for h in headings(self.doc(dest))]
            if not any(t == quote or (t.startswith(quote) and not t[len(quote)].isalnum()) for t in titles):
                found.append(f'{self.where(doc, m.start())}: {dest.name} has no heading "{m.group("quote")}"')
        for m in SECTION.finditer(doc.prose):
            dest = self.target(doc, m)
            if dest is None and m.group("name") and self.foreign(doc, m.group("name")):
                continue
            if dest is None:
                found.append(f"{self.where(doc, m.start())}: {m.group()!r} names no file")
                continue
            numbers = {NUMBERED.match(plain(h.text)) for h in headings(self.doc(dest))}
            if m.group("section") not in {n.group(1) for n in numbers if n}:
                found.append(f"{self.where(doc, m.start())}: {dest.name} has no section {m.group('section')}")
        for m in RUNBOOK_STEP.finditer(doc.prose):
            readme = self.named(doc, "README")
            if readme is None or int(m.group("step")) not in runbook_steps(self.doc(readme)):
                found.append(f"{self.where(doc, m.start())}: README's runbook has no step {m.group('step')}")
        return found


@cache
def repository_markdown() -> tuple[Path, ...]:
    """Every Markdown file git tracks or would track (untracked but not ignored), outside shared/."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "*.md"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    names = sorted({n for n in listed.split("\0") if n and not n.startswith(OUTSIDE)})
    return tuple(ROOT / n for n in names if (ROOT / n).is_file())


def test_the_repository_markdown_is_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in repository_markdown()}
    assert {"README.md", "docs/contracts.md", "docs/cluster.md", "tests/README.md", "bench/README.md"} <= names
    assert not any(n.startswith(OUTSIDE) for n in names)


def test_every_reference_between_the_docs_lands() -> None:
    problems = Checker(ROOT, list(repository_markdown())).problems()
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------------------------------------ the checker itself


def write(root: Path, files: dict[str, str]) -> list[Path]:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return [root / name for name in files if name.endswith(".md")]


GOOD = {
    "README.md": (
        "# Top\n\n## Runbook\n\n1. first\n2. second\n\n## Usage (`cli`), step-by-step!\n\n## Usage\n\n## Usage\n"
    ),
    "docs/a.md": (
        "# A\n\n## 1. Inventory (`site`)\n\n### Who starts training: operators\n\n```\n# not a heading\n```\n"
        "## 2. Run folder\n"
    ),
    "docs/b.md": (
        "See [a](a.md#1-inventory-site), [top](../README.md#usage-cli-step-by-step), "
        "[again](../README.md#usage-1), [self](#b), [img](img/x.png).\n"
        'Prose: docs/a.md, "Who starts training"; [a.md](a.md), section 2; `a.md` section 1;\n'
        'README\'s runbook, step 2; README "Runbook"; [a.md](a.md)\n("Inventory").\n'
        '`[code](nowhere.md)`, upstream `docs/guides/x.md`, "Theirs" and\n'
        "```\n[fenced](nowhere.md#x) docs/a.md section 9\n```\n# B\n"
    ),
    "docs/img/x.png": "",
}


def test_the_checker_passes_references_that_land(tmp_path: Path) -> None:
    files = write(tmp_path, GOOD)
    assert Checker(tmp_path, files).problems() == []


@pytest.mark.parametrize(
    ("broken", "reported"),
    [
        ("[a](a.md#2-inventory)", "link to a.md#2-inventory: a.md has no heading #2-inventory"),
        ("[a](a.md#who-starts-training)", "a.md has no heading #who-starts-training"),
        ("[gone](gone.md)", "link to gone.md: gone.md does not exist"),
        ("[top](../README.md#usage-2)", "README.md has no heading #usage-2"),
        ("[self](#nothing)", "b.md has no heading #nothing"),
        ('docs/a.md, "Who stops training"', 'a.md has no heading "Who stops training"'),
        ('[a.md](a.md), "Run folders"', 'a.md has no heading "Run folders"'),
        ('README "Settings"', 'README.md has no heading "Settings"'),
        ("a.md section 3", "a.md has no section 3"),
        ("[a.md](a.md), section 7", "a.md has no section 7"),
        ("README step 3", "README's runbook has no step 3"),
        ('gone.md, "Anything"', "names no file"),
        ("docs/gone.md section 1", "names no file"),
    ],
)
def test_the_checker_reports_a_broken_reference(tmp_path: Path, broken: str, reported: str) -> None:
    files = write(tmp_path, {**GOOD, "docs/b.md": GOOD["docs/b.md"] + f"\nAnd {broken}.\n"})
    problems = Checker(tmp_path, files).problems()
    assert len(problems) == 1, problems
    assert problems[0].startswith("docs/b.md:") and reported in problems[0], problems


def test_anchors_follow_github() -> None:
    doc = Doc(
        Path("x.md"),
        ("## 5. Security", "## `train`: wait, validate", "## A", "## A", "## A", "### Café & C++", "## Run (`<a>/b`)"),
    )
    assert anchors(doc) == {"5-security", "train-wait-validate", "a", "a-1", "a-2", "café--c", "run-ab"}
