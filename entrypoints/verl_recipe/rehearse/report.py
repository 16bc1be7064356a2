"""The rehearsal's report: one NodeReport per node, the text table, and the JSON (with the readiness page beside
it) that `verl-recipe report` and the readiness page read."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# What each worker must have inherited from its raylet (node.env, exported before `ray start`).
NODE_ENV_KEYS = ("HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES")


@dataclass
class NodeReport:
    node: str
    ip: str
    bundles: int = 0
    problems: list[str] = field(default_factory=list)
    allreduce_ms: float | None = None
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    # The all-to-all of the expert-parallel groups this node is in: its slowest pattern's median time, the bus
    # bandwidth that gives, and the peer node of its slowest pair.
    alltoall_ms: float | None = None
    alltoall_busbw_gbps: float | None = None
    alltoall_slowest_peer: str | None = None


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def format_report(reports: list[NodeReport], summary: dict[str, Any]) -> str:
    lines = [
        f"rehearsal: {summary.get('nnodes')} nodes x {summary.get('dies_per_node')} bundles, "
        f"{summary.get('backend', '?')} all-reduce of {summary.get('tensor_mb', '?')} MB over "
        f"{summary.get('world', '?')} ranks, {summary.get('total_s', '?')} s in all"
    ]
    lines.append(f"{'node':<12} {'ip':<15} {'bundles':>7} {'allreduce_ms':>12} {'busbw_GB/s':>10}  problems")
    for r in reports:
        ms = f"{r.allreduce_ms:.2f}" if r.allreduce_ms is not None else "-"
        bw = f"{r.busbw_gbps:.3f}" if r.busbw_gbps is not None else "-"
        lines.append(f"{r.node:<12} {r.ip:<15} {r.bundles:>7} {ms:>12} {bw:>10}  {'; '.join(r.problems) or 'ok'}")
    for pat in summary.get("alltoall") or []:
        done = pat["rehearsed_ranks"]
        sizes = "/".join(sorted({str(len(g)) for g in done}))
        how = f"rehearsed as {len(done)} groups of {sizes} ranks" if done else "each within one node: not rehearsed"
        lines.append(f"all-to-all {pat['pattern']} {pat['size']}: {pat['groups']} groups, {how}")
        for row in pat["nodes"]:
            lines.append(
                f"  {row['node']:<12} {row['ms']:>10.2f} ms {row['busbw_gbps']:>10.3f} GB/s bus  slowest peer "
                f"{row['peer'] or '-'}"
            )
        sp = pat.get("slowest_pair")
        if sp:
            lines.append(
                f"  slowest pair: {sp['nodes'][0]} <-> {sp['nodes'][1]} (ranks {sp['ranks'][0]}, "
                f"{sp['ranks'][1]}), {sp['ms']:.2f} ms"
            )
    if "error" in summary:
        lines.append(f"error: {summary['error']}")
    return "\n".join(lines)


def write_report(path: Path, reports: list[NodeReport], summary: dict[str, Any]) -> Path:
    """The JSON report, then the readiness page drawn from it next to it (same name, .html); returns the page."""
    from ..pages.readiness import report_meta, write_page

    path.parent.mkdir(parents=True, exist_ok=True)
    meta = report_meta("rehearsal", simulated=os.environ.get("VERL_RECIPE_SIMULATED") == "1")
    doc = {"summary": summary, "nodes": [asdict(r) for r in reports], "meta": meta}
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return write_page([path])
