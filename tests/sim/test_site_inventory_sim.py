"""`make inventory` against a simulated site that differs the way real sites do (`make sim-up SIM_PROFILE=real-site
SIM_HOSTS_FILE=none`): NPU and vNIC addresses with no pattern, npu-smi only in /usr/local/sbin on the head and the
3rd host, HDK versions that differ. The written hosts.yml must hold each host's own addresses as its /etc/hccn.conf
and hccn_tool say (read here through `docker exec`, not through the inventory script), note where npu-smi is, and
pass the inventory validator; a host whose sshd is stopped, or whose host key is unknown, gives one refusal line and
no file. The cluster has a test-only name and is always removed."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from verl_recipe import inventory as val

from simkit.cluster import SimCluster, leftovers
from simkit.procs import checked, make, run

pytestmark = pytest.mark.docker

HOSTS = ("a3-01", "a3-02", "a3-03")
SBIN_ONLY = ("a3-01", "a3-03")  # the profile's head and 3rd host
NPU_NET = ipaddress.IPv4Network("198.18.0.0/15")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    name = f"{os.environ.get('SIM_TEST_PREFIX', 'vrsimt')}inv{os.getpid()}"
    work = tmp_path_factory.mktemp("site-inventory")
    c = SimCluster(name, 3, work / name, work)
    try:
        up = c.make("sim-up", "NODES=3", "SIM_SUBNET=auto", "SIM_PROFILE=real-site", "SIM_HOSTS_FILE=none")
        checked(up, f"sim-up {name}")
        assert "hosts.yml not written: make inventory" in up.stdout
        c.info = json.loads((c.inventory / "cluster.json").read_text())
        yield c
    finally:
        c.down()
        assert leftovers(name) == [], f"objects of {name} left behind"
        assert not c.inventory.exists()


def inventory(c: SimCluster, out: Path, known_hosts: Path | None = None) -> tuple[Any, float]:
    """`make inventory` as a site types it, with the cluster's key and known_hosts; its output and seconds."""
    t0 = time.monotonic()
    p = make(
        "inventory",
        f"SITE={c.name}",
        "HOSTS=" + " ".join(c.ip(h) for h in HOSTS),
        f"SSH_KEY={c.inventory / 'id_ed25519'}",
        f"KNOWN_HOSTS={known_hosts or c.inventory / 'known_hosts'}",
        f"INVENTORY_OUT={out}",
        timeout=600,
    )
    return p, time.monotonic() - t0


def docker_exec(c: SimCluster, host: str, line: str) -> str:
    return checked(run(["docker", "exec", f"{c.name}-{host}", "sh", "-c", line]), f"{host}: {line}").stdout


def own_addresses(c: SimCluster, host: str) -> tuple[list[str], list[str]]:
    """The host's NPU addresses as its /etc/hccn.conf says, and its vNIC addresses as its hccn_tool says."""
    conf = dict(re.findall(r"^address_(\d+)=(\S+)$", docker_exec(c, host, "cat /etc/hccn.conf"), re.M))
    vnic = docker_exec(c, host, 'for d in $(seq 0 15); do hccn_tool -i "$d" -vnic -g; done')
    return [conf[str(d)] for d in range(16)], re.findall(r"^vnic ipaddr: (\S+)$", vnic, re.M)


def comment_of(text: str, host: str) -> str:
    """The comment block written above `host`'s entry."""
    block = text.split(f"        {host}:\n")[0].rsplit(f"        # {host}: ", 1)[1]
    return block


def test_inventory_holds_what_each_host_says(site: SimCluster) -> None:
    p, seconds = inventory(site, site.inventory)
    assert p.returncode == 0, p.stdout + p.stderr
    assert seconds < 120, f"make inventory took {seconds:.0f} s for 3 hosts"
    text = (site.inventory / "hosts.yml").read_text()
    data = yaml.safe_load(text)
    nodes = data["all"]["children"]["a3_nodes"]["hosts"]
    assert list(nodes) == list(HOSTS) and list(data["all"]["children"]["ray_head"]["hosts"]) == ["a3-01"]
    assert val.check_hosts(list(nodes), ["a3-01"], nodes, 16) == []
    seen: set[str] = set()
    for rank, host in enumerate(HOSTS):
        npu, vnic = own_addresses(site, host)
        hv = nodes[host]
        assert hv["a3_node_rank"] == rank and hv["ansible_host"] == hv["a3_cluster_ip"] == site.ip(host)
        assert hv["a3_cluster_nic"] == "eth0"
        assert hv["a3_npu_ips"] == npu and hv["a3_vnic_ips"] == vnic and len(vnic) == 16
        # no pattern: not the default profile's 198.18.<die>.<10+host>, inside the simulated NPU network
        octet = 11 + rank
        assert not any(ip == f"198.18.{d}.{octet}" for d, ip in enumerate(npu)), npu
        assert all(ipaddress.IPv4Address(ip) in NPU_NET for ip in npu + vnic)
        seen |= set(npu) | set(vnic)
    assert len(seen) == 3 * 32  # every address once in the cluster
    # npu-smi: only in sbin on the head and the 3rd host, and the comment says so there only
    for host in HOSTS:
        has_bin = run(["docker", "exec", f"{site.name}-{host}", "test", "-e", "/usr/local/bin/npu-smi"]).returncode == 0
        note = comment_of(text, host)
        if host in SBIN_ONLY:
            assert not has_bin and "npu-smi: /usr/local/sbin/npu-smi only" in note, note
        else:
            assert has_bin and "npu-smi: /usr/local/bin/npu-smi and /usr/local/sbin/npu-smi" in note, note
    # HDK: each host's own version.info, not all the same
    versions = {h["name"]: h["hdk"] for h in site.info["hosts"]}
    assert len(set(versions.values())) > 1
    for host in HOSTS:
        assert f"HDK driver {versions[host]}," in comment_of(text, host)
    for host in SBIN_ONLY:
        assert f"inventory: note: {host}: npu-smi only in /usr/local/sbin" in p.stdout


def test_unknown_host_key_is_refused(site: SimCluster, tmp_path: Path) -> None:
    known = (site.inventory / "known_hosts").read_text().splitlines()
    kh = tmp_path / "known_hosts"
    kh.write_text("\n".join(line for line in known if not line.startswith(f"{site.ip('a3-02')},")) + "\n")
    p, _ = inventory(site, tmp_path / "out", known_hosts=kh)
    problems = [line for line in p.stderr.splitlines() if "; fix: " in line]
    assert p.returncode != 0 and len(problems) == 1, p.stderr
    assert problems[0].startswith(f"{site.ip('a3-02')}: its host key is not in {kh} (ssh: Host key verification")
    assert "ssh-keyscan" in problems[0] and not (tmp_path / "out").exists()


def test_unreachable_host_is_one_line_and_no_file(site: SimCluster, tmp_path: Path) -> None:
    site.fault("a3-03", "down:ssh")
    try:
        p, _ = inventory(site, tmp_path / "out")
    finally:
        site.fault("a3-03", "clear")
    problems = [line for line in p.stderr.splitlines() if "; fix: " in line]
    assert p.returncode != 0 and len(problems) == 1, p.stderr
    ip = site.ip("a3-03")
    assert problems[0].startswith(f"{ip}: unreachable over SSH (ssh: ssh: connect to host {ip} port 22: Connection"), (
        problems[0]
    )
    assert "inventory: nothing written (1 problem(s) above)" in p.stderr
    assert not (tmp_path / "out").exists()
