#!/usr/bin/env python3
"""`pip check`, judged against the reviewed list of accepted conflicts (docker/lock/accepted-conflicts.toml).

Usage: pip_check.py ACCEPTED_TOML [--rehearsal] [--python PYTHON] [--pip-check-output FILE]
Runs `PYTHON -m pip check` (default: this interpreter) and sorts every line it prints into accepted (the package and
requirement are in the list, with a reason) or not. Exit 0 when nothing unaccepted is left, 1 otherwise, 2 on bad input.
Entries with `only = "rehearsal"` count only with --rehearsal (the build on the stand-in base).
An accepted entry that no longer occurs is reported (so the list shrinks when upstream fixes its pins), not failed.
Stdlib only: it runs inside the image build, before anything else is trusted.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

# pip's two kinds of broken requirement (pip/_internal/operations/check.py wording).
CONFLICT = re.compile(r"^(?P<pkg>\S+) \S+ has requirement (?P<req>.+), but you have (?P<dep>\S+) (?P<have>\S+)\.$")
MISSING = re.compile(r"^(?P<pkg>\S+) \S+ requires (?P<req>.+), which is not installed\.$")


def norm_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def norm_req(req: str) -> tuple[str, frozenset[str]]:
    """('name', {specifiers}) with extras and markers dropped, so spelling and order do not matter."""
    req = req.split(";", 1)[0].strip()
    m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$", req)
    if not m:
        return norm_name(req), frozenset()
    specs = frozenset(s.replace(" ", "") for s in m.group(3).split(",") if s.strip())
    return norm_name(m.group(1)), specs


@dataclass(frozen=True)
class Entry:
    package: str
    requirement: tuple[str, frozenset[str]]
    kind: str  # "conflict" | "missing"


def load_accepted(path: Path, rehearsal: bool = False) -> dict[Entry, str]:
    if not path.is_file():
        raise ValueError(f"{path} is missing: it lists the conflicts the image accepts; restore it from git")
    data = tomllib.loads(path.read_text())
    out: dict[Entry, str] = {}
    for i, item in enumerate(data.get("accepted", [])):
        missing = [k for k in ("package", "requirement", "kind", "reason") if not str(item.get(k, "")).strip()]
        if missing or item["kind"] not in ("conflict", "missing"):
            raise ValueError(f"{path}: entry {i + 1} needs package, requirement, kind (conflict|missing) and reason")
        if item.get("only", "rehearsal") != "rehearsal":
            raise ValueError(f'{path}: entry {i + 1}: only = {item["only"]!r}; the one value allowed is "rehearsal"')
        if item.get("only") == "rehearsal" and not rehearsal:
            continue
        name, specs = norm_req(item["requirement"])
        # A missing requirement is matched by name (pip prints no specifier for it); a conflict by name and specifier.
        kept = specs if item["kind"] == "conflict" else frozenset()
        out[Entry(norm_name(item["package"]), (name, kept), item["kind"])] = item["reason"]
    return out


def parse(lines: list[str]) -> tuple[list[tuple[Entry, str]], list[str]]:
    """(entries with their pip line, lines that are neither a conflict nor a missing requirement)."""
    found, other = [], []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("No broken requirements"):
            continue
        if m := CONFLICT.match(line):
            found.append((Entry(norm_name(m["pkg"]), norm_req(m["req"]), "conflict"), line))
        elif m := MISSING.match(line):
            # pip names only the missing distribution here, not the specifier.
            found.append((Entry(norm_name(m["pkg"]), (norm_req(m["req"])[0], frozenset()), "missing"), line))
        else:
            other.append(line)
    return found, other


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("accepted")
    p.add_argument("--rehearsal", action="store_true", help='also accept the entries marked only = "rehearsal"')
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--pip-check-output", help="judge this saved `pip check` output instead of running pip")
    a = p.parse_args(argv)
    try:
        accepted = load_accepted(Path(a.accepted), a.rehearsal)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        print(f"pip-check: {exc}", file=sys.stderr)
        return 2
    if a.pip_check_output:
        text = Path(a.pip_check_output).read_text()
    else:
        text = subprocess.run([a.python, "-m", "pip", "check"], capture_output=True, text=True, check=False).stdout
    found, other = parse(text.splitlines())
    bad = [line for entry, line in found if entry not in accepted] + other
    seen = {entry for entry, _ in found}
    for entry, line in found:
        if entry in accepted:
            print(f"pip-check: accepted: {line} ({accepted[entry]})")
    for entry in accepted:
        if entry not in seen:
            print(f"pip-check: note: accepted {entry.kind} {entry.package} -> {entry.requirement[0]} no longer occurs;"
                  " remove it from the accepted list")  # fmt: skip
    for line in bad:
        print(f"pip-check: NOT ACCEPTED: {line}", file=sys.stderr)
    if bad:
        print(f"pip-check: {len(bad)} broken requirement(s) not in {a.accepted}: fix the lock, or add each with its"
              " reason after review", file=sys.stderr)  # fmt: skip
        return 1
    print(f"pip-check: {len(found)} broken requirement(s), all accepted in {a.accepted}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
