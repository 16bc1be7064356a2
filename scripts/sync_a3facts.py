"""Copy the one source of the A3 facts, entrypoints/verl_recipe/a3facts.py, to where it runs outside the package.

`python3 scripts/sync_a3facts.py` writes the copies; `--check` only says which differ (exit 1), as
tests/unit/test_a3facts_copies.py does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "entrypoints" / "verl_recipe" / "a3facts.py"
# Ansible's module_utils (ansible.cfg `module_utils`) and the simulated host image (/usr/lib/verl-sim).
COPIES = (
    REPO / "ansible" / "module_utils" / "a3facts.py",
    REPO / "docker" / "sim-host" / "tools" / "a3facts.py",
)


def stale() -> list[Path]:
    """The copies that are missing or differ from the source, byte for byte."""
    want = SOURCE.read_bytes()
    return [c for c in COPIES if not c.is_file() or c.read_bytes() != want]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only report copies that differ (exit 1)")
    args = ap.parse_args(argv)
    todo = stale()
    if args.check:
        for c in todo:
            print(f"{c.relative_to(REPO)} differs from {SOURCE.relative_to(REPO)}", file=sys.stderr)
        return 1 if todo else 0
    for c in todo:
        c.write_bytes(SOURCE.read_bytes())
        print(f"wrote {c.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
