"""What several bench sections share: the recipe and image they measure, the log line, timing, the machine's
description, deploy.yml with the bench's image tarball, and stamped output lines of a process."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simkit.cluster import SimCluster
from simkit.paths import REPO, SIM_IMAGE
from simkit.procs import checked, run

IMAGE = SIM_IMAGE
# gzip: 16 hosts each hold the staged tarball and the loaded image at once during the fan-out (disk, not speed).
TARBALL = REPO / "build" / "images" / "verl-recipe-sim.tar.gz"
RECIPE = "qwen3.5-397b"
PLAN_NODES = 16
SERVICE = "train-397b"  # its service in compose.yaml
COMPOSE = "docker compose"  # deploy.yml's .env in the install folder carries the rest


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.monotonic()
    out = fn()
    return time.monotonic() - t0, out


def machine() -> dict[str, Any]:
    mem = Path("/proc/meminfo").read_text().split("\n")[0].split()[1]
    return {
        "nproc": os.cpu_count(),
        "mem_total_gib": round(int(mem) / 2**20, 1),
        "loadavg": list(os.getloadavg()),
        "platform": platform.platform(),
    }


def deploy_yml(c: SimCluster, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    """deploy.yml on the cluster with the bench's image tarball (`site_image_tarball`); returns its seconds too."""
    secs, p = timed(lambda: c.playbook("-e", f"site_image_tarball={TARBALL}", *args, timeout=3600))
    return float(secs), p


def scaled_layout(nodes: int) -> str:
    """The --set arguments that scale RECIPE's layout to `nodes` simulated nodes (scripts/sim_scale.py)."""
    scale = checked(run([sys.executable, str(REPO / "scripts" / "sim_scale.py"), RECIPE, str(nodes)]), "scale")
    return scale.stdout.strip()


class Stamped:
    """Lines of a process with the time each arrived."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[tuple[float, str]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.time(), line.rstrip()))

    def first(self, pred: Callable[[str], bool], after: float = 0.0) -> tuple[float, str] | None:
        for t, line in list(self.lines):
            if t >= after and pred(line):
                return t, line
        return None

    def wait(self, pred: Callable[[str], bool], timeout: float, after: float = 0.0) -> tuple[float, str] | None:
        end = time.time() + timeout
        while time.time() < end:
            hit = self.first(pred, after)
            if hit or (self.proc.poll() is not None and not self.thread.is_alive()):
                return hit
            time.sleep(0.2)
        return None
