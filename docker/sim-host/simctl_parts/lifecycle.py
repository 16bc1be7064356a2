"""Bringing a simulated cluster up (network, hosts, start, host keys, inventory, first logins), down, and its status."""

from __future__ import annotations

import argparse
import concurrent.futures
import ipaddress
import json
import shutil
import time
from pathlib import Path
from typing import Any

from .cluster import config_tar, describe, hosts_of, wait_ready
from .common import (
    DEFAULT_NAME,
    LABEL,
    LINK_MODES,
    MARKER,
    MAX_NODES,
    OPERATOR_KEY,
    SHARED_DIRS,
    SHARED_ROOT,
    SSH_USER,
    SimError,
    check_name,
    choose_subnet,
    container,
    default_inventory,
    docker,
    labelled,
    run,
)
from .inventory import HOSTS_FILE_MODES, prepare_inventory_dir, read_vnic_ips, ssh_cmd, write_inventory
from .profile import SiteOptions, parse_seed


def refuse_bad_up(a: argparse.Namespace) -> None:
    """Every reason not to start, before anything is created."""
    check_name(a.name)
    if a.link not in LINK_MODES:
        raise SimError(f"SIM_LINK '{a.link}' is not valid: use roce (default) or hccs")
    if not 1 <= a.nodes <= MAX_NODES:
        raise SimError(f"NODES={a.nodes} is out of range: give 1 to {MAX_NODES}")
    site_options(a).resolved()
    if hosts_file(a) not in HOSTS_FILE_MODES:
        raise SimError(f"SIM_HOSTS_FILE '{hosts_file(a)}' is not valid: use write (default) or none")
    existing = labelled("container", a.name) + labelled("network", a.name) + labelled("volume", a.name)
    if existing:
        raise SimError(
            f"simulated cluster '{a.name}' already exists ({existing[0]}, ...): run `make sim-down SIM_NAME={a.name}`"
        )
    if docker("image", "inspect", a.image, check=False).returncode != 0:
        raise SimError(f"image {a.image} is missing: run `make sim-image`")
    if not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        raise SimError("ssh/ssh-keygen are missing on this machine: run `make host-deps`")


def site_options(a: argparse.Namespace) -> SiteOptions:
    """The site profile and its options from `up`'s arguments (SIM_PROFILE, SIM_ADDRESSES, ...); a caller that
    builds its own arguments (bench/simcost.py) and names none gets the default profile."""
    return SiteOptions(
        getattr(a, "profile", "") or "default",
        getattr(a, "addresses", ""),
        getattr(a, "npu_smi", ""),
        getattr(a, "hdk", ""),
        parse_seed(getattr(a, "seed", "")),
    )


def hosts_file(a: argparse.Namespace) -> str:
    return str(getattr(a, "hosts_file", "") or "write")


def create_network(a: argparse.Namespace, net: ipaddress.IPv4Network, lab: list[str]) -> ipaddress.IPv4Network:
    """The cluster's bridge network on `net` (SIM_SUBNET, or the first free 172.30.N.0/24 when auto)."""
    auto = a.subnet == "auto" or (not a.subnet and a.name != DEFAULT_NAME)
    for attempt in range(5):
        gw = str(net.network_address + 1)
        p = docker("network", "create", "--driver", "bridge", "--subnet", str(net), "--gateway", gw, *lab, a.name,
                   check=False)  # fmt: skip
        if p.returncode == 0:
            return net
        # Another cluster may have taken the same free subnet a moment ago: pick the next free one.
        if not (auto and "overlap" in p.stderr and attempt < 4):
            raise SimError(f"creating network {a.name} on {net} failed: {p.stderr.strip()}")
        net = choose_subnet(a.name, a.subnet)
    raise AssertionError("unreachable: the last attempt returns or raises")


def create_hosts(a: argparse.Namespace, cluster: dict[str, Any], lab: list[str], pubkey: str) -> None:
    """One stopped container per host, with its engine's volume, the shared storage and its config files."""
    name = a.name
    shared_mount = f"{name}-shared:/var/lib/verl-sim/shared"
    if a.shared_dir:
        Path(a.shared_dir).mkdir(parents=True, exist_ok=True)
        shared_mount = f"{Path(a.shared_dir).resolve()}:/var/lib/verl-sim/shared"
    else:
        docker("volume", "create", *lab, f"{name}-shared")
    add_hosts = [f"--add-host={h['name']}:{h['cluster_ip']}" for h in cluster["hosts"]]
    for h in cluster["hosts"]:
        cname = container(name, h["name"])
        docker("volume", "create", *lab, f"{cname}-docker")
        docker(
            "create",
            "--name", cname,
            "--hostname", h["name"],
            "--network", name,
            "--ip", h["cluster_ip"],
            "--network-alias", h["name"],
            *add_hosts,
            "--init",
            # What a container running its own engine needs here (--privileged is refused on these machines).
            "--cap-add", "ALL",
            "--cap-drop", "SYS_RESOURCE",
            "--security-opt", "seccomp=unconfined",
            "--security-opt", "apparmor=unconfined",
            "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
            "-v", f"{cname}-docker:/var/lib/docker",
            "-v", shared_mount,
            # /run is a fresh tmpfs at every start, as on a real host: a power cycle (`down`, then `clear`)
            # leaves no pid files, sockets or containerd state of the previous boot behind.
            "--tmpfs", "/run:rw,nosuid,nodev,noexec,mode=0755",
            "--stop-timeout", "20",
            *lab,
            "--label", f"{LABEL}.host={h['name']}",
            a.image,
        )  # fmt: skip
        run(["docker", "cp", "-", f"{cname}:/"], input_bytes=config_tar(cluster, h["name"], pubkey))


def start_hosts(name: str, cluster: dict[str, Any]) -> dict[str, float]:
    """Start every host at once; seconds from each start to its services being ready."""
    starts: dict[str, float] = {}
    for h in cluster["hosts"]:
        starts[h["name"]] = time.monotonic()
        docker("start", container(name, h["name"]))
    nodes = len(cluster["hosts"])
    deadline = time.monotonic() + 120 + 15 * nodes
    timings: dict[str, float] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=nodes) as pool:
        futs = {h["name"]: pool.submit(wait_ready, container(name, h["name"]), deadline) for h in cluster["hosts"]}
        for hn, f in futs.items():
            f.result()
            timings[hn] = time.monotonic() - starts[hn]
    return timings


def record_host_keys(name: str, cluster: dict[str, Any], inv: Path) -> None:
    """known_hosts of the inventory, from each host's own key: the control node trusts exactly these."""
    keys = []
    for h in cluster["hosts"]:
        pub = docker("exec", container(name, h["name"]), "cat", "/etc/ssh/ssh_host_ed25519_key.pub").stdout.split()
        keys.append(f"{h['cluster_ip']},{h['name']} {pub[0]} {pub[1]}")
    (inv / "known_hosts").write_text("\n".join(keys) + "\n")


def first_logins(cluster: dict[str, Any], inv: Path) -> None:
    """The first login goes through SSH with host key checking on, as Ansible's will."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(cluster["hosts"])) as pool:
        logins = {
            h["name"]: pool.submit(run, [*ssh_cmd(inv, h["cluster_ip"]), "true"], False) for h in cluster["hosts"]
        }
        for hn, fut in logins.items():
            p = fut.result()
            if p.returncode != 0:
                raise SimError(f"SSH login to {hn} failed: {p.stderr.strip().splitlines()[-1:]}")


def up(a: argparse.Namespace) -> dict[str, Any]:
    """Network, hosts, start, host keys, inventory, first logins; everything is removed again if a step fails."""
    refuse_bad_up(a)
    name = a.name
    net = choose_subnet(name, a.subnet)
    inv = Path(a.inventory) if a.inventory else default_inventory(name)
    prepare_inventory_dir(inv)
    t0 = time.monotonic()
    try:
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name} cluster key", "-f", str(inv / "id_ed25519")])
        pubkey = (inv / "id_ed25519.pub").read_text()
        # the operator's own key (site_operator_keys), which only deploy.yml puts on the head
        run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name} operator key", "-f", str(inv / OPERATOR_KEY)]
        )
        lab = ["--label", f"{LABEL}={name}"]
        net = create_network(a, net, lab)
        cluster = describe(name, a.nodes, net, site_options(a))
        if hosts_file(a) == "none":
            cluster["inventory_hosts_file"] = "none"
        create_hosts(a, cluster, lab, pubkey)
        timings = start_hosts(name, cluster)
        record_host_keys(name, cluster, inv)
        first = container(name, cluster["hosts"][0]["name"])
        dirs = [f"{SHARED_ROOT}/{d}" for d in SHARED_DIRS]
        docker("exec", first, "sh", "-c", f"mkdir -p {' '.join(dirs)} && chown {SSH_USER}: {' '.join(dirs)}")
        vnics = read_vnic_ips(name, cluster) if a.link == "hccs" else None
        write_inventory(inv, cluster, docker("exec", first, "uname", "-m").stdout.strip(), a.link, vnics)
        first_logins(cluster, inv)
    except BaseException:
        teardown(name, inv, quiet=True)
        raise
    total = time.monotonic() - t0
    print(f"sim-up: {a.nodes} host(s) of '{name}' ready in {total:.1f} s on {net} ({a.link}); inventory {inv}")
    if "profile" in cluster:
        p = cluster["profile"]
        print(
            f"sim-up: profile {p['name']}: addresses {p['addresses']}, npu-smi {p['npu_smi']}, hdk {p['hdk']}, "
            f"seed {p['seed']} (SIM_SEED={p['seed']} repeats it)"
        )
    if hosts_file(a) == "none":
        hosts = " ".join(str(h["cluster_ip"]) for h in cluster["hosts"])
        print(
            f"sim-up: hosts.yml not written: make inventory SITE={name} HOSTS='{hosts}' SSH_KEY={inv / 'id_ed25519'} "
            f"KNOWN_HOSTS={inv / 'known_hosts'} INVENTORY_OUT={inv}"
        )
    print(f"sim-up: ssh -F {inv / 'ssh_config'} a3-01    |    ansible-playbook -i {inv / 'hosts.yml'} ...")
    return {"total_s": total, "per_host_s": timings, "inventory": str(inv)}


def teardown(name: str, inv: Path | None, quiet: bool = False) -> None:
    cs = labelled("container", name)
    if cs:
        docker("rm", "-f", "-v", *cs)
    for n in labelled("network", name):
        docker("network", "rm", n)
    vs = labelled("volume", name)
    if vs:
        docker("volume", "rm", "-f", *vs)
    if inv is not None and (inv / MARKER).exists():
        shutil.rmtree(inv)
    if not quiet:
        print(f"sim-down: removed {len(cs)} container(s), the network and {len(vs)} volume(s) of '{name}'")


def down(a: argparse.Namespace) -> None:
    check_name(a.name)
    teardown(a.name, Path(a.inventory) if a.inventory else default_inventory(a.name))


def status(a: argparse.Namespace) -> int:
    check_name(a.name)
    hosts = hosts_of(a.name)
    if not hosts:
        print(f"sim-status: no simulated cluster '{a.name}' (start one with `make sim-up SIM_NAME={a.name}`)")
        return 1
    print(f"{'HOST':<7} {'CONTAINER':<28} {'STATE':<8} {'ADDRESS':<15} {'ENGINE':<7} FAULTS")
    for h in hosts:
        cname = container(a.name, h)
        info = json.loads(docker("inspect", cname).stdout)[0]
        st = info["State"]
        state = "paused" if st.get("Paused") else st["Status"]
        # A powered-off host has no address of its own any more: show the one it comes back on.
        ip = info["NetworkSettings"]["Networks"].get(a.name, {}).get("IPAddress") or (
            info["NetworkSettings"]["Networks"].get(a.name, {}).get("IPAMConfig") or {}
        ).get("IPv4Address", "-")
        faults, engine = ["down"] if state in ("paused", "exited") else [], "-"
        if state == "running":
            faults = docker("exec", cname, "/usr/lib/verl-sim/simhost.py", "fault", "list").stdout.split()
            ok = docker("exec", cname, "docker", "info", "--format", "{{.ServerVersion}}", check=False).returncode == 0
            engine = "up" if ok else "down"
        print(f"{h:<7} {cname:<28} {state:<8} {ip:<15} {engine:<7} {','.join(faults) or '-'}")
    inv = Path(a.inventory) if a.inventory else default_inventory(a.name)
    print(f"inventory: {inv / 'hosts.yml'}   shared storage: volume {a.name}-shared at {SHARED_ROOT} on every host")
    return 0
