#!/usr/bin/env python3
"""Controller of the simulated A3 cluster (`make sim-up|sim-status|sim-down|sim-fault`).

Each simulated host is a container `<name>-a3-NN` (hostname `a3-NN`) of the image verl-recipe-sim-host on the
user-defined bridge network `<name>` with a fixed address, its own Docker engine on the volume `<name>-a3-NN-docker`
and the shared storage volume `<name>-shared`. Every object carries the label org.verl-recipe.sim=<name>, which is
how status and teardown find them. The inventory (hosts.yml, group_vars/all/sim.yml, the cluster's SSH key pair and
the hosts' known_hosts) is written to ansible/inventory/sim/ for the default name, ansible/inventory/<name>/ else.
With --link hccs (SIM_LINK=hccs) the inventory sets site_inter_server_link: hccs and lists each host's a3_vnic_ips
as the host's own `hccn_tool -i <die> -vnic -g` reports them; `link roce|hccs` rewrites a running cluster's.
Standard library plus PyYAML (to read docker/versions.yaml).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import io
import ipaddress
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent / "tools"))
from a3facts import DIES_PER_NODE as DIES  # noqa: E402 - the A3 facts' one home (a copy of verl_recipe/a3facts.py)
from a3facts import RAY_DASHBOARD_PORT, RAY_GCS_PORT  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LABEL = "org.verl-recipe.sim"
HOST_IMAGE = "verl-recipe-sim-host:bookworm"
DEFAULT_NAME = "verl-sim"
DEFAULT_SUBNET = "172.30.0.0/24"
MAX_NODES = 16

SSH_USER = "deploy"
SHARED_ROOT = "/mnt/shared"
SHARED_DIRS = ("models", "data", "checkpoints", "runs")
NPU_NET = "198.18"  # RFC 2544 benchmark range: the simulated NPU (RoCE) addresses are never routed anywhere
MARKER = ".verl-sim-inventory"
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")
LINK_MODES = ("roce", "hccs")


class SimError(Exception):
    """One line for the user: what is wrong and the fix."""


# --------------------------------------------------------------------------------------------------------------
# helpers


def run(cmd: list[str], check: bool = True, input_bytes: bytes | None = None) -> subprocess.CompletedProcess[str]:
    if input_bytes is not None:
        b = subprocess.run(cmd, input=input_bytes, capture_output=True)
        p = subprocess.CompletedProcess(
            cmd, b.returncode, b.stdout.decode(errors="replace"), b.stderr.decode(errors="replace")
        )
    else:
        p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        msg = (p.stderr or p.stdout).strip().splitlines()
        raise SimError(f"`{' '.join(cmd[:4])} ...` failed: {msg[-1] if msg else 'exit ' + str(p.returncode)}")
    return p


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run(["docker", *args], check=check)


def host_name(i: int) -> str:
    return f"a3-{i:02d}"


def container(name: str, host: str) -> str:
    return f"{name}-{host}"


def default_inventory(name: str) -> Path:
    return REPO / "ansible" / "inventory" / ("sim" if name == DEFAULT_NAME else name)


def hdk_min() -> str:
    data = yaml.safe_load((REPO / "docker" / "versions.yaml").read_text())
    return str(data["host"]["hdk_min"])


def check_name(name: str) -> None:
    if not NAME_RE.match(name):
        raise SimError(f"SIM_NAME '{name}' is not valid: use 2-32 lower-case letters, digits and '-' (e.g. verl-sim)")


def labelled(kind: str, name: str) -> list[str]:
    fmt = "{{.Names}}" if kind == "container" else "{{.Name}}"
    cmd = {"container": ["ps", "-a"], "network": ["network", "ls"], "volume": ["volume", "ls"]}[kind]
    out = docker(*cmd, "--filter", f"label={LABEL}={name}", "--format", fmt).stdout
    return sorted(line for line in out.splitlines() if line)


def used_subnets() -> list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    ids = docker("network", "ls", "-q").stdout.split()
    if not ids:
        return []
    nets = json.loads(docker("network", "inspect", *ids).stdout)
    out = []
    for n in nets:
        for cfg in (n.get("IPAM") or {}).get("Config") or []:
            if cfg.get("Subnet"):
                out.append((n["Name"], ipaddress.ip_network(cfg["Subnet"], strict=False)))
    return out


def choose_subnet(name: str, wanted: str) -> ipaddress.IPv4Network:
    used = used_subnets()
    if wanted == "auto" or (not wanted and name != DEFAULT_NAME):
        for third in range(1, 256):
            cand = ipaddress.IPv4Network(f"172.30.{third}.0/24")
            if not any(cand.overlaps(u) for _, u in used if u.version == 4):
                return cand
        raise SimError("no free 172.30.N.0/24 subnet is left: set SIM_SUBNET to a free IPv4 /24")
    text = wanted or DEFAULT_SUBNET
    try:
        net = ipaddress.IPv4Network(text, strict=True)
    except ValueError:
        raise SimError(f"SIM_SUBNET '{text}' is not an IPv4 network like 172.30.0.0/24") from None
    if net.prefixlen > 27:
        raise SimError(f"SIM_SUBNET '{text}' is too small: the hosts use .11-.26, give a /27 or larger")
    for other, u in used:
        if u.version == 4 and net.overlaps(u):
            raise SimError(f"SIM_SUBNET {net} overlaps docker network '{other}' ({u}): choose another SIM_SUBNET")
    return net


# --------------------------------------------------------------------------------------------------------------
# the cluster description handed to every host (/etc/verl-sim/cluster.json) and to the inventory


def describe(name: str, nodes: int, net: ipaddress.IPv4Network) -> dict[str, Any]:
    base = net.network_address
    hosts = []
    for i in range(1, nodes + 1):
        octet = 10 + i
        hosts.append(
            {
                "name": host_name(i),
                "rank": i - 1,
                "cluster_ip": str(base + octet),
                "cluster_nic": "eth0",
                "npu_ips": [f"{NPU_NET}.{die}.{octet}" for die in range(DIES)],
            }
        )
    return {
        "name": name,
        "subnet": str(net),
        "gateway": str(base + 1),
        "hdk_min": hdk_min(),
        # The machine's own architecture (every simulated host shares this kernel); the arch fault reports another.
        "native_arch": os.uname().machine,
        "shared_root": SHARED_ROOT,
        "hosts": hosts,
    }


def config_tar(cluster: dict[str, Any], host: str, pubkey: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add(path: str, text: str, mode: int = 0o644) -> None:
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))

        add("etc/verl-sim/cluster.json", json.dumps(cluster, indent=1) + "\n")
        add("etc/verl-sim/host", host + "\n")
        add("etc/verl-sim/faults.json", '{"faults": []}\n')
        add(f"etc/ssh/authorized_keys/{SSH_USER}", pubkey)
    return buf.getvalue()


# --------------------------------------------------------------------------------------------------------------
# inventory


def yaml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid double-quoted YAML scalar


def vnic_query(dies: int = DIES) -> str:
    """The shell loop an operator runs on a host to fill in a3_vnic_ips: `hccn_tool -i <die> -vnic -g` per die."""
    return f'for d in $(seq 0 {dies - 1}); do echo "== die $d"; hccn_tool -i "$d" -vnic -g || echo "exit $?"; done'


def parse_vnic(host: str, text: str, dies: int = DIES) -> list[str]:
    """The vNIC addresses in the output of vnic_query(), die by die; a die whose vNIC is not UP, has no address
    or did not answer is an error: the inventory lists only what the host really reports."""
    found: dict[int, dict[str, str]] = {}
    die = -1
    for line in text.splitlines():
        m = re.fullmatch(r"== die (\d+)", line.strip())
        if m:
            die = int(m.group(1))
            found[die] = {}
        elif die >= 0 and ":" in line:
            k, _, v = line.partition(":")
            found[die][k.strip()] = v.strip()
        elif die >= 0 and line.startswith("exit "):
            found[die]["exit"] = line.split()[1]
    ips, bad = [], []
    for d in range(dies):
        kv = found.get(d, {})
        if kv.get("vnic link status") != "UP" or not kv.get("vnic ipaddr") or "exit" in kv:
            bad.append(f"die {d}: {kv.get('vnic link status') or 'no answer'}")
        ips.append(kv.get("vnic ipaddr", ""))
    if bad:
        raise SimError(f"{host}: `hccn_tool -vnic -g` shows no usable vNIC ({'; '.join(bad)}): clear its faults first")
    return ips


def read_vnic_ips(name: str, cluster: dict[str, Any]) -> dict[str, list[str]]:
    """Each host's vNIC addresses, read from the host's own tool (not computed here)."""

    def one(host: str) -> list[str]:
        p = docker("exec", container(name, host), "sh", "-c", vnic_query(), check=False)
        return parse_vnic(host, p.stdout)

    hosts = [str(h["name"]) for h in cluster["hosts"]]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(hosts)) as pool:
        return dict(zip(hosts, pool.map(one, hosts), strict=True))


# The simulated site's launch layout (inventory site_launch, deploy.yml's site.yaml on every host): the FSDP
# recipe trains for real on the CPU stand-ins of verl-recipe:sim (DEVICE=cpu), with a tiny model and batch, one rank
# on each of two hosts (a gloo collective across hosts); every other recipe keeps its real layout and stops where
# the simulation ends. `make sim-seed` writes the model and data these paths name (simctl.py site-launch).
TRAIN_RECIPE = "qwen3.5-35b-fsdp"
STANDIN_MODEL = f"{SHARED_ROOT}/models/Qwen3.5-tiny-standin"
STANDIN_DATA = f"{SHARED_ROOT}/data/gsm8k-standin"


# The simulated site's one secret file (site_secret_files): random per cluster, root-only beside the inventory as the
# Ray token is. Every run on the simulated cluster carries it to verl's workers (the stand-in rollout names it), and
# tests/e2e/test_train_fsdp.py greps the run's records, logs and containers for its content.
PLANTED_SECRET = "VERL_RECIPE_SIM_PLANTED_KEY"


def planted_secret_file(inv: Path) -> Path:
    path = inv / ".secrets" / "sim_planted_key"
    if not path.is_file():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(f"sim-planted-{secrets.token_hex(20)}\n")
    return path


def yaml_block(key: str, value: Any, indent: int = 0) -> list[str]:
    """A mapping as block YAML, one key a line (yamllint's line length); leaves as JSON, which YAML reads."""
    pad = " " * indent
    if not isinstance(value, dict) or not value:
        return [f"{pad}{key}: {json.dumps(value)}"]
    return [f"{pad}{key}:", *(line for k in sorted(value) for line in yaml_block(k, value[k], indent + 2))]


def sim_site_launch(nodes: int) -> dict[str, Any]:
    tiny = {
        "DEVICE": "cpu",
        "NNODES": min(2, nodes),
        "NDEVICES_PER_NODE": 1,
        "MODEL_PATH": STANDIN_MODEL,
        "TRAIN_FILES": [f"{STANDIN_DATA}/train.parquet"],
        "VAL_FILES": [f"{STANDIN_DATA}/test.parquet"],
        "GEN_TP": 1,
        "FSDP_SIZE": -1,
        "TRAIN_BATCH_SIZE": 2,
        "PPO_MINI_BATCH_SIZE": 2,
        "PPO_MICRO_BATCH_SIZE_PER_GPU": 2,
        "LOG_PROB_MICRO_BATCH_SIZE_PER_GPU": 2,
        "ROLLOUT_N": 2,
        "MAX_PROMPT_LENGTH": 32,
        "MAX_RESPONSE_LENGTH": 16,
        "LR": "1e-3",
        "TOTAL_EPOCHS": 1,
        "TOTAL_TRAINING_STEPS": 3,
        "SAVE_FREQ": 1,
        "VAL_BEFORE_TRAIN": False,
        "LOGGER": ["console", "file"],
    }
    return {"recipes": {TRAIN_RECIPE: tiny}}


def write_inventory(
    inv: Path, cluster: dict[str, Any], arch: str, link: str = "roce", vnic_ips: dict[str, list[str]] | None = None
) -> None:
    """hosts.yml, group_vars/all/sim.yml, ssh_config and cluster.json; link hccs needs every host's vnic_ips."""
    if link not in LINK_MODES:
        raise SimError(f"SIM_LINK '{link}' is not valid: use roce (default) or hccs")
    if link == "hccs" and any(not (vnic_ips or {}).get(h["name"]) for h in cluster["hosts"]):
        raise SimError("SIM_LINK=hccs needs the vNIC addresses of every host")
    key, kh = inv / "id_ed25519", inv / "known_hosts"
    lines = [
        "---",
        f"# Generated by `make sim-up` for the simulated cluster '{cluster['name']}' (docker/sim-host/simctl.py);",
        "# rewritten by every sim-up. Same groups and variables as ../sample (docs/contracts.md section 1).",
        "all:",
        "  children:",
        "    a3_nodes:",
        "      vars:",
        f"        ansible_user: {SSH_USER}",
        "        ansible_port: 22",
        f"        ansible_ssh_private_key_file: {yaml_str(str(key))}",
        f"        ansible_ssh_common_args: {yaml_str('-o UserKnownHostsFile=' + str(kh))}",
        "      hosts:",
    ]
    for h in cluster["hosts"]:
        lines += [
            f"        {h['name']}:",
            f"          ansible_host: {h['cluster_ip']}",
            f"          a3_node_rank: {h['rank']}",
            f"          a3_cluster_ip: {h['cluster_ip']}",
            f"          a3_cluster_nic: {h['cluster_nic']}",
            "          a3_npu_ips:",
        ]
        lines += [f"            - {ip}" for ip in h["npu_ips"]]
        if link == "hccs" and vnic_ips:
            lines.append("          a3_vnic_ips:")
            lines += [f"            - {ip}" for ip in vnic_ips[h["name"]]]
    lines += ["    ray_head:", "      hosts:", f"        {cluster['hosts'][0]['name']}:"]
    (inv / "hosts.yml").write_text("\n".join(lines) + "\n")

    gv = inv / "group_vars" / "all"
    gv.mkdir(parents=True, exist_ok=True)
    site = [
        "---",
        "# Generated by `make sim-up` (docker/sim-host/simctl.py): site settings of the simulated cluster",
        f"# '{cluster['name']}' (docs/contracts.md section 1; docs/simulated-cluster.md).",
        "site_simulated: true",
        f"site_expected_dies: {DIES}",
        "# The simulated hosts report this machine's architecture; real A3 hosts are aarch64.",
        f"site_expected_arch: {arch}",
        "# docker/versions.yaml host.hdk_min when the cluster was brought up",
        f"site_hdk_min: {yaml_str(cluster['hdk_min'])}",
        "# How HCCL crosses servers (SIM_LINK): roce, or hccs with each host's a3_vnic_ips from its hccn_tool -vnic -g",
        f"site_inter_server_link: {link}",
        f"site_shared_root: {SHARED_ROOT}",
        f"site_model_path: {SHARED_ROOT}/models/Qwen3.5-35B-A3B",
        f"site_data_path: {SHARED_ROOT}/data/geo3k",
        f"site_ckpt_root: {SHARED_ROOT}/checkpoints",
        "site_image_ref: verl-recipe:sim",
        "site_image_source: tarball",
        f"site_image_tarball: {yaml_str(str(REPO / 'build' / 'images' / 'verl-recipe-sim.tar'))}",
        f"site_ray_port: {RAY_GCS_PORT}",
        f"site_dashboard_port: {RAY_DASHBOARD_PORT}",
        "site_install_dir: /opt/verl-recipe",
        "# A planted secret file (simctl.py PLANTED_SECRET): it reaches verl's workers, and no record holds it",
        f"site_secret_files: {{{PLANTED_SECRET}: {yaml_str(str(planted_secret_file(inv)))}}}",
        "# Launch settings for the simulated cluster (simctl.py sim_site_launch)",
        *yaml_block("site_launch", sim_site_launch(len(cluster["hosts"]))),
    ]
    (gv / "sim.yml").write_text("\n".join(site) + "\n")

    cfg = []
    for h in cluster["hosts"]:
        cfg += [
            f"Host {h['name']}",
            f"  HostName {h['cluster_ip']}",
            f"  User {SSH_USER}",
            f"  IdentityFile {key}",
            "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {kh}",
            "  StrictHostKeyChecking yes",
            "  BatchMode yes",
            "",
        ]
    (inv / "ssh_config").write_text("\n".join(cfg))
    (inv / "cluster.json").write_text(json.dumps(cluster, indent=1) + "\n")


def prepare_inventory_dir(inv: Path) -> None:
    if inv.exists() and any(inv.iterdir()) and not (inv / MARKER).exists():
        raise SimError(f"{inv} exists and was not written by simctl.py: move it away or set SIM_INVENTORY")
    if inv.exists():
        shutil.rmtree(inv)
    inv.mkdir(parents=True)
    (inv / MARKER).write_text("written by docker/sim-host/simctl.py; removed by `make sim-down`\n")
    # Keys and generated files never reach git, whatever the repository's .gitignore says.
    (inv / ".gitignore").write_text("*\n")


def ssh_cmd(inv: Path, ip: str, known_hosts: Path | None = None) -> list[str]:
    return [
        "ssh",
        "-i",
        str(inv / "id_ed25519"),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        f"UserKnownHostsFile={known_hosts or inv / 'known_hosts'}",
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=10",
        f"{SSH_USER}@{ip}",
    ]


# --------------------------------------------------------------------------------------------------------------
# commands


def wait_ready(cname: str, deadline: float) -> float:
    start = time.monotonic()
    while True:
        if docker("exec", cname, "/usr/lib/verl-sim/simhost.py", "ready", check=False).returncode == 0:
            return time.monotonic() - start
        state = docker("inspect", "-f", "{{.State.Status}}", cname, check=False).stdout.strip()
        if state != "running":
            logs = docker("logs", "--tail", "5", cname, check=False)
            tail = (logs.stdout + logs.stderr).strip().splitlines()
            raise SimError(f"{cname} stopped while starting ({state}): {tail[-1] if tail else 'no output'}")
        if time.monotonic() > deadline:
            raise SimError(f"{cname} was not ready in time: see `docker logs {cname}`")
        time.sleep(0.5)


def refuse_bad_up(a: argparse.Namespace) -> None:
    """Every reason not to start, before anything is created."""
    check_name(a.name)
    if a.link not in LINK_MODES:
        raise SimError(f"SIM_LINK '{a.link}' is not valid: use roce (default) or hccs")
    if not 1 <= a.nodes <= MAX_NODES:
        raise SimError(f"NODES={a.nodes} is out of range: give 1 to {MAX_NODES}")
    existing = labelled("container", a.name) + labelled("network", a.name) + labelled("volume", a.name)
    if existing:
        raise SimError(
            f"simulated cluster '{a.name}' already exists ({existing[0]}, ...): run `make sim-down SIM_NAME={a.name}`"
        )
    if docker("image", "inspect", a.image, check=False).returncode != 0:
        raise SimError(f"image {a.image} is missing: run `make sim-image`")
    if not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        raise SimError("ssh/ssh-keygen are missing on this machine: run `make host-deps`")


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
        lab = ["--label", f"{LABEL}={name}"]
        net = create_network(a, net, lab)
        cluster = describe(name, a.nodes, net)
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


def hosts_of(name: str) -> list[str]:
    out = docker("ps", "-a", "--filter", f"label={LABEL}={name}", "--format", f'{{{{.Label "{LABEL}.host"}}}}').stdout
    return sorted(h for h in out.split() if h)


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


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="simctl.py", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--name", default=os.environ.get("SIM_NAME") or DEFAULT_NAME)
    p.add_argument("--inventory", default=os.environ.get("SIM_INVENTORY", ""), help="inventory folder to write")
    p.add_argument("--image", default=os.environ.get("SIM_HOST_IMAGE") or HOST_IMAGE)
    sub = p.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up")
    u.add_argument("--nodes", type=int, default=3)
    u.add_argument("--subnet", default=os.environ.get("SIM_SUBNET", ""), help="IPv4 subnet, or auto")
    u.add_argument("--shared-dir", default=os.environ.get("SIM_SHARED_DIR", ""), help="host folder instead of a volume")
    u.add_argument("--link", default=os.environ.get("SIM_LINK") or "roce", help="inter-server link: roce or hccs")
    sub.add_parser("down")
    sub.add_parser("status")
    ln = sub.add_parser("link", help="rewrite the inventory of a running cluster for roce or hccs")
    ln.add_argument("mode")
    sub.add_parser("site-launch", help="print the simulated site's launch settings (a site file, for make sim-seed)")
    f = sub.add_parser("fault")
    f.add_argument("host")
    f.add_argument("fault")
    a = p.parse_args(argv)
    try:
        if a.cmd == "up":
            up(a)
        elif a.cmd == "down":
            down(a)
        elif a.cmd == "status":
            return status(a)
        elif a.cmd == "fault":
            fault(a)
        elif a.cmd == "link":
            link(a)
        elif a.cmd == "site-launch":
            print(json.dumps(sim_site_launch(len(hosts_of(a.name)) or 1), indent=2, sort_keys=True))
    except SimError as e:
        print(f"simctl: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
