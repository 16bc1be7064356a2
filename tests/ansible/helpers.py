"""Shared helpers for the deploy.yml tests: run ansible-playbook from ansible/ and build inventories."""

from __future__ import annotations

import copy
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_DIR = REPO / "ansible"
SAMPLE = ANSIBLE_DIR / "inventory" / "sample"
VENV_BIN = Path(sys.executable).parent


def load_plugin(relpath: str) -> ModuleType:
    """Import a module or action plugin file of the roles by path (they are not on sys.path)."""
    path = ANSIBLE_DIR / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def playbook(
    inventory: Path,
    *args: str,
    playbook_file: str = "deploy.yml",
    timeout: int = 1800,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.update(extra_env or {})
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["ANSIBLE_CONFIG"] = str(ANSIBLE_DIR / "ansible.cfg")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), playbook_file, *args]
    return subprocess.run(cmd, cwd=ANSIBLE_DIR, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def sample_inventory() -> tuple[dict[str, Any], dict[str, Any]]:
    hosts = yaml.safe_load((SAMPLE / "hosts.yml").read_text())
    site = yaml.safe_load((SAMPLE / "group_vars" / "all" / "site.yml").read_text())
    return hosts, site


def write_inventory(dest: Path, hosts: dict[str, Any], site: dict[str, Any]) -> Path:
    (dest / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
    (dest / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    (dest / "group_vars" / "all" / "site.yml").write_text(yaml.safe_dump(site, sort_keys=False))
    return dest


def node_hosts(inv: dict[str, Any]) -> dict[str, Any]:
    hosts: dict[str, Any] = inv["all"]["children"]["a3_nodes"]["hosts"]
    return hosts


def clone(value: Any) -> Any:
    return copy.deepcopy(value)


def _benchlib() -> ModuleType:
    """bench/benchlib.py holds the one PLAY RECAP parser (unit-tested in tests/bench); bench/ is not a package,
    so it is imported the way tests/bench imports it (one module object, whichever test collects first)."""
    sys.path.insert(0, str(REPO / "bench"))
    import benchlib

    return benchlib


recap = _benchlib().recap


def changed_tasks(output: str) -> str:
    """The TASK headers followed by a `changed:` line, with those lines (for assertion messages)."""
    out, task = [], ""
    for line in output.splitlines():
        if line.startswith("TASK ["):
            task = line
        elif line.startswith("changed:"):
            out += [task, line]
    return "\n".join(out) or "no changed task in the output"
