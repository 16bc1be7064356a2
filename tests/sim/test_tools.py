"""Unit tests of the simulated A3 host's stand-in tools, run as scripts on this machine with a scratch state."""

from __future__ import annotations

import ipaddress
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.sim.helpers import (
    FIXTURES,
    TOOLS,
    HostState,
    simctl,
    simfaults,
    simhccn,
    simhostview,
    simnpusmi,
    simservices,
    simstate,
)


def cluster(nodes: int = 2, hdk_min: str = "26.0.RC1", base_ip: str = "127.0.0.0/24") -> dict[str, Any]:
    c: dict[str, Any] = simctl.describe("unit", nodes, ipaddress.IPv4Network(base_ip))
    c["hdk_min"] = hdk_min
    return c


@pytest.fixture
def host(tmp_path: Path) -> HostState:
    return HostState(tmp_path, cluster(), "a3-01")


def test_npu_smi_info_is_the_verbatim_a3_sample(tmp_path: Path) -> None:
    # a3-tools T1: npu-smi 24.1.rc3.7 on an A3 node; with that driver version the stand-in prints the same bytes.
    h = HostState(tmp_path, cluster(hdk_min="24.1.rc3.7"), "a3-01")
    assert h.out("npu-smi", "info") == (FIXTURES / "npu-smi-info-a3.txt").read_text()


def test_npu_smi_info_warns_when_driver_install_is_incomplete(tmp_path: Path) -> None:
    h = HostState(tmp_path, cluster(), "a3-01", complete_install=False)
    assert h.out("npu-smi", "info").splitlines()[-1] == simnpusmi.INSTALL_WARNING


def test_npu_smi_info_header_carries_the_driver_version(host: HostState) -> None:
    lines = host.out("npu-smi", "info").splitlines()
    assert lines[1] == "| npu-smi 26.0.rc1                 Version: 26.0.rc1" + " " * 45 + "|"
    assert {len(line) for line in lines} == {98}
    assert sum(1 for line in lines if "Ascend910" in line) == 16


def test_health_fault_changes_exactly_one_die_row(host: HostState) -> None:
    before = host.out("npu-smi", "info").splitlines()
    host.set_faults("health-alarm:3")
    after = host.out("npu-smi", "info").splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [(before[15], before[15].replace("| OK            |", "| Alarm         |"))]
    assert "Ascend910" in before[15]  # die 3 = NPU 1 chip 1: the 4th die row
    health = host.out("npu-smi", "info", "-t", "health", "-i", "1", "-c", "1")
    assert health.splitlines()[0] == "\tHealth Status                  : Alarm"
    assert "Error Code" in health and ": NA" not in health
    assert host.out("npu-smi", "info", "-t", "health", "-i", "1", "-c", "0").splitlines()[0].endswith(": OK")
    # without -c the NPU reports its worst die
    assert host.out("npu-smi", "info", "-t", "health", "-i", "1").splitlines()[0].endswith(": Alarm")


def test_health_warning_words(host: HostState) -> None:
    host.set_faults("health-warning:0")
    assert "| Warning       |" in host.out("npu-smi", "info").splitlines()[6]


def test_mapping_format(host: HostState) -> None:
    lines = host.out("npu-smi", "info", "-m").splitlines()
    assert lines[0].split() == ["NPU", "ID", "Chip", "ID", "Chip", "Logic", "ID", "Chip", "Phy-ID", "Chip", "Name"]
    assert all(line.startswith("\t") for line in lines)
    rows = [line.split() for line in lines[1:]]
    assert len(rows) == 24  # 8 NPUs x (2 dies + Mcu)
    dies = [r for r in rows if r[4] == "Ascend910"]
    assert [int(r[3]) for r in dies] == list(range(16))
    assert all(r[2:4] == ["-", "-"] for r in rows if r[4] == "Mcu")
    assert lines[1] == "\t" + " ".join(f"{c:<30}" for c in ["0", "0", "0", "0", "Ascend910"])


def test_fewer_dies(host: HostState) -> None:
    host.set_faults("dies:15")
    assert sum(1 for line in host.out("npu-smi", "info", "-m").splitlines() if "Ascend910" in line) == 15
    assert sum(1 for line in host.out("npu-smi", "info").splitlines() if "Ascend910" in line) == 15
    assert host.out("npu-smi", "info", "-t", "board", "-i", "7").splitlines()[-1].endswith(": 1")
    p = host.tool("hccn_tool", "-i", "15", "-link", "-g")
    assert p.returncode == 1 and "device id 15 is invalid" in p.stderr
    assert host.out("hccn_tool", "-i", "14", "-link", "-g") == "link status: UP\n"


def test_board_fields_in_source_order(host: HostState) -> None:
    lines = host.out("npu-smi", "info", "-t", "board", "-i", "0").splitlines()
    keys = [line.split(":")[0].strip() for line in lines]
    assert keys[:8] == [
        "NPU ID",
        "Product Name",
        "Model",
        "Manufacturer",
        "Serial Number",
        "Software Version",
        "Firmware Version",
        "Compatibility",
    ]
    assert keys[-1] == "Chip Count" and lines[-1].endswith(": 2")
    assert all(line.startswith("\t") and line[31:34] == " : " for line in lines)
    assert "\tPCIe Bus Info                  : 0000:9D:00.0" in lines
    chip = host.out("npu-smi", "info", "-t", "board", "-i", "0", "-c", "1").splitlines()
    assert "\tChip ID                        : 1" in chip


def test_spod_info(host: HostState) -> None:
    lines = host.out("npu-smi", "info", "-t", "spod-info", "-i", "0", "-c", "0").splitlines()
    assert [line.split(":")[0].strip() for line in lines] == ["SDID", "Super Pod Size", "Super Pod ID", "Server Index"]
    other = HostState(host.dir.parent / "b", host.cluster, "a3-02")
    assert other.out("npu-smi", "info", "-t", "spod-info", "-i", "0", "-c", "0").splitlines()[3].endswith(": 1")


@pytest.mark.parametrize(
    "args",
    [
        ["info", "-t", "board", "-i", "8"],
        ["info", "-t", "health", "-i", "x"],
        ["info", "-t", "board", "-i", "0", "-c", "2"],
    ],
)
def test_npu_smi_rejects_bad_ids(host: HostState, args: list[str]) -> None:
    p = host.tool("npu-smi", *args)
    assert p.returncode == 1 and "invalid" in p.stderr and p.stdout == ""


def test_hccn_tool_formats(host: HostState) -> None:
    assert host.out("hccn_tool", "-i", "7", "-link", "-g") == "link status: UP\n"
    assert host.out("hccn_tool", "-i", "7", "-ip", "-g") == "ipaddr:198.18.7.11\nnetmask:255.255.0.0\n"
    assert host.out("hccn_tool", "-i", "7", "-net_health", "-g") == "net health status: Success\n"
    assert host.out("hccn_tool", "-i", "7", "-netdetect", "-g") == "netdetect addr: 198.18.0.1\n"
    assert host.out("hccn_tool", "-i", "7", "-gateway", "-g") == "default gateway:198.18.0.1, Iface:eth7\n"
    assert host.out("hccn_tool", "-i", "7", "-tls", "-g").startswith("dev_id:7, tls switch[0](0:disable, 1:enable)")


@pytest.mark.parametrize(
    ("fault", "die", "args", "expected", "rc"),
    [
        ("link-down:7", "7", ["-link", "-g"], "link status: DOWN\n", 0),
        ("ip-missing:7", "7", ["-ip", "-g"], "Get ipconf failed, because no ip was preset there!\n", 1),
        ("net-health:7", "7", ["-net_health", "-g"], "net health status: Fault\n", 0),
    ],
)
def test_hccn_faults_hit_only_their_die(
    host: HostState, fault: str, die: str, args: list[str], expected: str, rc: int
) -> None:
    others = (0, 6, 8, 15)  # the neighbours in both directions and the ends
    healthy = {d: host.tool("hccn_tool", "-i", str(d), *args).stdout for d in others}
    host.set_faults(fault)
    p = host.tool("hccn_tool", "-i", die, *args)
    assert (p.stdout, p.returncode) == (expected, rc)
    assert {d: host.tool("hccn_tool", "-i", str(d), *args).stdout for d in others} == healthy


def test_hccn_conf(host: HostState) -> None:
    conf = host.out("hccn_tool", "-i", "0", "-ip", "-g")
    assert conf.startswith("ipaddr:198.18.0.11")
    text = simhccn.hccn_conf(simhostview.Host(host.cluster, "a3-01", []))
    keys = dict(line.split("=", 1) for line in text.splitlines())
    assert [keys[f"address_{d}"] for d in range(16)] == host.cluster["hosts"][0]["npu_ips"]
    # the two dies of a module hold static ARP entries for each other (a3-tools T10)
    assert keys["arp_0"].startswith("-i eth0 -s 198.18.1.11 ") and keys["arp_1"].startswith("-i eth1 -s 198.18.0.11 ")
    missing = simhccn.hccn_conf(simhostview.Host(host.cluster, "a3-01", [simfaults.Fault("ip-missing", "2")]))
    assert "address_2=" not in missing and "netmask_2=" not in missing and "address_3=" in missing


def test_versions(host: HostState) -> None:
    h = simhostview.Host(host.cluster, "a3-01", [])
    assert "Version=26.0.rc1\n" in simservices.driver_version_info(h)
    old = simhostview.Host(
        host.cluster, "a3-01", [simfaults.Fault("driver-old"), simfaults.Fault("firmware-old", "25.3.rc1")]
    )
    assert "Version=25.5.0\n" in simservices.driver_version_info(old)
    assert "package_version=25.3.rc1\n" in simservices.firmware_version_info(old)
    assert simfaults.version_below("25.5.0", "26.0.RC1") and simfaults.version_below("26.0.rc1", "26.0.0")
    assert not simfaults.version_below("26.0.rc1", "26.0.RC1")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("link-down:16", "die must be a number 0-15"),
        ("link-down", "die must be a number 0-15"),
        ("dies:16", "dies must be 1-15"),
        ("ping-loss:a3-09", "not in this simulated cluster"),
        ("ping-loss:a3-01", "another host"),
        ("driver-old:27.0.0", "not below the minimum"),
        ("clock-skew:abc", "whole seconds"),
        ("arch:x86_64", "own architecture"),
        ("no-docker:1", "takes no value"),
        ("melt:1", "unknown fault"),
    ],
)
def test_bad_faults_are_refused(host: HostState, spec: str, message: str) -> None:
    c = dict(host.cluster, native_arch="x86_64")
    with pytest.raises(simstate.SimError, match=message):
        simfaults.parse_fault(spec, c, "a3-01")


def test_fault_add_replaces_single_valued_faults(host: HostState) -> None:
    env = host.env()
    run = [sys.executable, str(TOOLS / "simhost.py"), "fault"]
    # `apply` needs a real host (mounts, services); VERL_SIM_NO_APPLY=1 records the state only.
    for spec in ("clock-skew:10", "clock-skew:20", "link-down:1", "link-down:1"):
        p = subprocess.run([*run, "add", spec], env=dict(env, VERL_SIM_NO_APPLY="1"), capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
    p = subprocess.run([*run, "list"], env=env, capture_output=True, text=True, check=True)
    assert p.stdout.split() == ["clock-skew:20", "link-down:1"]
    p = subprocess.run([*run, "add", "melt"], env=dict(env, VERL_SIM_NO_APPLY="1"), capture_output=True, text=True)
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "unknown fault 'melt'" in p.stderr


# ---- the NPU network: hccn_tool -ping against responders on loopback ----


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def npu_net(tmp_path: Path) -> Iterator[tuple[HostState, HostState, dict[str, str]]]:
    """Two hosts on 127.0.0.11 and 127.0.0.12, each with its responder (simhost.py npud)."""
    c = cluster(2)
    a, b = HostState(tmp_path / "a", c, "a3-01"), HostState(tmp_path / "b", c, "a3-02")
    extra = {"VERL_SIM_NPU_PORT": str(free_udp_port()), "VERL_SIM_PING_TIMEOUT": "1.0"}
    procs = [subprocess.Popen([sys.executable, str(TOOLS / "simhost.py"), "npud"], env=h.env(**extra)) for h in (a, b)]
    try:
        # Wait until both responders answer (they bind within milliseconds; the loop only guards a slow start).
        for _ in range(100):
            p = a.tool("hccn_tool", "-i", "0", "-ping", "-g", "address", "198.18.0.12", **extra)
            q = a.tool("hccn_tool", "-i", "0", "-ping", "-g", "address", "198.18.0.11", **extra)
            if "3 received" in p.stdout and "3 received" in q.stdout:
                break
            time.sleep(0.1)
        yield a, b, extra
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)


def test_ping_a_reachable_peer(npu_net: tuple[HostState, HostState, dict[str, str]]) -> None:
    a, _, extra = npu_net
    p = a.tool("hccn_tool", "-i", "3", "-ping", "-g", "address", "198.18.9.12", **extra)
    lines = p.stdout.splitlines()
    assert p.returncode == 0
    assert lines[0] == "device 3 PING 198.18.9.12"
    assert [line.split(",")[0] for line in lines[1:4]] == ["recv seq=0", "recv seq=1", "recv seq=2"]
    assert lines[4] == "3 packets transmitted, 3 received, 0.00% packet loss"


@pytest.mark.parametrize(
    ("on", "fault", "target"),
    [
        ("b", "link-down:9", "198.18.9.12"),  # the peer's die is down
        ("b", "ip-missing:9", "198.18.9.12"),  # the peer's die has no address
        ("a", "ping-loss:a3-02", "198.18.9.12"),  # this host loses everything to a3-02
        ("a", "link-down:3", "198.18.9.12"),  # the sending die is down
    ],
)
def test_ping_loss(npu_net: tuple[HostState, HostState, dict[str, str]], on: str, fault: str, target: str) -> None:
    a, b, extra = npu_net
    (a if on == "a" else b).set_faults(fault)
    p = a.tool("hccn_tool", "-i", "3", "-ping", "-g", "address", target, **extra)
    assert p.returncode == 1
    assert p.stdout.splitlines()[-1] == "3 packets transmitted, 0 received, 100.00% packet loss"
    # the other dies of the same peer still answer
    ok = a.tool("hccn_tool", "-i", "4", "-ping", "-g", "address", "198.18.10.12", **extra)
    assert ("3 received" in ok.stdout) == (fault != "ping-loss:a3-02")


def test_ping_an_unknown_address(npu_net: tuple[HostState, HostState, dict[str, str]]) -> None:
    a, _, extra = npu_net
    p = a.tool("hccn_tool", "-i", "0", "-ping", "-g", "address", "198.18.0.99", **extra)
    assert p.returncode == 1 and "0 received, 100.00% packet loss" in p.stdout


def test_unknown_option_is_a_usage_error(host: HostState) -> None:
    p = host.tool("hccn_tool", "-i", "0", "-frobnicate", "-g")
    assert p.returncode == 2 and p.stdout == "" and "usage: hccn_tool" in p.stderr
    p = host.tool("npu-smi", "info", "-t", "board")
    assert p.returncode == 2 and "usage: npu-smi" in p.stderr


def test_tools_outside_a_simulated_host_fail_clearly(tmp_path: Path) -> None:
    p = subprocess.run(
        [str(TOOLS / "npu-smi"), "info"],
        env={"VERL_SIM_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 1 and "not a simulated host" in p.stderr and p.stderr.count("\n") == 1


# ---- the failure modes the preflight must see: each changes what the real tool would show, nothing else ----


def test_busy_die_shows_in_the_process_table(host: HostState) -> None:
    before = host.out("npu-smi", "info").splitlines()
    host.set_faults("npu-busy:9")
    after = host.out("npu-smi", "info").splitlines()
    row = "| 4       1                 | 950109        | pt_main_thread           | 49207                   |"
    assert row in after and len(row) == 98
    assert "| No running processes found in NPU 4" not in "\n".join(after)
    assert len(after) == len(before) and {len(line) for line in after} == {98}


def test_tls_gateway_and_drift_faults(host: HostState) -> None:
    host.set_faults("tls-on", "gateway-wrong:4", "hccn-drift:5")
    assert host.out("hccn_tool", "-i", "3", "-tls", "-g").startswith("dev_id:3, tls switch[1](0:disable, 1:enable)")
    assert host.out("hccn_tool", "-i", "4", "-gateway", "-g") == "default gateway:10.255.255.1, Iface:eth4\n"
    assert host.out("hccn_tool", "-i", "3", "-gateway", "-g") == "default gateway:198.18.0.1, Iface:eth3\n"
    # the device keeps its address; only the file names an old one
    assert host.out("hccn_tool", "-i", "5", "-ip", "-g") == "ipaddr:198.18.5.11\nnetmask:255.255.0.0\n"
    faults = [simfaults.parse_fault(f) for f in ("tls-on", "gateway-wrong:4", "hccn-drift:5")]
    text = simhccn.hccn_conf(simhostview.Host(host.cluster, "a3-01", faults))
    conf = dict(line.split("=", 1) for line in text.splitlines())
    assert conf["address_5"] == "198.18.5.112" and conf["address_4"] == "198.18.4.11"
    assert conf["tls_enable_0"] == "1" and conf["gateway_4"] == "10.255.255.1"


def test_upgrade_without_reboot_keeps_the_old_versions_running(host: HostState) -> None:
    host.set_faults("not-rebooted")
    board = host.out("npu-smi", "info", "-t", "board", "-i", "2")
    assert "\tSoftware Version               : 25.5.0" in board.splitlines()
    assert "\tFirmware Version               : 7.7.0.5.220" in board.splitlines()
    # the packages on disk are the new ones
    h = simhostview.Host(host.cluster, "a3-01", [simfaults.Fault("not-rebooted")])
    assert "Version=26.0.rc1\n" in simservices.driver_version_info(h)


def test_concurrent_npu_smi_is_refused(host: HostState) -> None:
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        outs = list(pool.map(lambda _: host.tool("npu-smi", "info", "-m", VERL_SIM_TOOL_HOLD_S="0.5"), range(6)))
    refused = [o for o in outs if o.returncode != 0]
    assert refused and any(o.returncode == 0 for o in outs)
    assert all(o.stdout == "" and o.stderr.count("\n") == 1 and "ret -8020" in o.stderr for o in refused)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ping-loss:a3-02:16", "die must be a number 0-15"),
        ("os:windows", "pick one of"),
        ("low-ram:0", "GiB"),
        ("npu-busy", "die must be a number 0-15"),
        ("tls-on:1", "takes no value"),
    ],
)
def test_bad_new_faults_are_refused(host: HostState, spec: str, message: str) -> None:
    with pytest.raises(simstate.SimError, match=message):
        simfaults.parse_fault(spec, host.cluster, "a3-01")


def test_firewall_opens_ssh_ray_hccl_and_the_fanout_only() -> None:
    # the `firewall` fault's port list, built from a3facts' Ray ports; iptables multiport takes at most 15 entries
    entries = simservices.FIREWALL_OPEN_TCP.split(",")
    assert len(entries) <= 15
    ranges = [[int(p) for p in e.split(":")] for e in entries]

    def is_open(port: int) -> bool:
        return any(r[0] <= port <= r[-1] for r in ranges)

    facts = simstate.a3facts
    ray = [facts.RAY_GCS_PORT, facts.RAY_DASHBOARD_PORT, facts.RAY_CLIENT_PORT, *facts.RAY_NODE_PORTS.values()]
    assert all(is_open(p) for p in [22, 18080, 15000, 60000, 60050, *ray])
    assert not any(is_open(p) for p in (21, 6378, 6385, 8264, 10000, 20000, 52364, 59999, 60051))


def test_ping_loss_to_one_peer_die(npu_net: tuple[HostState, HostState, dict[str, str]]) -> None:
    a, _, extra = npu_net
    a.set_faults("ping-loss:a3-02:9")
    lost = a.tool("hccn_tool", "-i", "3", "-ping", "-g", "address", "198.18.9.12", **extra)
    assert lost.returncode == 1 and "0 received, 100.00% packet loss" in lost.stdout
    ok = a.tool("hccn_tool", "-i", "3", "-ping", "-g", "address", "198.18.8.12", **extra)
    assert "3 received" in ok.stdout


# ---- the HCCS path (site_inter_server_link: hccs): the dies' virtual NICs, -hccs_ping, and its own faults ----


def test_vnic_down_shows_in_the_vnic_query_only(host: HostState) -> None:
    up = "vnic link status: UP\nvnic ipaddr: 198.19.7.11\nvnic netmask: 255.255.0.0\n"
    assert host.out("hccn_tool", "-i", "7", "-vnic", "-g") == up
    host.set_faults("vnic-down:7")
    # the link goes DOWN, the configured address stays; the die's RoCE NIC and the other vNICs are untouched
    assert host.out("hccn_tool", "-i", "7", "-vnic", "-g") == up.replace("UP", "DOWN")
    assert host.out("hccn_tool", "-i", "7", "-link", "-g") == "link status: UP\n"
    assert host.out("hccn_tool", "-i", "6", "-vnic", "-g").startswith("vnic link status: UP\n")
    host.set_faults("link-down:7")
    assert host.out("hccn_tool", "-i", "7", "-vnic", "-g") == up  # and a DOWN RoCE link leaves the vNIC UP


@pytest.mark.parametrize(
    ("on", "fault", "hccs_lost", "roce_lost"),
    [
        ("b", "vnic-down:9", True, False),  # the peer die's vNIC is down
        ("a", "vnic-down:3", True, False),  # the sending die's vNIC is down
        ("a", "hccs-loss:a3-02", True, False),  # the HCCS route to a3-02 is lost, RoCE still works
        ("a", "hccs-loss:a3-02:9", True, False),
        ("a", "ping-loss:a3-02", False, True),  # the RoCE route is lost, HCCS still works
        ("b", "link-down:9", False, True),
        ("a", "link-down:3", False, True),
    ],
)
def test_each_path_fails_on_its_own(
    npu_net: tuple[HostState, HostState, dict[str, str]], on: str, fault: str, hccs_lost: bool, roce_lost: bool
) -> None:
    a, b, extra = npu_net
    (a if on == "a" else b).set_faults(fault)
    hccs = a.tool("hccn_tool", "-i", "3", "-hccs_ping", "-g", "address", "198.19.9.12", **extra)
    roce = a.tool("hccn_tool", "-i", "3", "-ping", "-g", "address", "198.18.9.12", **extra)
    for p, lost in ((hccs, hccs_lost), (roce, roce_lost)):
        assert p.returncode == int(lost), p.stdout
        assert p.stdout.splitlines()[-1].endswith("100.00% packet loss" if lost else " 0.00% packet loss")
    assert hccs.stdout.splitlines()[0] == "device 3 PING 198.19.9.12"
    # another die of the same peer over HCCS: lost only when the whole peer is cut off
    other = a.tool("hccn_tool", "-i", "4", "-hccs_ping", "-g", "address", "198.19.10.12", **extra)
    assert ("3 received" in other.stdout) == (fault != "hccs-loss:a3-02")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("vnic-down:16", "die must be a number 0-15"),
        ("vnic-down", "die must be a number 0-15"),
        ("hccs-loss", "name the peer"),
        ("hccs-loss:a3-09", "not in this simulated cluster"),
        ("hccs-loss:a3-01", "another host"),
        ("hccs-loss:a3-02:x", "die must be a number 0-15"),
    ],
)
def test_bad_hccs_faults_are_refused(host: HostState, spec: str, message: str) -> None:
    with pytest.raises(simstate.SimError, match=message):
        simfaults.parse_fault(spec, host.cluster, "a3-01")


def reported_vnics(state: HostState, dies: int = 16) -> tuple[str, list[str]]:
    """simctl.py's vNIC loop run against a host's own stand-in tool: (raw output, parsed addresses)."""
    env = state.env(PATH=f"{TOOLS}:/usr/bin:/bin")
    p = subprocess.run(["sh", "-c", simctl.vnic_query(dies)], env=env, capture_output=True, text=True, check=True)
    return p.stdout, simctl.parse_vnic(state.host, p.stdout, dies)


def test_hccs_inventory_lists_what_each_host_reports(tmp_path: Path) -> None:
    """`make sim-up SIM_LINK=hccs`: site_inter_server_link hccs and per host the a3_vnic_ips its own hccn_tool
    reported; the project's inventory validation accepts it, and roce (the default) writes no vNIC at all."""
    import yaml
    from verl_recipe import inventory as val

    c = cluster(3)
    states = {h["name"]: HostState(tmp_path / h["name"], c, h["name"]) for h in c["hosts"]}
    vnics = {}
    for name, st in states.items():
        raw, ips = reported_vnics(st)
        assert raw.count("vnic link status: UP") == 16
        vnics[name] = ips
        assert ips == [st.out("hccn_tool", "-i", str(d), "-vnic", "-g").split()[6] for d in range(16)]
    for link in ("hccs", "roce"):
        inv = tmp_path / f"inv-{link}"
        inv.mkdir()
        simctl.write_inventory(inv, c, "x86_64", link, vnics if link == "hccs" else None)
        hosts = yaml.safe_load((inv / "hosts.yml").read_text())["all"]["children"]["a3_nodes"]["hosts"]
        site = yaml.safe_load((inv / "group_vars" / "all" / "sim.yml").read_text())
        assert site["site_inter_server_link"] == link
        if link == "hccs":
            assert {n: h["a3_vnic_ips"] for n, h in hosts.items()} == vnics
            assert val.check_vnic(list(hosts), hosts, site["site_expected_dies"]) == []
        else:
            assert not any("a3_vnic_ips" in h for h in hosts.values())
        lint = subprocess.run(
            [str(Path(sys.executable).parent / "yamllint"), "--strict", "-c", str(simctl.REPO / ".yamllint"), str(inv)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert lint.returncode == 0, lint.stdout
    with pytest.raises(simctl.SimError, match="needs the vNIC addresses of every host"):
        simctl.write_inventory(tmp_path / "inv-roce", c, "x86_64", "hccs", {"a3-01": vnics["a3-01"]})
    with pytest.raises(simctl.SimError, match="SIM_LINK 'ib' is not valid"):
        simctl.write_inventory(tmp_path / "inv-roce", c, "x86_64", "ib")


def test_a_host_without_a_usable_vnic_is_not_written_into_the_inventory(host: HostState) -> None:
    # the inventory lists what the host reports; a DOWN vNIC at sim-up is an error, not an address
    host.set_faults("vnic-down:3", "dies:15")
    with pytest.raises(simctl.SimError, match=r"a3-01: .*die 3: DOWN; die 15: no answer"):
        reported_vnics(host)
    with pytest.raises(simctl.SimError, match=r"die 0: no answer"):
        simctl.parse_vnic("a3-01", "")
