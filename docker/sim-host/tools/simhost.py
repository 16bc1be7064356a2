#!/usr/bin/python3 -IS
"""The Ascend A3 host surface of one simulated host: stand-ins for `npu-smi` and `hccn_tool`, the fault state, and
the files and services a real host has (hccn.conf, version.info, device nodes, sshd, dockerd, shared storage).

Everything is read from a state directory on each call (VERL_SIM_DIR, default /etc/verl-sim):
  cluster.json  written by simctl.py at `make sim-up` (every host, its addresses, the HDK minimum)
  host          this host's name (a3-01, ...)
  faults.json   {"faults": [...]}: the faults switched on at run time (`simhost.py fault add|clear`)
Files the tools read from the host (ascend_install.info) are looked up under VERL_SIM_ROOT (default /), so the tools
also run outside a container (unit tests). Output formats follow docs/a3-tools.md (its T<n> sections are cited
below); values that no source gives, marked SYNTHETIC (serials, firmware numbers, error codes), are made up and the
docs say so.
Standard library only: the simulated host's python3 has nothing else.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# a3facts.py lies next to this file (tools/ in the repository, /usr/lib/verl-sim in the image): a copy of
# entrypoints/verl_recipe/a3facts.py, the A3 facts the checks use too (the stand-ins share them, not the checks).
_HERE = os.path.dirname(os.path.realpath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
import a3facts  # noqa: E402

DIES = a3facts.DIES_PER_NODE  # dies per A3 node (8 NPU modules x 2 dies)
NPU_PORT = 4791  # UDP port of the NPU-network responder (the RoCE v2 port, for recognisability)


def npu_port() -> int:
    # The unit tests run a responder on loopback at a free port.
    return int(os.environ.get("VERL_SIM_NPU_PORT", NPU_PORT))


LIB_DIR = "/usr/lib/verl-sim"
SHIM = f"{LIB_DIR}/libverlsim.so"
SHARED_SOURCE = "/var/lib/verl-sim/shared"  # where the shared volume is mounted; bound onto site_shared_root
DISABLED_DIR = f"{LIB_DIR}/disabled"  # docker binaries are moved here while `no-docker` is on
DOCKER_BINARIES = ("/usr/bin/docker", "/usr/sbin/dockerd")
LOW_DISK_DEFAULT_MIB = 512

# Per-die values of the verbatim A3 sample (a3-tools T1): Bus-Id, power (die 0 only), temperature, HBM used.
BUS_IDS = ["9D", "9F", "99", "9B", "95", "97", "91", "93", "8D", "8F", "89", "8B", "85", "87", "81", "83"]
POWER = ["178.7", "186.4", "177.2", "178.5", "180.6", "189.2", "183.7", "186.1"]
TEMPS = [37, 36, 36, 36, 37, 37, 36, 37, 37, 37, 36, 36, 39, 37, 37, 38]
HBM_USED = [3419, 3196, 3413, 3189, 3412, 3190, 3411, 3187, 3403, 3200, 3398, 3202, 3400, 3203, 3418, 3187]
HBM_TOTAL = 65536

# Device nodes: /dev/davinciN 234:N, davinci_manager 235:0, devmm_svm 511:0 (a3-tools T11); hisi_hdc's numbers
# were not recorded, 236:0 is made up.
CONTROL_NODES = {"davinci_manager": (235, 0), "devmm_svm": (511, 0), "hisi_hdc": (236, 0)}

HEALTH_ERRORS = {  # SYNTHETIC error codes and texts (a3-tools T5 give the field names, not these values)
    "Warning": ("0x80E18402", "HBM single-bit ECC count over threshold (simulated)"),
    "Alarm": ("0x80CB8009", "AI core overheating, frequency reduced (simulated)"),
    "Critical": ("0x80E01801", "chip not responding (simulated)"),
}


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
# faults

DIE_FAULTS = {
    "health-warning",
    "health-alarm",
    "health-critical",
    "link-down",
    "ip-missing",
    "net-health",
    # a process of another job holds the die (npu-smi's process table lists it)
    "npu-busy",
    # /etc/hccn.conf names an old address for the die; the device keeps the one it was given
    "hccn-drift",
    # the die's gateway (hccn.conf and device) lies outside its own subnet
    "gateway-wrong",
    # the die's virtual NIC (HCCS inside a SuperPoD) is DOWN; its RoCE NIC is untouched
    "vnic-down",
}
# tls-on: the TLS switch of every die is 1 (the other hosts keep 0); not-rebooted: the HDK packages on disk are
# new, the running driver and firmware the old ones; nic-moved: the cluster address is not on the named NIC;
# firewall: the host drops new TCP connections from the other cluster hosts except SSH and a fixed port list.
FLAG_FAULTS = {"no-docker", "no-shared", "tls-on", "not-rebooted", "nic-moved", "firewall"}
# Faults that hold one value per host: switching one on again replaces the value.
SINGLE_FAULTS = {"dies", "driver-old", "firmware-old", "clock-skew", "low-disk", "arch", "os", "low-ram"}
FAULT_HELP = (
    "dev-missing:<die|davinci_manager|devmm_svm|hisi_hdc>, dies:<1-15>, health-warning:<die>, health-alarm:<die>, "
    "health-critical:<die>, link-down:<die>, ip-missing:<die>, net-health:<die>, npu-busy:<die>, "
    "hccn-drift:<die>, gateway-wrong:<die>, vnic-down:<die>, ping-loss:<host>[:<die>], hccs-loss:<host>[:<die>], "
    "tls-on, not-rebooted, nic-moved, firewall, os:<release>, low-ram[:<GiB>], driver-old[:<version>], "
    "firmware-old[:<version>], no-docker, no-shared, clock-skew:<seconds>, low-disk[:<MiB free>], arch:<machine>, "
    "down, down:ssh, clear"
)
# /etc/os-release of releases a site may run, in the layout their vendors ship (keys trimmed to the ones read).
# openEuler keeps the service pack in VERSION only; Ubuntu 24.04 is not on ascend-deployer 26.0.0's A3 list.
OS_RELEASES = {
    "ubuntu-24.04": 'NAME="Ubuntu"\nVERSION_ID="24.04"\nVERSION="24.04.1 LTS (Noble Numbat)"\nID=ubuntu\n'
    'ID_LIKE=debian\nPRETTY_NAME="Ubuntu 24.04.1 LTS"\n',
    "openeuler-22.03": 'NAME="openEuler"\nVERSION="22.03 (LTS)"\nID="openEuler"\nVERSION_ID="22.03"\n'
    'PRETTY_NAME="openEuler 22.03 (LTS)"\nANSI_COLOR="0;31"\n',
    "openeuler-22.03-sp4": 'NAME="openEuler"\nVERSION="22.03 (LTS-SP4)"\nID="openEuler"\nVERSION_ID="22.03"\n'
    'PRETTY_NAME="openEuler 22.03 (LTS-SP4)"\nANSI_COLOR="0;31"\n',
}
ARCH_RE = re.compile(r"^[a-z0-9_]{2,32}$")


@dataclass(frozen=True)
class Fault:
    kind: str
    arg: str = ""

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.arg}" if self.arg else self.kind


def _die_arg(spec: str, arg: str) -> str:
    if not arg.isdigit() or not 0 <= int(arg) < DIES:
        raise SimError(f"fault '{spec}': the die must be a number 0-{DIES - 1} (for example link-down:7)")
    return str(int(arg))


def parse_fault(spec: str, cluster: dict[str, Any] | None = None, host: str | None = None) -> Fault:
    """Validate one fault spec; `down` is handled by simctl.py (the host container is killed from outside)."""
    spec = spec.strip()
    kind, _, arg = spec.partition(":")
    if kind in DIE_FAULTS:
        return Fault(kind, _die_arg(spec, arg))
    if kind == "dev-missing":
        if arg in CONTROL_NODES:
            return Fault(kind, arg)
        return Fault(kind, _die_arg(spec, arg))
    if kind == "dies":
        if not arg.isdigit() or not 1 <= int(arg) < DIES:
            raise SimError(f"fault '{spec}': dies must be 1-{DIES - 1} (fewer than the {DIES} an A3 node has)")
        return Fault(kind, str(int(arg)))
    if kind in ("ping-loss", "hccs-loss"):
        # ping-loss: the RoCE path (-ping to a3_npu_ips); hccs-loss: the HCCS path (-hccs_ping to the vNICs)
        peer, _, die = arg.partition(":")
        if not peer:
            raise SimError(f"fault '{spec}': name the peer whose NPU addresses stop answering ({kind}:a3-02)")
        if die:
            die = _die_arg(spec, die)
        if cluster is not None:
            host_entry(cluster, peer)
            if peer == host:
                raise SimError(f"fault '{spec}': the peer must be another host than {host}")
        return Fault(kind, f"{peer}:{die}" if die else peer)
    if kind == "os":
        if arg not in OS_RELEASES:
            raise SimError(f"fault '{spec}': pick one of {', '.join(sorted(OS_RELEASES))} (os:ubuntu-24.04)")
        return Fault(kind, arg)
    if kind == "low-ram":
        if arg and (not arg.isdigit() or int(arg) < 1):
            raise SimError(f"fault '{spec}': give the host memory to report in GiB (low-ram:64)")
        return Fault(kind, str(int(arg)) if arg else "")
    if kind in ("driver-old", "firmware-old"):
        if arg and not is_hdk_version(arg):
            raise SimError(f"fault '{spec}': '{arg}' is not an HDK version like 25.5.0 or 25.3.rc1")
        if arg and cluster is not None and not version_below(arg, cluster["hdk_min"]):
            raise SimError(f"fault '{spec}': {arg} is not below the minimum {cluster['hdk_min']}; pick an older one")
        return Fault(kind, arg)
    if kind in FLAG_FAULTS:
        if arg:
            raise SimError(f"fault '{spec}': {kind} takes no value")
        return Fault(kind)
    if kind == "clock-skew":
        if not re.fullmatch(r"[+-]?\d+", arg) or int(arg) == 0:
            raise SimError(f"fault '{spec}': give the skew in whole seconds, not 0 (clock-skew:300 or clock-skew:-90)")
        return Fault(kind, str(int(arg)))
    if kind == "low-disk":
        if arg and (not arg.isdigit() or int(arg) < 1):
            raise SimError(f"fault '{spec}': give the free space to report in MiB (low-disk:512)")
        return Fault(kind, str(int(arg)) if arg else "")
    if kind == "arch":
        if not ARCH_RE.match(arg):
            raise SimError(f"fault '{spec}': give a machine name as `uname -m` prints it (arch:aarch64)")
        if cluster is not None and arg == cluster.get("native_arch"):
            raise SimError(f"fault '{spec}': {arg} is this machine's own architecture; pick another (arch:aarch64)")
        return Fault(kind, arg)
    if kind == "down":
        if arg not in ("", "ssh"):
            raise SimError(f"fault '{spec}': use down (power loss of the host) or down:ssh (stop its sshd)")
        return Fault(kind, arg)
    raise SimError(f"unknown fault '{spec}'; known faults: {FAULT_HELP}")


def active_faults() -> list[Fault]:
    return [parse_fault(s) for s in read_fault_specs()]


def _one(faults: list[Fault], kind: str) -> Fault | None:
    for f in faults:
        if f.kind == kind:
            return f
    return None


def _die_set(faults: list[Fault], kind: str) -> set[int]:
    return {int(f.arg) for f in faults if f.kind == kind and f.arg.isdigit()}


def is_hdk_version(v: str) -> bool:
    try:
        a3facts.hdk_key(v)
    except ValueError:
        return False
    return True


def version_key(v: str) -> tuple[int, ...]:
    """The one HDK order (a3facts.hdk_key): 26.0.rc1 < 26.0.0 < 26.0.1; SimError for what is not a version."""
    try:
        return a3facts.hdk_key(v)
    except ValueError as exc:
        raise SimError(f"version '{v}' is not an HDK version like 26.0.rc1 or 25.5.0") from exc


def version_below(a: str, b: str) -> bool:
    return version_key(a) < version_key(b)


def firmware_number(package_version: str) -> str:
    # SYNTHETIC: the 7.x firmware numbering follows the package (7.8.0.x.220 for 26.x, 7.7.0.x.231 for 25.x).
    return f"7.{int(package_version.split('.')[0]) - 18}.0.5.220"


def old_version(hdk_min: str) -> str:
    """The HDK release one year before the minimum (26.0.RC1 -> 25.5.0): what an un-upgraded host carries."""
    return f"{int(hdk_min.split('.')[0]) - 1}.5.0"


# --------------------------------------------------------------------------------------------------------------
# the simulated host as the tools see it


@dataclass
class Host:
    cluster: dict[str, Any]
    name: str
    faults: list[Fault]

    @classmethod
    def load(cls) -> Host:
        return cls(load_cluster(), this_host(), active_faults())

    @property
    def entry(self) -> dict[str, Any]:
        return host_entry(self.cluster, self.name)

    @property
    def dies(self) -> int:
        f = _one(self.faults, "dies")
        return int(f.arg) if f else DIES

    @property
    def npu_ips(self) -> list[str]:
        return [str(ip) for ip in self.entry["npu_ips"]]

    def driver_version(self) -> str:
        f = _one(self.faults, "driver-old")
        return (f.arg or old_version(self.cluster["hdk_min"])) if f else self.cluster["hdk_min"].lower()

    def firmware_package_version(self) -> str:
        f = _one(self.faults, "firmware-old")
        return (f.arg or old_version(self.cluster["hdk_min"])) if f else self.cluster["hdk_min"].lower()

    def firmware_version(self) -> str:
        return firmware_number(self.firmware_package_version())

    def health(self, die: int) -> str:
        for kind, word in (("health-critical", "Critical"), ("health-alarm", "Alarm"), ("health-warning", "Warning")):
            if die in _die_set(self.faults, kind):
                return word
        return "OK"

    def link_up(self, die: int) -> bool:
        return die not in _die_set(self.faults, "link-down")

    def has_ip(self, die: int) -> bool:
        return die not in _die_set(self.faults, "ip-missing")

    def net_ok(self, die: int) -> bool:
        return die not in _die_set(self.faults, "net-health")

    def answers(self, die: int) -> bool:
        """Whether this host's die answers an NPU-network ping at its address."""
        return die < self.dies and self.link_up(die) and self.has_ip(die)

    def vnic_up(self, die: int) -> bool:
        return die not in _die_set(self.faults, "vnic-down")

    def answers_vnic(self, die: int) -> bool:
        """Whether this host's die answers an HCCS ping at its vNIC address (the RoCE link plays no part)."""
        return die < self.dies and self.vnic_up(die)

    def ping_lost_to(self, hccs: bool = False) -> set[str]:
        """Peers (`a3-02`) or single peer dies (`a3-02:7`) this host's pings never reach: over RoCE (`-ping`,
        ping-loss) or over HCCS (`-hccs_ping`, hccs-loss). A route lost on one path leaves the other working."""
        kind = "hccs-loss" if hccs else "ping-loss"
        return {f.arg for f in self.faults if f.kind == kind}

    def busy(self, die: int) -> bool:
        return die in _die_set(self.faults, "npu-busy")

    def tls(self) -> int:
        return 1 if _one(self.faults, "tls-on") else 0

    def gateway(self, die: int) -> str:
        return "10.255.255.1" if die in _die_set(self.faults, "gateway-wrong") else npu_gateway(self.npu_ips)

    def conf_address(self, die: int) -> str:
        """address_<die> in /etc/hccn.conf: the device's own, or (hccn-drift) the one it had before re-addressing."""
        ip = self.npu_ips[die]
        if die in _die_set(self.faults, "hccn-drift"):
            a, b, c, d = ip.split(".")
            return f"{a}.{b}.{c}.{(int(d) + 100) % 254 + 1}"
        return ip

    def running_versions(self) -> tuple[str, str]:
        """(driver, firmware) that run now: after an upgrade without reboot, the year-older release."""
        if _one(self.faults, "not-rebooted"):
            old = old_version(self.cluster["hdk_min"])
            return old, firmware_number(old)
        return self.driver_version(), self.firmware_version()

    @property
    def index(self) -> int:
        return int(self.entry["rank"]) + 1


# --------------------------------------------------------------------------------------------------------------
# npu-smi

BORDER = "+" + "-" * 96 + "+"
COLS_DASH = "+" + "-" * 27 + "+" + "-" * 15 + "+" + "-" * 52 + "+"
COLS_EQ = "+" + "=" * 27 + "+" + "=" * 15 + "+" + "=" * 52 + "+"
HEAD_1 = "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|"
HEAD_2 = "| Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |"
PROC_HEAD = "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |"
INSTALL_WARNING = (
    "[WARNING]The driver package may not be completely installed, which may cause function abnormal. "
    "Please reinstall it."
)


def npu_count(dies: int) -> int:
    return (dies + 1) // 2


def npu_smi_table(h: Host) -> str:
    ver = h.driver_version()
    lines = [BORDER, f"| npu-smi {ver:<24} Version: {ver:<52} |", COLS_DASH, HEAD_1, HEAD_2, COLS_EQ]
    for die in range(h.dies):
        npu, chip = divmod(die, 2)
        power = POWER[npu] if chip == 0 else "-"
        lines.append(f"| {npu:<6}{'Ascend910':<20}| {h.health(die):<14}| {power:<12}{TEMPS[die]:<18}{0:<5}/ {0:<14}|")
        hbm = f"{HBM_USED[die]:<5}/ {HBM_TOTAL:<14}"
        lines.append(f"| {chip:<6}{die:<20}| {'0000:' + BUS_IDS[die] + ':00.0':<14}| {0:<12}{0:<5}/ {0:<11}{hbm}|")
        last_of_npu = chip == 1 or die == h.dies - 1
        lines.append(COLS_EQ if last_of_npu else BORDER)
    lines += [COLS_DASH, PROC_HEAD, COLS_EQ]
    for npu in range(npu_count(h.dies)):
        busy = [d for d in (2 * npu, 2 * npu + 1) if d < h.dies and h.busy(d)]
        if not busy:
            lines.append(f"| {'No running processes found in NPU ' + str(npu):<95}|")
        for die in busy:  # the layout of a busy A3 node's process block (openyuanrong's npu-smi fixture)
            pid, name, mem = busy_process(h, die)
            lines.append(f"| {npu:<8}{die % 2:<18}| {pid:<14}| {name:<25}| {mem:<24}|")
        lines.append(COLS_EQ)
    install = root_path("/etc/ascend_install.info")
    if "Driver_Install_Status=complete" not in (install.read_text() if install.exists() else ""):
        lines.append(INSTALL_WARNING)
    return "\n".join(lines)


def busy_process(h: Host, die: int) -> tuple[int, str, int]:
    """The process another job left on a die: SYNTHETIC pid, the name torch's main thread carries, 48 GiB."""
    return 950000 + 100 * h.index + die, "pt_main_thread", 49207


def kv(key: str, value: object) -> str:
    return f"\t{key:<30} : {value}"


def npu_smi_mapping(h: Host) -> str:
    cols = ["NPU ID", "Chip ID", "Chip Logic ID", "Chip Phy-ID", "Chip Name"]
    lines = ["\t" + " ".join(f"{c:<30}" for c in cols)]
    for npu in range(npu_count(h.dies)):
        rows = [[str(npu), str(die % 2), str(die), str(die), "Ascend910"] for die in (2 * npu, 2 * npu + 1)]
        rows = [r for r in rows if int(r[2]) < h.dies]
        rows.append([str(npu), "2", "-", "-", "Mcu"])
        lines += ["\t" + " ".join(f"{c:<30}" for c in r) for r in rows]
    return "\n".join(lines)


def npu_smi_board(h: Host, npu: int, chip: int | None) -> str:
    die0 = 2 * npu
    chips = sum(1 for d in (die0, die0 + 1) if d < h.dies)
    lines = [
        kv("NPU ID", npu),
        kv("Product Name", "Atlas 800T A3 (simulated)"),
        kv("Model", "NA"),
        kv("Manufacturer", "Huawei"),
        kv("Serial Number", f"SIM{h.index:02d}A3{npu:02d}"),
        kv("Software Version", h.running_versions()[0]),
        kv("Firmware Version", h.running_versions()[1]),
        kv("Compatibility", "OK"),
        kv("Board ID", "0xb0"),
        kv("Main Board ID", "0x1a"),
        kv("PCB ID", "A"),
        kv("BOM ID", "1"),
        kv("PCIe Bus Info", f"0000:{BUS_IDS[die0]}:00.0"),
        kv("Slot ID", npu),
        kv("Class ID", "NA"),
        kv("PCI Vendor ID", "0x19E5"),
        kv("PCI Device ID", "0xD803"),
        kv("Subsystem Vendor ID", "0x19E5"),
        kv("Subsystem Device ID", "0x3000"),
        kv("Chip Count", chips),
    ]
    if chip is not None:
        die = die0 + chip
        lines += [
            kv("Chip ID", chip),
            kv("Chip Type", "Ascend"),
            kv("Chip Name", "910_9392"),
            kv("Chip Version", "V1"),
            kv("VDie ID", f"SIM{h.index:02d}VD{die:02d}"),
            kv("NDie ID", f"SIM{h.index:02d}ND{die:02d}"),
            kv("Chip Position ID", chip),
        ]
    return "\n".join(lines)


def npu_smi_health(h: Host, npu: int, chip: int | None) -> str:
    dies = [2 * npu + chip] if chip is not None else [d for d in (2 * npu, 2 * npu + 1) if d < h.dies]
    order = ["OK", "Warning", "Alarm", "Critical"]
    worst = max((h.health(d) for d in dies), key=order.index)
    code, info = HEALTH_ERRORS.get(worst, ("NA", "NA"))
    return "\n".join([kv("Health Status", worst), kv("Error Code", code), kv("Error Information", info)])


def npu_smi_spod(h: Host, npu: int, chip: int) -> str:
    die = 2 * npu + chip
    server = int(h.entry["rank"])
    # SDID: the sample (a3-tools T6) pairs server index 4 with 16777216 = 4 << 22; the die bits are SYNTHETIC.
    sdid = (server << 22) | (die << 16)
    return "\n".join(
        [kv("SDID", sdid), kv("Super Pod Size", len(self_cluster_hosts(h)) * DIES), kv("Super Pod ID", 0)]
        + [kv("Server Index", server)]
    )


def self_cluster_hosts(h: Host) -> list[dict[str, Any]]:
    return list(h.cluster["hosts"])


def npu_smi_list(h: Host) -> str:
    lines = [kv("Total Count", npu_count(h.dies)), ""]
    for npu in range(npu_count(h.dies)):
        lines += [kv("NPU ID", npu), kv("Chip Count", sum(1 for d in (2 * npu, 2 * npu + 1) if d < h.dies)), ""]
    return "\n".join(lines).rstrip("\n")


NPU_SMI_USAGE = (
    "usage: npu-smi info [-m | -l | -t board|health -i <npu> [-c <chip>] | -t spod-info -i <npu> -c <chip>] "
    "(simulated A3 host: npu 0-7, chip 0-1)"
)


def _opts(args: list[str], allowed: set[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    it = iter(args)
    for a in it:
        if a not in allowed:
            raise SimError(f"unknown option '{a}'")
        out[a] = next(it, "")
        if out[a] == "":
            raise SimError(f"option '{a}' needs a value")
    return out


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


def npu_smi(argv: list[str]) -> int:
    if not argv or argv[0] != "info":
        print(NPU_SMI_USAGE, file=sys.stderr)
        return 2
    with exclusive("npu-smi") as mine:
        if not mine:
            print(BUSY_TEXT.format(tool="npu-smi", what="the device manager"), file=sys.stderr)
            return 1
        hold()
        return _npu_smi_info(argv)


def hold() -> None:
    """A real query takes a while on the device; the stand-in holds its lock for VERL_SIM_TOOL_HOLD_S (default
    0: none) so that calls started together in a test really overlap."""
    time.sleep(float(os.environ.get("VERL_SIM_TOOL_HOLD_S", "0")))


def _npu_smi_info(argv: list[str]) -> int:
    h = Host.load()
    rest = argv[1:]
    if not rest:
        print(npu_smi_table(h))
        return 0
    if rest == ["-m"]:
        print(npu_smi_mapping(h))
        return 0
    if rest == ["-l"]:
        print(npu_smi_list(h))
        return 0
    try:
        o = _opts(rest, {"-t", "-i", "-c"})
    except SimError as e:
        print(f"npu-smi: {e}. {NPU_SMI_USAGE}", file=sys.stderr)
        return 2
    kind = o.get("-t", "")
    if kind not in ("board", "health", "spod-info") or "-i" not in o:
        print(NPU_SMI_USAGE, file=sys.stderr)
        return 2
    n = npu_count(h.dies)
    if not o["-i"].isdigit() or int(o["-i"]) >= n:
        print(f"npu-smi: the NPU ID {o['-i']} is invalid; this host has NPU IDs 0-{n - 1}", file=sys.stderr)
        return 1
    npu = int(o["-i"])
    chip: int | None = None
    if "-c" in o:
        if not o["-c"].isdigit() or 2 * npu + int(o["-c"]) >= h.dies or int(o["-c"]) > 1:
            print(f"npu-smi: the chip ID {o['-c']} is invalid for NPU {npu}", file=sys.stderr)
            return 1
        chip = int(o["-c"])
    if kind == "board":
        print(npu_smi_board(h, npu, chip))
    elif kind == "health":
        print(npu_smi_health(h, npu, chip))
    else:
        if chip is None:
            print("npu-smi: spod-info needs -c <chip>", file=sys.stderr)
            return 2
        print(npu_smi_spod(h, npu, chip))
    return 0


# --------------------------------------------------------------------------------------------------------------
# hccn_tool and the NPU network

NPU_NETMASK = "255.255.0.0"


def npu_gateway(ips: list[str]) -> str:
    a, b, _, _ = ips[0].split(".")
    return f"{a}.{b}.0.1"


def die_mac(index: int, die: int) -> str:
    # The two dies of a module differ only in the last bit (a3-tools T10); locally administered prefix.
    return f"02:a3:{index:02x}:{die // 2:02x}:00:{0xDD - (die % 2):02x}"


def hccn_conf(h: Host) -> str:
    ips = h.npu_ips
    out: list[str] = []
    for die in range(DIES):
        peer = die ^ 1
        if h.has_ip(die):
            out += [f"address_{die}={h.conf_address(die)}", f"netmask_{die}={NPU_NETMASK}"]
        out += [
            f"gateway_{die}={h.gateway(die)}",
            f"arp_{die}=-i eth{die} -s {ips[peer]} {die_mac(h.index, peer)}",
            f"netdetect_{die}={h.gateway(die)}",
            f"send_arp_status_{die}=1",
            f"tls_enable_{die}={h.tls()}",
        ]
    return "\n".join(out) + "\n"


def vnic_ip(npu_ip: str) -> str:
    """A die's virtual NIC address (HCCS inside a SuperPoD): SYNTHETIC, the RoCE address one /16 up."""
    a, b, c, d = npu_ip.split(".")
    return f"{a}.{int(b) + 1}.{c}.{d}"


def find_npu_ip(cluster: dict[str, Any], ip: str, vnic: bool = False) -> tuple[dict[str, Any], int] | None:
    for h in cluster["hosts"]:
        ips = [vnic_ip(x) for x in h["npu_ips"]] if vnic else list(h["npu_ips"])
        if ip in ips:
            return h, ips.index(ip)
    return None


def ping_timeout() -> float:
    return float(os.environ.get("VERL_SIM_PING_TIMEOUT", "2.0"))


def hccn_ping(h: Host, die: int, target: str, count: int, vnic: bool = False) -> tuple[list[str], int]:
    """All packets leave at once and the answers are awaited together: a lost ping costs one timeout, not one per
    packet (a 16-host preflight pings one peer die per local die, one after another). vnic: `-hccs_ping` to a
    peer's virtual NIC address, over HCCS: the sending die's vNIC must be up, its RoCE link and address play no
    part, and hccs-loss (not ping-loss) cuts a route."""
    lines = [f"device {die} PING {target}"]
    received = 0
    found = find_npu_ip(h.cluster, target, vnic)
    lost = h.ping_lost_to(hccs=vnic)
    sender_up = h.vnic_up(die) if vnic else h.link_up(die) and h.has_ip(die)
    can_send = sender_up and found is not None
    if found is not None and (found[0]["name"] in lost or f"{found[0]['name']}:{found[1]}" in lost):
        can_send = False
    if can_send and found is not None:
        peer = found[0]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            start = time.monotonic()
            waiting = {}
            for seq in range(count):
                nonce = os.urandom(4).hex()
                waiting[f"PONG {target} {seq} {nonce}"] = seq
                s.sendto(f"PING {target} {seq} {nonce}".encode(), (peer["cluster_ip"], npu_port()))
            deadline = start + ping_timeout()
            while waiting:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                s.settimeout(left)
                try:
                    data, _ = s.recvfrom(512)
                except (TimeoutError, ConnectionRefusedError):
                    break
                seq = waiting.pop(data.decode(errors="replace"), -1)
                if seq >= 0:
                    received += 1
                    lines.append(f"recv seq={seq},time={(time.monotonic() - start) * 1000:.6f}ms")
    loss = 100.0 * (count - received) / count
    lines.append(f"{count} packets transmitted, {received} received, {loss:.2f}% packet loss")
    return lines, 0 if received else 1


HCCN_USAGE = (
    "usage: hccn_tool -i <die 0-15> -link|-ip|-net_health|-netdetect|-gateway|-mac|-tls|-vnic -g | "
    "hccn_tool -i <die> -ping|-hccs_ping -g address <ip> [pkt <n>] (simulated A3 host)"
)


def hccn_tool(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] != "-i":
        print(HCCN_USAGE, file=sys.stderr)
        return 2
    h = Host.load()
    if not argv[1].isdigit() or int(argv[1]) >= h.dies:
        print(f"hccn_tool: device id {argv[1]} is invalid; this host has dies 0-{h.dies - 1}", file=sys.stderr)
        return 1
    die = int(argv[1])
    with exclusive(f"hccn-{die}") as mine:
        if not mine:
            print(BUSY_TEXT.format(tool="hccn_tool", what=f"device {die}"), file=sys.stderr)
            return 1
        hold()
        return _hccn_die(h, die, argv)


def _hccn_die(h: Host, die: int, argv: list[str]) -> int:
    cmd, rest = argv[2], argv[3:]
    if not rest or rest[0] != "-g":
        print(HCCN_USAGE, file=sys.stderr)
        return 2
    ips = h.npu_ips
    if cmd == "-link" and rest == ["-g"]:
        print(f"link status: {'UP' if h.link_up(die) else 'DOWN'}")
    elif cmd == "-ip" and rest == ["-g"]:
        if not h.has_ip(die):
            print("Get ipconf failed, because no ip was preset there!")
            return 1
        print(f"ipaddr:{ips[die]}\nnetmask:{NPU_NETMASK}")
    elif cmd == "-net_health" and rest == ["-g"]:
        print(f"net health status: {'Success' if h.net_ok(die) else 'Fault'}")
    elif cmd == "-netdetect" and rest == ["-g"]:
        print(f"netdetect addr: {h.gateway(die)}")
    elif cmd == "-gateway" and rest == ["-g"]:
        print(f"default gateway:{h.gateway(die)}, Iface:eth{die}")
    elif cmd == "-mac" and rest == ["-g"]:
        print(f"mac addr: {die_mac(h.index, die)}")
    elif cmd == "-tls" and rest == ["-g"]:
        print(
            f"dev_id:{die}, tls switch[{h.tls()}](0:disable, 1:enable), tls preconfigured[1](0:non-preset, 1:preset), "
            "tls alarm time threshold[60]days"
        )
    elif cmd == "-vnic" and rest == ["-g"]:
        # vnic-down: the link goes DOWN, the configured address stays (as -link -g DOWN leaves -ip -g alone)
        status = "UP" if h.vnic_up(die) else "DOWN"
        print(f"vnic link status: {status}\nvnic ipaddr: {vnic_ip(ips[die])}\nvnic netmask: {NPU_NETMASK}")
    elif cmd in ("-ping", "-hccs_ping") and len(rest) in (3, 5) and rest[1] == "address":
        count = 3
        if len(rest) == 5:
            if rest[3] != "pkt" or not rest[4].isdigit() or not 1 <= int(rest[4]) <= 100:
                print(HCCN_USAGE, file=sys.stderr)
                return 2
            count = int(rest[4])
        lines, rc = hccn_ping(h, die, rest[2], count, vnic=cmd == "-hccs_ping")
        print("\n".join(lines))
        return rc
    else:
        print(HCCN_USAGE, file=sys.stderr)
        return 2
    return 0


def npud() -> int:
    """Answer NPU-network pings addressed to this host's dies: RoCE addresses whose link is up and address set,
    vNIC addresses whose vNIC is up."""
    h = Host.load()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((h.entry["cluster_ip"], npu_port()))
        while True:
            data, peer = s.recvfrom(512)
            parts = data.decode(errors="replace").split()
            if len(parts) != 4 or parts[0] != "PING":
                continue
            try:
                faults = active_faults()
            except (SimError, ValueError):
                continue
            now = Host(h.cluster, h.name, faults)
            ips = now.npu_ips
            vnics = [vnic_ip(x) for x in ips]
            if (parts[1] in ips and now.answers(ips.index(parts[1]))) or (
                parts[1] in vnics and now.answers_vnic(vnics.index(parts[1]))
            ):
                s.sendto(f"PONG {parts[1]} {parts[2]} {parts[3]}".encode(), peer)


# --------------------------------------------------------------------------------------------------------------
# host files and services (inside the simulated host, as root)


def driver_version_info(h: Host) -> str:
    v = h.driver_version()
    return (
        f"Version={v}\nascendhal_version=7.35.23\naicpu_version=1.0\ntdt_version=1.0\nlog_version=1.0\n"
        "prof_version=2.0\ndvppkernels_version=1.1\ntsfw_version=1.0\nInnerversion=V100R001C10SPC001B257\n"
        "compatible_version=[V100R001C19],[V100R001C20],[V100R001C21],[V100R001C22],[V100R001C23],[V100R001C25]\n"
        f"compatible_version_fw=[7.0.0,8.9.9]\npackage_version={v}\n"
    )


def firmware_version_info(h: Host) -> str:
    pv = h.firmware_package_version()
    major = int(pv.split(".")[0])
    return (
        f"Version={h.firmware_version()}\nfirmware_version=1.0\npackage_version={pv}\n"
        f"compatible_version_drv=[{major - 1}.0,{major - 1}.0.],[{major}.0,{major}.0.]\n"
    )


ASCEND_INSTALL_INFO = (
    "UserName=HwHiAiUser\nUserGroup=HwHiAiUser\nDriver_Install_Type=full\nDriver_Install_Path_Param=/usr/local/Ascend\n"
    "Driver_Install_For_All=yes\nDriver_Install_Mode=normal\nFirmware_Install_Type=full\n"
    "Firmware_Install_Path_Param=/usr/local/Ascend\nDriver_Install_Status=complete\n"
)


def write_if_changed(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.chmod(mode)
        tmp.replace(path)


def wanted_nodes(h: Host) -> dict[str, tuple[int, int]]:
    missing = {f.arg for f in h.faults if f.kind == "dev-missing"}
    nodes = {f"davinci{d}": (234, d) for d in range(h.dies)}
    nodes.update(CONTROL_NODES)
    return {n: mm for n, mm in nodes.items() if n not in missing and n.removeprefix("davinci") not in missing}


def sync_device_nodes(h: Host) -> None:
    want = wanted_nodes(h)
    dev = Path("/dev")
    all_names = {f"davinci{d}" for d in range(DIES)} | set(CONTROL_NODES)
    for name in sorted(all_names - set(want)):
        with contextlib.suppress(FileNotFoundError):
            (dev / name).unlink()
    for name, (major, minor) in want.items():
        p = dev / name
        if p.exists():
            continue
        try:
            # Character devices like the real ones; the container's device cgroup forbids opening them, and nothing
            # in the simulation opens them (site_simulated: no device is handed to containers).
            os.mknod(p, 0o666 | 0o020000, os.makedev(major, minor))
        except PermissionError:
            p.write_text("")  # without CAP_MKNOD an empty file at least makes presence checks meaningful
        p.chmod(0o666)


def _run(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=check, text=True, capture_output=True)


def _running(pid: int) -> bool:
    """True for a live process; a zombie (exited, not yet reaped by its parent) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _pid_alive(pidfile: str) -> int:
    try:
        pid = int(Path(pidfile).read_text().strip())
    except (FileNotFoundError, ValueError):
        return 0
    if not _running(pid):
        return 0
    # A stale pid file may name an unrelated process after a restart of the container.
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except FileNotFoundError:
        return 0
    return pid if comm in ("sshd", "dockerd", "python3") else 0


def _stop(pidfile: str, wait_s: float = 30.0) -> None:
    pid = _pid_alive(pidfile)
    if not pid:
        return
    os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not _running(pid):
            break
        time.sleep(0.1)
    else:
        raise SimError(f"process {pid} ({pidfile}) did not stop within {wait_s:.0f} s")
    with contextlib.suppress(FileNotFoundError):
        Path(pidfile).unlink()


def _spawn(cmd: list[str], log: str, pidfile: str) -> None:
    with open(log, "ab") as out:
        p = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    Path(pidfile).write_text(f"{p.pid}\n")


def docker_ready() -> bool:
    if not Path("/usr/bin/docker").exists():
        return False
    return _run(["docker", "info", "--format", "{{.ServerVersion}}"], check=False).returncode == 0


def ensure_services(h: Host) -> None:
    faults = {f.spec for f in h.faults}
    # sshd: stopped by down:ssh (existing sessions live on, new connections are refused).
    if "down:ssh" in faults:
        _stop("/run/sshd.pid")
    elif not _pid_alive("/run/sshd.pid"):
        Path("/run/sshd").mkdir(exist_ok=True)
        _run(["/usr/sbin/sshd"])
    # the per-host container engine
    if "no-docker" in faults:
        _stop("/run/docker.pid", 60)
        Path(DISABLED_DIR).mkdir(parents=True, exist_ok=True)
        for b in DOCKER_BINARIES:
            if Path(b).exists():
                shutil.move(b, f"{DISABLED_DIR}/{Path(b).name}")
    else:
        for b in DOCKER_BINARIES:
            parked = Path(f"{DISABLED_DIR}/{Path(b).name}")
            if parked.exists():
                shutil.move(str(parked), b)
        if not _pid_alive("/run/docker.pid"):
            _spawn(
                ["/usr/sbin/dockerd", "--pidfile", "/run/docker.pid"], "/var/log/dockerd.log", "/run/docker.pid.spawn"
            )
            end = time.monotonic() + 120
            while not docker_ready():
                if time.monotonic() > end:
                    raise SimError(f"dockerd on {h.name} did not answer within 120 s; see /var/log/dockerd.log there")
                time.sleep(0.5)
    if not _pid_alive("/run/verl-sim-npud.pid"):
        _spawn(
            [sys.executable, f"{LIB_DIR}/simhost.py", "npud"], "/var/log/verl-sim-npud.log", "/run/verl-sim-npud.pid"
        )


def is_mountpoint(path: str) -> bool:
    # Read the mount table itself: `mountpoint` has been seen answering yes for a plain folder at container start.
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def sync_shared(h: Host) -> None:
    target = h.cluster["shared_root"]
    mounted = is_mountpoint(target)
    if any(f.kind == "no-shared" for f in h.faults):
        if mounted:
            _run(["umount", "-l", target])
    elif not mounted:
        Path(target).mkdir(parents=True, exist_ok=True)
        _run(["mount", "--bind", SHARED_SOURCE, target])


def sync_shim(h: Host) -> None:
    conf: list[str] = []
    skew, arch, low = _one(h.faults, "clock-skew"), _one(h.faults, "arch"), _one(h.faults, "low-disk")
    if skew:
        conf.append(f"SKEW_S={skew.arg}")
    if arch:
        conf.append(f"ARCH={arch.arg}")
    if low:
        conf.append(f"AVAIL_BYTES={int(low.arg or LOW_DISK_DEFAULT_MIB) * 1024 * 1024}")
        conf.append(f"KEEP_PREFIX={h.cluster['shared_root']}")
    preload = Path("/etc/ld.so.preload")
    if conf:
        write_if_changed(state_dir() / "shim.conf", "\n".join(conf) + "\n")
        write_if_changed(preload, SHIM + "\n")
    else:
        with contextlib.suppress(FileNotFoundError):
            preload.unlink()
        with contextlib.suppress(FileNotFoundError):
            (state_dir() / "shim.conf").unlink()


# ---- the host faults behind the preflight's OS, memory, NIC and firewall rows (files and kernel state) ----

OS_RELEASE_LINK = "../usr/lib/os-release"  # Debian's /etc/os-release is this link
MEMINFO_FILE = "meminfo"  # in the state folder, bound over /proc/meminfo while low-ram is on
FIREWALL_CHAIN = "VERL-SIM-FW"
# The fixed list a port-based firewall would open (Ray's fixed ports, HCCL host sockets, the image fan-out).
FIREWALL_OPEN_TCP = "22,6379,6380:6384,8265,10001,10002:19999,18080,52365,60000:60050"
DUMMY_NIC = "verlsim0"


def sync_os_release(h: Host) -> None:
    f = _one(h.faults, "os")
    path = Path("/etc/os-release")
    if f:
        if path.is_symlink():
            path.unlink()
        write_if_changed(path, OS_RELEASES[f.arg])
    elif not path.is_symlink():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        path.symlink_to(OS_RELEASE_LINK)


def sync_meminfo(h: Host) -> None:
    f = _one(h.faults, "low-ram")
    mounted = is_mountpoint("/proc/meminfo")
    if mounted:
        _run(["umount", "/proc/meminfo"])
    if f:
        kib = int(f.arg or 1) * 1024 * 1024
        text = (
            f"MemTotal:       {kib} kB\nMemFree:        {kib // 2} kB\nMemAvailable:   {kib // 2} kB\n"
            "Buffers:               0 kB\nCached:                0 kB\nSwapTotal:             0 kB\n"
            "SwapFree:              0 kB\n"
        )
        write_if_changed(state_dir() / MEMINFO_FILE, text)
        _run(["mount", "--bind", str(state_dir() / MEMINFO_FILE), "/proc/meminfo"])


def sync_nic(h: Host) -> None:
    """nic-moved: the cluster address leaves the named NIC for a dummy one; the subnet stays routed through the
    NIC, so SSH and the NPU responder keep working (Linux answers for any local address on any interface)."""
    ip, nic, net = h.entry["cluster_ip"], h.entry.get("cluster_nic", "eth0"), h.cluster["subnet"]
    plen = net.split("/")[1]
    on_nic = ip in _run(["ip", "-o", "-4", "addr", "show", "dev", nic]).stdout.split(f"/{plen}")[0].split()
    dummy = Path(f"/sys/class/net/{DUMMY_NIC}").exists()
    if _one(h.faults, "nic-moved"):
        routes = _run(["ip", "-4", "route", "show", "default"]).stdout.split()
        if not dummy:
            _run(["ip", "link", "add", DUMMY_NIC, "type", "bridge"])  # an interface with no ports: no dummy module here
            _run(["ip", "link", "set", DUMMY_NIC, "up"])
            _run(["ip", "addr", "add", f"{ip}/32", "dev", DUMMY_NIC])
        if on_nic:
            _run(["ip", "addr", "del", f"{ip}/{plen}", "dev", nic])
            _run(["ip", "route", "replace", net, "dev", nic, "src", ip])
            if "via" in routes:
                _run(["ip", "route", "replace", "default", "via", routes[routes.index("via") + 1], "dev", nic])
    else:
        if not on_nic:
            routes = _run(["ip", "-4", "route", "show", "default"]).stdout.split()
            _run(["ip", "route", "del", net, "dev", nic], check=False)
            _run(["ip", "addr", "add", f"{ip}/{plen}", "dev", nic])
            if "via" in routes:
                _run(["ip", "route", "replace", "default", "via", routes[routes.index("via") + 1], "dev", nic])
        if dummy:
            _run(["ip", "link", "del", DUMMY_NIC])


def sync_firewall(h: Host) -> None:
    """firewall: new TCP connections from the cluster subnet are dropped except on a fixed port list, the way a
    port-based firewalld or ufw setup treats ephemeral ports (Gloo, verl's MASTER_PORT, vLLM's init)."""
    have = f"-j {FIREWALL_CHAIN}" in _run(["iptables", "-S", "INPUT"], check=False).stdout
    if _one(h.faults, "firewall"):
        if have:
            return
        net = h.cluster["subnet"]
        if _run(["iptables", "-N", FIREWALL_CHAIN], check=False).returncode != 0:
            _run(["iptables", "-F", FIREWALL_CHAIN])  # left over from an earlier start of this container
        for rule in (
            ["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"],
            ["-p", "tcp", "-m", "multiport", "--dports", FIREWALL_OPEN_TCP, "-j", "RETURN"],
            ["-s", net, "-p", "tcp", "--syn", "-j", "DROP"],
        ):
            _run(["iptables", "-A", FIREWALL_CHAIN, *rule])
        _run(["iptables", "-I", "INPUT", "-j", FIREWALL_CHAIN])
    elif have:
        _run(["iptables", "-D", "INPUT", "-j", FIREWALL_CHAIN], check=False)
        _run(["iptables", "-F", FIREWALL_CHAIN], check=False)
        _run(["iptables", "-X", FIREWALL_CHAIN], check=False)


def sync_host_faults(h: Host) -> None:
    for name in TOOL_LOCKS:  # readable by every user: the tools lock them read-only
        lock = state_dir() / f".busy-{name}"
        if not lock.exists():
            lock.touch(0o644)
    sync_os_release(h)
    sync_meminfo(h)
    sync_nic(h)
    sync_firewall(h)


def apply() -> None:
    """Make the host's files and services match its fault state."""
    h = Host.load()
    write_if_changed(Path("/etc/hccn.conf"), hccn_conf(h))
    write_if_changed(Path("/usr/local/Ascend/driver/version.info"), driver_version_info(h))
    write_if_changed(Path("/usr/local/Ascend/firmware/version.info"), firmware_version_info(h))
    write_if_changed(Path("/etc/ascend_install.info"), ASCEND_INSTALL_INFO)
    # sshd listens on the cluster interface only.
    write_if_changed(Path("/etc/ssh/sshd_config.d/20-listen.conf"), f"ListenAddress {h.entry['cluster_ip']}\n")
    sync_device_nodes(h)
    sync_shim(h)
    sync_shared(h)
    sync_host_faults(h)
    ensure_services(h)


@contextlib.contextmanager
def locked() -> Any:
    with open(state_dir() / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def set_faults(specs: list[str]) -> None:
    p = state_dir() / "faults.json"
    tmp = p.with_name("faults.json.tmp")
    tmp.write_text(json.dumps({"faults": specs}, indent=1) + "\n")
    tmp.chmod(0o644)
    tmp.replace(p)


def fault_cmd(argv: list[str], do_apply: bool = True) -> int:
    """`fault add SPEC...` | `fault clear` | `fault list`."""
    if not argv or argv[0] not in ("add", "clear", "list"):
        print(f"usage: simhost.py fault add <fault>... | clear | list; faults: {FAULT_HELP}", file=sys.stderr)
        return 2
    if argv[0] == "list":
        print("\n".join(read_fault_specs()))
        return 0
    cluster, name = load_cluster(), this_host()
    with locked():
        if argv[0] == "clear":
            set_faults([])
        else:
            new = [parse_fault(s, cluster, name) for s in argv[1:]]
            if not new:
                raise SimError("fault add needs at least one fault")
            if any(f.kind == "down" and not f.arg for f in new):
                raise SimError("fault 'down' cuts the power from outside: use `make sim-fault ... FAULT=down`")
            faults = [parse_fault(s) for s in read_fault_specs()]
            for f in new:
                if f.kind in SINGLE_FAULTS:
                    faults = [g for g in faults if g.kind != f.kind]
                if f not in faults:
                    faults.append(f)
            set_faults([f.spec for f in faults])
        # VERL_SIM_NO_APPLY=1: record the state only (unit tests, outside a simulated host).
        if do_apply and not os.environ.get("VERL_SIM_NO_APPLY"):
            apply()
    return 0


def ready() -> int:
    """Exit 0 once sshd, the NPU responder and (unless no-docker) dockerd are up."""
    h = Host.load()
    faults = {f.spec for f in h.faults}
    problems = []
    if "down:ssh" not in faults and not _pid_alive("/run/sshd.pid"):
        problems.append("sshd")
    if "no-docker" not in faults and not docker_ready():
        problems.append("dockerd")
    if not _pid_alive("/run/verl-sim-npud.pid"):
        problems.append("npud")
    if problems:
        print(f"{h.name}: not ready: {', '.join(problems)}", file=sys.stderr)
        return 1
    return 0


def boot() -> int:
    """Container main process: host key, files, services; then wait for SIGTERM and stop dockerd cleanly."""
    # /run is a fresh tmpfs at every start of hosts made by simctl.py; on a container without it, pid files of a
    # previous start would name unrelated processes.
    for stale in ("sshd.pid", "docker.pid", "docker.pid.spawn", "verl-sim-npud.pid"):
        with contextlib.suppress(FileNotFoundError):
            (Path("/run") / stale).unlink()
    key = Path("/etc/ssh/ssh_host_ed25519_key")
    if not key.exists():
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{this_host()} host key", "-f", str(key)])
    stop = False

    def on_term(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    def reap(_sig: int, _frame: object) -> None:
        # Services started here are our children; reap them when they exit so none lingers as a zombie.
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    signal.signal(signal.SIGCHLD, reap)
    apply()
    print(f"{this_host()}: up", flush=True)
    while not stop:
        signal.pause()
    _stop("/run/docker.pid", 20)
    return 0


def main(argv: list[str]) -> int:
    prog = Path(argv[0]).name
    try:
        if prog == "npu-smi":
            return npu_smi(argv[1:])
        if prog == "hccn_tool":
            return hccn_tool(argv[1:])
        cmd, rest = (argv[1], argv[2:]) if len(argv) > 1 else ("", [])
        if cmd == "npu-smi":
            return npu_smi(rest)
        if cmd == "hccn_tool":
            return hccn_tool(rest)
        if cmd == "fault":
            return fault_cmd(rest)
        if cmd == "apply":
            with locked():
                apply()
            return 0
        if cmd == "ready":
            return ready()
        if cmd == "boot":
            return boot()
        if cmd == "npud":
            return npud()
        if cmd == "hccn-conf":
            print(hccn_conf(Host.load()), end="")
            return 0
        print("usage: simhost.py npu-smi|hccn_tool|fault|apply|ready|boot|npud|hccn-conf ...", file=sys.stderr)
        return 2
    except SimError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
