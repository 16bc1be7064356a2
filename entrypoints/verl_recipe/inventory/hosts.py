"""The hosts of the inventory: names, SSH addresses, ranks, the head, cluster NICs and addresses, NPU and vNIC
addresses (one per die, none shared), and whether this run reaches the image play."""

from __future__ import annotations

from typing import Any

from ..contracts.inventory import HOST
from .fields import (
    INVENTORY,
    MISSING,
    NIC_RE,
    SSH_HOST_RE,
    _hccn_fix,
    _host,
    _ipv4,
    _is_int,
    _per_die,
    _plain_host_name,
    _port,
    _show,
    _text,
    _unusable,
    check_names,
    problem,
)


def check_vnic(nodes: list[str], hosts: dict[str, dict[str, Any]], dies: Any) -> list[str]:
    """site_inter_server_link: hccs: HCCL reaches the other servers over HCCS at the dies' virtual NIC addresses
    (`hccn_tool -i <die> -vnic -g`), so the preflight pings those and needs them per host."""
    errors: list[str] = []
    for name in nodes:
        ips = hosts[name].get("a3_vnic_ips", MISSING)
        if not isinstance(ips, list) or (_is_int(dies) and len(ips) != dies):
            errors.append(
                problem(
                    _host(name),
                    f"a3_vnic_ips={_show(ips)} must list {_per_die(dies, 'vNIC addresses')} "
                    "when site_inter_server_link is hccs",
                    "`hccn_tool -i <die> -vnic -g` on that host",
                )
            )
            continue
        for die, raw in enumerate(ips):
            ip = _ipv4(raw)
            if ip is None or _unusable(ip):
                errors.append(
                    problem(
                        _host(name),
                        f"a3_vnic_ips[{die}]={_show(raw)} is " + (_unusable(ip) if ip else "not an IPv4 address"),
                        f"the address `hccn_tool -i {die} -vnic -g` prints on that host",
                    )
                )
    return errors


def check_hosts(nodes: list[str], heads: list[str], hosts: dict[str, dict[str, Any]], dies: Any) -> list[str]:
    errors: list[str] = []
    if not nodes:
        return [
            problem(
                INVENTORY, "group a3_nodes is empty", "list every training host under a3_nodes, see inventory/sample"
            )
        ]
    if len(heads) != 1:
        found = ", ".join(heads) if heads else "none"
        errors.append(
            problem(
                INVENTORY,
                f"group ray_head must hold exactly one host, found {len(heads)} ({found})",
                "list only the a3_nodes host with a3_node_rank 0 under ray_head",
            )
        )
    for head in heads:
        if head not in nodes:
            errors.append(problem(_host(head), "the ray_head host is not in a3_nodes", "list it under a3_nodes too"))

    last = len(nodes) - 1
    seen_ssh: dict[str, str] = {}
    seen_cluster: dict[str, str] = {}
    seen_npu: dict[str, str] = {}
    npu_owner: dict[str, tuple[str, int]] = {}
    ranks: dict[int, str] = {}
    for name in nodes:
        hv = hosts[name]
        if not _plain_host_name(name):
            errors.append(
                problem(
                    INVENTORY,
                    f"host name {_show(name)} is not a plain host name",
                    "name it with letters, digits, '.', '_' or '-' only, starting with a letter or digit, at most 63 "
                    "characters (it becomes NODE_NAME, Ray's node name and a log file name), e.g. a3-01",
                )
            )
        ssh = hv.get("ansible_host", MISSING)
        if ssh is MISSING or not ssh:
            ssh = name
        elif not (isinstance(ssh, str) and SSH_HOST_RE.fullmatch(ssh)):
            errors.append(
                problem(
                    _host(name),
                    f"ansible_host={_show(ssh)} is not a host name or IP address",
                    "the address SSH reaches that host at: a DNS name or an IP address, nothing else (no spaces, "
                    "no shell characters, not starting with -)",
                )
            )
        port = hv.get("ansible_port", MISSING)
        if port is not MISSING and port is not None and _port(port) is None:
            errors.append(
                problem(
                    _host(name),
                    f"ansible_port={_show(port)} is not a TCP port number",
                    "the port that host's sshd listens on, 1-65535 (22 unless the site changed it)",
                )
            )
        target = f"{_text(ssh)}:{_port(port) or 22}"
        if target in seen_ssh:
            errors.append(
                problem(
                    _host(name),
                    f"duplicate address {target}, already used by {seen_ssh[target]}",
                    "give each host its own ansible_host (and ansible_port): the address SSH reaches that host at",
                )
            )
        seen_ssh.setdefault(target, name)

        rank = hv.get("a3_node_rank", MISSING)
        if not _is_int(rank):
            errors.append(
                problem(
                    _host(name),
                    f"a3_node_rank={_show(rank)} is not an integer",
                    f"an integer 0..{last}, a different one for each host",
                )
            )
        elif not 0 <= rank < len(nodes):
            errors.append(
                problem(
                    _host(name),
                    f"a3_node_rank={rank} is outside 0..{last}",
                    f"number the {len(nodes)} hosts of a3_nodes 0..{last}, each rank once",
                )
            )
        elif rank in ranks:
            errors.append(
                problem(
                    _host(name),
                    f"duplicate a3_node_rank {rank}, already used by {ranks[rank]}",
                    f"give each host its own a3_node_rank in 0..{last}",
                )
            )
        else:
            ranks[rank] = name
        if name in heads and _is_int(rank) and rank != 0:
            errors.append(problem(_host(name), f"the ray_head host has a3_node_rank={rank}", "give it rank 0"))

        cip = _ipv4(hv.get("a3_cluster_ip"))
        if cip is None or _unusable(cip):
            errors.append(
                problem(
                    _host(name),
                    f"a3_cluster_ip={_show(hv.get('a3_cluster_ip', MISSING))} is "
                    + (_unusable(cip) if cip else "not an IPv4 address"),
                    "the host's IPv4 address on the cluster network (the address of its a3_cluster_nic)",
                )
            )
        elif cip in seen_cluster:
            errors.append(
                problem(
                    _host(name),
                    f"duplicate address a3_cluster_ip={cip}, already used by {seen_cluster[cip]}",
                    "give each host its own address on the cluster network",
                )
            )
        else:
            seen_cluster[cip] = name

        nic = hv.get("a3_cluster_nic", MISSING)
        if not (isinstance(nic, str) and NIC_RE.fullmatch(nic)):
            errors.append(
                problem(
                    _host(name),
                    f"a3_cluster_nic={_show(nic)} is not an interface name",
                    "the interface that holds a3_cluster_ip, as `ip -br addr` lists it, e.g. enp189s0f0",
                )
            )

        ips = hv.get("a3_npu_ips", MISSING)
        if not isinstance(ips, list):
            errors.append(
                problem(
                    _host(name),
                    f"a3_npu_ips={_show(ips)} is not a list of {_per_die(dies, 'NPU addresses')}",
                    _hccn_fix(dies),
                )
            )
            continue
        if _is_int(dies) and len(ips) != dies:
            errors.append(
                problem(
                    _host(name),
                    f"a3_npu_ips has {len(ips)} addresses, expected {dies} (one per die)",
                    _hccn_fix(dies),
                )
            )
        for die, raw in enumerate(ips):
            ip = _ipv4(raw)
            if ip is None or _unusable(ip):
                errors.append(
                    problem(
                        _host(name),
                        f"a3_npu_ips[{die}]={_show(raw)} is " + (_unusable(ip) if ip else "not an IPv4 address"),
                        f"address_{die} of that host's /etc/hccn.conf",
                    )
                )
            elif ip in seen_npu:
                errors.append(
                    problem(
                        _host(name),
                        f"duplicate address a3_npu_ips[{die}]={ip}, already used by {seen_npu[ip]}",
                        f"address_{die} of that host's /etc/hccn.conf: every die of every host has its own address",
                    )
                )
            else:
                seen_npu[ip] = f"{name} die {die}"
                npu_owner[ip] = (name, die)
    for name in nodes:
        errors += check_names(hosts[name], HOST, _host(name))
    # The NPU network is not the cluster network: a die at a host's cluster address would take that host's traffic
    # (or HCCL's would go to the host).
    for ip, (owner, index) in npu_owner.items():
        if ip in seen_cluster:
            errors.append(
                problem(
                    _host(owner),
                    f"a3_npu_ips[{index}]={ip} is the a3_cluster_ip of {_text(seen_cluster[ip])}",
                    f"address_{index} of that host's /etc/hccn.conf: an NPU-network address, never a cluster "
                    "network one",
                )
            )
    return errors


def image_stage(run_tags: list[str], skip_tags: list[str]) -> bool:
    """Whether this run reaches the image play (tag `image`), which reads site_image_tarball: `--tags preflight`
    (the read-only check) does not, and must work before the image is built."""
    runs = "all" in run_tags or "image" in run_tags or "tagged" in run_tags
    return runs and "image" not in skip_tags and "tagged" not in skip_tags
