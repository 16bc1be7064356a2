"""Changing a running simulated cluster: its inter-server link mode, a host's power, and its injected faults."""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path

from .cluster import hosts_of, wait_ready
from .common import LINK_MODES, MARKER, SimError, check_name, container, default_inventory, docker
from .inventory import read_vnic_ips, write_inventory


def link(a: argparse.Namespace) -> None:
    """Rewrite a running cluster's inventory for another inter-server link (keys and known_hosts are kept)."""
    check_name(a.name)
    if a.mode not in LINK_MODES:
        raise SimError(f"link '{a.mode}' is not valid: use roce or hccs")
    inv = Path(a.inventory) if a.inventory else default_inventory(a.name)
    if not (inv / MARKER).exists() or not (inv / "cluster.json").exists():
        raise SimError(f"{inv} is no inventory of simctl.py: run `make sim-up SIM_NAME={a.name}` first")
    cluster = json.loads((inv / "cluster.json").read_text())
    states = {h["name"]: host_state(container(a.name, h["name"])) for h in cluster["hosts"]}
    if any(s != "running" for s in states.values()):
        raise SimError(f"every host must run to read its tools: {states}; `make sim-fault ... FAULT=clear` first")
    first = container(a.name, cluster["hosts"][0]["name"])
    vnics = read_vnic_ips(a.name, cluster) if a.mode == "hccs" else None
    write_inventory(inv, cluster, docker("exec", first, "uname", "-m").stdout.strip(), a.mode, vnics)
    print(f"sim-link: inventory {inv} now uses site_inter_server_link: {a.mode}")


def host_state(cname: str) -> str:
    """running, down (powered off: the container exited) or paused (a cluster of an older simctl.py)."""
    st = json.loads(docker("inspect", "-f", "{{json .State}}", cname).stdout)
    if st.get("Paused"):
        return "paused"
    return "running" if st.get("Running") else "down"


def inner_container_ids(cname: str) -> list[str]:
    """Containers the host's own engine runs (their cgroups are this machine's, not under the host's)."""
    p = docker("exec", cname, "docker", "ps", "-q", "--no-trunc", check=False)
    return p.stdout.split() if p.returncode == 0 else []


def power_off(cname: str, network: str, host: str) -> list[str]:
    """A power loss: the host's link goes dark first, so that the sockets its dying processes close send no FIN
    or RST to anyone (a host without power says nothing); then SIGKILL to its PID 1, so the kernel kills every
    process of its PID namespace at once, the containers its own engine started included (their PID namespaces
    are nested in the host's). Nothing answers on its address, not even a refusal. The link is plugged in again
    (same address and name) for the next boot."""
    ids = inner_container_ids(cname)
    ip = json.loads(docker("inspect", "-f", "{{json .NetworkSettings.Networks}}", cname).stdout)[network]["IPAddress"]
    docker("network", "disconnect", "--force", network, cname)
    docker("kill", "--signal", "KILL", cname)
    end = time.monotonic() + 30
    while host_state(cname) != "down":
        if time.monotonic() > end:
            raise SimError(f"{cname} still runs 30 s after SIGKILL: see `docker inspect {cname}`")
        time.sleep(0.2)
    docker("network", "connect", "--ip", ip, "--alias", host, network, cname)
    release_cgroups(ids)
    return ids


def release_cgroups(ids: list[str]) -> None:
    """The inner engine's containers have their cgroups at this machine's root (/docker/<id> in every hierarchy);
    the engine is dead, so nobody else removes them. Only empty ones named by the ids are removed."""
    root = Path("/sys/fs/cgroup")
    for cid in ids:
        for d in [root / "docker" / cid, *root.glob(f"*/docker/{cid}")]:
            with contextlib.suppress(OSError):  # gone already, or not empty yet (then the kernel keeps it)
                d.rmdir()


def power_on(cname: str, nodes: int) -> float:
    """Boot a powered-off host: tini, then `simhost.py boot` starts sshd, dockerd and the NPU responder from
    their configuration; dockerd restarts the containers whose restart policy asks for it."""
    t0 = time.monotonic()
    docker("start", cname)
    wait_ready(cname, time.monotonic() + 120 + 15 * nodes)
    return time.monotonic() - t0


def fault(a: argparse.Namespace) -> None:
    check_name(a.name)
    hosts = hosts_of(a.name)
    if not hosts:
        raise SimError(f"no simulated cluster '{a.name}': run `make sim-up SIM_NAME={a.name}` first")
    if a.host not in hosts:
        raise SimError(f"HOST={a.host} is not a host of '{a.name}' ({', '.join(hosts)})")
    specs = [s for s in a.fault.split(",") if s]
    if not specs:
        raise SimError(f"FAULT is empty: give one of the faults in docs/simulated-cluster.md, or clear (HOST={a.host})")
    cname = container(a.name, a.host)
    state = host_state(cname)
    if specs == ["clear"]:
        if state == "paused":
            docker("unpause", cname)
        elif state == "down":
            secs = power_on(cname, len(hosts))
            print(f"sim-fault: {a.host}: powered on, booted in {secs:.1f} s (sshd, dockerd and its containers)")
        p = docker("exec", cname, "/usr/lib/verl-sim/simhost.py", "fault", "clear", check=False)
        if p.returncode != 0:
            raise SimError(p.stderr.strip() or f"clearing the faults of {a.host} failed")
        print(f"sim-fault: {a.host}: all faults cleared")
        return
    if "clear" in specs:
        raise SimError("FAULT=clear cannot be combined with other faults: clear first, then add")
    if state != "running":
        raise SimError(f"{a.host} is {state} (FAULT=down): `make sim-fault HOST={a.host} FAULT=clear` boots it first")
    if "down" in specs:
        if specs != ["down"]:
            raise SimError("FAULT=down cannot be combined with other faults: add them first, then down")
        ids = power_off(cname, a.name, a.host)
        print(
            f"sim-fault: {a.host}: down (power loss: every process killed at once, {len(ids)} container(s) of its "
            "engine included; no answer on SSH, Ray or the NPU network). FAULT=clear boots it again."
        )
        return
    p = docker("exec", cname, "/usr/lib/verl-sim/simhost.py", "fault", "add", *specs, check=False)
    if p.returncode != 0:
        raise SimError(p.stderr.strip().removeprefix("simhost.py: ") or f"fault {a.fault} on {a.host} failed")
    print(f"sim-fault: {a.host}: {','.join(specs)} on")
