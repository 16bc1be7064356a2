"""The fault grammar of a simulated A3 host: the faults `simhost.py fault add` takes (parse_fault validates one
spec), the faults switched on now, and the HDK version helpers the version faults use.
Standard library only: the simulated host's python3 has nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import a3facts
from simfaulttable import DIE, FLAG, SINGLE, fault_help, kinds_of
from simstate import CONTROL_NODES, DIES, SimError, host_entry, read_fault_specs

# The faults' grammar, from the one table of them (simfaulttable.py: forms, the rows each trips, effects).
DIE_FAULTS = kinds_of(DIE)
FLAG_FAULTS = kinds_of(FLAG)
# Faults that hold one value per host: switching one on again replaces the value.
SINGLE_FAULTS = kinds_of(SINGLE)
FAULT_HELP = fault_help()
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


def fault_of(faults: list[Fault], kind: str) -> Fault | None:
    for f in faults:
        if f.kind == kind:
            return f
    return None


def fault_dies(faults: list[Fault], kind: str) -> set[int]:
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
