#!/usr/bin/python
"""Read-only health check of one A3 host; returns every check, passed or failed, in one result."""

# ruff: noqa: E402  # Ansible modules put DOCUMENTATION before the imports
from __future__ import annotations

DOCUMENTATION = r"""
module: a3_preflight
short_description: Read-only preflight checks of an Ascend A3 training host
description:
  - Runs every check (OS, memory, cluster NIC, firewall, driver and firmware versions installed and running, device
    nodes, die map, die health and occupancy, NPU network and hccn.conf, container runtime, shared storage, free
    disk, time sync) and returns them all; it never changes the host.
  - npu-smi and hccn_tool run one call at a time (Huawei documents npu-smi as not supporting concurrent use).
  - The module itself does not fail on a failed check; the caller collects the results of all hosts.
options:
  expected_dies: {type: int, required: true, description: NPU dies on the host.}
  hdk_min: {type: str, required: true, description: Minimum driver and firmware version.}
  npu_ips: {type: list, elements: str, required: true, description: Expected NPU address per die.}
  ping_plan:
    type: list
    elements: dict
    default: []
    description: Pings to send, each {die, address, peer, peer_die} (the action plugin plans them).
  inter_server_link:
    type: str
    default: roce
    choices: [roce, hccs]
    description: Which path HCCL uses between servers (site_inter_server_link).
  vnic_ips:
    type: list
    elements: str
    default: []
    description: hccs mode, the inventory's vNIC address per die (a3_vnic_ips), compared with what -vnic -g reports.
  cluster_ip: {type: str, required: true, description: This host's cluster address (inventory a3_cluster_ip).}
  cluster_nic: {type: str, required: true, description: The NIC that must carry it (inventory a3_cluster_nic).}
  cluster_peers: {type: list, elements: str, default: [], description: Cluster addresses of the other hosts.}
  compose_project: {type: str, default: verl-recipe, description: Compose project whose containers may hold dies.}
  min_host_ram_gib: {type: float, default: 0, description: Host memory needed (MemTotal), GiB.}
  simulated: {type: bool, default: false, description: Simulated host.}
  allowed_arch: {type: list, elements: str, required: true, description: Accepted machine architectures.}
  allowed_os:
    type: list
    elements: str
    required: true
    description: Accepted releases, "ID VERSION_ID [text in VERSION]" from /etc/os-release.
  shared_root: {type: str, required: true, description: Shared storage mount point.}
  model_path: {type: str, required: true, description: Model folder (must hold config.json).}
  data_files: {type: list, elements: str, required: true, description: Data files that must exist.}
  ckpt_root: {type: str, required: true, description: Checkpoint folder (exists or can be created).}
  min_free_disk_gib: {type: float, required: true, description: Free space needed on the Docker data root.}
  docker_installable: {type: bool, default: false, description: Offline Docker packages are provided.}
  driver_version_file: {type: str, default: /usr/local/Ascend/driver/version.info, description: Driver version.info.}
  firmware_version_file:
    {type: str, default: /usr/local/Ascend/firmware/version.info, description: Firmware version.info.}
  hccn_conf_file: {type: str, default: /etc/hccn.conf, description: The NPU network configuration file.}
  meminfo_file: {type: str, default: /proc/meminfo, description: Where MemTotal is read.}
  os_release_file: {type: str, default: /etc/os-release, description: The OS release file.}
  tool_dirs: {type: list, elements: str, default: [], description: Extra folders searched for npu-smi and hccn_tool.}
  command_timeout: {type: int, default: 60, description: Seconds one device query may take.}
author: verl-recipe
"""

EXAMPLES = r"""
# The preflight role calls it through its action plugin, which adds ping_plan and cluster_peers.
- name: Check one A3 host (read-only)
  a3_preflight:
    expected_dies: 16
    hdk_min: 25.5.0
    npu_ips: "{{ a3_npu_ips }}"
    cluster_ip: 10.20.0.11
    cluster_nic: bond0
    allowed_arch: [aarch64]
    allowed_os: ["openEuler 22.03 (LTS-SP4)"]
    shared_root: /mnt/shared
    model_path: /mnt/shared/models/Qwen3.5-397B-A17B
    data_files: [/mnt/shared/data/gsm8k/train.parquet]
    ckpt_root: /mnt/shared/ckpt
    min_free_disk_gib: 200
  register: preflight_result
"""

RETURN = r"""
checks:
  description: One row per check, passed or failed.
  returned: always
  type: list
  elements: dict
  contains:
    check: {description: Row name (docs/deploy.md lists them)., type: str}
    ok: {description: Whether the check passed., type: bool}
    status: {description: ok or failed., type: str}
    dies: {description: The die indices the row is about., type: list}
    peers: {description: The other hosts the row is about., type: list}
    found: {description: What the host shows., type: str}
    expected: {description: What the check wants., type: str}
    fix: {description: What to do; empty on passed rows., type: str}
net:
  description: Per die, the NPU network as hccn_tool reports it.
  returned: always
  type: dict
device_queries:
  description: How many npu-smi/hccn_tool calls ran, one at a time, and their seconds in all.
  returned: always
  type: dict
clock:
  description: The host clock when it was read (epoch seconds).
  returned: always
  type: float
clock_source:
  description: ntp when a time-sync check ran, else none.
  returned: always
  type: str
docker_present: {description: A Docker engine is installed., returned: always, type: bool}
compose_present: {description: docker compose v2 is installed., returned: always, type: bool}
service_mgr: {description: systemd or service., returned: always, type: str}
engine_limits: {description: Hard limits of the running dockerd (nofile, memlock)., returned: always, type: dict}
"""

import ipaddress
import os
import re
import shutil
import subprocess
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule

# ansible/module_utils (ansible.cfg `module_utils`); Ansible ships it to the host with this module. The tests put
# the same folder on ansible.module_utils' path (tests/conftest.py).
from ansible.module_utils.a3facts import (
    DRIVER_VERSION_KEYS,
    FIRMWARE_VERSION_KEYS,
    hdk_key,
    hdk_version,
    nearest_existing,
    parse_version_info,
)

Check = dict[str, Any]


def check(
    name: str,
    ok: bool,
    found: Any,
    expected: Any,
    fix: str,
    dies: list[int] | None = None,
    peers: list[str] | None = None,
) -> Check:
    """One row: `dies` and `peers` name what the row is about (the failing dies, the hosts pinged)."""
    return {
        "check": name,
        "ok": bool(ok),
        "status": "ok" if ok else "failed",
        "dies": sorted(set(dies or [])),
        "peers": sorted(set(peers or [])),
        "found": str(found),
        "expected": str(expected),
        "fix": "" if ok else fix,
    }


def as_int(text: str) -> int | None:
    """ASCII digits as an int, else None: str.isdigit() also accepts digits int() refuses (superscripts, ...)."""
    return int(text) if text.isascii() and text.isdigit() else None


def parse_kv(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        if "=" in line:
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), value.strip())
    return out


def parse_colon(text: str) -> dict[str, str]:
    """`Key : value` and `key:value` lines (npu-smi -t, hccn_tool -g) into a dict, keys lower-cased."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if ":" in line:
            key, _, value = line.partition(":")
            out.setdefault(key.strip().lower(), value.strip())
    return out


def parse_ping_loss(text: str) -> float | None:
    m = re.search(r"([0-9]+(?:\.[0-9]+)?)%\s*packet loss", text, re.ASCII)
    return float(m.group(1)) if m else None


def parse_mountpoints(text: str) -> set[str]:
    points = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 4:
            points.add(fields[4].replace("\\040", " "))
    return points


def os_release(text: str) -> dict[str, str]:
    return {k: v.strip().strip('"').strip("'") for k, v in parse_kv(text).items()}


def os_allowed(rel: dict[str, str], allowed: list[str]) -> bool:
    """An entry "ID VERSION_ID [text]" matches ID and VERSION_ID exactly (case-insensitive) and, when given, the
    text inside VERSION: openEuler keeps its service pack there ("22.03 (LTS-SP4)"), Kylin its release name."""
    rid, vid, ver = rel.get("ID", "").lower(), rel.get("VERSION_ID", "").lower(), rel.get("VERSION", "").lower()
    for entry in allowed:
        parts = entry.split(None, 2)
        if len(parts) < 2 or parts[0].lower() != rid or parts[1].lower() != vid:
            continue
        if len(parts) == 2 or parts[2].lower() in ver:
            return True
    return False


def parse_npu_table(text: str) -> tuple[dict[tuple[int, int], dict[str, str]], list[dict[str, Any]]]:
    """`npu-smi info`: per (NPU id, chip) the Health and Phy-ID of each die row pair, and the process table rows
    (NPU id, chip, pid, name). A3 prints `| <npu> <name> | <health> |` then `| <chip> <phy-id> | <bus-id> |`."""
    dies: dict[tuple[int, int], dict[str, str]] = {}
    procs: list[dict[str, Any]] = []
    in_procs = False
    npu, health = -1, ""
    for line in text.splitlines():
        if "Process id" in line:
            in_procs = True
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2:
            continue
        first = cells[0].split()
        nums = [as_int(t) for t in first[:2]]
        if in_procs:
            pid = as_int(cells[1])
            if len(first) == 2 and nums[0] is not None and nums[1] is not None and pid is not None:
                name = cells[2] if len(cells) > 2 else ""
                procs.append({"npu": nums[0], "chip": nums[1], "pid": pid, "name": name})
            continue
        if len(first) >= 2 and nums[0] is not None and not first[1].isdigit():
            npu, health = nums[0], cells[1].split()[0] if cells[1].split() else ""
        elif first and nums[0] is not None and re.match(r"^[0-9A-Fa-f]{4}:", cells[1]) and npu >= 0:
            phy = first[1] if len(first) > 1 else ""
            dies[(npu, nums[0])] = {"health": health, "phy": phy}
    return dies, procs


def parse_chip_map(text: str) -> dict[tuple[int, int], int]:
    """`npu-smi info -m` (A3): (NPU ID, Chip ID) -> Chip Phy-ID for the die rows; Mcu rows carry `-`."""
    out: dict[tuple[int, int], int] = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 5 or f[-1] == "Mcu":
            continue
        npu, chip, phy = as_int(f[0]), as_int(f[1]), as_int(f[3])
        if npu is not None and chip is not None and phy is not None:
            out[(npu, chip)] = phy
    return out


def parse_hccn_conf(text: str) -> dict[str, str]:
    return parse_kv(text)


def in_subnet(addr: str, mask: str, other: str) -> bool:
    try:
        net = ipaddress.IPv4Network(f"{addr}/{mask}", strict=False)
        return ipaddress.IPv4Address(other) in net
    except ValueError:
        return False


def first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "no output"
    return line[:120]


class Host:
    """Runs the host's commands one at a time and counts the device queries (npu-smi, hccn_tool). Output that is
    not UTF-8 is read with replacement characters and named in the tool_output row."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.p = params
        self.timeout = params["command_timeout"]
        path = os.environ.get("PATH", "/usr/bin:/bin")
        extra = [
            *params["tool_dirs"],
            "/usr/local/bin",
            "/usr/local/sbin",
            "/usr/local/Ascend/driver/tools",
            "/usr/sbin",
            "/sbin",
        ]
        self.path = os.pathsep.join([path, *extra])
        self.queries = 0
        self.query_s = 0.0
        self.not_utf8: list[str] = []

    def tool(self, name: str) -> str | None:
        return shutil.which(name, path=self.path)

    def run(self, argv: list[str]) -> tuple[int, str]:
        # LC_ALL=C: the tools' English messages, which the parsers read (a GBK locale prints others)
        env = {**os.environ, "LC_ALL": "C"}
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=self.timeout, check=False, env=env)
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            return 127, str(exc)
        return proc.returncode, self.decode(argv, proc.stdout + proc.stderr).strip()

    def decode(self, argv: list[str], raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            cmd = " ".join([os.path.basename(argv[0]), *argv[1:]])
            self.not_utf8.append(f"`{cmd}` byte {exc.start}: {raw[exc.start : exc.start + 1]!r}")
            return raw.decode("utf-8", errors="replace")

    def query(self, argv: list[str]) -> tuple[int, str]:
        """A device query: never two at once (the caller runs them in sequence)."""
        t = time.monotonic()
        out = self.run(argv)
        self.queries += 1
        self.query_s += time.monotonic() - t
        return out


def read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def platform_checks(p: dict[str, Any]) -> list[Check]:
    arch = os.uname().machine
    rel = os_release(read(p["os_release_file"]) or "")
    shown = f"{rel.get('ID', 'unknown')} {rel.get('VERSION_ID', '')} ({rel.get('VERSION', '')})"
    return [
        check(
            "architecture", arch in p["allowed_arch"], arch, " or ".join(p["allowed_arch"]), "use an A3 (aarch64) host"
        ),
        check(
            "os",
            os_allowed(rel, p["allowed_os"]),
            shown,
            " or ".join(p["allowed_os"]),
            "install an OS release on the A3 list (ascend-deployer 26.0.0), or add this one to preflight_allowed_os "
            "once Huawei's compatibility matrix lists it",
        ),
    ]


def memory_check(p: dict[str, Any]) -> Check:
    meminfo = parse_colon(read(p["meminfo_file"]) or "")
    want = p["min_host_ram_gib"]
    raw = meminfo.get("memtotal")
    words = (raw or "").split()
    kib = as_int(words[0]) if words else None
    if kib is None:
        return check(
            "host_memory",
            False,
            f"no MemTotal in {p['meminfo_file']}" if raw is None else f"MemTotal {raw[:40]!r} is not a number of kB",
            f">= {want:g} GiB",
            f"`grep MemTotal {p['meminfo_file']}` on the host must print the memory in kB; check the kernel's /proc",
        )
    gib = kib / 2**20
    return check(
        "host_memory",
        gib >= want,
        f"{gib:.1f} GiB (MemTotal)",
        f">= {want:g} GiB",
        "the recipes offload optimizer state and vLLM weights to host memory: use hosts with more RAM or lower "
        "preflight_min_host_ram_gib only with a recipe that offloads less",
    )


def parse_ip_addr(text: str) -> dict[str, list[str]]:
    """`ip -o -4 addr show`: NIC -> its IPv4 addresses."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 4 and f[2] == "inet":
            out.setdefault(f[1].rstrip(":").split("@")[0], []).append(f[3].split("/")[0])
    return out


def nic_check(p: dict[str, Any], host: Host) -> Check:
    ip_tool = host.tool("ip")
    ip, nic = p["cluster_ip"], p["cluster_nic"]
    if not ip_tool:
        return check("cluster_nic", False, "`ip` not found", f"{ip} on {nic}", "install iproute2")
    rc, text = host.run([ip_tool, "-o", "-4", "addr", "show"])
    nics = parse_ip_addr(text) if rc == 0 else {}
    holders = [n for n, addrs in nics.items() if ip in addrs]
    ok = nic in holders
    if ok:
        found = f"{ip} on {nic}"
    elif holders:
        found = f"{ip} is on {', '.join(holders)}, not {nic}"
    elif nic in nics:
        found = f"{nic} carries {', '.join(nics[nic]) or 'no IPv4 address'}; {ip} is on no interface"
    else:
        found = f"no interface {nic}; {ip} is on no interface"
    return check(
        "cluster_nic",
        ok,
        found,
        f"{ip} on {nic}",
        "set a3_cluster_nic to the interface that carries a3_cluster_ip (Gloo, HCCL host sockets and Ray bind it), "
        "or a3_cluster_ip to that NIC's address",
    )


def parse_iptables(text: str) -> tuple[dict[str, str], dict[str, list[list[str]]]]:
    """`iptables -S`: chain policies and each chain's rules as word lists (without `-A <chain>`)."""
    policies: dict[str, str] = {}
    rules: dict[str, list[list[str]]] = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 3 and f[0] == "-P":
            policies[f[1]] = f[2]
        elif len(f) >= 2 and f[0] == "-A":
            rules.setdefault(f[1], []).append(f[2:])
    return policies, rules


def _opt(rule: list[str], name: str) -> str:
    return rule[rule.index(name) + 1] if name in rule and rule.index(name) + 1 < len(rule) else ""


def _matches_source(rule: list[str], peer: str) -> bool:
    src = _opt(rule, "-s")
    if not src:
        return True
    try:
        return ipaddress.IPv4Address(peer) in ipaddress.IPv4Network(src, strict=False)
    except ValueError:
        return False


def firewall_blocks(policies: dict[str, str], rules: dict[str, list[list[str]]], peer: str) -> str:
    """The first INPUT rule (following jumps into user chains) that would drop a new TCP connection from `peer` to
    an ephemeral port, or "" when it is accepted. Rules restricted to ports, states or interfaces cannot accept
    every connection, so only an unconditional ACCEPT for the peer's address counts as trust."""

    def walk(chain: str, depth: int) -> str | None:
        for rule in rules.get(chain, []):
            target = _opt(rule, "-j")
            if not _matches_source(rule, peer):
                continue
            narrowed = any(o in rule for o in ("--dport", "--dports", "-i", "--ctstate", "--state", "-m", "-d"))
            if target == "ACCEPT" and not narrowed and _opt(rule, "-p") in ("", "tcp"):
                return ""
            if target in ("DROP", "REJECT") and _opt(rule, "-p") in ("", "tcp", "6"):
                ports = _opt(rule, "--dport") or _opt(rule, "--dports")
                if not ports:  # a drop of all TCP, or all traffic, from the peer
                    return f"-A {chain} {' '.join(rule)}"
            if target == "RETURN" and not narrowed:
                return None
            if target and target in rules and depth < 4:
                got = walk(target, depth + 1)
                if got is not None:
                    return got
        return None

    got = walk("INPUT", 0)
    if got is not None:
        return got
    return "" if policies.get("INPUT", "ACCEPT") == "ACCEPT" else f"-P INPUT {policies['INPUT']}"


def firewall_check(p: dict[str, Any], host: Host) -> Check:
    """Gloo, verl's MASTER_PORT and vLLM's distributed init listen on ephemeral ports: the other cluster hosts
    must reach every port. firewalld and ufw are fine (the OS settings play trusts the cluster addresses there);
    other iptables rules that drop them are not something deploy.yml changes."""
    expected = "new TCP from every cluster host accepted on any port"
    fix = (
        "trust the cluster hosts' addresses in the host firewall (all ports), or use firewalld/ufw, which "
        "deploy.yml configures that way"
    )
    for manager, argv, active in (
        ("firewalld", ["firewall-cmd", "--state"], "running"),
        ("ufw", ["ufw", "status"], "Status: active"),
    ):
        tool = host.tool(argv[0])
        if tool:
            rc, out = host.run([tool, *argv[1:]])
            if rc == 0 and active in out:
                return check(
                    "host_firewall", True, f"{manager} active: the OS settings play trusts the cluster", expected, ""
                )
    ipt = host.tool("iptables")
    if not ipt:
        return check("host_firewall", True, "no iptables (nothing to inspect)", expected, "")
    rc, text = host.run([ipt, "-S"])
    if rc != 0:  # e.g. an nftables ruleset iptables cannot show: not inspected (the rehearsal still tests it)
        return check("host_firewall", True, f"not inspected: iptables -S: {first_line(text)}", expected, fix)
    policies, rules = parse_iptables(text)
    blocked = {}
    for peer in p["cluster_peers"]:
        rule = firewall_blocks(policies, rules, peer)
        if rule:
            blocked[peer] = rule
    if not blocked:
        return check("host_firewall", True, "cluster hosts accepted", expected, "")
    first = next(iter(blocked.values()))
    return check(
        "host_firewall",
        False,
        f"new TCP from {', '.join(sorted(blocked))} dropped by `{first}`",
        expected,
        fix,
        peers=sorted(blocked),
    )


def version_checks(p: dict[str, Any]) -> tuple[list[Check], dict[str, str]]:
    """Installed driver and firmware (version.info) against the minimum; returns the installed versions too."""
    out = []
    want = p["hdk_min"]
    installed: dict[str, str] = {}
    for name, path, keys in (
        ("driver_version", p["driver_version_file"], DRIVER_VERSION_KEYS),
        ("firmware_version", p["firmware_version_file"], FIRMWARE_VERSION_KEYS),
    ):
        text = read(path)
        if text is None:
            out.append(
                check(name, False, f"{path} missing", f">= {want}", f"install the Ascend HDK {want} {name[:-8]}")
            )
            continue
        fields = parse_version_info(text)
        # what npu-smi shows as running: the driver's release, the firmware's own 7.x number
        installed["driver" if name == "driver_version" else "firmware"] = fields.get("Version", "")
        found = hdk_version(fields, keys)
        if not found:
            out.append(check(name, False, f"no {'/'.join(keys)} in {path}", f">= {want}", f"reinstall the HDK {want}"))
            continue
        try:
            ok = hdk_key(found) >= hdk_key(want)
        except ValueError:
            ok = False
        out.append(
            check(
                name,
                ok,
                found,
                f">= {want}",
                f"upgrade the {name[:-8]} to HDK {want} or newer (firmware first, then driver; reboot)",
            )
        )
    return out, installed


def device_node_checks(p: dict[str, Any]) -> list[Check]:
    wanted = [f"/dev/davinci{i}" for i in range(p["expected_dies"])]
    wanted += ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
    missing = [w for w in wanted if not os.path.exists(w)]
    found = "all present" if not missing else "missing " + ", ".join(m.removeprefix("/dev/") for m in missing)
    dies = [int(m.removeprefix("/dev/davinci")) for m in missing if m.removeprefix("/dev/davinci").isdigit()]
    return [
        check(
            "device_nodes",
            not missing,
            found,
            f"{len(wanted)} nodes (davinci0..{p['expected_dies'] - 1} + manager, svm, hdc)",
            "load the NPU driver (reinstall the HDK driver, then reboot)",
            dies=dies,
        )
    ]


def _die_list(bad: dict[int, str]) -> str:
    return "; ".join(f"die {d}: {v}" for d, v in sorted(bad.items()))


def npu_checks(p: dict[str, Any], host: Host, installed: dict[str, str]) -> tuple[list[Check], dict[str, Any]]:
    """Every device query, one after another: one `npu-smi info` (health and process table of all dies), `-m`
    (die -> NPU id/chip), `-t board` per NPU (running versions), hccn_tool per die, then the planned pings."""
    dies = p["expected_dies"]
    npu_smi, hccn = host.tool("npu-smi"), host.tool("hccn_tool")
    out: list[Check] = []
    net: dict[str, Any] = {}
    if not npu_smi:
        for name in ("npu_map", "chip_health", "npu_occupancy", "running_versions"):
            out.append(check(name, False, "npu-smi not found", f"{dies} dies", "install the Ascend HDK driver"))
    else:
        out += npu_smi_checks(p, host, npu_smi, installed)
    if not hccn:
        for name in ("npu_link", "npu_ip", "hccn_conf", "npu_net_health", "npu_gateway", "npu_tls", "npu_ping"):
            out.append(
                check(name, False, "hccn_tool not found", f"{dies} dies", "install the Ascend HDK driver (hccn_tool)")
            )
    else:
        rows, net = hccn_checks(p, host, hccn)
        out += rows
    return out, net


def npu_smi_checks(p: dict[str, Any], host: Host, npu_smi: str, installed: dict[str, str]) -> list[Check]:
    dies = p["expected_dies"]
    out: list[Check] = []
    rc_m, text_m = host.query([npu_smi, "info", "-m"])
    chip_map = parse_chip_map(text_m) if rc_m == 0 else {}
    phys = sorted(chip_map.values())
    missing = sorted(set(range(dies)) - set(phys))
    dup = sorted({d for d in phys if phys.count(d) > 1})
    if rc_m != 0 or not chip_map:
        found = f"`npu-smi info -m` failed: {first_line(text_m)}"
    elif missing or dup:
        found = "; ".join(
            x
            for x in (f"no die with Phy-ID {', '.join(map(str, missing))}" if missing else "",)
            + (f"Phy-ID listed twice: {', '.join(map(str, dup))}" if dup else "",)
            if x
        )
    else:
        found = f"{len(phys)} dies (Phy-ID 0..{dies - 1}) on {len({n for n, _ in chip_map})} NPU ids"
    out.append(
        check(
            "npu_map",
            rc_m == 0 and bool(chip_map) and not missing and not dup,
            found,
            f"Phy-ID 0..{dies - 1} once each in `npu-smi info -m`",
            "a die is missing from the driver's view: check `npu-smi info -m`, reseat or replace the module, "
            "reinstall the driver",
            dies=missing + dup,
        )
    )
    rc, text = host.query([npu_smi, "info"])
    table, procs = parse_npu_table(text) if rc == 0 else ({}, [])

    def die_of(npu: int, chip: int) -> int:
        if (npu, chip) in chip_map:
            return chip_map[(npu, chip)]
        phy = as_int(table.get((npu, chip), {}).get("phy", ""))
        return -1 if phy is None else phy

    health_bad: dict[int, str] = {}
    seen = set()
    for (npu, chip), row in table.items():
        die = die_of(npu, chip)
        seen.add(die)
        if row["health"] != "OK":
            health_bad[die] = f"{row['health'] or 'no health'} (NPU {npu} chip {chip})"
    if rc == 0:
        for die in sorted(set(range(dies)) - seen):
            health_bad[die] = "not listed by `npu-smi info`"
        found = _die_list(health_bad) or f"{dies} dies OK"
    else:
        found = f"`npu-smi info` failed: {first_line(text)}"
    out.append(
        check(
            "chip_health",
            rc == 0 and not health_bad,
            found,
            "Health OK on every die (`npu-smi info`)",
            "see `npu-smi info -t health -i <npu> -c <chip>` for the error code; reset or replace the module",
            dies=list(health_bad),
        )
    )
    busy: dict[int, str] = {}
    for pr in procs:
        die = die_of(pr["npu"], pr["chip"])
        busy[die] = (busy.get(die, "") + ", " if die in busy else "") + f"pid {pr['pid']} {pr['name']}".strip()
    holders = device_holders(p, host)
    found_parts = [_die_list(busy)] if busy else []
    if holders:
        found_parts.append("containers holding NPU devices: " + ", ".join(holders))
    out.append(
        check(
            "npu_occupancy",
            rc == 0 and not busy and not holders,
            "; ".join(found_parts)
            or ("no process on any die" if rc == 0 else f"`npu-smi info` failed: {first_line(text)}"),
            "no process on any die; no other container holding /dev/davinci*",
            "a previous job still holds the dies (-8005 dcmi init / -8020 device is used / EJ0001 on the next "
            "start): stop it (`docker ps`, `kill <pid>`), or wait for it to end",
            dies=list(busy),
        )
    )
    out.append(running_versions(p, host, npu_smi, chip_map, installed))
    return out


def _span(nums: list[int]) -> str:
    nums = sorted(nums)
    if len(nums) > 1 and nums == list(range(nums[0], nums[-1] + 1)):
        return f"{nums[0]}-{nums[-1]}"
    return ",".join(map(str, nums))


def device_holders(p: dict[str, Any], host: Host) -> list[str]:
    """Running containers outside this recipe's Compose project that were handed /dev/davinci* (ascend-deployer
    asks `docker inspect` the same question)."""
    docker = host.tool("docker")
    if not docker:
        return []
    rc, ids = host.run([docker, "ps", "-q"])
    if rc != 0 or not ids.split():
        return []
    fmt = (
        '{{.Name}}|{{index .Config.Labels "com.docker.compose.project"}}|'
        "{{range .HostConfig.Devices}}{{.PathOnHost}} {{end}}"
    )
    rc, text = host.run([docker, "inspect", "--format", fmt, *ids.split()])
    return parse_holders(text, p["compose_project"]) if rc == 0 else []


def parse_holders(text: str, project: str) -> list[str]:
    out = []
    for line in text.splitlines():
        name, _, rest = line.partition("|")
        proj, _, devices = rest.partition("|")
        if proj == project:
            continue
        if any(d.startswith("/dev/davinci") for d in devices.split()):
            out.append(name.lstrip("/"))
    return out


def running_versions(
    p: dict[str, Any], host: Host, npu_smi: str, chip_map: dict[tuple[int, int], int], installed: dict[str, str]
) -> Check:
    """`npu-smi info -t board -i <npu>` shows the driver and firmware that run now; after an upgrade without the
    reboot they differ from version.info (the installer's exit code 2 asks for the reboot)."""
    npus = sorted({n for n, _ in chip_map}) or list(range((p["expected_dies"] + 1) // 2))
    bad: list[str] = []
    running = set()
    for npu in npus:
        rc, text = host.query([npu_smi, "info", "-t", "board", "-i", str(npu)])
        board = parse_colon(text)
        if rc != 0 or "software version" not in board:
            bad.append(f"NPU {npu}: query failed ({first_line(text)})")
            continue
        sw, fw = board.get("software version", ""), board.get("firmware version", "")
        compat = board.get("compatibility", "")
        running.add(f"driver {sw}, firmware {fw}")
        problems = []
        if installed.get("driver") and sw.lower() != installed["driver"].lower():
            problems.append(f"driver {sw} runs, {installed['driver']} installed")
        if installed.get("firmware") and fw.lower() != installed["firmware"].lower():
            problems.append(f"firmware {fw} runs, {installed['firmware']} installed")
        if compat not in ("OK", "NOT SUPPORT"):
            problems.append(f"Compatibility {compat or 'missing'}")
        if problems:
            bad.append(f"NPU {npu}: " + ", ".join(problems))
    dies = [d for (n, _), d in chip_map.items() if any(b.startswith(f"NPU {n}:") for b in bad)]
    # the same finding on several NPUs becomes one entry ("NPU 0-7: ...")
    grouped: dict[str, list[int]] = {}
    for entry in bad:
        head, _, what = entry.partition(": ")
        grouped.setdefault(what, []).append(int(head.split()[1]))
    shown = [f"NPU {_span(n)}: {what}" for what, n in grouped.items()]
    return check(
        "running_versions",
        not bad,
        "; ".join(shown) if bad else ", ".join(sorted(running)),
        "running driver/firmware = installed (version.info), Compatibility OK",
        "reboot the host to load the upgraded driver and firmware (the HDK installer asked for it)",
        dies=dies,
    )


def hccn_checks(p: dict[str, Any], host: Host, hccn: str) -> tuple[list[Check], dict[str, Any]]:
    dies = p["expected_dies"]
    ips = p["npu_ips"]
    conf_text = read(p["hccn_conf_file"])
    conf = parse_hccn_conf(conf_text or "")
    link_bad: dict[int, str] = {}
    ip_bad: dict[int, str] = {}
    conf_bad: dict[int, str] = {}
    health_bad: dict[int, str] = {}
    gw_bad: dict[int, str] = {}
    tls: dict[int, str] = {}
    masks: dict[int, str] = {}
    vnic_bad: dict[int, str] = {}
    for die in range(dies):

        def hccn_query(*args: str, die: int = die) -> tuple[int, str]:
            return host.query([hccn, "-i", str(die), *args])

        rc, text = hccn_query("-link", "-g")
        status = parse_colon(text).get("link status", "")
        if rc != 0 or status != "UP":
            link_bad[die] = status or f"query failed ({first_line(text)})"
        rc, text = hccn_query("-ip", "-g")
        ip_fields = parse_colon(text)
        addr, mask = ip_fields.get("ipaddr", ""), ip_fields.get("netmask", "")
        want = ips[die] if die < len(ips) else ""
        if rc != 0 or not addr:
            ip_bad[die] = f"no address ({first_line(text)})"
        elif addr != want:
            ip_bad[die] = f"{addr} (inventory {want})"
        if mask:
            masks[die] = mask
        c_addr, c_mask = conf.get(f"address_{die}", ""), conf.get(f"netmask_{die}", "")
        if conf_text is not None and addr:
            if c_addr != addr:
                conf_bad[die] = f"address_{die}={c_addr or '(none)'}, device has {addr}"
            elif mask and c_mask and c_mask != mask:
                conf_bad[die] = f"netmask_{die}={c_mask}, device has {mask}"
        rc, text = hccn_query("-net_health", "-g")
        status = parse_colon(text).get("net health status", "")
        if rc != 0 or status != "Success":
            health_bad[die] = status or f"query failed ({first_line(text)})"
        rc, text = hccn_query("-gateway", "-g")
        m = re.search(r"default gateway:\s*([\d.]+)", text)
        gw = m.group(1) if m and rc == 0 else ""
        problems = []
        if not gw:
            problems.append("no gateway")
        elif addr and mask and not in_subnet(addr, mask, gw):
            problems.append(f"gateway {gw} outside {addr}/{mask}")
        if problems:
            gw_bad[die] = ", ".join(problems)
        rc, text = hccn_query("-tls", "-g")
        m = re.search(r"tls switch\[(\d+)\]", text)
        tls[die] = m.group(1) if m and rc == 0 else "?"
        if p["inter_server_link"] == "hccs":
            rc, text = hccn_query("-vnic", "-g")
            vnic = parse_colon(text)
            want = p["vnic_ips"][die] if die < len(p["vnic_ips"]) else ""
            if rc != 0 or vnic.get("vnic link status") != "UP" or not vnic.get("vnic ipaddr"):
                vnic_bad[die] = vnic.get("vnic link status") or f"query failed ({first_line(text)})"
            elif want and vnic["vnic ipaddr"] != want:  # the peers would ping the inventory's address, not this one
                vnic_bad[die] = f"vNIC {vnic['vnic ipaddr']}, a3_vnic_ips[{die}] says {want}"
    n = f"{dies} dies OK"
    out = [
        check(
            "npu_link",
            not link_bad,
            _die_list(link_bad) or n,
            "link status UP on every die",
            "check the cable/optics and switch port of the listed dies (`hccn_tool -i <die> -link -g`, `-lldp -g`)",
            dies=list(link_bad),
        ),
        check(
            "npu_ip",
            not ip_bad,
            _die_list(ip_bad) or n,
            "hccn address = inventory a3_npu_ips",
            "configure /etc/hccn.conf address_<die> and run `hccn_tool -a -cfg recovery`, or fix a3_npu_ips",
            dies=list(ip_bad),
        ),
        check(
            "hccn_conf",
            conf_text is not None and not conf_bad,
            (_die_list(conf_bad) or "address_N and netmask_N match the device")
            if conf_text is not None
            else f"{p['hccn_conf_file']} missing",
            "/etc/hccn.conf address_N/netmask_N = what each die has",
            "correct /etc/hccn.conf (ascend-deployer writes it) and run `hccn_tool -a -cfg recovery`; a stale "
            "address_N makes that NPU unreachable after the next recovery or reboot",
            dies=list(conf_bad),
        ),
        check(
            "npu_net_health",
            not health_bad,
            _die_list(health_bad) or n,
            "net health Success on every die",
            "set netdetect_<die> in /etc/hccn.conf and check the NPU network gateway",
            dies=list(health_bad),
        ),
        check(
            "npu_gateway",
            not gw_bad,
            _die_list(gw_bad) or n,
            "a gateway inside the die's subnet on every die (a missing netdetect address shows in npu_net_health)",
            "set gateway_<die> (and netdetect_<die>) in /etc/hccn.conf, then `hccn_tool -a -cfg recovery`",
            dies=list(gw_bad),
        ),
    ]
    switch = sorted(set(tls.values()))
    out.append(
        check(
            "npu_tls",
            len(switch) == 1 and switch != ["?"],
            f"TLS switch {switch[0]} on all {dies} dies"
            if len(switch) == 1
            else _die_list({d: f"switch {v}" for d, v in tls.items()}),
            "one TLS switch value on every die of every host",
            "make the TLS switch the same everywhere (`hccn_tool -i <die> -tls -s enable <0|1>`): HCCL links "
            "between dies with different switches never establish (EI0006)",
            dies=[d for d, v in tls.items() if v == "?"] if len(switch) == 1 else list(tls),
        )
    )
    if p["inter_server_link"] == "hccs":
        out.append(
            check(
                "npu_vnic",
                not vnic_bad,
                _die_list(vnic_bad) or n,
                "vNIC UP on every die at the inventory's a3_vnic_ips address (HCCS between servers)",
                "check the super-pod's HCCS links (`hccn_tool -i <die> -vnic -g`) and correct a3_vnic_ips to what it "
                "reports, or set site_inter_server_link: roce",
                dies=list(vnic_bad),
            )
        )
    out.append(ping_check(p, host, hccn, link_bad))
    mask_values = sorted(set(masks.values()))
    net = {
        "tls": switch[0] if len(switch) == 1 else "mixed",
        "netmask": mask_values[0] if len(mask_values) == 1 else "mixed",
    }
    return out, net


def ping_check(p: dict[str, Any], host: Host, hccn: str, link_bad: dict[int, str]) -> Check:
    plan = p["ping_plan"]
    bad: dict[int, str] = {}
    peers = set()
    for item in plan:
        die, addr = int(item["die"]), str(item["address"])
        peers.add(str(item.get("peer", "")))
        cmd = "-hccs_ping" if item.get("path") == "hccs" else "-ping"
        rc, text = host.query([hccn, "-i", str(die), cmd, "-g", "address", addr])
        loss = parse_ping_loss(text)
        if loss is None:
            bad[die] = f"ping {addr} failed ({first_line(text)})"
        elif loss > 0:
            bad[die] = f"{loss:.2f}% loss to {addr}"
    hosts = sorted(x for x in peers if x)
    found = _die_list(bad) or f"{len(plan)} pings to {len(hosts)} hosts OK"
    return check(
        "npu_ping",
        not bad,
        found if plan else "no peers (single host)",
        "0% loss from every die to its planned peer die (every other host covered)",
        "check the NPU-network route between these dies (switch, VLAN, ip_rule/ip_route in hccn.conf, "
        "`hccn_tool -i <die> -lldp -g` for mis-cabling)",
        dies=list(bad),
        peers=[str(i["peer"]) for i in plan if int(i["die"]) in bad],
    )


def runtime_checks(p: dict[str, Any], host: Host) -> tuple[list[Check], dict[str, Any]]:
    out: list[Check] = []
    info: dict[str, Any] = {"docker": False, "compose": False, "docker_root": "/var/lib/docker"}
    docker = host.tool("docker") or ""
    rc, text = host.run([docker, "version", "--format", "{{.Server.Version}}"]) if docker else (127, "docker not found")
    info["docker"] = rc == 0
    if rc == 0:
        out.append(check("container_runtime", True, f"docker {text}", "docker engine running", ""))
        rc2, root = host.run([docker, "info", "--format", "{{.DockerRootDir}}"])
        if rc2 == 0 and root.startswith("/"):
            info["docker_root"] = root
        rc3, ver = host.run([docker, "compose", "version", "--short"])
        info["compose"] = rc3 == 0
        if rc3 != 0:
            out.append(
                check(
                    "compose_plugin",
                    p["docker_installable"],
                    "docker compose missing",
                    "Compose v2 plugin",
                    "provide the docker-compose-plugin package in container_engine_offline_dir",
                )
            )
        else:
            out.append(check("compose_plugin", True, f"compose {ver}", "Compose v2 plugin", ""))
    else:
        found = first_line(text) + ("; offline packages provided, will install" if p["docker_installable"] else "")
        out.append(
            check(
                "container_runtime",
                p["docker_installable"],
                found,
                "docker engine running",
                "install Docker or set container_engine_offline_dir to the site's offline packages",
            )
        )
    if rc == 0:
        rc4, text4 = host.run([docker, "info", "--format", "{{.DefaultRuntime}}|{{json .Runtimes}}"])
        out.append(default_runtime_check(rc4, text4, host))
    return out, info


def default_runtime_check(rc: int, text: str, host: Host) -> Check:
    """The recipe hands devices to its containers itself (compose.yaml `devices:`) and sets no
    ASCEND_VISIBLE_DEVICES, so the Ascend Docker Runtime adds nothing (its hook acts only on that variable). What
    can still break is a daemon whose default runtime names a binary that is gone: every container start fails."""
    expected = "the default runtime's binary present (runc; ascend only if installed)"
    if rc != 0:
        return check(
            "docker_default_runtime", False, f"docker info failed: {first_line(text)}", expected, "check dockerd"
        )
    import json

    name, _, runtimes = text.partition("|")
    name = name.strip()
    try:
        table = json.loads(runtimes or "{}")
    except ValueError:
        table = None
    if not name or not isinstance(table, dict):
        return check(
            "docker_default_runtime",
            False,
            f"docker info gave no runtime table: {first_line(text)!r}",
            expected,
            "check dockerd (`docker info --format '{{json .Runtimes}}'` must print a JSON map) and restart it",
        )
    entry = table.get(name)
    path = str((entry.get("path") if isinstance(entry, dict) else None) or name)
    present = os.path.isfile(path) if path.startswith("/") else bool(host.tool(path))
    return check(
        "docker_default_runtime",
        present,
        f"{name} ({path}{'' if present else ' missing'})",
        expected,
        f"install the runtime at {path} or remove `default-runtime: {name}` from /etc/docker/daemon.json and restart "
        "docker (the recipe does not need the Ascend Docker Runtime)",
    )


def storage_checks(p: dict[str, Any], docker_root: str) -> list[Check]:
    out: list[Check] = []
    root = p["shared_root"].rstrip("/") or "/"
    mounts = parse_mountpoints(read("/proc/self/mountinfo") or "")
    out.append(
        check(
            "shared_storage_mounted",
            root in mounts,
            "mounted" if root in mounts else "not a mount point",
            f"{root} mounted",
            f"mount the shared file system at {root} on this host (same path on every host)",
        )
    )
    problems = []
    if not os.path.isfile(os.path.join(p["model_path"], "config.json")):
        problems.append(f"{p['model_path']}/config.json missing")
    for path in p["data_files"]:
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            problems.append(f"{path} missing or empty")
    ckpt = p["ckpt_root"]
    if not os.path.isdir(ckpt) and not os.path.isdir(os.path.dirname(ckpt.rstrip("/"))):
        problems.append(f"{ckpt} and its parent missing")
    out.append(
        check(
            "shared_storage_content",
            not problems,
            "; ".join(problems) or "model, data and checkpoint paths present",
            "model config.json, data files, checkpoint folder",
            "copy the model and data onto the shared storage (deploy.yml never downloads them)",
        )
    )
    want = p["min_free_disk_gib"]
    try:
        probe = nearest_existing(docker_root or "/")
        st = os.statvfs(probe)
    except (OSError, ValueError) as exc:  # a Docker root that is no path (docker info's odd output)
        out.append(
            check(
                "free_disk",
                False,
                f"cannot read free space of {docker_root!r}: {exc}",
                f">= {want:g} GiB",
                "check `docker info --format '{{.DockerRootDir}}'` on the host",
            )
        )
        return out
    free = st.f_bavail * st.f_frsize / 2**30
    out.append(
        check(
            "free_disk",
            free >= want,
            f"{free:.1f} GiB free on {probe}",
            f">= {want:g} GiB",
            f"free space on {probe} (old images: `docker image prune`) or move the Docker data root",
        )
    )
    return out


def time_check(host: Host) -> tuple[Check | None, float]:
    """NTP status when the host can tell; otherwise None and the caller compares clocks with the control node."""
    stamp = time.time()
    tdc = host.tool("timedatectl")
    if tdc:
        rc, text = host.run([tdc, "show", "-p", "NTPSynchronized", "--value"])
        if rc == 0 and text in ("yes", "no"):
            return check(
                "time_sync",
                text == "yes",
                f"NTPSynchronized={text}",
                "NTPSynchronized=yes",
                "enable NTP/chrony on this host (`timedatectl set-ntp true`)",
            ), stamp
    chronyc = host.tool("chronyc")
    if chronyc:
        rc, text = host.run([chronyc, "tracking"])
        leap = parse_colon(text).get("leap status", "")
        if rc == 0 and leap:
            return check(
                "time_sync",
                leap == "Normal",
                f"chrony leap status {leap}",
                "chrony synchronised",
                "check chrony's sources (`chronyc sources`)",
            ), stamp
    return None, stamp


def parse_limits(text: str) -> dict[str, int]:
    """Hard `Max open files` and `Max locked memory` of a /proc/<pid>/limits file; -1 = unlimited. A line cut
    short or holding no number is left out (the caller sees the key missing)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        for key, label in (("nofile", "Max open files"), ("memlock", "Max locked memory")):
            if line.startswith(label):
                words = line[len(label) :].split()
                hard = words[1] if len(words) > 1 else ""
                value = -1 if hard == "unlimited" else as_int(hard)
                if value is not None:
                    out[key] = value
    return out


def engine_limits(pid_file: str = "/var/run/docker.pid") -> tuple[dict[str, int], Check]:
    """Hard limits of the running dockerd (containers cannot get more), else of this process, and the row that
    says which were read."""
    pid = as_int((read(pid_file) or "").strip())
    text = read(f"/proc/{pid}/limits") if pid is not None else None
    expected = "dockerd's hard nofile and memlock limits readable (/proc/<pid>/limits)"
    if text is None:  # no dockerd running: container_runtime says so; the container settings use this process's
        limits = parse_limits(read("/proc/self/limits") or "")
        return limits, check("engine_limits", True, "no running dockerd: this process's limits", expected, "")
    limits = parse_limits(text)
    if len(limits) == 2:
        shown = ", ".join(f"{k} {'unlimited' if v < 0 else v}" for k, v in sorted(limits.items()))
        return limits, check("engine_limits", True, f"dockerd pid {pid}: {shown}", expected, "")
    lacking = " and ".join(k for k in ("nofile", "memlock") if k not in limits)
    return parse_limits(read("/proc/self/limits") or ""), check(
        "engine_limits",
        False,
        f"/proc/{pid}/limits (dockerd) has no readable {lacking} line: {first_line(text)[:60]!r}",
        expected,
        f"`cat /proc/{pid}/limits` on the host must show Max open files and Max locked memory; restart docker",
    )


def tool_output_check(host: Host) -> Check:
    """Every command's output is read as UTF-8; a byte that is not (a GBK locale's message, output cut
    mid-character) fails this row, naming the command, and the other rows read it with replacement characters."""
    return check(
        "tool_output",
        not host.not_utf8,
        "; ".join(host.not_utf8[:3]) + (f" (+{len(host.not_utf8) - 3} more)" if len(host.not_utf8) > 3 else "")
        if host.not_utf8
        else "every command printed UTF-8 text",
        "UTF-8 output from every tool (run with LC_ALL=C)",
        "run the named command on the host: output that is not UTF-8 even with LC_ALL=C means a damaged tool or "
        "driver install (reinstall the HDK driver), or output cut mid-character (check the host's load)",
    )


def guarded(name: str, fn: Any, *args: Any) -> Any:
    """One group of checks; a failure nobody foresaw becomes a failed row for this host instead of killing the
    module (which would lose every other row)."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - reported as a row, with the exception's type and text
        return check(
            name,
            False,
            f"the check itself failed: {type(exc).__name__}: {' '.join(str(exc).split())[:120]}",
            "the check runs",
            "report this line to verl-recipe with the host's tool output; the other rows are still valid",
        )


def run_all(p: dict[str, Any]) -> dict[str, Any]:
    host = Host(p)
    tcheck, stamp = time_check(host)
    checks = platform_checks(p) + [
        memory_check(p),
        guarded("cluster_nic", nic_check, p, host),
        guarded("host_firewall", firewall_check, p, host),
    ]
    versions, installed = version_checks(p)
    checks += versions + device_node_checks(p)
    npu = guarded("npu_checks", npu_checks, p, host, installed)
    net: dict[str, Any] = {}
    if isinstance(npu, tuple):
        npu, net = npu
    else:
        npu = [npu]
    checks += npu
    rt, info = runtime_checks(p, host)
    checks += rt + storage_checks(p, info["docker_root"])
    limits, limits_row = engine_limits()
    checks.append(limits_row)
    if tcheck:
        checks.append(tcheck)
    checks.append(tool_output_check(host))
    return {
        "checks": checks,
        "net": net,
        "device_queries": {"count": host.queries, "seconds": round(host.query_s, 2)},
        "clock": stamp,
        "clock_source": "ntp" if tcheck else "none",
        "docker_present": info["docker"],
        "compose_present": info["compose"],
        "service_mgr": "systemd" if os.path.isdir("/run/systemd/system") else "service",
        "engine_limits": limits,
    }


# Must agree with DOCUMENTATION (tests/ansible/test_module_docs.py).
ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "expected_dies": {"type": "int", "required": True},
    "hdk_min": {"type": "str", "required": True},
    "npu_ips": {"type": "list", "elements": "str", "required": True},
    "ping_plan": {"type": "list", "elements": "dict", "default": []},
    "inter_server_link": {"type": "str", "default": "roce", "choices": ["roce", "hccs"]},
    "vnic_ips": {"type": "list", "elements": "str", "default": []},
    "cluster_ip": {"type": "str", "required": True},
    "cluster_nic": {"type": "str", "required": True},
    "cluster_peers": {"type": "list", "elements": "str", "default": []},
    "compose_project": {"type": "str", "default": "verl-recipe"},
    "min_host_ram_gib": {"type": "float", "default": 0},
    "simulated": {"type": "bool", "default": False},
    "allowed_arch": {"type": "list", "elements": "str", "required": True},
    "allowed_os": {"type": "list", "elements": "str", "required": True},
    "shared_root": {"type": "str", "required": True},
    "model_path": {"type": "str", "required": True},
    "data_files": {"type": "list", "elements": "str", "required": True},
    "ckpt_root": {"type": "str", "required": True},
    "min_free_disk_gib": {"type": "float", "required": True},
    "docker_installable": {"type": "bool", "default": False},
    "driver_version_file": {"type": "str", "default": "/usr/local/Ascend/driver/version.info"},
    "firmware_version_file": {"type": "str", "default": "/usr/local/Ascend/firmware/version.info"},
    "hccn_conf_file": {"type": "str", "default": "/etc/hccn.conf"},
    "meminfo_file": {"type": "str", "default": "/proc/meminfo"},
    "os_release_file": {"type": "str", "default": "/etc/os-release"},
    "tool_dirs": {"type": "list", "elements": "str", "default": []},
    "command_timeout": {"type": "int", "default": 60},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result = run_all(module.params)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
