"""The simulated site profiles (docker/sim-host/simctl_parts/profile.py) without Docker: a real-site cluster's
description (addresses with no pattern, unique, inside the simulated NPU network, from a recorded seed; npu-smi only
in /usr/local/sbin on the head and the 3rd host; HDK versions at or above the floor that differ), what each host's
stand-in tools then report (its own addresses only, its own versions, the faults still in force), and that the
default profile is what it always was."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.sim.helpers import TOOLS, HostState, simctl, simfaults, simhccn, simhostview, simservices

sys.path.insert(0, str(simctl.REPO / "docker" / "sim-host"))
from simctl_parts import profile  # noqa: E402

NET = ipaddress.IPv4Network("172.30.9.0/24")
ROCE = ipaddress.IPv4Network("198.18.0.0/16")
VNIC = ipaddress.IPv4Network("198.19.0.0/16")


def real_site(nodes: int = 4, seed: int = 7, **over: str) -> dict[str, Any]:
    c: dict[str, Any] = simctl.describe("unit", nodes, NET, profile.SiteOptions("real-site", seed=seed, **over))
    return c


def test_default_profile_adds_nothing() -> None:
    plain = simctl.describe("unit", 3, NET)
    assert plain == simctl.describe("unit", 3, NET, profile.SiteOptions())
    keys = {"name", "rank", "cluster_ip", "cluster_nic", "npu_ips", "mem_gib"}
    assert "profile" not in plain and all(set(h) == keys for h in plain["hosts"])
    # every simulated host reports the same assumed A3 memory by default
    assert {h["mem_gib"] for h in plain["hosts"]} == {simctl.HOST_MEM_GIB}
    assert plain["hosts"][1]["npu_ips"][7] == "198.18.7.12"


def test_real_site_addresses_have_no_pattern_and_repeat_by_seed() -> None:
    c = real_site(16)
    assert c["profile"] == {"name": "real-site", "addresses": "random", "npu_smi": "sbin-some", "hdk": "mixed",
                            "deploy_docker": "no", "memory": "mixed", "seed": 7}  # fmt: skip
    # host memory differs between hosts, and the least is not the head's
    mems = [h["mem_gib"] for h in c["hosts"]]
    assert len(set(mems)) == 2 and mems[0] > min(mems)
    roce = [ip for h in c["hosts"] for ip in h["npu_ips"]]
    vnic = [ip for h in c["hosts"] for ip in h["vnic_ips"]]
    assert len(roce) == len(set(roce)) == 256 and len(vnic) == len(set(vnic)) == 256
    assert all(ipaddress.IPv4Address(ip) in ROCE for ip in roce) and all(
        ipaddress.IPv4Address(ip) in VNIC for ip in vnic
    )
    assert not {"198.18.0.1", "198.19.0.1"} & set(roce + vnic)  # the dies' gateways
    formula = simctl.describe("unit", 16, NET)
    assert not any(a == b for h, f in zip(c["hosts"], formula["hosts"], strict=True)
                   for a, b in zip(h["npu_ips"], f["npu_ips"], strict=True))  # fmt: skip
    assert real_site(16) == c and real_site(16, seed=8)["hosts"][0]["npu_ips"] != c["hosts"][0]["npu_ips"]


def test_real_site_npu_smi_and_hdk() -> None:
    c = real_site(4)
    sbin = ["/usr/local/sbin/npu-smi"]
    assert [h.get("npu_smi") for h in c["hosts"]] == [sbin, None, sbin, None]
    versions = [h["hdk"] for h in c["hosts"]]
    floor = simctl.describe("unit", 1, NET)["hdk_min"]
    key = simfaults.version_key
    assert versions[0] == floor.lower() and versions[1] != versions[0]
    assert all(key(v) >= key(floor) for v in versions)


def test_options_one_by_one() -> None:
    only_smi = simctl.describe("unit", 2, NET, profile.SiteOptions(npu_smi="sbin-some", seed=1))
    assert only_smi["hosts"][0]["npu_ips"][0] == "198.18.0.11" and "hdk" not in only_smi["hosts"][1]
    assert only_smi["hosts"][0]["npu_smi"] == ["/usr/local/sbin/npu-smi"] and "npu_smi" not in only_smi["hosts"][1]
    formula = real_site(2, addresses="formula")
    assert formula["hosts"][1]["npu_ips"][7] == "198.18.7.12" and "vnic_ips" not in formula["hosts"][1]
    assert profile.newer_versions("25.5.0") == ["25.5.0", "25.5.1", "25.6.0"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (profile.SiteOptions("cloud"), "SIM_PROFILE 'cloud' is not valid"),
        (profile.SiteOptions(addresses="dhcp"), "SIM_ADDRESSES 'dhcp' is not valid"),
        (profile.SiteOptions(npu_smi="bin"), "SIM_NPU_SMI 'bin' is not valid"),
        (profile.SiteOptions(hdk="old"), "SIM_HDK 'old' is not valid"),
    ],
)
def test_bad_options_are_refused(options: profile.SiteOptions, message: str) -> None:
    with pytest.raises(simctl.SimError, match=message):
        simctl.describe("unit", 2, NET, options)
    with pytest.raises(simctl.SimError, match="SIM_SEED 'x' is not valid"):
        profile.parse_seed("x")


def test_each_host_reports_its_own_addresses_and_versions(tmp_path: Path) -> None:
    c = real_site(2)
    for h in c["hosts"]:
        state = HostState(tmp_path / h["name"], c, h["name"])
        host = simhostview.Host(c, h["name"], [])
        conf = dict(line.split("=", 1) for line in simhccn.hccn_conf(host).splitlines())
        assert [conf[f"address_{d}"] for d in range(16)] == h["npu_ips"]
        for d in (0, 9, 15):
            assert (
                state.out("hccn_tool", "-i", str(d), "-ip", "-g") == f"ipaddr:{h['npu_ips'][d]}\nnetmask:255.255.0.0\n"
            )
            vnic = state.out("hccn_tool", "-i", str(d), "-vnic", "-g")
            assert vnic == f"vnic link status: UP\nvnic ipaddr: {h['vnic_ips'][d]}\nvnic netmask: 255.255.0.0\n"
        assert f"Version={h['hdk']}\n" in simservices.driver_version_info(host)
        assert f"package_version={h['hdk']}\n" in simservices.firmware_version_info(host)
        assert host.npu_smi_paths == h.get("npu_smi", ["/usr/local/bin/npu-smi", "/usr/local/sbin/npu-smi"])
        assert f"npu-smi {h['hdk']}" in state.out("npu-smi", "info")
    # a peer's address is found where the responder answers for it: RoCE and vNIC alike
    peer = c["hosts"][1]
    assert simhccn.find_npu_ip(c, peer["npu_ips"][4]) == (peer, 4)
    assert simhccn.find_npu_ip(c, peer["vnic_ips"][4], vnic=True) == (peer, 4)


def test_faults_still_change_what_a_real_site_host_reports(tmp_path: Path) -> None:
    c = real_site(2)
    h = c["hosts"][0]
    state = HostState(tmp_path, c, h["name"])
    state.set_faults("ip-missing:3", "vnic-down:5", "driver-old")
    p = state.tool("hccn_tool", "-i", "3", "-ip", "-g")
    assert p.returncode == 1 and "no ip was preset" in p.stdout
    assert state.out("hccn_tool", "-i", "5", "-vnic", "-g").startswith("vnic link status: DOWN\n")
    host = simhostview.Host(c, h["name"], [simfaults.Fault("ip-missing", "3"), simfaults.Fault("driver-old")])
    assert "address_3=" not in simhccn.hccn_conf(host) and f"address_4={h['npu_ips'][4]}" in simhccn.hccn_conf(host)
    assert "Version=25.5.0\n" in simservices.driver_version_info(host)


def test_sim_inventory_can_leave_hosts_yml_to_make_inventory(tmp_path: Path) -> None:
    c = real_site(2)
    c["inventory_hosts_file"] = "none"
    simctl.write_inventory(tmp_path, c, "x86_64")
    assert not (tmp_path / "hosts.yml").exists() and (tmp_path / "group_vars" / "all" / "sim.yml").exists()
    assert json.loads((tmp_path / "cluster.json").read_text())["profile"]["seed"] == 7
    del c["inventory_hosts_file"]
    simctl.write_inventory(tmp_path, c, "x86_64")
    assert "- " + c["hosts"][1]["npu_ips"][0] in (tmp_path / "hosts.yml").read_text()


def test_simctl_refuses_bad_profile_options_before_creating_anything(tmp_path: Path) -> None:
    env = {"SIM_NAME": "vrsimprof", "SIM_INVENTORY": str(tmp_path / "inv"), "PATH": "/usr/bin:/bin"}
    for var, value, message in (
        ("SIM_PROFILE", "cloud", "SIM_PROFILE 'cloud' is not valid"),
        ("SIM_HOSTS_FILE", "maybe", "SIM_HOSTS_FILE 'maybe' is not valid"),
        ("SIM_SEED", "-1", "SIM_SEED '-1' is not valid"),
    ):
        p = subprocess.run(
            [sys.executable, str(TOOLS.parent / "simctl.py"), "up", "--nodes", "2"],
            env={**env, var: value},
            capture_output=True,
            text=True,
            check=False,
        )
        assert p.returncode == 1 and message in p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert not (tmp_path / "inv").exists()
