"""ansible-playbook as a user runs it from ansible/, and what its output says."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from simkit.paths import ANSIBLE_DIR, VENV_BIN
from simkit.procs import run


def ansible_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment with the venv's Ansible first on PATH, the project's ansible.cfg, no colour."""
    env = dict(os.environ)
    env.update(extra or {})
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["ANSIBLE_CONFIG"] = str(ANSIBLE_DIR / "ansible.cfg")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    return env


def playbook(
    inventory: Path,
    *args: str,
    playbook_file: str = "deploy.yml",
    timeout: float = 1800,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`ansible-playbook -i INVENTORY PLAYBOOK ARGS...` in ansible/ (an inventory file or folder)."""
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), playbook_file, *args]
    return run(cmd, timeout=timeout, cwd=ANSIBLE_DIR, env=ansible_env(extra_env))


def recap(output: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP counters per host of an ansible-playbook run."""
    out: dict[str, dict[str, int]] = {}
    in_recap = False
    for line in output.splitlines():
        if line.startswith("PLAY RECAP"):
            in_recap = True
            continue
        if in_recap:
            m = re.match(r"^(\S+)\s+:\s+(.*)$", line)
            if not m:
                if line.strip() == "":
                    continue
                if out:
                    break
                continue
            out[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return out


def changed_total(counts: dict[str, dict[str, int]]) -> int:
    return sum(c.get("changed", 0) for c in counts.values())


def changed_tasks(output: str) -> str:
    """The TASK headers followed by a `changed:` line, with those lines (for assertion messages)."""
    out, task = [], ""
    for line in output.splitlines():
        if line.startswith("TASK ["):
            task = line
        elif line.startswith("changed:"):
            out += [task, line]
    return "\n".join(out) or "no changed task in the output"


def role_times(output: str) -> dict[str, float]:
    """ansible.posix.profile_roles' summary: seconds per role."""
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(\w+) -+ ([\d.]+)s$", output, re.M)}
