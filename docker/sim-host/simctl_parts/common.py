"""What every part of the simulated cluster's controller shares: names, labels, subnets, the version floor, and
running docker."""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
LABEL = "org.verl-recipe.sim"
HOST_IMAGE = "verl-recipe-sim-host:bookworm"
DEFAULT_NAME = "verl-sim"
DEFAULT_SUBNET = "172.30.0.0/24"
MAX_NODES = 16

SSH_USER = "deploy"
# A head account that may start training (inventory site_operators; ansible/roles/operator), not the deploy account.
OPERATOR_USER = "trainer"  # Debian has a group "operator" of its own
# The operator's own key pair beside the simulated inventory (not the deploy account's id_ed25519)
OPERATOR_KEY = "id_operator_ed25519"
# The memory every simulated host reports (/proc/meminfo, bound as LXCFS does): an assumed A3 host's RAM, above the
# preflight's 1024 GiB floor; the real figure is the host's own. The real-site profile varies it between hosts.
HOST_MEM_GIB = 1536
SHARED_ROOT = "/mnt/shared"
SHARED_DIRS = ("models", "data", "checkpoints", "runs")
NPU_NET = "198.18"  # RFC 2544 benchmark range: the simulated NPU (RoCE) addresses are never routed anywhere
MARKER = ".verl-sim-inventory"
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")
LINK_MODES = ("roce", "hccs")


class SimError(Exception):
    """One line for the user: what is wrong and the fix."""


# --------------------------------------------------------------------------------------------------------------
# helpers


def run(cmd: list[str], check: bool = True, input_bytes: bytes | None = None) -> subprocess.CompletedProcess[str]:
    if input_bytes is not None:
        b = subprocess.run(cmd, input=input_bytes, capture_output=True)
        p = subprocess.CompletedProcess(
            cmd, b.returncode, b.stdout.decode(errors="replace"), b.stderr.decode(errors="replace")
        )
    else:
        p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        msg = (p.stderr or p.stdout).strip().splitlines()
        raise SimError(f"`{' '.join(cmd[:4])} ...` failed: {msg[-1] if msg else 'exit ' + str(p.returncode)}")
    return p


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run(["docker", *args], check=check)


def host_name(i: int) -> str:
    return f"a3-{i:02d}"


def container(name: str, host: str) -> str:
    return f"{name}-{host}"


def default_inventory(name: str) -> Path:
    return REPO / "ansible" / "inventory" / ("sim" if name == DEFAULT_NAME else name)


def hdk_min() -> str:
    data = yaml.safe_load((REPO / "docker" / "versions.yaml").read_text())
    return str(data["host"]["hdk_min"])


def check_name(name: str) -> None:
    if not NAME_RE.match(name):
        raise SimError(f"SIM_NAME '{name}' is not valid: use 2-32 lower-case letters, digits and '-' (e.g. verl-sim)")


def labelled(kind: str, name: str) -> list[str]:
    fmt = "{{.Names}}" if kind == "container" else "{{.Name}}"
    cmd = {"container": ["ps", "-a"], "network": ["network", "ls"], "volume": ["volume", "ls"]}[kind]
    out = docker(*cmd, "--filter", f"label={LABEL}={name}", "--format", fmt).stdout
    return sorted(line for line in out.splitlines() if line)


def used_subnets() -> list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    ids = docker("network", "ls", "-q").stdout.split()
    if not ids:
        return []
    nets = json.loads(docker("network", "inspect", *ids).stdout)
    out = []
    for n in nets:
        for cfg in (n.get("IPAM") or {}).get("Config") or []:
            if cfg.get("Subnet"):
                out.append((n["Name"], ipaddress.ip_network(cfg["Subnet"], strict=False)))
    return out


def choose_subnet(name: str, wanted: str) -> ipaddress.IPv4Network:
    used = used_subnets()
    if wanted == "auto" or (not wanted and name != DEFAULT_NAME):
        for third in range(1, 256):
            cand = ipaddress.IPv4Network(f"172.30.{third}.0/24")
            if not any(cand.overlaps(u) for _, u in used if u.version == 4):
                return cand
        raise SimError("no free 172.30.N.0/24 subnet is left: set SIM_SUBNET to a free IPv4 /24")
    text = wanted or DEFAULT_SUBNET
    try:
        net = ipaddress.IPv4Network(text, strict=True)
    except ValueError:
        raise SimError(f"SIM_SUBNET '{text}' is not an IPv4 network like 172.30.0.0/24") from None
    if net.prefixlen > 27:
        raise SimError(f"SIM_SUBNET '{text}' is too small: the hosts use .11-.26, give a /27 or larger")
    for other, u in used:
        if u.version == 4 and net.overlaps(u):
            raise SimError(f"SIM_SUBNET {net} overlaps docker network '{other}' ({u}): choose another SIM_SUBNET")
    return net
