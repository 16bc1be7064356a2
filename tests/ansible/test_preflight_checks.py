"""The preflight module against the simulated host's npu-smi and hccn_tool (run here, no container): each fault
modelled on how a real A3 host fails trips exactly its row, a healthy host passes every row, and the device
queries run one at a time. Plus the parsers, on the real tools' output formats (docs/a3-tools.md)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.ansible.helpers import load_plugin, preflight_module
from tests.sim.helpers import TOOLS, HostState, simctl, simfaults, simfaulttable, simhccn, simhostview

pre = preflight_module()
act = load_plugin("roles/preflight/action_plugins/a3_preflight.py")
rep = load_plugin("roles/preflight/action_plugins/a3_preflight_report.py")

ROOT = Path(__file__).resolve().parents[2]
DIES = 4  # per simulated host in these tests (a real A3 host has 16)
# fault kind -> the preflight rows the simulated host's fault table says it fails
TRIPS = {kind: spec.trips for spec in simfaulttable.FAULTS for kind in spec.kinds}
NPU_ROWS = {
    "npu_map",
    "chip_health",
    "npu_occupancy",
    "running_versions",
    "npu_link",
    "npu_ip",
    "hccn_conf",
    "npu_net_health",
    "npu_gateway",
    "npu_tls",
    "npu_ping",
}


def free_udp_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], dict[str, str], Path]]:
    """Two hosts' NPU responders on loopback (127.0.0.11, .12); each test makes its own host states."""
    import ipaddress

    c: dict[str, Any] = simctl.describe("unit", 2, ipaddress.IPv4Network("127.0.0.0/24"))
    c["hdk_min"] = "26.0.RC1"
    base = tmp_path_factory.mktemp("npu")
    extra = {"VERL_SIM_NPU_PORT": str(free_udp_port()), "VERL_SIM_PING_TIMEOUT": "1.0"}
    states = {h: HostState(base / h, c, h) for h in ("a3-01", "a3-02")}
    procs = [
        subprocess.Popen([sys.executable, str(TOOLS / "simhost.py"), "npud"], env=s.env(**extra))
        for s in states.values()
    ]
    try:
        time.sleep(0.5)
        yield c, extra, base
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def vnics(net: tuple[dict[str, Any], dict[str, str], Path]) -> dict[str, list[str]]:
    """Each healthy host's vNIC addresses as its own `hccn_tool -vnic -g` reports them, read the way `make sim-up
    SIM_LINK=hccs` fills a3_vnic_ips (the loop and parser of simctl.py), never derived here."""
    _, _, base = net
    out = {}
    for h in ("a3-01", "a3-02"):
        (base / h / "state" / "faults.json").write_text('{"faults": []}')
        env = dict(os.environ, VERL_SIM_DIR=str(base / h / "state"), VERL_SIM_ROOT=str(base / h / "root"))
        env["PATH"] = f"{TOOLS}:{env['PATH']}"
        p = subprocess.run(["sh", "-c", simctl.vnic_query(DIES)], env=env, capture_output=True, text=True, check=True)
        out[h] = simctl.parse_vnic(h, p.stdout, DIES)
    return out


def run_npu(
    net: tuple[dict[str, Any], dict[str, str], Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    faults: tuple[str, ...] = (),
    peer_faults: tuple[str, ...] = (),
    rotation: int = 0,
    link: str = "roce",
    vnic_ips: dict[str, list[str]] | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, Any], Any]:
    """The module's device checks on a3-01 with `faults`, pinging a3-02 (which carries `peer_faults`). Both hosts
    show DIES dies (the `dies` fault) to keep the ~30 sequential tool calls quick. link hccs pings the vnic_ips
    (the `vnics` fixture: what the hosts' tools reported), as the action plugin does with a3_vnic_ips."""
    c, extra, base = net
    if not any(f.startswith("dies:") for f in faults):
        faults = (*faults, f"dies:{DIES}")
    peer_faults = (*peer_faults, f"dies:{DIES}")
    me = HostState(tmp_path / "me", c, "a3-01")
    # the responders read the state folders they were started with: the peer's faults go there
    (base / "a3-02" / "state" / "faults.json").write_text(json.dumps({"faults": list(peer_faults)}))
    (base / "a3-01" / "state" / "faults.json").write_text(json.dumps({"faults": list(faults)}))
    me.set_faults(*faults)
    for k, v in me.env(**extra).items():
        monkeypatch.setenv(k, v)
    h = simhostview.Host(c, "a3-01", [simfaults.parse_fault(f) for f in faults])
    conf = tmp_path / "hccn.conf"
    conf.write_text(simhccn.hccn_conf(h))
    order = ["a3-01", "a3-02"]
    ips = {x["name"]: list(x["npu_ips"]) for x in c["hosts"]}
    assert link == "roce" or vnic_ips, "hccs mode pings the vNIC addresses the hosts reported"
    targets = vnic_ips if link == "hccs" and vnic_ips else ips
    p = {
        "expected_dies": DIES,
        "npu_ips": ips["a3-01"],
        "ping_plan": act.ping_plan(order, "a3-01", DIES, rotation, targets, link),
        "inter_server_link": link,
        "vnic_ips": list((vnic_ips or {}).get("a3-01", [])) if link == "hccs" else [],
        "compose_project": "verl-recipe",
        "hccn_conf_file": str(conf),
        "tool_dirs": [str(TOOLS)],
        "command_timeout": 30,
    }
    host = pre.Host(p)
    host.path = str(TOOLS) + ":/usr/bin:/bin"  # the stand-ins, never a real npu-smi of this machine
    installed = {"driver": h.driver_version(), "firmware": h.firmware_version()}
    rows, netinfo = pre.npu_checks(p, host, installed)
    return {r["check"]: r for r in rows}, netinfo, host


def failed(rows: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {k: r["found"] for k, r in rows.items() if not r["ok"]}


def test_healthy_host_passes_every_device_row_one_query_at_a_time(
    net: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rows, netinfo, host = run_npu(net, monkeypatch, tmp_path)
    assert set(rows) >= NPU_ROWS
    assert failed(rows) == {}
    assert netinfo == {"tls": "0", "netmask": "255.255.0.0"}
    # 2 npu-smi (info, -m) + one board per NPU + 5 hccn_tool queries per die + one ping per die
    assert host.queries == 2 + DIES // 2 + DIES * 5 + DIES
    assert rows["npu_ping"]["found"] == f"{DIES} pings to 1 hosts OK"
    assert all(set(r) >= {"check", "status", "ok", "dies", "peers", "found", "expected", "fix"} for r in rows.values())


@pytest.mark.parametrize(
    ("faults", "peer_faults", "row", "found", "dies"),
    [
        (("npu-busy:1",), (), "npu_occupancy", "die 1: pid 950101 pt_main_thread", [1]),
        (("hccn-drift:2",), (), "hccn_conf", "die 2: address_2=198.18.2.112, device has 198.18.2.11", [2]),
        (("gateway-wrong:2",), (), "npu_gateway", "die 2: gateway 10.255.255.1 outside 198.18.2.11/255.255.0.0", [2]),
        (("not-rebooted",), (), "running_versions", "driver 25.5.0 runs, 26.0.rc1 installed", list(range(DIES))),
        (("health-alarm:3",), (), "chip_health", "die 3: Alarm (NPU 1 chip 1)", [3]),
        (("link-down:0",), (), "npu_link", "die 0: DOWN", [0]),
        (("dies:3",), (), "npu_map", "no die with Phy-ID 3", [3]),
        ((), ("link-down:2",), "npu_ping", "die 2: 100.00% loss to 198.18.2.12", [2]),
        (("ping-loss:a3-02:1",), (), "npu_ping", "die 1: 100.00% loss to 198.18.1.12", [1]),
    ],
)
def test_each_fault_trips_its_row(
    net: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    faults: tuple[str, ...],
    peer_faults: tuple[str, ...],
    row: str,
    found: str,
    dies: list[int],
) -> None:
    rows, _, _ = run_npu(net, monkeypatch, tmp_path, faults, peer_faults)
    bad = failed(rows)
    assert row in bad and found in bad[row], bad
    for fault in faults:  # the fault table names the row this host's fault is made to fail
        assert row in TRIPS[fault.partition(":")[0]], (fault, row)
    assert rows[row]["dies"] == dies and rows[row]["status"] == "failed" and rows[row]["fix"]
    # the fault trips its own row (and the pings that cross the same die), nothing else
    allowed = {row, "npu_ping"} | (
        {"chip_health", "npu_link", "npu_ip", "npu_net_health", "npu_gateway", "npu_tls"} if row == "npu_map" else set()
    )
    assert set(bad) <= allowed, bad


def test_tls_switch_differs_between_hosts(net: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    rows_on, net_on, _ = run_npu(net, monkeypatch, tmp_path / "on", ("tls-on",))
    assert failed(rows_on) == {}  # consistent on the host itself: only the comparison across hosts shows it
    rows_off, net_off, _ = run_npu(net, monkeypatch, tmp_path / "off")
    results = {
        "a3-01": {"checks": list(rows_off.values()), "net": net_off},
        "a3-02": {"checks": list(rows_off.values()), "net": net_off},
        "a3-03": {"checks": list(rows_on.values()), "net": net_on},
    }
    s = rep.summarize(["a3-01", "a3-02", "a3-03"], results)
    assert s["failed_hosts"] == ["a3-03"]
    (row,) = [r for r in s["failures"] if r["check"] == "npu_tls"]
    assert row["found"] == "TLS switch 1; a3-01, a3-02: 0" and row["peers"] == ["a3-01", "a3-02"]
    assert "EI0006" in row["fix"]
    assert [r["check"] for r in s["rows"] if r["host"] == "a3-01"].count("npu_netmask") == 1


def test_concurrent_queries_are_refused_as_the_real_tools_do(net: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    c, extra, base = net
    state = {
        "VERL_SIM_DIR": str(base / "a3-01" / "state"),
        "VERL_SIM_ROOT": str(base / "a3-01" / "root"),
        "VERL_SIM_TOOL_HOLD_S": "0.5",  # each call holds its lock long enough for the others to collide
    }

    def call(argv: list[str]) -> subprocess.CompletedProcess[str]:
        import os

        return subprocess.run(argv, env=dict(os.environ, **state), capture_output=True, text=True, check=False)

    (base / "a3-01" / "state" / "faults.json").write_text('{"faults": []}')
    npu = [[str(TOOLS / "npu-smi"), "info"]] * 12
    same_die = [[str(TOOLS / "hccn_tool"), "-i", "3", "-link", "-g"]] * 12
    with ThreadPoolExecutor(12) as pool:
        npu_out = list(pool.map(call, npu))
        die_out = list(pool.map(call, same_die))
    for outs in (npu_out, die_out):
        refused = [o for o in outs if o.returncode != 0]
        assert refused, "twelve calls at once: some must be refused"
        assert all("ret -8020" in o.stderr and "concurrent use is not supported" in o.stderr for o in refused)
        assert any(o.returncode == 0 for o in outs)
    # one after another, every call answers
    assert all(call(a).returncode == 0 for a in npu[:3] + same_die[:3])
    # different dies at once are fine
    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(call, [[str(TOOLS / "hccn_tool"), "-i", str(d), "-link", "-g"] for d in range(8)]))
    assert all(o.returncode == 0 for o in outs), [o.stderr for o in outs]


# ---- parsers, on the real formats ----

A3_BUSY = """+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| No running processes found in NPU 3                                                            |
+===========================+===============+====================================================+
| 4       0                 | 957687        | pt_main_thread           | 49207                   |
| 4       1                 | 957770        | pt_main_thread           | 49207                   |
+===========================+===============+====================================================+
"""


def test_process_table_of_a_busy_a3_node() -> None:
    # the layout of a busy A3 node's process block (openyuanrong's 910C npu-smi fixture)
    _, procs = pre.parse_npu_table(A3_BUSY)
    assert procs == [
        {"npu": 4, "chip": 0, "pid": 957687, "name": "pt_main_thread"},
        {"npu": 4, "chip": 1, "pid": 957770, "name": "pt_main_thread"},
    ]


def test_die_map_is_read_not_computed() -> None:
    # `npu-smi info -m` after a Phy-ID remap: NPU 0 chip 1 is die 3 and NPU 1 chip 1 is die 1
    rows = [("0", "0", "0", "0", "Ascend910"), ("0", "1", "1", "3", "Ascend910"), ("0", "2", "-", "-", "Mcu")]
    rows += [("1", "0", "2", "2", "Ascend910"), ("1", "1", "3", "1", "Ascend910")]
    text = "\n".join("\t" + " ".join(f"{c:<30}" for c in r) for r in rows)
    assert pre.parse_chip_map(text) == {(0, 0): 0, (0, 1): 3, (1, 0): 2, (1, 1): 1}


@pytest.mark.parametrize(
    ("release", "ok"),
    [
        ("openeuler-22.03-sp4", True),
        ("openeuler-22.03", False),  # 22.03 LTS without a service pack: not on the A3 list
        ("ubuntu-24.04", False),  # A2 only in ascend-deployer 26.0.0
    ],
)
def test_os_allow_list_reads_the_service_pack(release: str, ok: bool) -> None:
    allowed = ["openEuler 22.03 LTS-SP1", "openEuler 22.03 LTS-SP4", "ubuntu 22.04", "hce 2.0", "kylin V10 Halberd"]
    rel = pre.os_release(simfaults.OS_RELEASES[release])
    assert pre.os_allowed(rel, allowed) is ok
    kylin = pre.os_release(
        'NAME="Kylin Linux Advanced Server"\nVERSION="V10 (Halberd)"\nID="kylin"\nVERSION_ID="V10"\n'
    )
    assert pre.os_allowed(kylin, allowed)
    assert not pre.os_allowed(dict(kylin, VERSION="V10 (Lance)"), allowed)


def test_cluster_nic_and_memory(tmp_path: Path) -> None:
    text = (
        "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n"
        "2: eth0    inet 10.0.0.5/24 brd 10.0.0.255 scope global eth0\n"
        "7: verlsim0    inet 10.0.0.11/32 scope global verlsim0\n"
    )
    assert pre.parse_ip_addr(text) == {"lo": ["127.0.0.1"], "eth0": ["10.0.0.5"], "verlsim0": ["10.0.0.11"]}
    mem = tmp_path / "meminfo"
    mem.write_text("MemTotal:       67108864 kB\nMemFree:        1 kB\n")
    row = pre.memory_check({"meminfo_file": str(mem), "min_host_ram_gib": 1024})
    assert not row["ok"] and row["found"] == "64.0 GiB (MemTotal)"


def test_firewall_rules() -> None:
    # what the simulated `firewall` fault installs: a port list open, the rest of the cluster's new TCP dropped
    text = (
        "-P INPUT ACCEPT\n-P FORWARD DROP\n-N VERL-SIM-FW\n-A INPUT -j VERL-SIM-FW\n"
        "-A VERL-SIM-FW -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN\n"
        "-A VERL-SIM-FW -p tcp -m multiport --dports 22,6379,10002:19999 -j RETURN\n"
        "-A VERL-SIM-FW -s 172.30.5.0/24 -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -j DROP\n"
    )
    pol, rules = pre.parse_iptables(text)
    assert "172.30.5.0/24" in pre.firewall_blocks(pol, rules, "172.30.5.12")
    assert pre.firewall_blocks(pol, rules, "10.1.1.1") == ""  # not a cluster source
    trusted = "-A INPUT -s 172.30.5.12/32 -j ACCEPT\n" + text
    assert pre.firewall_blocks(*pre.parse_iptables(trusted), "172.30.5.12") == ""
    assert pre.firewall_blocks(*pre.parse_iptables("-P INPUT DROP\n"), "172.30.5.12") == "-P INPUT DROP"


def test_containers_holding_devices() -> None:
    text = "/verl-recipe-ray-worker-1|verl-recipe|/dev/davinci0 /dev/davinci1 \n/old-job|| /dev/davinci3 \n/web||\n"
    assert pre.parse_holders(text, "verl-recipe") == ["old-job"]


def test_ping_plan_covers_every_host_pair_and_every_die() -> None:
    for n in (2, 3, 16, 17):
        order = [f"h{i}" for i in range(n)]
        for rotation in (0, 5):
            cov = act.coverage(order, 16, rotation)
            assert cov["host_pairs"] == cov["host_pairs_total"], (n, rotation)
            assert cov["dies_pinged"] == cov["dies_total"] and cov["pings_per_host"] == 16
    plan = act.ping_plan(["a", "b", "c"], "a", 16, 3, {h: [str(d) for d in range(16)] for h in "abc"})
    assert any(p["peer_die"] != p["die"] for p in plan)  # a rotation crosses die indices


def test_report_rows_have_every_field() -> None:
    results = {"a": {"checks": [{"check": "os", "ok": True, "found": "x", "expected": "y", "fix": ""}]}}
    s = rep.summarize(["a", "b"], results)
    assert [list(r) for r in s["rows"]] == [
        ["host", "check", "status", "ok", "dies", "peers", "entries", "found", "expected", "fix"]
    ] * 2
    assert s["rows"][1]["check"] == "ssh" and s["rows"][1]["status"] == "failed"


def test_hccs_mode_healthy_host_passes_and_checks_the_vnic_path(
    net: Any, vnics: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """site_inter_server_link: hccs: `-vnic -g` on every die (row npu_vnic) and `-hccs_ping` to the peers' vNIC
    addresses; a healthy host passes every row, with one query more per die than in roce mode."""
    rows, _, host = run_npu(net, monkeypatch, tmp_path, link="hccs", vnic_ips=vnics)
    assert set(rows) == NPU_ROWS | {"npu_vnic"}
    assert failed(rows) == {} and rows["npu_vnic"]["found"] == f"{DIES} dies OK"
    assert rows["npu_ping"]["found"] == f"{DIES} pings to 1 hosts OK"
    assert host.queries == 2 + DIES // 2 + DIES * 6 + DIES
    assert set(vnics["a3-02"]).isdisjoint(net[0]["hosts"][1]["npu_ips"])  # another address than the RoCE one
    roce, _, _ = run_npu(net, monkeypatch, tmp_path / "roce")
    assert "npu_vnic" not in roce and failed(roce) == {}


# Each fault on its path: in hccs mode a RoCE-only fault leaves the pings alone and an HCCS one fails them, in roce
# mode the other way round. `exactly` is every row that fails on a3-01 (rotation 0: die d pings a3-02's die d).
PATH_FAULTS = [
    # the HCCS path
    ("hccs", ("vnic-down:1",), (), {"npu_vnic": "die 1: DOWN", "npu_ping": "die 1: 100.00% loss to 198.19.1.12"}),
    ("hccs", (), ("vnic-down:2",), {"npu_ping": "die 2: 100.00% loss to 198.19.2.12"}),
    ("hccs", ("hccs-loss:a3-02:1",), (), {"npu_ping": "die 1: 100.00% loss to 198.19.1.12"}),
    (
        "hccs",
        ("hccs-loss:a3-02",),
        (),
        {"npu_ping": "; ".join(f"die {d}: 100.00% loss to 198.19.{d}.12" for d in range(DIES))},
    ),
    # RoCE-only faults in hccs mode: the RoCE rows still see their own die, the HCCS pings pass
    ("hccs", ("ping-loss:a3-02:1",), (), {}),
    ("hccs", (), ("link-down:2",), {}),
    ("hccs", ("link-down:1",), (), {"npu_link": "die 1: DOWN"}),
    # roce mode: the HCCS faults are invisible, the RoCE ones fail the pings
    ("roce", ("vnic-down:1",), (), {}),
    ("roce", (), ("vnic-down:2",), {}),
    ("roce", ("hccs-loss:a3-02:1",), (), {}),
    ("roce", ("ping-loss:a3-02:1",), (), {"npu_ping": "die 1: 100.00% loss to 198.18.1.12"}),
    ("roce", (), ("link-down:2",), {"npu_ping": "die 2: 100.00% loss to 198.18.2.12"}),
]


def test_hccs_mode_a_vnic_address_the_inventory_misstates_is_named(
    net: Any, vnics: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the host's tool reports its real vNIC; the inventory lists another one for die 1 (the peers would ping that)
    stale = {**vnics, "a3-01": [ip if d != 1 else "198.19.250.250" for d, ip in enumerate(vnics["a3-01"])]}
    rows, _, _ = run_npu(net, monkeypatch, tmp_path, link="hccs", vnic_ips=stale)
    assert failed(rows) == {"npu_vnic": f"die 1: vNIC {vnics['a3-01'][1]}, a3_vnic_ips[1] says 198.19.250.250"}
    assert rows["npu_vnic"]["dies"] == [1] and "correct a3_vnic_ips" in rows["npu_vnic"]["fix"]


@pytest.mark.parametrize(("link", "faults", "peer_faults", "exactly"), PATH_FAULTS)
def test_faults_fail_only_the_path_the_mode_uses(
    net: Any,
    vnics: dict[str, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    link: str,
    faults: tuple[str, ...],
    peer_faults: tuple[str, ...],
    exactly: dict[str, str],
) -> None:
    rows, _, _ = run_npu(net, monkeypatch, tmp_path, faults, peer_faults, link=link, vnic_ips=vnics)
    assert failed(rows) == exactly
    assert ("npu_vnic" in rows) == (link == "hccs")
    for row, found in exactly.items():
        assert rows[row]["status"] == "failed" and rows[row]["fix"]
        assert rows[row]["dies"] == [int(d) for d in re.findall(r"die (\d+):", found)]
    if "npu_ping" in exactly:
        assert set(rows["npu_ping"]["peers"]) == {"a3-02"}


def test_report_blames_a_lost_hccs_ping_on_the_peers_vnic(
    net: Any, vnics: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The report names the peer die of a lost HCCS ping by its vNIC address, and only a fault of that path (the
    peer's npu_vnic, not its RoCE npu_link) explains the loss away from the healthy sender."""
    rows, _, _ = run_npu(net, monkeypatch, tmp_path, peer_faults=("vnic-down:2",), link="hccs", vnic_ips=vnics)
    assert failed(rows) == {"npu_ping": "die 2: 100.00% loss to 198.19.2.12"}

    def peer(check: str) -> dict[str, Any]:
        return {"checks": [pre.check(check, False, "die 2: DOWN", "", "fix it", dies=[2], entries={2: "DOWN"})]}

    nodes = ["a3-01", "a3-02"]
    me = {"checks": list(rows.values())}
    s = rep.summarize(nodes, {"a3-01": me, "a3-02": peer("npu_vnic")}, vnics, "hccs")
    assert s["failed_hosts"] == ["a3-02"]
    row = next(r for r in s["rows"] if r["host"] == "a3-01" and r["check"] == "npu_ping")
    assert row["ok"] and row["found"].endswith("die 2: 100.00% loss to 198.19.2.12 (a3-02 die 2)")
    # a DOWN RoCE link on the peer does not explain a lost HCCS ping: the sender stays failed, the peer named
    s = rep.summarize(nodes, {"a3-01": me, "a3-02": peer("npu_link")}, vnics, "hccs")
    assert s["failed_hosts"] == ["a3-01", "a3-02"]
    row = next(r for r in s["failures"] if r["host"] == "a3-01")
    assert row["found"] == "die 2: 100.00% loss to 198.19.2.12 (a3-02 die 2)"


def test_default_runtime_binary_must_exist(tmp_path: Path) -> None:
    host = pre.Host({"command_timeout": 5, "tool_dirs": []})
    gone = '{"ascend":{"path":"/usr/local/Ascend/Ascend-Docker-Runtime/ascend-docker-runtime"},"runc":{"path":"runc"}}'
    row = pre.default_runtime_check(0, "ascend|" + gone, host)
    assert not row["ok"] and row["found"].endswith("ascend-docker-runtime missing)")
    assert "default-runtime: ascend" in row["fix"]
    present = tmp_path / "ascend-docker-runtime"
    present.write_text("")
    row = pre.default_runtime_check(0, f'ascend|{{"ascend":{{"path":"{present}"}}}}', host)
    assert row["ok"]


def test_the_fault_table_names_real_rows_and_every_fault_it_lists_parses() -> None:
    """Each `trips` of the fault table is a row the preflight writes, and each form it lists is a fault parse_fault
    takes (with an example argument); the grammar's sets are the table's."""
    import ast
    import re

    rows = {"ssh"}  # the report plugin's row for a host it cannot reach; the others are the module's strings
    for part in (ROOT / "ansible" / "module_utils").glob("a3_*.py"):
        tree = ast.parse(part.read_text())
        rows |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    for spec in simfaulttable.FAULTS:
        assert set(spec.trips) <= rows, (spec.kinds, set(spec.trips) - rows)
    example = {
        "die": "3",
        "1-15": "3",
        "host": "a3-02",
        "release": "ubuntu-24.04",
        "machine": "aarch64",
        "seconds": "300",
    }
    for spec in simfaulttable.FAULTS:
        for form in spec.forms:
            kind, _, arg = re.sub(r"\[.*\]", "", form).partition(":")  # an optional part left out
            value = example[arg.strip("<>").split("|")[0]] if arg.startswith("<") else arg
            assert simfaults.parse_fault(f"{kind}:{value}" if value else kind).kind == kind, form
    assert simfaulttable.kinds_of(simfaulttable.DIE) == simfaults.DIE_FAULTS
