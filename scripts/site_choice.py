#!/usr/bin/env python3
"""The site every command acts on, chosen once: `make use INVENTORY=inventory/<site>` makes the link
ansible/inventory/current (ignored by git) point at it. ansible.cfg's default inventory is that link, so
`ansible-playbook deploy.yml` typed in ansible/ acts on the chosen site, and mk/ansible.mk reads the same link, so
`make runs`, `make attach RUN=...`, `make deploy` and the rest need no `INVENTORY=`. An INVENTORY given on a command
line wins. The link is the choice's one home (SkyPilot remembers its cluster the same way).

No command ever acts on the tracked sample (ansible/inventory/sample): its addresses are README's examples, and a
command typed without a site would otherwise reach whichever host owns 10.10.0.11.

  site_choice.py use INVENTORY          check it and point the link at it
  site_choice.py check TARGET INVENTORY exit 2 with one line when INVENTORY is empty, the sample or missing
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ANSIBLE = REPO / "ansible"
SAMPLE = ANSIBLE / "inventory" / "sample"
USE = "make use INVENTORY=inventory/<site>"
CURRENT = ANSIBLE / "inventory" / "current"
# What the link may point at: a plain path, nothing make or a shell would expand when mk/ansible.mk reads it.
SAFE = re.compile(r"[A-Za-z0-9_./+-][A-Za-z0-9_./+@:-]*")


def resolve(inventory: str) -> Path:
    """INVENTORY as the targets read it: relative to ansible/, or absolute."""
    p = Path(inventory)
    return p if p.is_absolute() else ANSIBLE / p


def is_sample(path: Path) -> bool:
    folder = path if path.is_dir() else path.parent
    return folder.resolve() == SAMPLE.resolve()


def problem(inventory: str) -> str:
    """Why INVENTORY cannot be acted on, with the fix; empty when it can."""
    if not inventory.strip() or (inventory.rstrip("/") == "inventory/current" and not CURRENT.exists()):
        return f"no site chosen; fix: `{USE}` once (or INVENTORY=... on this command)"
    path = resolve(inventory)
    if is_sample(path):
        return (
            f"INVENTORY={inventory} is the tracked sample, whose addresses are README's examples; fix: "
            "`make inventory SITE=<site> HOSTS=...` writes your site's, then `" + USE + "`"
        )
    if not path.exists():
        return f"INVENTORY={inventory} does not exist ({path}); fix: `{USE}` with the folder `make inventory` wrote"
    if path.is_dir() and not any((path / n).exists() for n in ("hosts.yml", "hosts.yaml", "hosts.ini", "hosts")):
        return f"INVENTORY={inventory} holds no hosts.yml; fix: `make inventory SITE=<site> HOSTS=...` writes it"
    return ""


def use(inventory: str) -> int:
    why = problem(inventory)
    if not why and not SAFE.fullmatch(inventory):
        why = f"INVENTORY={inventory!r} is not a plain path; fix: give the folder without spaces or quotes"
    if why:
        print(f"use: {why}", file=sys.stderr)
        return 2
    path = resolve(inventory)
    if path.resolve() == CURRENT.resolve() or path == CURRENT:
        print(f"use: INVENTORY={inventory} is already the current site")
        return 0
    # relative to the link's folder for inventory/<site>, so the checkout can move; absolute stays absolute
    rel = Path(inventory).relative_to("inventory") if inventory.startswith("inventory/") else path
    tmp = CURRENT.with_name(".current.tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(rel)
    os.replace(tmp, CURRENT)  # atomic: a command reading the link meanwhile sees the old site or the new one
    print(
        f"use: every command now acts on INVENTORY={inventory} (ansible/inventory/current -> {rel}), "
        "`ansible-playbook deploy.yml` in ansible/ too; `make use INVENTORY=...` changes it"
    )
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "use":
        return use(argv[1])
    if len(argv) == 3 and argv[0] == "check":
        why = problem(argv[2])
        if why:
            print(f"{argv[1]}: {why}", file=sys.stderr)
            return 2
        return 0
    print("usage: site_choice.py use INVENTORY | check TARGET INVENTORY", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
