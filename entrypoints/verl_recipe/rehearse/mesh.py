"""New TCP connections between every pair of nodes on ephemeral ports: the ports verl's MASTER_PORT, Gloo and
vLLM's distributed init listen on."""

from __future__ import annotations

import socket
import time
from typing import Any

from ..cluster.nodewatch import Guard
from .waits import _get

MESH_CONNECT_S = 5.0


def _ephemeral_listener() -> socket.socket:
    """A socket on a port the kernel picks, on every address, as verl's `_get_free_port` and Gloo's pairs bind."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", 0))
    s.listen(128)
    return s


def _dial(targets: list[tuple[str, int]], timeout_s: float) -> list[tuple[str, int, str]]:
    """Open one new TCP connection to each target at once; (ip, port, why) for each that failed."""
    from concurrent.futures import ThreadPoolExecutor

    def one(target: tuple[str, int]) -> tuple[str, int, str] | None:
        try:
            with socket.create_connection(target, timeout=timeout_s):
                return None
        except TimeoutError:
            return (*target, f"no answer in {timeout_s:g} s")
        except OSError as exc:
            return (*target, exc.strerror or type(exc).__name__)

    if not targets:
        return []
    with ThreadPoolExecutor(max_workers=min(32, len(targets))) as pool:
        return [r for r in pool.map(one, targets) if r is not None]


def cross_node_mesh(
    ray: Any, firsts: dict[str, Any], names: dict[str, str], timeout_s: float, guard: Guard | None = None
) -> dict[str, Any]:
    """Every ordered pair of nodes: a new TCP connection to a port the target's kernel picked. Problems are
    attributed to the target node (its firewall drops the connection) and name the nodes that could not reach it."""
    t = time.perf_counter()
    ips = list(firsts)
    ports = dict(zip(ips, _get(ray, [firsts[ip].listen.remote() for ip in ips], timeout_s, guard), strict=True))
    plans = {src: [ports[dst] for dst in ips if dst != src] for src in ips}
    failures = _get(ray, [firsts[src].dial.remote(plans[src], MESH_CONNECT_S) for src in ips], timeout_s, guard)
    # (on an error the actors are killed, which closes their listeners)
    _get(ray, [firsts[ip].unlisten.remote() for ip in ips], timeout_s, guard)
    unreachable: dict[str, list[tuple[str, str]]] = {}
    for src, failed in zip(ips, failures, strict=True):
        for dst_ip, port, why in failed:
            unreachable.setdefault(dst_ip, []).append((src, f"{port}: {why}"))
    problems = []
    for dst, froms in sorted(unreachable.items()):
        sources = ", ".join(sorted(names.get(src, src) for src, _ in froms))
        problems.append(
            (
                dst,
                f"new TCP to {dst} on an ephemeral port ({froms[0][1]}) fails from {sources}: a host firewall on "
                f"{names.get(dst, dst)} drops the cluster's traffic (verl's MASTER_PORT, Gloo and vLLM listen on "
                "such ports); fix: trust the cluster hosts' addresses on every port (docs/deploy.md, Firewall)",
            )
        )
    return {
        "pairs": len(ips) * (len(ips) - 1),
        "failed_pairs": sum(len(f) for f in unreachable.values()),
        "connect_timeout_s": MESH_CONNECT_S,
        "mesh_s": round(time.perf_counter() - t, 3),
        "problems": problems,
    }
