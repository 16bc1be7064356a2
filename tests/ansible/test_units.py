"""Unit tests of the Python pieces of deploy.yml: parsers, version order, report table, ring, clock window."""

from __future__ import annotations

import re
from typing import Any

import pytest
from verl_recipe import inventory as val

from tests.ansible.helpers import load_plugin, preflight_module, valid_hosts

pre = preflight_module()
act = load_plugin("roles/preflight/action_plugins/a3_preflight.py")
rep = load_plugin("roles/preflight/action_plugins/a3_preflight_report.py")

man = load_plugin("roles/shared_assets/library/a3_asset_manifest.py")


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("25.5.0", "26.0.RC1"),
        ("26.0.rc1", "26.0.RC2"),
        ("26.0.RC1", "26.0.0"),
        ("26.0.0", "26.0.1"),
        ("24.1.rc3", "24.1.rc3.7"),
        ("25.3.rc1", "25.5.0"),
    ],
)
def test_hdk_order(older: str, newer: str) -> None:
    assert pre.hdk_key(older) < pre.hdk_key(newer)


def test_hdk_case_insensitive() -> None:
    assert pre.hdk_key("26.0.rc1") == pre.hdk_key("26.0.RC1")


def test_version_info_and_colon_parsers() -> None:
    # driver 25.3.rc1 version.info and npu-smi -t health output, from the fact sheet (2.8, 2.5)
    info = pre.parse_kv("Version=25.3.rc1\nascendhal_version=7.35.23\npackage_version=25.3.rc1\n")
    assert info["Version"] == "25.3.rc1"
    health = pre.parse_colon(" Health Status                  : OK\n Error Code                     : NA\n")
    assert health["health status"] == "OK"
    ip = pre.parse_colon("ipaddr:11.12.165.80\nnetmask:255.255.255.0\n")
    assert ip["ipaddr"] == "11.12.165.80"
    assert pre.parse_colon("link status: DOWN")["link status"] == "DOWN"


def test_ping_loss() -> None:
    ok = (
        "device 0 PING 11.12.165.80\nrecv seq=0,time=0.114000ms\n3 packets transmitted, 3 received, 0.00% packet loss\n"
    )
    assert pre.parse_ping_loss(ok) == 0.0
    assert pre.parse_ping_loss("3 packets transmitted, 0 received, 100.00% packet loss") == 100.0
    assert pre.parse_ping_loss("Command execute failed!") is None


def test_mountpoints_and_os_release() -> None:
    mi = "36 35 98:0 /mnt1 /mnt/shared rw,noatime master:1 - ext3 /dev/root rw\n22 1 0:1 / / rw - overlay o rw\n"
    assert pre.parse_mountpoints(mi) == {"/mnt/shared", "/"}
    assert pre.os_release('ID=ubuntu\nVERSION_ID="22.04"\n') == {"ID": "ubuntu", "VERSION_ID": "22.04"}


def _params(tmp: Any, **over: Any) -> dict[str, Any]:
    p: dict[str, Any] = {
        "expected_dies": 16,
        "hdk_min": "26.0.RC1",
        "driver_version_file": str(tmp / "driver.info"),
        "firmware_version_file": str(tmp / "fw.info"),
    }
    p.update(over)
    return p


def test_version_checks(tmp_path: Any) -> None:
    (tmp_path / "driver.info").write_text("Version=26.0.rc1\npackage_version=26.0.rc1\n")
    (tmp_path / "fw.info").write_text("Version=7.7.0.1.231\npackage_version=25.5.0\n")
    rows, installed = pre.version_checks(_params(tmp_path))
    checks = {c["check"]: c for c in rows}
    assert installed == {"driver": "26.0.rc1", "firmware": "7.7.0.1.231"}
    assert checks["driver_version"]["ok"] is True
    assert checks["firmware_version"]["ok"] is False
    assert checks["firmware_version"]["found"] == "25.5.0"
    assert "firmware" in checks["firmware_version"]["fix"]


def test_version_file_missing(tmp_path: Any) -> None:
    checks = {c["check"]: c for c in pre.version_checks(_params(tmp_path))[0]}
    assert not checks["driver_version"]["ok"]
    assert "missing" in checks["driver_version"]["found"]


def test_ping_plan_follows_rank_order() -> None:
    order = ["a", "b", "c"]
    ips = {h: [f"10.{d}.0.{i}" for d in range(4)] for i, h in enumerate(order)}
    plan = act.ping_plan(order, "a", 4, 0, ips)
    assert [(p["die"], p["peer"], p["peer_die"]) for p in plan] == [(0, "b", 0), (1, "c", 1), (2, "b", 2), (3, "c", 3)]
    assert plan[1]["address"] == "10.1.0.2" and plan[1]["path"] == "roce"
    assert act.ping_plan(["a"], "a", 4, 0, ips) == []


def test_clock_window_never_blames_a_slow_round_trip() -> None:
    # host read its clock 1 s after we sent and 30 s before the answer came back: no proof of skew
    assert act.clock_check(1001.0, 1000.0, 1031.0, 2)["ok"] is True
    # host 300 s ahead, whatever the round trip
    bad = act.clock_check(1300.0, 1000.0, 1001.0, 2)
    assert bad["ok"] is False and "+299.0" in bad["found"]
    assert act.clock_check(700.0, 1000.0, 1001.0, 2)["ok"] is False


def test_report_collects_every_host() -> None:
    ok = {"check": "os", "ok": True, "found": "debian 12", "expected": "debian 12", "fix": ""}
    bad = {"check": "npu_link", "ok": False, "found": "die 7: DOWN", "expected": "UP", "fix": "check cable"}
    results = {
        "a3-01": {"checks": [ok]},
        "a3-02": {"checks": [ok, bad]},
        "a3-03": {"unreachable": True, "msg": "Failed to connect to the host via ssh: Connection refused"},
    }
    s = rep.summarize(["a3-01", "a3-02", "a3-03"], results)
    assert s["failed_hosts"] == ["a3-02", "a3-03"]
    assert s["healthy_hosts"] == ["a3-01"]
    table = rep.render(s["failures"])
    lines = table.splitlines()
    assert [c.strip() for c in lines[0].split(" | ")] == ["host", "check", "found", "expected", "fix"]
    assert any(line.startswith("a3-02") and "npu_link" in line and "die 7: DOWN" in line for line in lines)
    assert any(line.startswith("a3-03") and "ssh" in line and "Connection refused" in line for line in lines)


def _hosts(n: int, dies: int = 16) -> dict[str, dict[str, Any]]:
    return valid_hosts(n, dies)


def test_validate_hosts_clean() -> None:
    hosts = _hosts(3)
    assert val.check_hosts(list(hosts), ["h0"], hosts, 16) == []


def test_validate_hosts_every_problem_listed() -> None:
    hosts = _hosts(3)
    hosts["h1"]["ansible_host"] = "10.0.0.1"
    hosts["h2"]["a3_npu_ips"] = hosts["h2"]["a3_npu_ips"][:15]
    hosts["h2"]["a3_node_rank"] = 1
    errors = val.check_hosts(list(hosts), ["h0", "h1"], hosts, 16)
    joined = "\n".join(errors)
    assert "duplicate address 10.0.0.1:22" in joined
    assert "exactly one host, found 2 (h0, h1)" in joined
    assert "h2: a3_npu_ips has 15 addresses, expected 16" in joined
    assert "h2: duplicate a3_node_rank 1" in joined
    assert all("\n" not in e for e in errors)


def test_asset_manifest(tmp_path: Any) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    (tmp_path / "m" / "big.bin").write_bytes(b"x" * 100)
    a = man.manifest(str(tmp_path / "m"), 10)
    assert a["files"] == 2 and a["bytes"] == 102
    assert any(line.startswith("big.bin\t100\t-") for line in a["lines"])
    (tmp_path / "m" / "config.json").write_text("{ }")
    assert man.manifest(str(tmp_path / "m"), 10)["sha256"] != a["sha256"]
    assert man.manifest(str(tmp_path / "nope"), 10)["present"] is False


def test_engine_limits_parser() -> None:
    text = (
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        "Max open files            20000                20000                files     \n"
        "Max locked memory         8388608              unlimited            bytes     \n"
    )
    assert pre.parse_limits(text) == {"nofile": 20000, "memlock": -1}


def test_lost_pings_blamed_on_the_faulty_peer() -> None:
    ips = {"a": ["10.0.0.1", "10.0.1.1"], "b": ["10.0.0.2", "10.0.1.2"], "c": ["10.0.0.3", "10.0.1.3"]}

    def c(check: str, ok: bool, bad: dict[int, str], pinged: dict[int, str] | None = None) -> dict[str, Any]:
        """A row as the module writes it: the text, the dies, an entry per die (with the address it pinged)."""
        found = "; ".join(f"die {d}: {t}" for d, t in bad.items()) or "2 dies OK"
        return pre.check(check, ok, found, "", "fix it", dies=list(bad), entries=bad, addresses=pinged)

    results = {
        "a": {"checks": [c("npu_ping", False, {1: "100.00% loss to 10.0.1.2"}, {0: "10.0.0.2", 1: "10.0.1.2"})]},
        "b": {"checks": [c("npu_link", False, {1: "DOWN"}), c("npu_ping", True, {})]},
        "c": {"checks": [c("npu_ping", False, {0: "100.00% loss to 10.0.0.1"}, {0: "10.0.0.1", 1: "10.0.1.1"})]},
    }
    s = rep.summarize(["a", "b", "c"], results, ips)
    assert s["failed_hosts"] == ["b", "c"]  # a's only lost ping is explained by b's link
    c_row = next(r for r in s["failures"] if r["host"] == "c")
    assert "(a die 0)" in c_row["found"]
    # the peer is named in the entries too (the page reads them, never the text)
    assert c_row["entries"] == [
        {"die": 0, "text": "100.00% loss to 10.0.0.1", "address": "10.0.0.1", "peer": "a", "peer_die": 0}
    ]
    a_row = next(r for r in s["rows"] if r["host"] == "a" and r["check"] == "npu_ping")
    assert a_row["ok"] and a_row["entries"][0]["explained"] is True and a_row["entries"][0]["peer"] == "b"


def test_inter_server_link_setting() -> None:
    control = {"ansible_version": "2.19.0", "ansible_min": "2.19", "ansible_max": "2.20", "required_files": []}
    errors = val.check_site({"site_inter_server_link": "infiniband"}, control)
    assert any("site_inter_server_link='infiniband' must be roce or hccs" in e for e in errors)
    assert not any("site_inter_server_link" in e for e in val.check_site({}, control))  # optional, roce
    hosts = _hosts(2)
    hosts["h0"]["a3_vnic_ips"] = [f"192.169.{d}.1" for d in range(16)]
    errors = val.check_vnic(list(hosts), hosts, 16)
    assert errors == [
        "inventory: h1: a3_vnic_ips=<unset> must list 16 vNIC addresses when site_inter_server_link is hccs; "
        "fix: `hccn_tool -i <die> -vnic -g` on that host"
    ]


PROBLEM_LINE = re.compile(r"^(inventory|control node)(: [\w.-]+)?: .+; fix: .+$")


def _every_inventory_problem(tmp_path: Any) -> list[str]:
    """The plugin's checks on a site, control node and hosts broken in every way they can report."""
    good_control = {"ansible_version": "2.19.0", "ansible_min": "2.19", "ansible_max": "2.20", "required_files": []}
    bad_control = {
        "ansible_version": "2.17.4",
        "ansible_min": "2.19",
        "ansible_max": "2.20",
        "required_files": [str(tmp_path / "compose.yaml")],
    }
    broken_site = {
        "site_simulated": "false",
        "site_expected_dies": 0,
        "site_hdk_min": "latest",
        # site_shared_root unset
        "site_models": {"qwen3.5-397b": "models/Qwen3.5", "qwen3.5-397B": "/mnt/shared/models/x"},
        "site_data_path": "/mnt/shared/data",
        "site_ckpt_root": "/mnt/shared/ckpt",
        "site_image_ref": "Verl Recipe",
        "site_image_source": "tarball",
        "site_image_tarball": str(tmp_path / "missing.tar"),
        "site_ray_port": 70000,
        "site_dashboard_port": "dashboard",
        "site_install_dir": "/opt/verl-recipe",
        "site_inter_server_link": "infiniband",
    }
    other_site = {
        **broken_site,
        "site_simulated": True,
        "site_expected_dies": 16,
        "site_hdk_min": "26.0.RC1",
        "site_shared_root": "/mnt/shared",
        "site_models": {"qwen3.5-397b": "/mnt/shared/models/Qwen3.5"},
        "site_data_path": "/data/geo3k",
        "site_image_ref": "verl-recipe:npu",
        "site_image_source": "ftp",
        "site_ray_port": 6379,
        "site_dashboard_port": 6379,
        "site_inter_server_link": "hccs",
    }
    errors = val.check_site(broken_site, bad_control) + val.check_site(other_site, good_control)

    hosts = _hosts(4)
    hosts["h1"]["ansible_host"] = hosts["h0"]["ansible_host"]  # duplicate SSH address
    hosts["h1"]["a3_node_rank"] = "one"
    hosts["h2"]["a3_node_rank"] = 9
    hosts["h3"]["a3_node_rank"] = 0  # duplicate of h0
    hosts["h1"]["a3_cluster_ip"] = "10.0.0.300"
    hosts["h2"]["a3_cluster_ip"] = hosts["h0"]["a3_cluster_ip"]
    hosts["h2"]["a3_cluster_nic"] = "not a nic name"
    hosts["h1"]["a3_npu_ips"] = "192.168.0.2"
    hosts["h2"]["a3_npu_ips"] = hosts["h2"]["a3_npu_ips"][:15]
    hosts["h3"]["a3_npu_ips"][4] = "192.168.4"
    hosts["h3"]["a3_npu_ips"][5] = hosts["h0"]["a3_npu_ips"][5]
    errors += val.check_hosts(list(hosts), ["h0", "h2", "h9"], hosts, 16)  # h2 has rank 9, h9 is not a node
    errors += val.check_hosts(["h1"], ["h1"], {"h1": {"a3_node_rank": 0, "a3_npu_ips": None}}, "16")
    errors += val.check_hosts([], [], {}, 16)

    vnic = _hosts(2)
    vnic["h0"]["a3_vnic_ips"] = [f"192.169.{d}.1" for d in range(15)] + ["fe80::1"]
    errors += val.check_vnic(list(vnic), vnic, 16)  # h1 lists none
    return errors


def test_every_inventory_problem_has_the_validator_shape(tmp_path: Any) -> None:
    errors = _every_inventory_problem(tmp_path)
    kinds = [
        "inventory: site_shared_root is not set; fix: set it in group_vars/all",
        "inventory: site_simulated='false' is not a boolean; fix: ",
        "inventory: site_expected_dies=0 is not a positive integer; fix: 16 on A3",
        "inventory: site_hdk_min='latest' is not an HDK version like 26.0.RC1; fix: host.hdk_min of docker/versions",
        "inventory: site_models.qwen3.5-397b='models/Qwen3.5' is not an absolute path; fix: start it with /",
        "inventory: site_models: 'qwen3.5-397B' is not a recipe (did you mean qwen3.5-397b?); fix: rename it to "
        "qwen3.5-397b",
        "inventory: site_data_path=/data/geo3k is not under site_shared_root=/mnt/shared; fix: keep it on shared",
        "inventory: site_image_ref='Verl Recipe' is not an image reference; fix: name:tag",
        "inventory: site_image_source='ftp' must be registry or tarball; fix: registry (",
        "control node: site_image_tarball=",
        "inventory: site_ray_port=70000 is not a TCP port number; fix: a port number 1-65535, default 6379",
        "inventory: site_dashboard_port='dashboard' is not a TCP port number; fix: a port number 1-65535, default 8265",
        "inventory: site_ray_port and site_dashboard_port are both 6379; fix: give them different ports, by default "
        "6379 and 8265",
        "inventory: site_inter_server_link='infiniband' must be roce or hccs; fix: roce unless",
        "control node: ansible-core 2.17.4 is outside [2.19, 2.20); fix: `make venv`",
        "compose.yaml is missing; fix: check out the whole repository",
        "inventory: group ray_head must hold exactly one host, found 3 (h0, h2, h9); fix: list only",
        "inventory: h9: the ray_head host is not in a3_nodes; fix: list it under a3_nodes too",
        "inventory: h1: duplicate address 10.0.0.1:22, already used by h0; fix: give each host its own ansible_host",
        "inventory: h1: a3_node_rank='one' is not an integer; fix: an integer 0..3",
        "inventory: h2: a3_node_rank=9 is outside 0..3; fix: number the 4 hosts of a3_nodes 0..3",
        "inventory: h3: duplicate a3_node_rank 0, already used by h0; fix: give each host its own a3_node_rank",
        "inventory: h2: the ray_head host has a3_node_rank=9; fix: give it rank 0",
        "inventory: h1: a3_cluster_ip='10.0.0.300' is not an IPv4 address; fix: the host's IPv4 address on the cluster",
        "inventory: h2: duplicate address a3_cluster_ip=10.0.0.1, already used by h0; fix: give each host its own "
        "address on the cluster network",
        "inventory: h2: a3_cluster_nic='not a nic name' is not an interface name; fix: ",
        "inventory: h1: a3_npu_ips='192.168.0.2' is not a list of 16 NPU addresses; fix: list the 16 address_N values "
        "of that host's /etc/hccn.conf, address_0..address_15 in order",
        "inventory: h2: a3_npu_ips has 15 addresses, expected 16 (one per die); fix: list the 16 address_N values of "
        "that host's /etc/hccn.conf, address_0..address_15 in order",
        "inventory: h3: a3_npu_ips[4]='192.168.4' is not an IPv4 address; fix: address_4 of that host's /etc/hccn.conf",
        "inventory: h3: duplicate address a3_npu_ips[5]=192.168.5.1, already used by h0 die 5; fix: address_5 of ",
        "inventory: h1: a3_npu_ips=None is not a list of NPU addresses, one per die; fix: list the address_N values "
        "of that host's /etc/hccn.conf, one per die, address_0 first",
        "inventory: h1: a3_cluster_ip=<unset> is not an IPv4 address; fix: ",
        "inventory: h1: a3_cluster_nic=<unset> is not an interface name; fix: the interface that holds a3_cluster_ip",
        "inventory: group a3_nodes is empty; fix: list every training host under a3_nodes",
        "inventory: h0: a3_vnic_ips[15]='fe80::1' is not an IPv4 address; fix: the address `hccn_tool -i 15 -vnic -g`",
        "inventory: h1: a3_vnic_ips=<unset> must list 16 vNIC addresses when site_inter_server_link is hccs; fix: ",
    ]
    missing = [k for k in kinds if not any(k in e for e in errors)]
    assert not missing, "\n".join(["not reported:", *missing, "reported:", *errors])
    for line in errors:
        assert PROBLEM_LINE.match(line), line
        assert "(fix:" not in line and line.count("; fix: ") == 1, line
    assert len(errors) == len(kinds)  # each kind once: the broken inputs trip nothing else
