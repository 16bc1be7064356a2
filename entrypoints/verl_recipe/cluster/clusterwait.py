"""Wait until the cluster can hold the job, through Ray's API; give up on a deadline naming who is missing."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..exitcodes import EXIT_NOT_READY, EXIT_OK
from ..problems import error
from ..topology import CPUS_PER_DIE
from .nodewatch import NodeWatch, lost_line


@dataclass(frozen=True)
class NodeView:
    name: str
    ip: str
    npu_total: float
    npu_available: float
    cpu_total: float
    alive: bool = True
    port: int = 0  # the raylet's port, which the head knocks on (nodewatch)
    node_id: str = ""  # Ray's ID of this registration: a host that rebooted comes back under a new one


@dataclass
class Assessment:
    ready: bool
    line: str
    fatal: str | None = None
    missing: list[str] = field(default_factory=list)
    good: list[NodeView] = field(default_factory=list)  # the joined nodes that can take their share of the job


def views_from_ray(ray: Any) -> list[NodeView]:
    available = ray._private.state.available_resources_per_node()  # noqa: SLF001 - what verl itself reads
    out = []
    for n in ray.nodes():
        res = n.get("Resources", {})
        avail = available.get(n["NodeID"], {})
        out.append(
            NodeView(
                name=n.get("NodeName") or n["NodeManagerAddress"],
                ip=n["NodeManagerAddress"],
                npu_total=float(res.get("NPU", 0)),
                npu_available=float(avail.get("NPU", 0)),
                cpu_total=float(res.get("CPU", 0)),
                alive=bool(n.get("Alive")),
                port=int(n.get("NodeManagerPort") or 0),
                node_id=str(n.get("NodeID") or ""),
            )
        )
    return out


def drain_nodes(ray: Any, node_ids: list[str], timeout_s: float = 10.0) -> str:
    """Tell Ray's GCS that these nodes are gone now: it marks them dead at once (and asks their raylets to exit),
    so that nothing is placed on a powered-off host while Ray's own health checks still count its dies as free. A
    host that comes back joins under a new node ID. The same call the autoscaler makes when it removes nodes
    (ray/autoscaler/_private/autoscaler.py, drain_nodes_via_gcs). One line saying what was done, or why not."""
    if not node_ids:
        return ""
    try:
        gcs = ray._private.worker.global_worker.gcs_client  # noqa: SLF001 - the autoscaler's own route
        done = gcs.drain_nodes([bytes.fromhex(i) for i in node_ids], timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001 - the wait still keeps the nodes out by its own knock
        why = type(exc).__name__
        return f"note: Ray not told that {len(node_ids)} lost node(s) are gone ({why}); the wait keeps them out"
    return f"Ray told that {len(done)} of {len(node_ids)} lost node(s) are gone (marked dead at once)"


def assess(views: list[NodeView], expected: tuple[tuple[str, str], ...], need_nodes: int, dies: int) -> Assessment:
    """Ready when `need_nodes` joined nodes each offer `dies` free NPUs and 3 CPUs per die."""
    need_cpu = CPUS_PER_DIE * dies
    good, short, held = [], [], []
    alive_ips = {v.ip for v in views if v.alive}
    left = sorted({f"{v.name} ({v.ip})" for v in views if not v.alive and v.ip not in alive_ips})
    views = [v for v in views if v.alive]
    for v in views:
        label = f"{v.name} ({v.ip})" if v.name != v.ip else v.ip
        if v.npu_total < dies or v.cpu_total < need_cpu:
            short.append(
                f"{label} joined with {v.npu_total:g} NPU / {v.cpu_total:g} CPU, needs {dies} NPU / {need_cpu} CPU"
            )
        elif v.npu_available < v.npu_total:
            held.append(f"{label} has {v.npu_total - v.npu_available:g} of {v.npu_total:g} NPU held by another job")
        else:
            good.append(v)
    joined_ips = {v.ip for v in views}
    missing = [f"{name} ({ip})" for name, ip in expected if ip not in joined_ips]
    line = (
        f"cluster: {len(good)}/{need_nodes} nodes ready, {int(sum(v.npu_total for v in good))}/{need_nodes * dies} dies"
    )
    if missing:
        line += f"; missing: {', '.join(missing[:8])}" + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
    if short or held:
        line += "; " + "; ".join(short + held)
    if len(good) >= need_nodes:
        return Assessment(True, line, missing=missing, good=good)
    if left:
        return Assessment(
            False,
            line,
            fatal=f"{', '.join(left)} joined and then left the cluster; fix: look at that "
            "host's ray-worker log and restart it",
            missing=missing,
        )
    # A joined node never gains NPUs or CPUs, so waiting cannot fix a short node that the job needs.
    if short and len(views) >= max(need_nodes, len(expected)):
        return Assessment(
            False,
            line,
            fatal="; ".join(short) + "; fix: restart that node with all its dies "
            "(check `npu-smi info` and the container's devices)",
            missing=missing,
        )
    return Assessment(False, line, missing=missing)


def wait_for_cluster(
    snapshot: Callable[[], list[NodeView]],
    expected: tuple[tuple[str, str], ...],
    need_nodes: int,
    dies: int,
    deadline_s: float,
    poll_s: float = 2.0,
    report_every_s: float = 10.0,
    now: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    watch: NodeWatch | None = None,
) -> int:
    """0 when ready; 3 on the deadline, a lost node or a node that can never fit, with one line naming them."""
    start = now()
    last_report = -report_every_s
    while True:
        views = snapshot()
        if watch is not None:
            lost = watch.check(views)
            if lost:
                error(lost_line(lost, "while the head waited"), flush=True)
                return EXIT_NOT_READY
            # A node that stopped answering is not counted until it answers again (or is named lost); a node that
            # left before this wait but whose host answers again (rebooted, registering) is waited for.
            back = watch.rejoining(views)
            views = [v for v in views if v.ip not in watch.suspect and not (v.ip in back and not v.alive)]
            # Two live entries at one address: the host rebooted and Ray still lists its node of the earlier boot,
            # where it would place work that never runs. Not counted until Ray drops the ghost.
            seen: dict[str, int] = {}
            for v in views:
                seen[v.ip] = seen.get(v.ip, 0) + int(v.alive)
            views = [v for v in views if seen.get(v.ip, 0) < 2]
        a = assess(views, expected, need_nodes, dies)
        elapsed = now() - start
        if a.ready:
            print(f"{a.line} - ready after {elapsed:.1f} s", file=sys.stderr, flush=True)
            return EXIT_OK
        if a.fatal:
            error(a.fatal, flush=True)
            return EXIT_NOT_READY
        if elapsed >= deadline_s:
            who = ", ".join(a.missing) if a.missing else a.line
            error(
                f"cluster not ready after {deadline_s:.0f} s: {who}; fix: start the Ray node service on "
                "those hosts (deploy.yml --tags ray) and check they reach the head",
                flush=True,
            )
            return EXIT_NOT_READY
        if elapsed - last_report >= report_every_s:
            print(f"waiting: {a.line}", file=sys.stderr, flush=True)
            last_report = elapsed
        sleep(poll_s)


def node_table(views: list[NodeView], expected: tuple[tuple[str, str], ...], dies: int) -> str:
    """One row per expected host (then any other joined node): the readiness report deploy.yml prints."""
    need_cpu = CPUS_PER_DIE * dies
    alive = {v.ip: v for v in views if v.alive}
    rows = [("host", "ip", "ray", "NPU", "CPU", "status")]
    names = dict((ip, name) for name, ip in expected)
    for ip in [ip for _, ip in expected] + sorted(set(alive) - set(names)):
        v = alive.get(ip)
        if v is None:
            rows.append((names.get(ip, ip), ip, "missing", "0", "0", "NOT READY"))
            continue
        ok = v.npu_total >= dies and v.cpu_total >= need_cpu and v.npu_available >= v.npu_total
        rows.append(
            (names.get(ip, v.name), ip, "joined", f"{v.npu_total:g}", f"{v.cpu_total:g}", "ok" if ok else "NOT READY")
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)
