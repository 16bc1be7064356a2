"""The state of one simulated A3 host, shared by the stand-ins' modules (simhost.py is their entry point).

Everything is read from a state directory on each call (VERL_SIM_DIR, default /etc/verl-sim):
  cluster.json  written by simctl.py at `make sim-up` (every host, its addresses, the HDK minimum)
  host          this host's name (a3-01, ...)
  faults.json   {"faults": [...]}: the faults switched on at run time (`simhost.py fault add|clear`)
Files the tools read from the host (ascend_install.info) are looked up under VERL_SIM_ROOT (default /), so the tools
also run outside a container (unit tests). This module holds those paths, the cluster and fault-state readers,
SimError, the constants several modules share, and the locks that keep the tools from running concurrently.
Standard library only: the simulated host's python3 has nothing else.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

# a3facts.py and the other modules lie next to this file (tools/ in the repository, /usr/lib/verl-sim in the image);
# whoever imports them puts that folder on sys.path first (simhost.py, the npu-smi and hccn_tool wrappers, the tests).
import a3facts

DIES = a3facts.DIES_PER_NODE  # dies per A3 node (8 NPU modules x 2 dies)

# Device nodes: /dev/davinciN 234:N, davinci_manager 235:0, devmm_svm 511:0 (a3-tools T11); hisi_hdc's numbers
# were not recorded, 236:0 is made up.
CONTROL_NODES = {"davinci_manager": (235, 0), "devmm_svm": (511, 0), "hisi_hdc": (236, 0)}


class SimError(Exception):
    """A one-line error for the user: what is wrong, and the fix."""


# --------------------------------------------------------------------------------------------------------------
# state


def state_dir() -> Path:
    return Path(os.environ.get("VERL_SIM_DIR", "/etc/verl-sim"))


def root_path(path: str) -> Path:
    return Path(os.environ.get("VERL_SIM_ROOT", "/")) / path.lstrip("/")


def load_cluster() -> dict[str, Any]:
    p = state_dir() / "cluster.json"
    try:
        data: dict[str, Any] = json.loads(p.read_text())
    except FileNotFoundError:
        raise SimError(f"{p} is missing: this is not a simulated host (set VERL_SIM_DIR to its state folder)") from None
    return data


def this_host() -> str:
    p = state_dir() / "host"
    try:
        return p.read_text().strip()
    except FileNotFoundError:
        raise SimError(f"{p} is missing: this is not a simulated host (set VERL_SIM_DIR to its state folder)") from None


def host_entry(cluster: dict[str, Any], name: str) -> dict[str, Any]:
    for h in cluster["hosts"]:
        if h["name"] == name:
            return dict(h)
    names = ", ".join(h["name"] for h in cluster["hosts"])
    raise SimError(f"host '{name}' is not in this simulated cluster ({names})")


def read_fault_specs() -> list[str]:
    p = state_dir() / "faults.json"
    try:
        specs = json.loads(p.read_text()).get("faults", [])
    except FileNotFoundError:
        return []
    return [str(s) for s in specs]


# --------------------------------------------------------------------------------------------------------------
# the tools' locks (state folder files: one npu-smi per host, one hccn_tool per die at a time)

TOOL_LOCKS = ["npu-smi", *(f"hccn-{d}" for d in range(DIES))]


@contextlib.contextmanager
def exclusive(name: str) -> Any:
    """Yield False when another call holds `name`: Huawei's npu-smi guide says the tool does not support
    concurrent use, and ascend-deployer and MindCluster query one die after another. The stand-ins refuse a
    second npu-smi on the host, and a second hccn_tool on the same die, while one runs."""
    path = state_dir() / f".busy-{name}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)  # flock needs no write access
    except OSError:
        yield True  # no lock file and no right to create one (apply() creates them as root)
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


# SYNTHETIC: the real tools' text for a refused concurrent call was not recorded; the code -8020 ("device is
# used") is the one dcmi returns for a die another caller holds.
BUSY_TEXT = "{tool}: {what} is in use by another {tool} call, ret -8020; concurrent use is not supported (simulated)"


def hold() -> None:
    """A real query takes a while on the device; the stand-in holds its lock for VERL_SIM_TOOL_HOLD_S (default
    0: none) so that calls started together in a test really overlap."""
    time.sleep(float(os.environ.get("VERL_SIM_TOOL_HOLD_S", "0")))
