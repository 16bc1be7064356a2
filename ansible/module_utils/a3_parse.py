"""Parsers of what an A3 host's tools print (npu-smi, hccn_tool, ip, iptables, docker, /proc, os-release): text in,
plain values out, nothing run. Part of the preflight module (roles/preflight/library/a3_preflight.py); Ansible ships
module_utils with it to each host."""

from __future__ import annotations

import ipaddress
import re
from typing import Any


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


def parse_ip_addr(text: str) -> dict[str, list[str]]:
    """`ip -o -4 addr show`: NIC -> its IPv4 addresses."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 4 and f[2] == "inet":
            out.setdefault(f[1].rstrip(":").split("@")[0], []).append(f[3].split("/")[0])
    return out


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
