"""deploy.yml over real SSH against a 3-host simulated cluster: faults first (nothing may change), then
check mode -> apply -> second apply with changed=0 -> the hosts' real state."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from simkit.cluster import SimCluster
from simkit.images import save_sim_image
from simkit.paths import ANSIBLE_DIR, simctl
from simkit.playbook import changed_tasks, recap

pytestmark = pytest.mark.docker

# Per process: engineers and CI may run this module at the same time on one machine (VERL_TEST_SIM_PREFIX
# gives an engineer's runs their own prefix).
NAME = f"{os.environ.get('VERL_TEST_SIM_PREFIX', 'ans')}{os.getpid()}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimCluster, Path, str]]:
    work = tmp_path_factory.mktemp("ans-sim")
    sim = SimCluster(NAME, 3, work=work)
    try:
        tarball = work / "verl-recipe-sim.tar"
        image_id = save_sim_image(tarball)
        sim.up()
        extra = sim.prepare_site(tarball)
        yield sim, extra, image_id
    finally:
        sim.down()


def table(output: str) -> str:
    return "\n".join(line for line in output.splitlines() if re.match(r"^\s*(host|a3-\d\d)\s+\|", line))


def rows(output: str, host: str, check: str) -> list[str]:
    return [line for line in output.splitlines() if re.match(rf"^\s*{host}\s+\|\s+{check}\s+\|", line)]


def failing_preflight(
    sim: SimCluster, extra: Path, faults: dict[str, list[str]], expected: dict[str, dict[str, str]], *args: str
) -> str:
    """Switch `faults` on, run deploy.yml ARGS, and check that it failed naming a3-02 and a3-03 (a3-01 healthy)
    with each expected (host, check) row holding its text. Returns the output; the caller clears the faults."""
    for host, specs in faults.items():
        for spec in specs:
            sim.fault(host, spec)
    res = sim.deploy(extra, *args)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "on 2 of 3 hosts (a3-02, a3-03); nothing was changed." in out, table(out)
    for host, checks in expected.items():
        for check, found in checks.items():
            hit = rows(out, host, check)
            assert hit and found in hit[0], f"{host} {check}: expected {found!r} in {hit} of:\n{table(out)}"
    assert "healthy hosts: a3-01" in out
    return out


def failed_rows(out: str) -> set[tuple[str, str]]:
    return set(re.findall(r"^\s*(a3-\d\d)\s+\|\s+(\w+)\s+\|", table(out), re.M))


def test_faults_on_several_hosts_reported_in_one_run_and_nothing_changed(
    cluster: tuple[SimCluster, Path, str],
) -> None:
    sim, extra, _ = cluster
    faults = {
        "a3-02": ["link-down:7", "health-critical:3", "ip-missing:5", "net-health:9", "driver-old", "clock-skew:300"],
        "a3-03": ["no-shared", "low-disk", "arch:aarch64", "dev-missing:4", "firmware-old", "ping-loss:a3-01"],
    }
    expected = {
        "a3-02": {
            "npu_link": "die 7: DOWN",
            "chip_health": "die 3: Critical",
            "npu_ip": "die 5: no address",
            "npu_net_health": "die 9:",
            "driver_version": "",
            "time_sync": "clock offset +",
        },
        "a3-03": {
            "shared_storage_mounted": "not a mount point",
            "free_disk": "GiB free",
            "architecture": "aarch64",
            "device_nodes": "missing davinci4",
            "firmware_version": "",
            "npu_ping": "loss to 198.18.",
        },
    }
    before = sim.state()
    try:
        out = failing_preflight(sim, extra, faults, expected)
        assert "PREFLIGHT FAILED" in out
        assert not rows(out, "a3-01", r"\w+")
        assert "PLAY [OS settings" not in out
    finally:
        sim.clear()
    assert sim.state() == before  # no change anywhere


def test_real_failure_modes_each_trip_their_row(cluster: tuple[SimCluster, Path, str]) -> None:
    """The ways A3 hosts really fail, each modelled in the simulated host the way the real tool shows it (docs/
    deploy.md, troubleshooting): one preflight run reports every one on its host, the healthy host stays healthy,
    and nothing is changed."""
    sim, extra, _ = cluster
    faults = {
        "a3-02": ["tls-on", "npu-busy:4", "hccn-drift:6", "gateway-wrong:2", "not-rebooted", "os:ubuntu-24.04"],
        # rotation 0: a3-03's die 4 pings a3-01's die 4
        "a3-03": ["firewall", "nic-moved", "low-ram", "ping-loss:a3-01:4"],
    }
    expected = {
        "a3-02": {
            "npu_tls": "TLS switch 1; a3-01, a3-03: 0",
            "npu_occupancy": "die 4: pid",
            "hccn_conf": "die 6: address_6=",
            "npu_gateway": "die 2: gateway 10.255.255.1 outside",
            "running_versions": "NPU 0-7: driver 25.5.0 runs, 26.0.rc1 installed",
            "os": "ubuntu 24.04",
        },
        "a3-03": {
            "host_firewall": "new TCP from",
            "cluster_nic": "is on verlsim0, not eth0",
            "host_memory": "1.0 GiB (MemTotal)",
            "npu_ping": "die 4: 100.00% loss to 198.18.4.11 (a3-01 die 4)",
        },
    }
    before = sim.state()
    try:
        out = failing_preflight(sim, extra, faults, expected, "--tags", "preflight", "-e", "preflight_ping_rotation=0")
        failed = {(h, c) for h, checks in expected.items() for c in checks}
        got = failed_rows(out)
        assert got == failed, f"only the injected faults may fail: {sorted(got ^ failed)}"
        report = json.loads((ANSIBLE_DIR / ".cache" / "reports" / f"preflight-{NAME}.json").read_text())
        row = next(r for r in report["failures"] if r["check"] == "npu_occupancy")
        assert row == {**row, "host": "a3-02", "status": "failed", "ok": False, "dies": [4], "peers": []}
        assert report["device_queries"]["a3-01"]["count"] == 2 + 8 + 16 * 5 + 16
    finally:
        sim.clear()
    assert sim.state() == before


def test_hccs_mode_preflight_checks_the_vnic_path(cluster: tuple[SimCluster, Path, str]) -> None:
    """site_inter_server_link: hccs on the same cluster: `simctl.py link hccs` rewrites its inventory with the
    a3_vnic_ips each host's own `hccn_tool -vnic -g` reports. The preflight then checks every die's vNIC and pings
    over HCCS: a DOWN vNIC and a lost HCCS route fail, a DOWN RoCE link fails only npu_link, a lost RoCE route
    nothing. The inventory is switched back to roce afterwards."""
    sim, extra, _ = cluster

    def relink(mode: str) -> None:
        sim.simctl("link", mode)

    # rotation 0, 3 hosts: die d of a3-03 pings a3-01 (d even) or a3-02 (d odd), die d
    faults = {"a3-02": ["vnic-down:5", "link-down:7"], "a3-03": ["hccs-loss:a3-01:4", "ping-loss:a3-01"]}
    expected = {
        "a3-02": {"npu_vnic": "die 5: DOWN", "npu_link": "die 7: DOWN"},
        "a3-03": {"npu_ping": "die 4: 100.00% loss to 198.19.4.11 (a3-01 die 4)"},
    }
    before = sim.state()
    try:
        relink("hccs")
        assert sim.site_vars()["site_inter_server_link"] == "hccs"
        healthy = sim.deploy(extra, "--tags", "preflight", "-e", "preflight_ping_rotation=0")
        out = healthy.stdout + healthy.stderr
        assert healthy.returncode == 0 and "preflight OK: 3 hosts x" in out, out[-4000:]
        out = failing_preflight(sim, extra, faults, expected, "--tags", "preflight", "-e", "preflight_ping_rotation=0")
        failed = {(h, c) for h, checks in expected.items() for c in checks}
        got = failed_rows(out)
        # a3-02's own die 5 and a3-03's die 5 (to a3-02's vNIC) lose their pings: explained by a3-02's npu_vnic
        assert got == failed, f"only the injected faults may fail: {sorted(got ^ failed)}"
    finally:
        sim.clear()
        relink("roce")
    assert sim.site_vars()["site_inter_server_link"] == "roce"
    assert sim.state() == before


def test_unreachable_host_named_and_others_checked(cluster: tuple[SimCluster, Path, str]) -> None:
    sim, extra, _ = cluster
    try:
        sim.fault("a3-03", "down:ssh")
        res = sim.deploy(extra, "--tags", "preflight", fresh_ssh=True)
        out = res.stdout + res.stderr
        assert res.returncode != 0
        hit = rows(out, "a3-03", "ssh")
        assert hit and "unreachable" in hit[0], out[-4000:]
        assert "healthy hosts: a3-01, a3-02" in out
    finally:
        sim.clear()


def test_check_mode_changes_nothing(cluster: tuple[SimCluster, Path, str]) -> None:
    sim, extra, _ = cluster
    before = sim.state()
    res = sim.deploy(extra, "--check")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-5000:]
    counts = recap(res.stdout)
    assert all(counts[h]["changed"] > 0 for h in sim.hosts), counts  # it reports what it would change
    assert sim.state() == before


def test_apply_then_reapply_changes_nothing(cluster: tuple[SimCluster, Path, str]) -> None:
    sim, extra, _ = cluster
    first = sim.deploy(extra)
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-6000:]
    assert re.search(r"a3-01\s+172\.\d+\.\d+\.11\s+joined\s+16\s+48\s+ok", out), out[-3000:]
    second = sim.deploy(extra)
    assert second.returncode == 0, (second.stdout + second.stderr)[-5000:]
    counts = recap(second.stdout)
    assert set(counts) >= set(sim.hosts)
    assert all(c["changed"] == 0 and c["failed"] == 0 for c in counts.values()), changed_tasks(second.stdout)


def test_hosts_real_state_after_deploy(cluster: tuple[SimCluster, Path, str]) -> None:
    sim, _, image_id = cluster
    env = {
        h: dict(
            line.split("=", 1)
            for line in sim.output(h, "cat /opt/verl-recipe/node.env").splitlines()
            if line and not line.startswith("#")
        )
        for h in sim.hosts
    }
    ips = {h: env[h]["NODE_IP"] for h in sim.hosts}
    cluster_nodes = ",".join(f"{h}={ips[h]}" for h in sim.hosts)
    for rank, h in enumerate(sim.hosts):
        e = env[h]
        assert e["NODE_RANK"] == str(rank) and e["NODE_NAME"] == h
        assert e["HEAD_ADDR"] == ips["a3-01"] and e["HCCL_IF_IP"] == ips[h]
        assert e["CLUSTER_SIZE"] == "3" and e["CLUSTER_NODES"] == cluster_nodes
        assert (
            e["NODE_DIES"] == "16" and e["VERL_RECIPE_SIMULATED"] == "1" and e["VERL_RECIPE_IMAGE"] == "verl-recipe:sim"
        )
        # compose's own convention: `.env` (a link to node.env) names the files, so plain `docker compose` works.
        assert e["COMPOSE_FILE"] == "compose.yaml:compose.sim.yaml" and e["COMPOSE_PATH_SEPARATOR"] == ":"
        assert sim.output(h, "readlink /opt/verl-recipe/.env").strip() == "node.env"
        services = sim.output(h, "cd /opt/verl-recipe && docker compose --profile '*' config --services").split()
        assert {"ray-head", "ray-worker", "train-397b", "doctor"} <= set(services), services
        assert e["HCCL_SOCKET_IFNAME"] == e["GLOO_SOCKET_IFNAME"] == e["TP_SOCKET_IFNAME"] == e["CLUSTER_NIC"]
        assert "TRAIN_FILES" not in e and e["CKPT_DIR"] == "/mnt/shared/checkpoints"
        site = yaml.safe_load(sim.output(h, "cat /opt/verl-recipe/site.yaml"))
        assert site["TRAIN_FILES"] == ["/mnt/shared/data/geo3k/train.parquet"], site  # site_data_path, site-wide
        assert site["recipes"]["qwen3.5-35b-fsdp"]["DEVICE"] == "cpu"  # the simulated site's site_launch above it
        # each recipe's MODEL_PATH from the inventory's site_models (away from the recipes' defaults)
        models = sim.site_vars()["site_models"]
        assert {r: site["recipes"][r]["MODEL_PATH"] for r in models} == models, site
        # the least memory the preflight measured (every simulated host reports the same here)
        assert site["HOST_MEM_GIB"] == simctl.HOST_MEM_GIB, site
        # npu-smi bound from where this host has it
        smi = sim.output(h, "for p in /usr/local/bin/npu-smi /usr/local/sbin/npu-smi; do [ -e $p ] && echo $p; done")
        assert e["NPU_SMI_PATH"] == smi.split()[0], (e, smi)
        # the simulated site's planted secret file: root-only on the host, named (never held) in site.yaml
        planted = f"/etc/verl-recipe/secrets/{simctl.PLANTED_SECRET}"
        assert site["secret_files"] == {simctl.PLANTED_SECRET: planted}, site
        modes = sim.output(h, f"sudo stat -c '%a %U' /etc/verl-recipe/secrets {planted}").split("\n")
        assert modes[:2] == ["700 root", "600 root"], modes
        # the same image everywhere, the staging copy gone
        got = sim.output(h, "docker image inspect --format '{{.Id}}' verl-recipe:sim").strip()
        assert got == image_id
        # the staging copy and the one-time fan-out tokens gone; nothing staged in world-writable /var/tmp
        assert sim.output(h, "sudo test -e /var/lib/verl-recipe/image-stage && echo left || echo gone") == "gone\n"
        assert sim.output(h, "test -e /var/tmp/verl-recipe-image && echo left || echo gone").strip() == "gone"
        # OS settings and the engine
        assert "memlock" in sim.output(h, "cat /etc/security/limits.d/90-verl-recipe.conf")
        assert "net.ipv4.ip_local_reserved_ports=60000-60050" in sim.output(h, "cat /etc/sysctl.d/90-verl-recipe.conf")
        daemon = json.loads(sim.output(h, "cat /etc/docker/daemon.json"))
        assert daemon["log-opts"] == {"max-size": "100m", "max-file": "5"} and daemon["live-restore"] is True
        assert daemon["default-ulimits"]["nofile"]["Hard"] > 1024
        assert daemon["storage-driver"] == "overlay2"  # the host's own settings are kept
        assert "default-runtime" not in daemon  # no Ascend runtime on simulated hosts
        service = "ray-head" if rank == 0 else "ray-worker"
        ps = sim.output(
            h,
            "cd /opt/verl-recipe && sudo docker compose -p verl-recipe ps --format '{{.Service}} {{.State}}'",
        )
        assert f"{service} running" in ps, ps
    # every node joined with its NPUs and CPUs, read from Ray itself on the head
    probe = (
        "import json, os, ray; ray.init(address=os.environ['HEAD_ADDR'] + ':' + os.environ['RAY_PORT'], "
        "logging_level='ERROR'); print(json.dumps([[n['NodeManagerAddress'], n['Resources'].get('NPU', 0), "
        "n['Resources'].get('CPU', 0)] for n in ray.nodes() if n['Alive']]))"
    )
    out = sim.output(
        "a3-01",
        f"cd /opt/verl-recipe && sudo docker compose -p verl-recipe exec -T ray-head python3 -c {shlex.quote(probe)}",
    )
    nodes = {ip: (npu, cpu) for ip, npu, cpu in json.loads(out.strip().splitlines()[-1])}
    assert nodes == {ips[h]: (16.0, 48.0) for h in sim.hosts}


def test_preflight_tag_runs_alone(cluster: tuple[SimCluster, Path, str]) -> None:
    sim, extra, _ = cluster
    res = sim.deploy(extra, "--tags", "preflight")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    assert "preflight OK: 3 hosts x" in out
    ran = set(re.findall(r"^TASK \[(\w+) :", out, re.M))
    assert ran == {"validate_inventory", "preflight"}, ran


def test_registry_source_verifies_the_image_everywhere(cluster: tuple[SimCluster, Path, str]) -> None:
    """The registry branch on hosts that already hold the image: no pull, the same ID verified on every host.
    (Pulling itself needs a registry, which this machine has none of.)"""
    sim, extra, image_id = cluster
    res = sim.deploy(extra, "--tags", "image", "-e", "site_image_source=registry")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    assert f"verl-recipe:sim is {image_id} on all 3 hosts" in " ".join(out.split())  # the callback wraps lines
    assert all(c["changed"] == 0 for c in recap(res.stdout).values()), changed_tasks(res.stdout)
