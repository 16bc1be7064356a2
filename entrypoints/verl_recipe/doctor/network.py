"""The HCCL, Gloo and TensorPipe NIC variables against this host's interfaces and addresses."""

from __future__ import annotations

from pathlib import Path

from .findings import NIC_VARS, Finding
from .probes import interfaces, local_addresses


def nic_matches(value: str, names: list[str]) -> bool:
    """HCCL_SOCKET_IFNAME syntax: `eth` prefix, `=eth0` exact, `^...` exclusions, comma lists."""
    for item in value.split(","):
        item = item.strip()
        if not item or item.startswith("^"):
            return True  # an exclusion list leaves the choice to HCCL
        if item.startswith("="):
            if item[1:] in names:
                return True
        elif any(n.startswith(item) for n in names):
            return True
    return False


def check_nics(env: dict[str, str], sys_net: Path) -> list[Finding]:
    out: list[Finding] = []
    names = interfaces(sys_net)
    for var in NIC_VARS:
        value = env.get(var, "")
        if not value:
            out.append(
                Finding(
                    f"env:{var}",
                    "fail",
                    "not set",
                    f"set {var} to the cluster NIC in node.env (deploy.yml writes it from a3_cluster_nic)",
                )
            )
        elif names and not nic_matches(value, names):
            out.append(
                Finding(
                    f"env:{var}",
                    "fail",
                    f"{value!r} matches no interface here ({', '.join(names)})",
                    f"set {var} to this host's cluster NIC (a3_cluster_nic in the inventory) and redeploy",
                )
            )
        else:
            out.append(Finding(f"env:{var}", "ok", value))
    if_ip = env.get("HCCL_IF_IP", "")
    node_ip = env.get("NODE_IP", "")
    if if_ip:
        local = local_addresses()
        if local and if_ip not in local:
            out.append(
                Finding(
                    "env:HCCL_IF_IP",
                    "fail",
                    f"{if_ip} is not an address of this host ({', '.join(sorted(local))})",
                    "set HCCL_IF_IP to this host's a3_cluster_ip and redeploy",
                )
            )
        elif node_ip and node_ip != if_ip:
            out.append(Finding("env:HCCL_IF_IP", "fail", f"{if_ip} != NODE_IP {node_ip}", "both must be a3_cluster_ip"))
        else:
            out.append(Finding("env:HCCL_IF_IP", "ok", if_ip))
    return out
