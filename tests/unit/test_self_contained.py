"""The repository stands alone: no tracked file reads, imports or cites a path outside the checkout."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Names of material that lives beside a development checkout but never in a user's clone.
OUTSIDE_NAMES = re.compile(r"\.\./shared\b|\bshared/facts\b|\bfacts \d+\.\d+\b|(?<![\w.-])/work/")
# A relative path that climbs: counted from the file's own folder, it must stay inside the checkout.
CLIMB = re.compile(r"(?:(?<=[\s'\"`(=:])|^)((?:\.\./)+)[\w.-]*")
# Python reaching above its checkout: Path(__file__).resolve().parents[N] with N >= the file's depth.
PARENTS = re.compile(r"Path\(__file__\)\.resolve\(\)\.parents\[(\d+)\]")


def outside_references(rel: str, text: str) -> list[str]:
    """Every reference in `text` (the file at repository path `rel`) that points outside the repository."""
    found: list[str] = []
    depth = len(PurePosixPath(rel).parts) - 1  # folders between the root and the file
    for n, line in enumerate(text.splitlines(), 1):
        for m in OUTSIDE_NAMES.finditer(line):
            found.append(f"{rel}:{n}: {m.group(0)!r} names material outside the repository")
        for m in CLIMB.finditer(line):
            ups = m.group(1).count("../")
            if ups > depth:
                found.append(f"{rel}:{n}: {m.group(0)!r} climbs {ups} folders from a file {depth} deep")
        for m in PARENTS.finditer(line):
            if int(m.group(1)) > depth:
                found.append(f"{rel}:{n}: parents[{m.group(1)}] is above the repository for a file {depth} deep")
    return found


def tracked_files() -> list[str]:
    # Tracked and new files alike (--others --exclude-standard), so a file is checked before its first commit.
    listing = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    p = subprocess.run(listing, cwd=ROOT, capture_output=True, check=False)
    if p.returncode == 0 and p.stdout:
        return [f for f in p.stdout.decode().split("\0") if f]
    # An export without .git: every file under the root but build outputs and environments.
    skip = {".git", ".venv", "build", ".cache", "node_modules", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
    return [str(f.relative_to(ROOT)) for f in ROOT.rglob("*") if f.is_file() and not skip & set(f.parts)]


def test_no_tracked_file_refers_outside_the_repository() -> None:
    problems: list[str] = []
    this = str(Path(__file__).resolve().relative_to(ROOT))
    for rel in tracked_files():
        path = ROOT / rel
        if rel == this or path.is_symlink() or not path.is_file():
            continue
        raw = path.read_bytes()
        if b"\0" in raw[:8192]:
            continue  # binary
        problems += outside_references(rel, raw.decode("utf-8", errors="replace"))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("rel", "text"),
    [
        ("docs/x.md", "formats of `../shared/facts/ascend-a3-hosts.md`"),
        ("entrypoints/verl_recipe/models.py", "Values from shared/facts/qwen.md section 1.1"),
        ("docker/sim-host/tools/simnpusmi.py", "# Bus-Ids of the sample (facts 2.1)"),
        ("tests/conformance/test_x.py", 'FACTS = Path(__file__).resolve().parents[3] / "shared"'),
        ("Makefile", "include ../other/mk/common.mk"),
        ("docs/image.md", "see ../../notes/build.md"),
        ("scripts/x.sh", "cat /work/shared/pins.md"),
    ],
)
def test_the_check_catches_each_way_out(rel: str, text: str) -> None:
    assert outside_references(rel, text), f"not caught: {text}"


@pytest.mark.parametrize(
    ("rel", "text"),
    [
        ("mk/ansible.mk", "ansible-lint -c ../.ansible-lint deploy.yml"),
        ("docker/sim-host/build.sh", 'here=$(dirname "$0"); root=$here/../..'),
        ("tests/unit/test_x.py", "ROOT = Path(__file__).resolve().parents[2]"),
        ("docs/deploy.md", "mounted at /mnt/shared on every host (site_shared_root)"),
    ],
)
def test_references_inside_the_repository_pass(rel: str, text: str) -> None:
    assert outside_references(rel, text) == []
