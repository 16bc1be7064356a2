"""How a simulated site differs from the code's assumptions, the way real A3 sites do (docs/simulated-cluster.md,
"Site profiles"). Each difference is an option of `simctl.py up`; a profile names a set of them:

  --addresses formula|random   NPU (RoCE) and vNIC addresses: 198.18.<die>.<10+host> and one /16 up (formula), or
                               drawn at random per cluster (random): no pattern, unique, inside the simulated NPU
                               network 198.18.0.0/15 (RFC 2544, never routed), known only from each host's own
                               /etc/hccn.conf and hccn_tool
  --npu-smi everywhere|sbin-some  npu-smi in /usr/local/sbin with a link in /usr/local/bin on every host, or only in
                               /usr/local/sbin on the head and the 3rd host (docs/a3-tools.md T13: both layouts are
                               real)
  --hdk uniform|mixed          every host at host.hdk_min, or HDK versions that differ between hosts, all at or above it
  --seed N                     the seed of the random choices (default: drawn), recorded in cluster.json
  --profile default|real-site  default: formula, everywhere, uniform; real-site: random, sbin-some, mixed, and two
                               differences that only the profile sets: the deploy account without the docker group
                               (training goes through the operator account and verl-train, docs/deploy.md section
                               5), and host memory that differs between hosts (2048 GiB on even ranks, the head
                               among them, 1536 GiB on odd ones)

The choices are written into the cluster description (cluster.json, on every host and beside the inventory): the
host's stand-ins (simhostview.py, simhccn.py, simservices.py) read them there. The default profile adds nothing to
the description, so a default cluster is what it always was.
"""

from __future__ import annotations

import ipaddress
import random
import secrets
from dataclasses import dataclass
from typing import Any

from .common import NPU_NET, SimError

ADDRESSES = ("formula", "random")
NPU_SMI = ("everywhere", "sbin-some")
HDK = ("uniform", "mixed")
PROFILES: dict[str, dict[str, str]] = {
    "default": {
        "addresses": "formula",
        "npu_smi": "everywhere",
        "hdk": "uniform",
        "deploy_docker": "yes",
        "memory": "uniform",
    },
    "real-site": {
        "addresses": "random",
        "npu_smi": "sbin-some",
        "hdk": "mixed",
        "deploy_docker": "no",
        "memory": "mixed",
    },
}
# --profile real-site's host memory: the head and every other host more than the rest, so HOST_MEM_GIB (the least)
# is not the head's.
MIXED_MEM_GIB = (2048, 1536)
NPU_SMI_SBIN = "/usr/local/sbin/npu-smi"
# The hosts (by rank) whose npu-smi is only in /usr/local/sbin under --npu-smi sbin-some: the head (it runs the
# training container too) and the 3rd, so a 3-host cluster has two such hosts and one with the usual link.
SBIN_ONLY_RANKS = (0, 2)
# The simulated NPU network: RoCE addresses in the first /16, vNIC addresses in the second (the formula's layout);
# the .0.1 of each is the dies' gateway (simhostview.npu_gateway), never a die's.
ROCE_NET = ipaddress.IPv4Network(f"{NPU_NET}.0.0/16")
VNIC_NET = ipaddress.IPv4Network(f"{NPU_NET.split('.')[0]}.{int(NPU_NET.split('.')[1]) + 1}.0.0/16")


@dataclass(frozen=True)
class SiteOptions:
    profile: str = "default"
    addresses: str = ""
    npu_smi: str = ""
    hdk: str = ""
    seed: int | None = None

    def resolved(self) -> dict[str, str]:
        """Each option: the one given, else the profile's."""
        if self.profile not in PROFILES:
            raise SimError(f"SIM_PROFILE '{self.profile}' is not valid: use {' or '.join(PROFILES)}")
        base = dict(PROFILES[self.profile])
        for key, value, allowed, var in (
            ("addresses", self.addresses, ADDRESSES, "SIM_ADDRESSES"),
            ("npu_smi", self.npu_smi, NPU_SMI, "SIM_NPU_SMI"),
            ("hdk", self.hdk, HDK, "SIM_HDK"),
        ):
            if value and value not in allowed:
                raise SimError(f"{var} '{value}' is not valid: use {' or '.join(allowed)}")
            if value:
                base[key] = value
        return base

    @property
    def is_default(self) -> bool:
        return self.resolved() == PROFILES["default"]


def parse_seed(text: str) -> int | None:
    if not text:
        return None
    if not text.isdigit() or len(text) > 12:
        raise SimError(f"SIM_SEED '{text}' is not valid: give a whole number (0-999999999999)")
    return int(text)


def random_addresses(rng: random.Random, net: ipaddress.IPv4Network, count: int, taken: set[str]) -> list[str]:
    """`count` addresses of `net` no one has yet: not the network's .0.1 (the gateway), no .0 or .255 host part."""
    out: list[str] = []
    gateway = net.network_address + 1
    while len(out) < count:
        ip = net.network_address + rng.randrange(1, net.num_addresses - 1)
        text = str(ip)
        if ip == gateway or text.endswith((".0", ".255")) or text in taken:
            continue
        taken.add(text)
        out.append(text)
    return out


def newer_versions(floor: str) -> list[str]:
    """HDK releases at or above `floor`, spelled as version.info spells them (lower-case rc): 26.0.RC1 gives
    26.0.rc1, 26.0.rc2, 26.0.0, 26.0.1; 25.5.0 gives 25.5.0, 25.5.1, 25.6.0."""
    parts = floor.lower().split(".")
    major, minor = parts[0], parts[1]
    third = parts[2] if len(parts) > 2 else "0"
    if third.startswith("rc"):
        n = int(third[2:])
        return [f"{major}.{minor}.rc{n}", f"{major}.{minor}.rc{n + 1}", f"{major}.{minor}.0", f"{major}.{minor}.1"]
    return [floor.lower(), f"{major}.{minor}.{int(third) + 1}", f"{major}.{int(minor) + 1}.0"]


def apply_profile(cluster: dict[str, Any], options: SiteOptions) -> dict[str, Any]:
    """The cluster description with the options' differences: per host its npu_ips and vnic_ips (random), npu_smi
    (the paths it has) and hdk (its version), and `profile` saying what was chosen with which seed."""
    chosen = options.resolved()
    if chosen == PROFILES["default"]:
        return cluster
    seed = options.seed if options.seed is not None else secrets.randbelow(10**9)
    rng = random.Random(seed)
    roce: set[str] = set()
    vnic: set[str] = set()
    versions = newer_versions(str(cluster["hdk_min"]))
    for h in cluster["hosts"]:
        rank = int(h["rank"])
        if chosen["addresses"] == "random":
            h["npu_ips"] = random_addresses(rng, ROCE_NET, len(h["npu_ips"]), roce)
            h["vnic_ips"] = random_addresses(rng, VNIC_NET, len(h["npu_ips"]), vnic)
        if chosen["npu_smi"] == "sbin-some" and rank in SBIN_ONLY_RANKS:
            h["npu_smi"] = [NPU_SMI_SBIN]
        if chosen["hdk"] == "mixed":
            # The head keeps the floor itself and the 2nd host another release: at least two versions in the cluster.
            pick = versions[0] if rank == 0 else rng.choice(versions[1:]) if rank == 1 else rng.choice(versions)
            h["hdk"] = pick
        if chosen["memory"] == "mixed":
            h["mem_gib"] = MIXED_MEM_GIB[rank % 2]
    cluster["profile"] = {"name": options.profile, **chosen, "seed": seed}
    return cluster
