"""README is a page a site starts from: at most 150 lines, and every command of its runbook (the code blocks marked
`<!-- runbook -->`) names a make target and make variables that exist, so the page cannot drift from the Makefile."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def runbook_lines() -> list[str]:
    """The command lines of the marked blocks, comments and continuation joins removed."""
    text = README.read_text()
    blocks = re.findall(r"<!-- runbook -->\n(?:<!-- runbook -->\n)*```bash\n(.*?)```", text, re.S)
    lines = []
    for block in blocks:
        for raw in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", raw).strip()
            if line:
                lines.append(line)
    return lines


def make_database() -> str:
    """make's own view of every target and variable (`make -pn`), without running anything."""
    p = subprocess.run(["make", "-pnq", "-C", str(REPO)], capture_output=True, text=True, check=False, timeout=120)
    return p.stdout


def test_readme_is_short_and_has_a_runbook() -> None:
    assert len(README.read_text().splitlines()) <= 150
    lines = runbook_lines()
    for step in ("make venv", "make inventory", "make preflight", "make deploy", "make train"):
        assert any(line.startswith(step) for line in lines), f"the runbook has no `{step}`"


def test_every_runbook_make_command_names_a_real_target_and_real_variables() -> None:
    db = make_database()
    targets = set(re.findall(r"^([a-zA-Z][\w-]*):", db, re.M))
    variables = set(re.findall(r"^([A-Z][A-Z0-9_]*) [:?]?=", db, re.M))
    seen = 0
    commands = [c.strip() for line in runbook_lines() for c in line.split("&&")]
    for line in commands:
        if not line.startswith("make "):
            continue
        # placeholders (<Ascend index>, <site>) are one word
        words = re.findall(r'(?:[^\s"]+|"[^"]*")+', re.sub(r"<[^>]*>", "X", line[len("make ") :]))
        for word in words:
            if "=" in word:
                name = word.split("=", 1)[0]
                assert name in variables, f"README runbook: `{line}` sets {name}, which no makefile reads"
            elif not word.startswith("-"):
                assert word in targets, f"README runbook: `{line}` names target {word}, which does not exist"
                seen += 1
    assert seen >= 6
