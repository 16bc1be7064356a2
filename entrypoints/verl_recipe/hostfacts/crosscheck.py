"""What must differ or agree between hosts: addresses on two hosts, die counts, HDK versions."""

from __future__ import annotations

from collections import Counter

from .common import die_list, problem
from .facts import HostFacts

# --------------------------------------------------------------------------------------------------------------
# what must differ, or agree, between hosts


def cross_check(facts: list[HostFacts]) -> list[str]:
    errors: list[str] = []
    names: dict[str, str] = {}
    cluster: dict[str, str] = {}
    for f in facts:
        if f.name:
            if f.name in names:
                errors.append(
                    problem(
                        f.address,
                        f"hostname {f.name} is also that of {names[f.name]} (the inventory names hosts by it)",
                        "HOSTS lists one host twice, or give each host its own name (`hostnamectl set-hostname`)",
                    )
                )
            names.setdefault(f.name, f.address)
        if f.cluster_ip:
            if f.cluster_ip in cluster:
                errors.append(
                    problem(
                        f.address,
                        f"cluster address {f.cluster_ip} is also that of {cluster[f.cluster_ip]}",
                        "HOSTS lists one host twice, or give each host its own address on the cluster network "
                        "(CLUSTER_NET picks which)",
                    )
                )
            cluster.setdefault(f.cluster_ip, f.address)
    for attr, what in (("npu_ips", "NPU address"), ("vnic_ips", "vNIC address")):
        owner: dict[str, tuple[str, int]] = {}
        for f in facts:
            for die, ip in zip(f.dies, getattr(f, attr), strict=False):
                if ip in owner:
                    host, other = owner[ip]
                    where = "this host's" if host == f.address else f"{host}'s"
                    conf = "address_<die> in /etc/hccn.conf" if attr == "npu_ips" else "the vNIC address"
                    errors.append(
                        problem(
                            f.address,
                            f"{what} {ip} of die {die} is also {where} die {other}",
                            f"every die of every host needs its own {what}: correct {conf} on one of them "
                            "(`hccn_tool -a -cfg recovery` applies it)",
                        )
                    )
                else:
                    owner[ip] = (f.address, die)
    counts = Counter(len(f.dies) for f in facts if f.dies)
    if len(counts) > 1:
        usual, _ = max(counts.items(), key=lambda kc: (kc[1], kc[0]))
        others = sum(n for c, n in counts.items() if c == usual)
        for f in facts:
            if f.dies and len(f.dies) != usual:
                errors.append(
                    problem(
                        f.address,
                        f"{len(f.dies)} dies (/dev/davinci{die_list(f.dies)}), while {others} other host(s) have "
                        f"{usual}",
                        "every host of a cluster has the same dies: check `npu-smi info` there (a module down, the "
                        "driver), or leave the host out of HOSTS",
                    )
                )
    return errors
