"""The simulated host as the tools see it: `Host`, one host of the cluster with the faults switched on there,
and what follows from them (dies, driver and firmware versions, health, links, addresses, gateways).
Standard library only: the simulated host's python3 has nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simfaults import Fault, active_faults, fault_dies, fault_of, firmware_number, old_version
from simstate import DIES, host_entry, load_cluster, this_host

# npu-smi on a simulated host: the file (image: /usr/local/sbin) and the link to it the image makes.
NPU_SMI_PATHS = ("/usr/local/bin/npu-smi", "/usr/local/sbin/npu-smi")


# Every die's gateway (hccn.conf gateway_<die>, netdetect_<die>): the .0.1 of the NPU /16 (198.18.0.1).
def npu_gateway(ips: list[str]) -> str:
    a, b, _, _ = ips[0].split(".")
    return f"{a}.{b}.0.1"


def vnic_ip(npu_ip: str) -> str:
    """A die's virtual NIC address (HCCS inside a SuperPoD): SYNTHETIC, the RoCE address one /16 up."""
    a, b, c, d = npu_ip.split(".")
    return f"{a}.{int(b) + 1}.{c}.{d}"


def host_vnic_ips(entry: dict[str, Any]) -> list[str]:
    """A host's vNIC addresses: its own in the cluster description (a site profile with random addresses), else
    each RoCE address one /16 up."""
    own = entry.get("vnic_ips")
    return [str(ip) for ip in own] if own else [vnic_ip(str(ip)) for ip in entry["npu_ips"]]


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
        f = fault_of(self.faults, "dies")
        return int(f.arg) if f else DIES

    @property
    def npu_ips(self) -> list[str]:
        return [str(ip) for ip in self.entry["npu_ips"]]

    @property
    def vnic_ips(self) -> list[str]:
        return host_vnic_ips(self.entry)

    @property
    def hdk(self) -> str:
        """The HDK release installed here: the host's own (a site profile with mixed versions), else the minimum."""
        return str(self.entry.get("hdk") or self.cluster["hdk_min"]).lower()

    @property
    def npu_smi_paths(self) -> list[str]:
        """Where this host has npu-smi: the file in /usr/local/sbin and its link in /usr/local/bin, unless the
        cluster description names fewer (a site profile's sbin-only hosts)."""
        return [str(p) for p in self.entry.get("npu_smi") or NPU_SMI_PATHS]

    def driver_version(self) -> str:
        f = fault_of(self.faults, "driver-old")
        return (f.arg or old_version(self.cluster["hdk_min"])) if f else self.hdk

    def firmware_package_version(self) -> str:
        f = fault_of(self.faults, "firmware-old")
        return (f.arg or old_version(self.cluster["hdk_min"])) if f else self.hdk

    def firmware_version(self) -> str:
        return firmware_number(self.firmware_package_version())

    def health(self, die: int) -> str:
        for kind, word in (("health-critical", "Critical"), ("health-alarm", "Alarm"), ("health-warning", "Warning")):
            if die in fault_dies(self.faults, kind):
                return word
        return "OK"

    def link_up(self, die: int) -> bool:
        return die not in fault_dies(self.faults, "link-down")

    def has_ip(self, die: int) -> bool:
        return die not in fault_dies(self.faults, "ip-missing")

    def net_ok(self, die: int) -> bool:
        return die not in fault_dies(self.faults, "net-health")

    def answers(self, die: int) -> bool:
        """Whether this host's die answers an NPU-network ping at its address."""
        return die < self.dies and self.link_up(die) and self.has_ip(die)

    def vnic_up(self, die: int) -> bool:
        return die not in fault_dies(self.faults, "vnic-down")

    def answers_vnic(self, die: int) -> bool:
        """Whether this host's die answers an HCCS ping at its vNIC address (the RoCE link plays no part)."""
        return die < self.dies and self.vnic_up(die)

    def ping_lost_to(self, hccs: bool = False) -> set[str]:
        """Peers (`a3-02`) or single peer dies (`a3-02:7`) this host's pings never reach: over RoCE (`-ping`,
        ping-loss) or over HCCS (`-hccs_ping`, hccs-loss). A route lost on one path leaves the other working."""
        kind = "hccs-loss" if hccs else "ping-loss"
        return {f.arg for f in self.faults if f.kind == kind}

    def busy(self, die: int) -> bool:
        return die in fault_dies(self.faults, "npu-busy")

    def tls(self) -> int:
        return 1 if fault_of(self.faults, "tls-on") else 0

    def gateway(self, die: int) -> str:
        return "10.255.255.1" if die in fault_dies(self.faults, "gateway-wrong") else npu_gateway(self.npu_ips)

    def conf_address(self, die: int) -> str:
        """address_<die> in /etc/hccn.conf: the device's own, or (hccn-drift) the one it had before re-addressing."""
        ip = self.npu_ips[die]
        if die in fault_dies(self.faults, "hccn-drift"):
            a, b, c, d = ip.split(".")
            return f"{a}.{b}.{c}.{(int(d) + 100) % 254 + 1}"
        return ip

    def running_versions(self) -> tuple[str, str]:
        """(driver, firmware) that run now: after an upgrade without reboot, the year-older release."""
        if fault_of(self.faults, "not-rebooted"):
            old = old_version(self.cluster["hdk_min"])
            return old, firmware_number(old)
        return self.driver_version(), self.firmware_version()

    @property
    def index(self) -> int:
        return int(self.entry["rank"]) + 1
