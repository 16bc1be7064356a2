"""Integration tests of the simulated A3 cluster: a real 3-host cluster under a test-only name.

Every fault is switched on a3-03 and the whole observable surface of all three hosts is compared with the healthy
baseline: exactly the expected observations change on a3-03 (and, for faults of the NPU network, in what its peers
see of it), nothing else anywhere; `clear` brings a3-03 back to the baseline.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from simkit.cluster import SimCluster, leftovers, running_cluster
from simkit.paths import REPO, SIMCTL

pytestmark = pytest.mark.docker

HOSTS = ("a3-01", "a3-02", "a3-03")
TARGET = "a3-03"
PING_DIES = (0, 2, 7)  # dies each host pings on every peer (2 and 7 are the dies the faults below touch)
HCCN_DIES = (0, 2, 7, 15)  # a healthy die and the dies the faults below touch

# Run on each host over SSH (python3 -): one JSON object of everything the faults may change.
PROBE = r"""
import concurrent.futures, json, os, subprocess, sys, time
peers = json.loads(sys.argv[1])
pool = concurrent.futures.ThreadPoolExecutor(4)  # tool calls in parallel: the probe's time is Python start-ups
npu_pool = concurrent.futures.ThreadPoolExecutor(1)  # npu-smi and hccn_tool refuse concurrent calls, as real ones
def sh(*cmd):
    return (npu_pool if cmd[0] in ("npu-smi", "hccn_tool") else pool).submit(run, *cmd)
def run(*cmd):
    try:
        p = subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return "not found"
    return f"rc={p.returncode} {p.stdout}{p.stderr}"
def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return f"unreadable: {e.strerror}"
o = {"reachable": True}
o["npu_smi"] = sh("npu-smi", "info")
o["npu_map"] = sh("npu-smi", "info", "-m")
o["health_3"] = sh("npu-smi", "info", "-t", "health", "-i", "1", "-c", "1")
o["board_0"] = sh("npu-smi", "info", "-t", "board", "-i", "0")
for d in HCCN_DIES:
    for what in ("link", "ip", "net_health"):
        o[f"{what}_{d}"] = sh("hccn_tool", "-i", str(d), f"-{what}", "-g")
o["hccn_conf"] = read("/etc/hccn.conf")
o["driver_info"] = read("/usr/local/Ascend/driver/version.info")
o["firmware_info"] = read("/usr/local/Ascend/firmware/version.info")
o["dev"] = sorted(n for n in os.listdir("/dev") if n.startswith(("davinci", "devmm", "hisi")))
o["docker"] = sh("docker", "info", "--format", "{{.Driver}}")
with open("/proc/self/mountinfo") as f:
    o["shared"] = any(line.split()[4] == "/mnt/shared" for line in f)
o["clock_min"] = round((time.time() - float(sys.argv[2])) / 60)
o["arch"] = os.uname().machine
st = os.statvfs("/var/lib/docker")
o["disk_low"] = st.f_bavail * st.f_frsize < 600 * 2**20
for host, ips in peers.items():
    for d in PING_DIES:
        o[f"ping:{host}:{d}"] = sh("hccn_tool", "-i", "0", "-ping", "-g", "address", ips[d])
print(json.dumps({k: v.result() if isinstance(v, concurrent.futures.Future) else v for k, v in o.items()}))
""".replace("HCCN_DIES", repr(HCCN_DIES)).replace("PING_DIES", repr(PING_DIES))

PING_KEYS = {f"ping:{TARGET}:{d}" for d in PING_DIES}
# fault -> (observations that change on a3-03, observations that change in what a3-01/a3-02 see)
EXPECTED: dict[str, tuple[set[str], set[str]]] = {
    "dev-missing:5": ({"dev"}, set()),
    "dies:15": ({"npu_smi", "npu_map", "dev", "link_15", "ip_15", "net_health_15"}, set()),
    "health-warning:3": ({"npu_smi", "health_3"}, set()),
    "health-alarm:3": ({"npu_smi", "health_3"}, set()),
    "link-down:7": ({"link_7"}, {f"ping:{TARGET}:7"}),
    "ip-missing:2": ({"ip_2", "hccn_conf"}, {f"ping:{TARGET}:2"}),
    "net-health:7": ({"net_health_7"}, set()),
    "ping-loss:a3-02": ({"ping:a3-02:0", "ping:a3-02:2", "ping:a3-02:7"}, set()),
    "driver-old": ({"npu_smi", "board_0", "driver_info"}, set()),
    "firmware-old": ({"board_0", "firmware_info"}, set()),
    "no-docker": ({"docker"}, set()),
    "no-shared": ({"shared"}, set()),
    "clock-skew:300": ({"clock_min"}, set()),
    "low-disk": ({"disk_low"}, set()),
    "arch:riscv64": ({"arch"}, set()),
    "down:ssh": ({"reachable"}, set()),
    "down": ({"reachable"}, PING_KEYS),
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    name = f"{os.environ.get('SIM_TEST_PREFIX', 'vrsimt')}{os.getpid()}"  # SIM_TEST_PREFIX: one's own prefix
    with running_cluster(name, 3, tmp_path_factory.mktemp("inventory")) as c:
        yield c


@pytest.fixture(scope="module")
def baseline(cluster: SimCluster) -> dict[str, dict[str, Any]]:
    b = cluster.probe_all(PROBE)
    assert all(b[h]["reachable"] for h in HOSTS)
    return b


def test_inventory_follows_the_contract(cluster: SimCluster) -> None:
    inv = yaml.safe_load((cluster.inventory / "hosts.yml").read_text())
    nodes = inv["all"]["children"]["a3_nodes"]
    assert list(inv["all"]["children"]["ray_head"]["hosts"]) == ["a3-01"]
    assert list(nodes["hosts"]) == list(HOSTS)
    for rank, (hn, h) in enumerate(nodes["hosts"].items()):
        assert h["a3_node_rank"] == rank and h["ansible_host"] == h["a3_cluster_ip"] == cluster.ip(hn)
        assert h["a3_cluster_nic"] == "eth0" and len(h["a3_npu_ips"]) == 16 and len(set(h["a3_npu_ips"])) == 16
    v = nodes["vars"]
    assert v["ansible_ssh_common_args"] == f"-o UserKnownHostsFile={cluster.inventory / 'known_hosts'}"
    assert Path(v["ansible_ssh_private_key_file"]).stat().st_mode & 0o077 == 0
    site = yaml.safe_load((cluster.inventory / "group_vars" / "all" / "sim.yml").read_text())
    versions = yaml.safe_load((REPO / "docker" / "versions.yaml").read_text())
    assert site["site_simulated"] is True and site["site_expected_dies"] == 16
    assert site["site_hdk_min"] == versions["host"]["hdk_min"]
    assert site["site_shared_root"] == "/mnt/shared"
    lint = subprocess.run(
        [str(REPO / ".venv" / "bin" / "yamllint"), "--strict", "-c", str(REPO / ".yamllint"), str(cluster.inventory)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode == 0, lint.stdout


def test_ssh_with_host_key_checking(cluster: SimCluster) -> None:
    for h in HOSTS:
        p = cluster.ssh(h, "hostname")
        assert (p.returncode, p.stdout.strip()) == (0, h), p.stderr


def test_wrong_known_hosts_entry_is_refused(cluster: SimCluster, tmp_path: Path) -> None:
    lines = (cluster.inventory / "known_hosts").read_text().splitlines()
    key_of_01 = lines[0].split(" ", 1)[1]
    bad = tmp_path / "known_hosts"
    bad.write_text("\n".join([lines[0], f"{cluster.ip('a3-02')},a3-02 {key_of_01}", lines[2]]) + "\n")
    p = cluster.ssh("a3-02", "true", known_hosts=bad)
    assert p.returncode == 255 and "Host key verification failed" in p.stderr
    assert cluster.ssh("a3-01", "true", known_hosts=bad).returncode == 0


def test_host_surface(cluster: SimCluster, baseline: dict[str, dict[str, Any]]) -> None:
    p = cluster.ssh("a3-02", "sh", "-c", "sudo -n true && command -v npu-smi && command -v hccn_tool && ls /mnt/shared")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [
        "/usr/local/bin/npu-smi",
        "/usr/local/bin/hccn_tool",
        "checkpoints",
        "data",
        "models",
        "runs",
    ]
    # shared storage is one file system for all hosts
    assert cluster.ssh("a3-01", "sh", "-c", "echo hello > /mnt/shared/runs/t").returncode == 0
    assert cluster.ssh("a3-03", "cat", "/mnt/shared/runs/t").stdout == "hello\n"
    for h in HOSTS:
        b = baseline[h]
        assert b["docker"].startswith("rc=0 overlay2") and b["shared"] and b["clock_min"] == 0 and not b["disk_low"]
        assert len(b["dev"]) == 19 and all(
            v == ["3 packets transmitted, 3 received, 0.00% packet loss"] for k, v in b.items() if k.startswith("ping:")
        )


@pytest.mark.parametrize("fault", list(EXPECTED))
def test_fault_changes_exactly_its_surface(
    cluster: SimCluster, baseline: dict[str, dict[str, Any]], fault: str
) -> None:
    local, seen = EXPECTED[fault]
    cluster.simctl("fault", TARGET, fault)
    try:
        now = cluster.probe_all(PROBE)
    finally:
        cluster.simctl("fault", TARGET, "clear")
    for h in HOSTS:
        keys = set(baseline[h]) | set(now[h])
        changed = {k for k in keys if baseline[h].get(k) != now[h].get(k)}
        if h == TARGET:
            if fault == "down" or fault == "down:ssh":
                assert now[h] == {"reachable": False}
            else:
                assert changed == local, f"{fault} on {h}: changed {sorted(changed)}, expected {sorted(local)}"
        else:
            assert changed == seen, f"{fault}: {h} sees {sorted(changed)} change, expected {sorted(seen)}"
    assert cluster.probe(TARGET, PROBE) == baseline[TARGET], f"{TARGET} is not back to its baseline after clear"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fault", TARGET, "melt:1"], "unknown fault 'melt:1'"),
        (["fault", "a3-09", "link-down:1"], "HOST=a3-09 is not a host of"),
        (["fault", TARGET, "link-down:99"], "die must be a number 0-15"),
        (["fault", TARGET, "down,link-down:1"], "FAULT=down cannot be combined with other faults"),
        (["up", "--nodes", "3"], "already exists"),
    ],
)
def test_bad_requests_fail_cleanly(cluster: SimCluster, args: list[str], message: str) -> None:
    before = cluster.simctl("status").stdout
    p = cluster.simctl(*args, check=False)
    assert p.returncode == 1 and message in p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert cluster.simctl("status").stdout == before


def test_bad_node_count_creates_nothing(tmp_path: Path) -> None:
    name = f"vrsimn{os.getpid()}"
    env = dict(os.environ, SIM_NAME=name, SIM_INVENTORY=str(tmp_path / "inv"))
    p = subprocess.run(
        [sys.executable, str(SIMCTL), "up", "--nodes", "17"], env=env, capture_output=True, text=True, check=False
    )
    assert p.returncode == 1 and "NODES=17 is out of range" in p.stderr
    assert leftovers(name) == [] and not (tmp_path / "inv").exists()


def test_power_loss_kills_the_engines_containers_and_reboot_restarts_by_policy(cluster: SimCluster) -> None:
    """`down` is a power loss: the containers of the host's own engine die too (a pause froze only the host's own
    processes), nothing answers at its address; `clear` boots it and the engine restarts by restart policy."""
    from verl_recipe.cluster.nodewatch import knock

    cname = f"{cluster.name}-{TARGET}"
    image = "verl-recipe-base:bookworm"  # the smallest image at hand; loaded into a3-03's own engine
    save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
    load = subprocess.run(["docker", "exec", "-i", cname, "docker", "load"], stdin=save.stdout, capture_output=True)
    assert save.wait() == 0 and load.returncode == 0, load.stderr
    marker = 400000 + os.getpid() % 100000  # `sleep <marker>` names the inner containers' processes on this machine
    runs = {"kept": "unless-stopped", "stopped": "unless-stopped", "none": "no"}
    try:
        for name, policy in runs.items():
            args = ["run", "-d", "--name", name, "--restart", policy, image, "sleep", str(marker)]
            p = cluster.ssh(TARGET, "docker", *args)
            assert p.returncode == 0, p.stderr
        assert cluster.ssh(TARGET, "docker", "stop", "-t", "1", "stopped").returncode == 0
        pgrep = ["pgrep", "-f", f"^sleep {marker}$"]
        assert len(subprocess.run(pgrep, capture_output=True, text=True).stdout.split()) == 2, "visible from here"
        cluster.simctl("fault", TARGET, "down")
        assert subprocess.run(pgrep, capture_output=True, text=True).stdout == "", "an inner container survived"
        assert knock(cluster.ip(TARGET), 22, timeout=5) == "silent", "a host without power does not even refuse"
        assert "exited" in cluster.simctl("status").stdout
        cluster.simctl("fault", TARGET, "clear")
        p = cluster.ssh(TARGET, "docker", "ps", "--format", "{{.Names}}")
        assert p.returncode == 0 and p.stdout.split() == ["kept"], p.stdout + p.stderr
        assert len(subprocess.run(pgrep, capture_output=True, text=True).stdout.split()) == 1
    finally:
        cluster.ssh(TARGET, "sh", "-c", f"docker rm -f {' '.join(runs)}; docker rmi {image}")
