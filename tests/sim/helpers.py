"""Shared helpers of the stand-in tool tests: the tools' modules, a scratch host state, running a stand-in tool.
The cluster driver (a running simulated cluster, SSH, faults) is simkit.cluster's, shared with the bench."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from simkit.paths import TOOLS, simctl

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# The stand-ins' modules import each other (and a3facts) by plain name, from the folder they lie in.
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))
simstate = importlib.import_module("simstate")
simfaults = importlib.import_module("simfaults")
simfaulttable = importlib.import_module("simfaulttable")
simhostview = importlib.import_module("simhostview")
simnpusmi = importlib.import_module("simnpusmi")
simhccn = importlib.import_module("simhccn")
simservices = importlib.import_module("simservices")
__all__ = ["FIXTURES", "TOOLS", "HostState", "simctl", "simfaults", "simfaulttable", "simhccn", "simhostview",
           "simnpusmi",
           "simservices", "simstate"]  # fmt: skip


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
        info = simservices.ASCEND_INSTALL_INFO if complete_install else "Driver_Install_Type=full\n"
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
