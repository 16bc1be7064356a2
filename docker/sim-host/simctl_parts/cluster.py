"""A simulated cluster as data (hosts, addresses, NPU and vNIC addresses), each host's configuration, waiting for a
host to be ready, and the hosts of a running cluster."""

from __future__ import annotations

import io
import ipaddress
import json
import os
import tarfile
import time
from typing import Any

from a3facts import DIES_PER_NODE as DIES  # noqa: E402 - the A3 facts' one home (a copy of verl_recipe/a3facts.py)

from .common import (
    HOST_MEM_GIB,
    LABEL,
    NPU_NET,
    SHARED_ROOT,
    SSH_USER,
    SimError,
    docker,
    hdk_min,
    host_name,
)
from .profile import SiteOptions, apply_profile

# --------------------------------------------------------------------------------------------------------------
# the cluster description handed to every host (/etc/verl-sim/cluster.json) and to the inventory


def describe(name: str, nodes: int, net: ipaddress.IPv4Network, options: SiteOptions | None = None) -> dict[str, Any]:
    """The cluster as data; `options` (a site profile, simctl_parts/profile.py) makes its hosts differ the way real
    sites' do. The default profile adds nothing."""
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
                "mem_gib": HOST_MEM_GIB,
                "npu_ips": [f"{NPU_NET}.{die}.{octet}" for die in range(DIES)],
            }
        )
    cluster = {
        "name": name,
        "subnet": str(net),
        "gateway": str(base + 1),
        "hdk_min": hdk_min(),
        # The machine's own architecture (every simulated host shares this kernel); the arch fault reports another.
        "native_arch": os.uname().machine,
        "shared_root": SHARED_ROOT,
        "hosts": hosts,
    }
    return apply_profile(cluster, options or SiteOptions())


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
        # only the deploy account's: the operator's own key (site_operator_keys) is installed by deploy.yml
        add(f"etc/ssh/authorized_keys/{SSH_USER}", pubkey)
    return buf.getvalue()


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


def hosts_of(name: str) -> list[str]:
    out = docker("ps", "-a", "--filter", f"label={LABEL}={name}", "--format", f'{{{{.Label "{LABEL}.host"}}}}').stdout
    return sorted(h for h in out.split() if h)
