"""Synthetic preflight and rehearsal reports for the readiness page, built with the project's own code.

The preflight rows come from the preflight module's `check()` and the report plugin's `summarize()` (which also
attributes lost pings), and the `meta` block from the plugin's `report_meta()`, so the rows have exactly the shape
a real `deploy.yml --tags preflight` writes. Each host's module result is what a simulated or real host answers,
with the injected faults applied; a faulty target die or an unreachable host also makes its ring sender lose
pings, as on a real cluster.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from verl_recipe.rehearse import NodeReport

from simkit.paths import ANSIBLE_DIR
from tests.ansible.helpers import load_plugin, preflight_module

pre = preflight_module()
rep = load_plugin("roles/preflight/action_plugins/a3_preflight_report.py")

# check name and what the module finds on a die with that fault
DIE_FAULTS = {
    "health": ("chip_health", "Critical"),
    "link": ("npu_link", "DOWN"),
    "net": ("npu_net_health", "Fault"),
}


@dataclass(frozen=True)
class Fault:
    host: str
    kind: str  # health, link, net, ip, ping, unreachable, disk, time, hdk
    die: int | None = None


def hosts(n: int) -> list[str]:
    return [f"a3-{i:02d}" for i in range(1, n + 1)]


def npu_ips(names: list[str], dies: int) -> dict[str, list[str]]:
    """One subnet per die index, as A3 sites lay out their NPU network."""
    return {h: [f"10.{20 + d}.0.{i + 11}" for d in range(dies)] for i, h in enumerate(names)}


def module_result(host: str, peer: str | None, ips: dict[str, list[str]], dies: int, faults: list[Fault]) -> dict:
    """What the preflight action returns for one host, with its faults applied."""
    mine = [f for f in faults if f.host == host]
    if any(f.kind == "unreachable" for f in mine):
        return {
            "unreachable": True,
            "msg": f"Failed to connect to the host via ssh: ssh: connect to host {host} port 22: No route to host",
        }
    c = pre.check
    checks = [
        c("architecture", True, "aarch64", "aarch64", ""),
        c("os", True, "ubuntu 22.04", "ubuntu 22.04 or openEuler 22.03", ""),
    ]
    old_hdk = any(f.kind == "hdk" for f in mine)
    checks.append(c("driver_version", not old_hdk, "25.3.rc1" if old_hdk else "26.0.RC1", ">= 26.0.RC1", "upgrade"))
    checks.append(c("firmware_version", True, "26.0.RC1", ">= 26.0.RC1", "upgrade"))
    checks.append(c("device_nodes", True, "all present", f"{dies + 3} nodes", "reload the driver"))
    for kind, (name, bad) in DIE_FAULTS.items():
        found_on = {f.die: bad for f in mine if f.kind == kind and f.die is not None}
        entries = [f"die {d}: {t}" for d, t in found_on.items()]
        expected = {
            "chip_health": "Health Status OK on every die",
            "npu_link": "link status UP on every die",
            "npu_net_health": "net health Success on every die",
        }[name]
        checks.append(
            c(
                name,
                not entries,
                "; ".join(entries) or f"{dies} dies OK",
                expected,
                f"fix {name}",
                dies=list(found_on),
                entries=found_on,
            )
        )
    ip_bad = {
        f.die: f"10.99.0.{f.die} (inventory {ips[host][f.die]})" for f in mine if f.kind == "ip" and f.die is not None
    }
    checks.append(
        c(
            "npu_ip",
            not ip_bad,
            "; ".join(f"die {d}: {t}" for d, t in ip_bad.items()) or f"{dies} dies OK",
            "hccn address = inventory a3_npu_ips",
            "configure /etc/hccn.conf",
            dies=list(ip_bad),
            entries=ip_bad,
        )
    )
    if peer:
        target_broken = {
            f.die if f.die is not None else d
            for f in faults
            if f.host == peer and f.kind in ("health", "link", "net", "ip", "unreachable")
            for d in range(dies)
        }
        lost = sorted(target_broken | {f.die for f in mine if f.kind == "ping" and f.die is not None})
        loss = {d: f"100.00% loss to {ips[peer][d]}" for d in lost}
        checks.append(
            c(
                "npu_ping",
                not loss,
                "; ".join(f"die {d}: {t}" for d, t in loss.items()) or f"{dies} dies OK",
                "0% loss to the next host's same die",
                "check the NPU network route",
                dies=lost,
                peers=[peer] if lost else [],
                entries=loss,
                addresses={d: ips[peer][d] for d in range(dies)},
            )
        )
    checks += [
        c("container_runtime", True, "docker 27.5.1", "docker engine running", ""),
        c("compose_plugin", True, "compose 2.32.4", "Compose v2 plugin", ""),
        c("shared_storage_mounted", True, "mounted", "/mnt/shared mounted", ""),
        c("shared_storage_content", True, "model, data and checkpoint paths present", "model config.json", ""),
    ]
    full = any(f.kind == "disk" for f in mine)
    checks.append(
        c(
            "free_disk",
            not full,
            f"{42.0 if full else 812.5:.1f} GiB free on /var/lib/docker",
            ">= 150 GiB",
            "free space on /var/lib/docker",
        )
    )
    skew = 7.3 if any(f.kind == "time" for f in mine) else 0.1
    checks.append(
        c(
            "time_sync",
            skew <= 2,
            f"clock offset +{skew:.1f} s vs control node (no NTP status readable)",
            "|offset| <= 2 s",
            "run chrony or ntpd on every host and the control node",
        )
    )
    return {"checks": checks, "ping_peer": peer, "changed": False}


def preflight_report(n_hosts: int = 16, dies: int = 16, faults: tuple[Fault, ...] = (), simulated: bool = True) -> dict:
    names = hosts(n_hosts)
    ips = npu_ips(names, dies)
    results = {}
    for i, h in enumerate(names):
        peer = names[(i + 1) % n_hosts] if n_hosts > 1 else None
        results[h] = module_result(h, peer, ips, dies, list(faults))
    summary: dict[str, Any] = rep.summarize(names, results, ips)
    task_vars = {
        "hostvars": {h: {"a3_node_rank": i} for i, h in enumerate(names)},
        "inventory_dir": str(ANSIBLE_DIR / "inventory" / f"sim{n_hosts}"),
        "playbook_dir": str(ANSIBLE_DIR),
    }
    summary["meta"] = rep.report_meta(task_vars, names, results, ips, simulated)
    return summary


def rehearsal_report(n_hosts: int = 16, dies: int = 16, slow: str | None = None, broken: str | None = None) -> dict:
    """A rehearsal report as rehearse.write_report writes it: NodeReport rows, a summary with the placement."""
    names = hosts(n_hosts)
    nodes, placement = [], []
    for i, h in enumerate(names):
        ip = f"172.30.0.{i + 11}"
        ms = 41.5 + 0.37 * (i % 5) + (55.0 if h == slow else 0.0)
        r = NodeReport(node=h, ip=ip, bundles=dies, allreduce_ms=round(ms, 3))
        r.algbw_gbps = round(32e6 / (ms / 1e3) / 1e9, 4)
        r.busbw_gbps = round(r.algbw_gbps * 2 * (n_hosts * dies - 1) / (n_hosts * dies), 4)
        if h == broken:
            r.problems = ["bundle 5: /mnt/shared/ckpt not writable"]
        nodes.append(asdict(r))
        placement.append(
            {
                "group": i,
                "node": h,
                "ip": ip,
                "bundles": [{"bundle": b, "ip": ip, "npu": [str(b)]} for b in range(dies)],
            }
        )
    summary = {
        "nnodes": n_hosts,
        "dies_per_node": dies,
        "device": "npu",
        "placement_s": 1.2,
        "probe_s": 8.4,
        "world": n_hosts * dies,
        "tensor_mb": 32.0,
        "iters": 5,
        "collective_s": 12.0,
        "backend": "hccl",
        "total_s": 22.5,
        "placement": placement,
    }
    from verl_recipe.pages.readiness import report_meta

    return {"summary": summary, "nodes": nodes, "meta": report_meta("rehearsal", simulated=True)}


# The faults drawn in the README screenshot and checked by the browser test.
FAULTY_16 = (
    Fault("a3-03", "link", 7),
    Fault("a3-05", "health", 2),
    Fault("a3-09", "unreachable"),
    Fault("a3-12", "ping", 4),
    Fault("a3-14", "ip", 11),
    Fault("a3-07", "disk"),
    Fault("a3-11", "time"),
)


def write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return path
