"""Shared helpers of the simulated-cluster tests: paths, a scratch host state, running the stand-in tools."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SIM_HOST = REPO / "docker" / "sim-host"
TOOLS = SIM_HOST / "tools"
SIMCTL = SIM_HOST / "simctl.py"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def load_module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


simhost = load_module("verl_sim_simhost", TOOLS / "simhost.py")
simctl = load_module("verl_sim_simctl", SIMCTL)


class HostState:
    """A simulated host's state folder outside any container (VERL_SIM_DIR / VERL_SIM_ROOT)."""

    def __init__(self, base: Path, cluster: dict[str, Any], host: str, complete_install: bool = True) -> None:
        self.dir = base / "state"
        self.root = base / "root"
        self.dir.mkdir(parents=True)
        (self.root / "etc").mkdir(parents=True)
        (self.dir / "cluster.json").write_text(json.dumps(cluster))
        (self.dir / "host").write_text(host + "\n")
        (self.dir / "faults.json").write_text('{"faults": []}\n')
        info = simhost.ASCEND_INSTALL_INFO if complete_install else "Driver_Install_Type=full\n"
        (self.root / "etc" / "ascend_install.info").write_text(info)
        self.cluster = cluster
        self.host = host

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ, VERL_SIM_DIR=str(self.dir), VERL_SIM_ROOT=str(self.root))
        env.update(extra)
        return env

    def set_faults(self, *specs: str) -> None:
        (self.dir / "faults.json").write_text(json.dumps({"faults": list(specs)}))

    def tool(self, name: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(TOOLS / name), *args], env=self.env(**env), capture_output=True, text=True, timeout=60, check=False
        )

    def out(self, name: str, *args: str) -> str:
        p = self.tool(name, *args)
        assert p.returncode == 0, f"{name} {' '.join(args)} failed: {p.stderr}"
        return p.stdout
