"""Shared helpers of the simulated-cluster tests: paths, a scratch host state, running the stand-in tools."""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
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


@dataclass
class Cluster:
    name: str
    inventory: Path
    info: dict[str, Any]

    def simctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, SIM_NAME=self.name, SIM_INVENTORY=str(self.inventory))
        p = subprocess.run([sys.executable, str(SIMCTL), *args], env=env, capture_output=True, text=True, check=False)
        if check:
            assert p.returncode == 0, f"simctl {' '.join(args)}: {p.stderr}"
        return p

    def ssh(
        self, host: str, *cmd: str, known_hosts: Path | None = None, stdin: str = ""
    ) -> subprocess.CompletedProcess[str]:
        ip = self.ip(host)
        return subprocess.run(
            # ssh hands the remote shell one string: quote each word.
            [*simctl.ssh_cmd(self.inventory, ip, known_hosts), shlex.join(cmd)],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    def ip(self, host: str) -> str:
        return next(str(h["cluster_ip"]) for h in self.info["hosts"] if h["name"] == host)

    def probe(self, host: str, script: str) -> dict[str, Any]:
        """Run a Python script on `host` over SSH (argv: peers' NPU addresses as JSON, the control node's clock)."""
        peers = {h["name"]: h["npu_ips"] for h in self.info["hosts"] if h["name"] != host}
        script = "import os; os.environ['VERL_SIM_PING_TIMEOUT'] = '1.0'\n" + script
        p = self.ssh(host, "python3", "-", json.dumps(peers), str(time.time()), stdin=script)
        if p.returncode == 255:  # ssh itself failed: the host does not answer
            return {"reachable": False}
        assert p.returncode == 0, p.stderr
        out: dict[str, Any] = json.loads(p.stdout)
        for k in out:
            if k.startswith("ping:"):  # the summary line; the per-packet lines carry round-trip times
                out[k] = [line for line in out[k].splitlines() if "packets transmitted" in line]
        return out

    def probe_all(self, script: str) -> dict[str, dict[str, Any]]:
        hosts = [str(h["name"]) for h in self.info["hosts"]]
        with concurrent.futures.ThreadPoolExecutor(len(hosts)) as pool:
            return dict(zip(hosts, pool.map(lambda h: self.probe(h, script), hosts), strict=True))


def leftovers(name: str) -> list[str]:
    out = []
    for kind in ("container", "network", "volume"):
        out += simctl.labelled(kind, name)
    names = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"name=^{name}-", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return out + names


@contextlib.contextmanager
def running_cluster(name: str, nodes: int, workdir: Path) -> Iterator[Cluster]:
    """A cluster under a test-only name, removed on exit even after a failure; nothing of it may be left."""
    if subprocess.run(["docker", "image", "inspect", simctl.HOST_IMAGE], capture_output=True).returncode != 0:
        subprocess.run(["make", "-C", str(REPO), "sim-image"], check=True)
    c = Cluster(name, workdir / name, {})
    try:
        c.simctl("up", "--nodes", str(nodes), "--subnet", "auto")
        c.info = json.loads((c.inventory / "cluster.json").read_text())
        yield c
    finally:
        c.simctl("down", check=False)
        left = leftovers(name)
        assert left == [], f"objects of {name} left behind: {left}"
        assert not c.inventory.exists()
