"""Synthetic preflight and rehearsal reports for the readiness page, built with the project's own code.

The preflight rows come from the preflight module's `check()` and `ping_check()` and the report plugin's
`summarize()` (which also attributes lost pings), the ping plan from the action plugin's `ping_plan()`, and the `meta`
block from the report plugin's `report_meta()`, so the report has exactly the shape a real `deploy.yml --tags
preflight` writes. Each host's module result is what a simulated or real host answers, with the injected faults
applied; a faulty target die or an unreachable host also makes the die that the plan points at it lose its ping, as
on a real cluster.

The rehearsal's all-to-all figures come from the rehearsal's own `alltoall_patterns()` (the 397B recipe's layout)
and `alltoall_summary()`, fed per-rank timings as `AllReduceRank.run` returns them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from verl_recipe.recipes import load_recipe
from verl_recipe.rehearse import NodeReport, alltoall_patterns, alltoall_summary, project_groups

from simkit.paths import ANSIBLE_DIR
from tests.ansible.helpers import load_plugin, preflight_module


def _module_utils_path() -> None:
    """The preflight module's parts import `ansible.module_utils.*` from ansible/module_utils, as tests/conftest.py
    arranges under pytest; `python -m tests.browser.screenshot` runs without it."""
    import ansible.module_utils

    folder = str(ANSIBLE_DIR / "module_utils")
    if folder not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(folder)


_module_utils_path()
pre = preflight_module()
act = load_plugin("roles/preflight/action_plugins/a3_preflight.py")
rep = load_plugin("roles/preflight/action_plugins/a3_preflight_report.py")

# The ping plan's rotation, pinned so the tests and the picture stay the same (a real run's `auto` is the day number).
ROTATION = 3
# The layout whose expert-parallel all-to-alls the synthetic rehearsal times: the 16-host recipe's.
LAYOUT = "qwen3.5-397b"

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


class _Pinger:
    """The host as the module's `ping_check` queries it: `hccn_tool -i DIE -ping -g address ADDR` answers with the
    loss a real tool prints. A ping is lost when its target host is unreachable or its target die has a fault that
    stops traffic, or when the sender die has a `ping` fault (a route)."""

    TARGET = ("health", "link", "net", "ip")

    def __init__(self, host: str, plan: list[dict[str, Any]], faults: list[Fault]) -> None:
        self.lost: set[int] = set()
        for item in plan:
            peer, peer_die, die = item["peer"], item["peer_die"], item["die"]
            if any(
                (f.host == peer and (f.kind == "unreachable" or (f.kind in self.TARGET and f.die == peer_die)))
                or (f.host == host and f.kind == "ping" and f.die == die)
                for f in faults
            ):
                self.lost.add(die)

    def query(self, argv: list[str]) -> tuple[int, str]:
        die = int(argv[argv.index("-i") + 1])
        received = 0 if die in self.lost else 3
        loss = 100.0 * (3 - received) / 3
        return 0, f"3 packets transmitted, {received} received, {loss:.2f}% packet loss\n"


def module_result(
    host: str, plan: list[dict[str, Any]], ips: dict[str, list[str]], dies: int, faults: list[Fault]
) -> dict:
    """What the preflight action returns for one host, with its faults applied: the module's checks, and the ping
    plan and rotation the action plugin adds."""
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
    checks.append(pre.ping_check({"ping_plan": plan}, _Pinger(host, plan, faults), "hccn_tool", {}))
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
    return {"checks": checks, "ping_rotation": ROTATION, "ping_plan": plan, "changed": False}


def preflight_report(n_hosts: int = 16, dies: int = 16, faults: tuple[Fault, ...] = (), simulated: bool = True) -> dict:
    names = hosts(n_hosts)
    ips = npu_ips(names, dies)
    results = {}
    for h in names:
        plan = act.ping_plan(names, h, dies, ROTATION, ips)  # the hosts in rank order, the NPU addresses (roce)
        results[h] = module_result(h, plan, ips, dies, list(faults))
    summary: dict[str, Any] = rep.summarize(names, results, ips)
    task_vars = {
        "hostvars": {h: {"a3_node_rank": i} for i, h in enumerate(names)},
        "inventory_dir": str(ANSIBLE_DIR / "inventory" / f"sim{n_hosts}"),
        "playbook_dir": str(ANSIBLE_DIR),
    }
    summary["meta"] = rep.report_meta(task_vars, names, results, ips, simulated)
    return summary


def rehearsal_report(n_hosts: int = 16, dies: int = 16, slow: str | None = None, broken: str | None = None) -> dict:
    """A rehearsal report as rehearse.write_report writes it: NodeReport rows, a summary with the placement and the
    all-to-all of the layout's expert-parallel groups (none where the layout does not fit n_hosts x dies)."""
    names = hosts(n_hosts)
    placement: list[dict[str, Any]] = []
    reports: dict[str, NodeReport] = {}
    actor_ip: list[str] = []
    for i, h in enumerate(names):
        ip = f"172.30.0.{i + 11}"
        ms = 41.5 + 0.37 * (i % 5) + (55.0 if h == slow else 0.0)
        r = NodeReport(node=h, ip=ip, bundles=dies, allreduce_ms=round(ms, 3))
        r.algbw_gbps = round(32e6 / (ms / 1e3) / 1e9, 4)
        r.busbw_gbps = round(r.algbw_gbps * 2 * (n_hosts * dies - 1) / (n_hosts * dies), 4)
        if h == broken:
            r.problems = ["bundle 5: /mnt/shared/ckpt not writable"]
        reports[ip] = r
        actor_ip += [ip] * dies  # a rank per die, rank r on node r // dies
        placement.append(
            {
                "group": i,
                "node": h,
                "ip": ip,
                "bundles": [{"bundle": b, "ip": ip, "npu": [str(b)]} for b in range(dies)],
            }
        )
    summary: dict[str, Any] = {
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
    patterns = alltoall_patterns(load_recipe(LAYOUT).settings, n_hosts * dies)
    if patterns:
        for pat in patterns:
            pat["rehearsed"] = project_groups(pat["groups"], dies, dies)
        slow_node = names.index(slow) if slow in names else None
        results = [_alltoall_rank(rank, patterns, dies, slow_node) for rank in range(n_hosts * dies)]
        summary["alltoall"] = alltoall_summary(patterns, results, actor_ip, reports)
    nodes = [asdict(r) for r in reports.values()]
    from verl_recipe.pages.readiness import report_meta

    return {"summary": summary, "nodes": nodes, "meta": report_meta("rehearsal", simulated=True)}


def _alltoall_rank(rank: int, patterns: list[dict[str, Any]], dies: int, slow_node: int | None) -> dict[str, Any]:
    """What one rank's `AllReduceRank.run` returns of the all-to-all: per pattern its group's median time, bytes and
    the time of each pair round. A group with the slow node waits for it (2.2x; the slow node's own ranks 2.6x); a
    pair with the slow node takes 2.5x; pairs inside a node (HCCS) are quick."""
    node = rank // dies
    out: list[dict[str, Any] | None] = []
    for k, pat in enumerate(patterns):
        group = next((g for g in pat["rehearsed"] if rank in g), None)
        if group is None:
            out.append(None)
            continue
        n = len(group)
        spans_slow = slow_node is not None and any(r // dies == slow_node for r in group)
        factor = 2.6 if node == slow_node else (2.2 if spans_slow else 1.0)
        seconds = (0.021 + 0.014 * k) * (1 + 0.01 * (node % 4)) * factor
        pairs = {}
        for peer in group:
            if peer == rank:
                continue
            t = 0.0004 if peer // dies == node else 0.0011 + 0.00002 * ((rank + peer) % 7)
            pairs[peer] = t * (2.5 if slow_node in (node, peer // dies) and peer // dies != node else 1.0)
        chunk = 8_000_000 // n  # 32 MB of floats, numel // n to each member
        out.append({"group": 0, "n": n, "bytes": chunk * n * 4, "seconds": seconds, "pairs": pairs, "correct": True})
    return {"rank": rank, "ip": "", "seconds": 0.04, "correct": True, "alltoall": out}


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
