"""The rehearsal: verl's placement groups, a probe in every bundle, a real all-reduce, and a report.

It proves the cluster can run the job before 256 dies are committed: the same STRICT_PACK groups verl builds
(one per node, one {"CPU": 3, "NPU": 1} bundle per die), then per bundle the host, visible devices, environment
and shared paths, then new TCP connections between every pair of nodes on ephemeral ports (the ports verl's
MASTER_PORT, Gloo and vLLM's distributed init listen on), then a collective across the cluster (HCCL on NPU, gloo in
the simulation).

By part: report (NodeReport, the text report and the JSON the readiness page reads), probe (what one bundle
sees), mesh (TCP between every pair of nodes), groups (expert-parallel groups and pair rounds), collective (the
all-reduce and all-to-all ranks), and here the orchestration: place, probe, dial, reduce, report."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from ..cluster.nodewatch import Guard, NodeLost
from ..topology import CPUS_PER_DIE
from .collective import AllReduceRank, alltoall_summary
from .groups import alltoall_patterns, expert_parallel_groups, pair_rounds, project_groups
from .mesh import cross_node_mesh
from .probe import probe
from .report import NODE_ENV_KEYS, NodeReport, _dedupe, format_report, write_report
from .waits import _get, _wait_ready

# What callers and tests use of the parts, besides rehearse() itself.
__all__ = [
    "AllReduceRank",
    "NodeReport",
    "alltoall_patterns",
    "alltoall_summary",
    "cross_node_mesh",
    "expert_parallel_groups",
    "format_report",
    "pair_rounds",
    "project_groups",
    "rehearse",
    "write_report",
]


@dataclass
class Placed:
    """The placement groups once Ray has placed them: which node holds each, and a report per node."""

    groups: list[Any]
    node_of: list[str]  # node IP of each group, in group order
    reports: dict[str, NodeReport]
    placement: list[dict[str, Any]]  # which bundle landed where, for the readiness page


def rehearse(
    ray: Any,
    *,
    nnodes: int,
    dies: int,
    device: str,
    paths: dict[str, list[str]],
    names: dict[str, str],
    ranks_per_node: int,
    tensor_mb: float,
    iters: int,
    timeout_s: float,
    guard: Guard | None = None,
    layout: dict[str, Any] | None = None,
) -> tuple[list[NodeReport], dict]:
    """Place, probe every bundle, dial every node pair, then the collectives (the all-reduce, and the all-to-all
    of each expert-parallel group of `layout`, the resolved settings); each phase timed in the summary."""
    from ray.util.placement_group import placement_group, remove_placement_group

    t0 = time.perf_counter()
    pgs = [placement_group([{"CPU": CPUS_PER_DIE, "NPU": 1}] * dies, strategy="STRICT_PACK") for _ in range(nnodes)]
    summary: dict[str, Any] = {"nnodes": nnodes, "dies_per_node": dies, "device": device}
    actors: list[Any] = []

    def done(reports: list[NodeReport]) -> tuple[list[NodeReport], dict]:
        summary["total_s"] = round(time.perf_counter() - t0, 3)
        return sorted(reports, key=lambda r: r.node), summary

    try:
        placed = _place(ray, pgs, names, timeout_s, guard, summary)
        if placed is None:
            return [], summary
        summary["placement_s"] = round(time.perf_counter() - t0, 3)
        t1 = time.perf_counter()
        _probe_bundles(ray, placed, dies, device, paths, timeout_s, guard)
        summary["probe_s"] = round(time.perf_counter() - t1, 3)

        t2 = time.perf_counter()
        actor_ip = _start_ranks(ray, placed, ranks_per_node, device, actors)
        # Before the collective (which would hang until its timeout on a dropped port): every node's first rank
        # dials every other node's first rank on a fresh ephemeral port.
        firsts: dict[str, Any] = {}
        for actor, ip in zip(actors, actor_ip, strict=True):
            firsts.setdefault(ip, actor)
        mesh = cross_node_mesh(ray, firsts, names, timeout_s, guard)
        summary["mesh"] = {k: v for k, v in mesh.items() if k != "problems"}
        for ip, problem in mesh["problems"]:
            placed.reports[ip].problems.append(problem)
        if mesh["failed_pairs"]:
            summary["error"] = (
                f"{mesh['failed_pairs']} of {mesh['pairs']} node pairs cannot open a TCP connection on an ephemeral "
                "port: the collective was not started (verl's rendezvous would hang there the same way)"
            )
            return done(list(placed.reports.values()))
        patterns = alltoall_patterns(layout or {}, nnodes * dies)
        for pat in patterns:
            pat["rehearsed"] = project_groups(pat["groups"], dies, ranks_per_node)
        _collective(ray, actors, actor_ip, placed.reports, tensor_mb, iters, timeout_s, guard, summary, patterns)
        summary["collective_s"] = round(time.perf_counter() - t2, 3)
        return done(list(placed.reports.values()))
    except NodeLost as lost:
        summary["error"] = str(lost)
        summary["lost"] = [x.as_dict() for x in lost.losses]
        summary["total_s"] = round(time.perf_counter() - t0, 3)
        return [], summary
    finally:
        for a in actors:  # a rank blocked in a collective with a lost peer ends here, not at its timeout
            ray.kill(a)
        for pg in pgs:
            remove_placement_group(pg)


def _place(
    ray: Any, pgs: list[Any], names: dict[str, str], timeout_s: float, guard: Guard | None, summary: dict[str, Any]
) -> Placed | None:
    """Wait for every group; None (and the error in the summary) when one cannot be placed in time."""
    from ray.util.placement_group import placement_group_table

    not_ready = _wait_ready(ray, pgs, timeout_s, guard)
    if not_ready:
        dies = summary["dies_per_node"]
        summary["error"] = (
            f"{len(not_ready)} of {len(pgs)} placement groups of {dies} x {{CPU: {CPUS_PER_DIE}, NPU: "
            f"1}} could not be placed in {timeout_s:.0f} s: verl would block forever here"
        )
        return None
    by_id = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
    node_of = [by_id.get(placement_group_table(pg)["bundles_to_node_id"][0], "?") for pg in pgs]
    if guard is not None:
        guard.only = set(node_of)  # from here on only the nodes holding a group matter
    placement: list[dict[str, Any]] = [
        {"group": i, "node": names.get(ip, ip), "ip": ip, "bundles": []} for i, ip in enumerate(node_of)
    ]
    summary["placement"] = placement
    reports = {ip: NodeReport(node=names.get(ip, ip), ip=ip) for ip in node_of}
    return Placed(pgs, node_of, reports, placement)


def _probe_bundles(
    ray: Any,
    placed: Placed,
    dies: int,
    device: str,
    paths: dict[str, list[str]],
    timeout_s: float,
    guard: Guard | None,
) -> None:
    """One probe per bundle, a wave of one bundle index at a time so Ray reuses a few worker processes."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    remote_probe = ray.remote(num_cpus=1, resources={"NPU": 1})(probe)
    for b in range(dies):
        refs = [
            remote_probe.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, b)).remote(
                paths, NODE_ENV_KEYS
            )
            for pg in placed.groups
        ]
        for pg_index, result in enumerate(_get(ray, refs, timeout_s, guard)):
            r = placed.reports[placed.node_of[pg_index]]
            r.bundles += 1
            placed.placement[pg_index]["bundles"].append({"bundle": b, "ip": result["ip"], "npu": result["npu_ids"]})
            if result["ip"] != placed.node_of[pg_index]:
                r.problems.append(f"bundle {b} ran on {result['ip']}, not in its STRICT_PACK group's node")
            if device == "npu" and not result["npu_ids"]:
                r.problems.append(f"bundle {b}: no NPU id assigned by Ray")
            r.problems += [f"bundle {b}: {p}" for p in result["problems"] if f"bundle {b}" not in p]
    for r in placed.reports.values():
        r.problems = _dedupe(r.problems)


def _start_ranks(ray: Any, placed: Placed, ranks_per_node: int, device: str, actors: list[Any]) -> list[str]:
    """ranks_per_node ranks in every group, rank 0 in the first; appends them to `actors` (the caller kills them)
    and returns each rank's node IP."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    world = len(placed.groups) * ranks_per_node
    actor_cls = ray.remote(num_cpus=1, resources={"NPU": 1})(AllReduceRank)
    actor_ip: list[str] = []
    for pg_index, pg in enumerate(placed.groups):
        for j in range(ranks_per_node):
            strategy = PlacementGroupSchedulingStrategy(pg, j)
            actors.append(actor_cls.options(scheduling_strategy=strategy).remote(len(actors), world, device))
            actor_ip.append(placed.node_of[pg_index])
    return actor_ip


def _collective(
    ray: Any,
    actors: list[Any],
    actor_ip: list[str],
    reports: dict[str, NodeReport],
    tensor_mb: float,
    iters: int,
    timeout_s: float,
    guard: Guard | None,
    summary: dict[str, Any],
    patterns: list[dict[str, Any]] | None = None,
) -> None:
    """The timed all-reduce over every rank; per node the median time and the bandwidths it gives. Then the
    all-to-all patterns (alltoall_summary)."""
    world = len(actors)
    master = _get(ray, actors[0].address.remote(), timeout_s, guard)
    numel = max(1, int(tensor_mb * 1e6 / 4))
    rehearsed = [p["rehearsed"] for p in patterns or []]
    results = _get(
        ray, [a.run.remote(master, numel, iters, timeout_s, rehearsed) for a in actors], timeout_s * 2, guard
    )
    backend = "hccl" if summary["device"] == "npu" else "gloo"
    summary.update(world=world, tensor_mb=tensor_mb, iters=iters, backend=backend)
    per_node: dict[str, list[float]] = {}
    for res, ip in zip(results, actor_ip, strict=True):
        if "error" in res:
            reports[ip].problems.append(res["error"])
            continue
        if not res["correct"]:
            reports[ip].problems.append(f"rank {res['rank']}: all-reduce gave a wrong sum")
        per_node.setdefault(ip, []).append(res["seconds"])
    nbytes = numel * 4
    for ip, secs in per_node.items():
        t = statistics.median(secs)
        r = reports[ip]
        r.allreduce_ms = round(t * 1e3, 3)
        r.algbw_gbps = round(nbytes / t / 1e9, 4)
        r.busbw_gbps = round(r.algbw_gbps * 2 * (world - 1) / world, 4) if world > 1 else r.algbw_gbps
    if patterns:
        summary["alltoall"] = alltoall_summary(patterns, results, actor_ip, reports)
