"""One host's answer read into facts: its name, cluster address and NIC, NPU and vNIC addresses, dies, HDK,
npu-smi, memory."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from ..inventory.fields import HOST_NAME_RE, NIC_RE
from .common import die_list, problem, shown
from .probe import Reply
from .script import HCCN_TOOL, NPU_SMI_PATHS

# --------------------------------------------------------------------------------------------------------------
# one host's answer


def parse_facts(text: str) -> dict[str, list[str]]:
    """The script's key=value lines; a key may repeat (davinci=0, davinci=1, ...). Anything else is ignored."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and re.fullmatch(r"[a-z_]+", key):
            out.setdefault(key, []).append(value.strip())
    return out


@dataclass
class HostFacts:
    address: str  # as given in HOSTS
    read_at: str
    name: str = ""
    cluster_ip: str = ""
    cluster_nic: str = ""
    cluster_source: str = ""
    dies: list[int] = field(default_factory=list)
    npu_ips: list[str] = field(default_factory=list)
    npu_source: str = ""
    vnic_ips: list[str] = field(default_factory=list)
    vnic_note: str = ""
    npu_smi: list[str] = field(default_factory=list)
    driver: str = ""
    firmware: str = ""
    firmware_package: str = ""
    mem_kib: int = 0
    user: str = ""


def _by_die(lines: list[str]) -> dict[int, list[str]]:
    """`<die> <text>` lines, grouped by die."""
    out: dict[int, list[str]] = {}
    for line in lines:
        die, _, text = line.partition(" ")
        if die.isdigit():
            out.setdefault(int(die), []).append(text.strip())
    return out


def _ipv4(text: str) -> ipaddress.IPv4Address | None:
    try:
        return ipaddress.IPv4Address(text)
    except ValueError:
        return None


def _after(lines: list[str], label: str) -> str:
    """The value of `label:value` (tools print `ipaddr:1.2.3.4` and `vnic ipaddr: 1.2.3.4`)."""
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and key.strip() == label:
            return value.strip()
    return ""


def _cluster_address(
    f: HostFacts, kv: dict[str, list[str]], net: ipaddress.IPv4Network | None, errors: list[str]
) -> None:
    inets: list[tuple[str, ipaddress.IPv4Interface]] = []
    for line in kv.get("inet", []):
        nic, _, addr = line.partition(" ")
        try:
            inets.append((nic.split("@")[0], ipaddress.IPv4Interface(addr.strip())))
        except ValueError:
            continue
    if "missing" in kv.get("ip_tool", []):
        errors.append(
            problem(f.address, "`ip` (iproute2) is missing: its interfaces cannot be read", "install iproute2 there")
        )
        return
    if net is not None:
        hits = [(nic, i) for nic, i in inets if i.ip in net and not i.ip.is_loopback]
        f.cluster_source = f"its address in CLUSTER_NET {net} (ip -o -4 addr show)"
        if not hits:
            have = ", ".join(f"{i.ip} ({nic})" for nic, i in inets if not i.ip.is_loopback) or "none"
            errors.append(
                problem(
                    f.address,
                    f"no address in CLUSTER_NET {net} (its IPv4 addresses: {have})",
                    "the CLUSTER_NET every host has an address in, or configure the cluster interface",
                )
            )
            return
        if len({i.ip for _, i in hits}) > 1:
            errors.append(
                problem(
                    f.address,
                    f"several addresses in CLUSTER_NET {net}: " + ", ".join(f"{i.ip} ({nic})" for nic, i in hits),
                    "a narrower CLUSTER_NET that holds one address per host",
                )
            )
            return
    else:
        words = (kv.get("ssh_connection") or [""])[0].split()
        reached = words[2] if len(words) >= 3 else ""
        f.cluster_source = "the address SSH reached ($SSH_CONNECTION) and the interface holding it (ip -o -4 addr show)"
        hits = [(nic, i) for nic, i in inets if str(i.ip) == reached]
        if not reached or not hits:
            errors.append(
                problem(
                    f.address,
                    f"the address SSH reached ({reached or 'not reported'}) is on no interface of the host (NAT, "
                    "a jump host or IPv6)",
                    "CLUSTER_NET=<the cluster network's CIDR>: the cluster address is then the host's address there",
                )
            )
            return
        if hits[0][1].ip.is_loopback:
            errors.append(
                problem(
                    f.address,
                    f"SSH reached it at the loopback address {reached}",
                    "list the host in HOSTS by its cluster-network address, or give CLUSTER_NET",
                )
            )
            return
    nic, iface = hits[0]
    f.cluster_ip, f.cluster_nic = str(iface.ip), nic
    if not NIC_RE.fullmatch(nic):
        errors.append(problem(f.address, f"interface name {shown(nic)!r} is not usable", "a plain interface name"))


def _npu_addresses(f: HostFacts, kv: dict[str, list[str]], errors: list[str]) -> None:
    conf = (kv.get("hccn_conf") or [""])[0]
    tool = (kv.get("hccn_tool") or [""])[0]
    found: dict[int, str] = {}
    replies: dict[int, list[str]] = {}
    if conf == "present":
        f.npu_source = "/etc/hccn.conf address_<die>"
        for die, texts in _by_die(kv.get("conf_address", [])).items():
            found.setdefault(die, texts[0])
        where = "no address_{die} in /etc/hccn.conf"
        fix = (
            "configure each die's NPU-network address (address_<die> in /etc/hccn.conf, applied with "
            "`hccn_tool -a -cfg recovery`; ascend-deployer's `install.sh --hccn` writes both)"
        )
    elif conf == "unreadable":
        errors.append(
            problem(
                f.address,
                f"/etc/hccn.conf is not readable by {f.user or 'the SSH user'} and sudo -n is not allowed",
                "make it readable (mode 0644, as ascend-deployer writes it) or let SSH_USER use sudo -n",
            )
        )
        return
    elif tool:
        f.npu_source = "hccn_tool -i <die> -ip -g (no /etc/hccn.conf)"
        replies = _by_die(kv.get("tool_ip", []))
        for die, texts in replies.items():
            ip = _after(texts, "ipaddr")
            if ip:
                found[die] = ip
        where = "`hccn_tool -i {die} -ip -g` gives no address"
        fix = (
            "configure each die's NPU-network address (/etc/hccn.conf address_<die>, then `hccn_tool -a -cfg recovery`)"
        )
    else:
        errors.append(
            problem(
                f.address,
                f"no /etc/hccn.conf and no hccn_tool (neither on PATH nor {HCCN_TOOL}): its NPU addresses cannot "
                "be read",
                "install the HDK driver (it brings hccn_tool) and configure the NPU network (/etc/hccn.conf)",
            )
        )
        return
    missing = [d for d in f.dies if d not in found]
    if missing:
        said = ""
        if replies.get(missing[0]):
            said = f" ({shown(replies[missing[0]][-1], 80)})"
        errors.append(
            problem(
                f.address,
                f"{'dies' if len(missing) > 1 else 'die'} {die_list(missing)} without an NPU address: "
                + where.format(die="<die>" if len(missing) > 1 else missing[0])
                + said,
                fix,
            )
        )
    bad = [(d, found[d]) for d in f.dies if d in found and _unusable(found[d])]
    for die, ip in bad:
        errors.append(
            problem(
                f.address,
                f"die {die}'s NPU address {shown(ip, 40)!r} ({f.npu_source.split(' (')[0]}) is {_unusable(ip)}",
                f"a unicast IPv4 address of the NPU network for die {die}",
            )
        )
    if not missing and not bad:
        f.npu_ips = [str(ipaddress.IPv4Address(found[d])) for d in f.dies]


def _unusable(text: str) -> str:
    ip = _ipv4(text)
    if ip is None:
        return "not an IPv4 address"
    if ip.is_unspecified or ip.is_loopback or ip.is_multicast or ip.is_reserved or str(ip) == "255.255.255.255":
        return "not an address another host can reach"
    return ""


def _vnic_addresses(f: HostFacts, kv: dict[str, list[str]]) -> None:
    if not (kv.get("hccn_tool") or [""])[0]:
        f.vnic_note = "none read (no hccn_tool)"
        return
    replies = _by_die(kv.get("tool_vnic", []))
    ips: dict[int, str] = {}
    down: list[int] = []
    for die in f.dies:
        texts = replies.get(die, [])
        ip = _after(texts, "vnic ipaddr")
        if ip and not _unusable(ip):
            ips[die] = str(ipaddress.IPv4Address(ip))
        if _after(texts, "vnic link status") == "DOWN":
            down.append(die)
    if f.dies and len(ips) == len(f.dies):
        f.vnic_ips = [ips[d] for d in f.dies]
        f.vnic_note = "hccn_tool -i <die> -vnic -g" + (f" (vNIC link DOWN on dies {die_list(down)})" if down else "")
    elif not ips:
        first = next((replies[d][-1] for d in f.dies if replies.get(d)), "no answer")
        f.vnic_note = f"none (hccn_tool -vnic -g: {shown(first, 60)})"
    else:
        f.vnic_note = f"not written: no vNIC address on dies {die_list([d for d in f.dies if d not in ips])}"


def interpret(r: Reply, net: ipaddress.IPv4Network | None = None) -> tuple[HostFacts, list[str]]:
    """One host's facts from its script's output, and its own problems (one line each)."""
    kv = parse_facts(r.stdout)
    f = HostFacts(r.address, r.read_at)
    errors: list[str] = []
    if kv.get("end") != ["1"]:
        return f, [
            problem(
                r.address,
                "its answer was cut short (the fact script did not finish)",
                "log in and run `sh -s` with scripts/site_inventory.py's script by hand to see where it stops",
            )
        ]
    f.user = (kv.get("user") or [""])[0]
    f.name = (kv.get("hostname") or [""])[0]
    if not HOST_NAME_RE.fullmatch(f.name):
        errors.append(
            problem(
                r.address,
                f"its hostname {shown(f.name, 70)!r} is not a plain host name (the inventory names hosts by it)",
                "`hostnamectl set-hostname a3-01` there: letters, digits, '.', '_', '-', at most 63 characters",
            )
        )
    _cluster_address(f, kv, net, errors)

    f.dies = sorted({int(d) for d in kv.get("davinci", []) if d.isdigit()})
    if not f.dies:
        errors.append(
            problem(
                r.address,
                "no /dev/davinci<N> device nodes: the NPU driver is not loaded",
                "install the HDK driver and firmware, reboot, and check that `npu-smi info` lists the dies",
            )
        )
    elif f.dies != list(range(len(f.dies))):
        gaps = [d for d in range(f.dies[-1] + 1) if d not in f.dies]
        errors.append(
            problem(
                r.address,
                f"/dev/davinci{die_list(gaps)} missing while /dev/davinci{f.dies[-1]} exists",
                "a die did not come up: check `npu-smi info` and the driver's log, reboot or replace the module",
            )
        )
    if f.dies:
        _npu_addresses(f, kv, errors)
        _vnic_addresses(f, kv)

    f.npu_smi = [p for p in kv.get("npu_smi", []) if p in NPU_SMI_PATHS]
    if not f.npu_smi:
        extra = "".join(f"; {d} is a folder (a wrong bind mount?)" for d in kv.get("npu_smi_dir", []))
        extra += "".join(f"; there is one at {shown(p, 60)}" for p in kv.get("npu_smi_path", []))
        errors.append(
            problem(
                r.address,
                "npu-smi is in neither /usr/local/bin nor /usr/local/sbin" + extra,
                "install the HDK driver package, which puts it there (the Ray node services bind it from one of "
                "those two paths)",
            )
        )
    f.driver = shown((kv.get("driver_version") or [""])[0], 40)
    f.firmware = shown((kv.get("firmware_version") or [""])[0], 40)
    f.firmware_package = shown((kv.get("firmware_package") or [""])[0], 40)
    mem = (kv.get("mem_total_kib") or ["0"])[0]
    f.mem_kib = int(mem) if mem.isdigit() else 0
    return f, errors
