"""Collect every host's preflight result into one table (host, check, found, expected, fix) and one JSON report."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from ansible.plugins.action import ActionBase

COLUMNS = ("host", "check", "found", "expected", "fix")


def host_rows(name: str, res: Any) -> list[dict[str, Any]]:
    """Check rows of one host; an unreachable host or a crashed module becomes a single failed row."""
    if not isinstance(res, dict) or not res:
        return [_row(name, "ssh", "no result (host skipped)", "reachable over SSH", "check the host and rerun")]
    if res.get("unreachable"):
        msg = " ".join(str(res.get("msg", "unreachable")).removeprefix("Task failed: ").split())[:160]
        return [
            _row(
                name,
                "ssh",
                f"unreachable: {msg}",
                "reachable over SSH with a known host key",
                "check the host is up, ansible_host/ansible_port, and its key in known_hosts",
            )
        ]
    checks = res.get("checks")
    if not isinstance(checks, list):
        msg = " ".join(str(res.get("msg") or res.get("module_stderr") or "module failed").split())[:160]
        return [_row(name, "preflight", msg, "preflight module runs", "check python3 and sudo on the host")]
    return [{"host": name, **c} for c in checks]


def _row(host: str, check: str, found: str, expected: str, fix: str) -> dict[str, Any]:
    return {"host": host, "check": check, "ok": False, "found": found, "expected": expected, "fix": fix}


def render(rows: list[dict[str, Any]]) -> str:
    """Plain-text table with a header; cells are single lines."""
    table = [list(COLUMNS)] + [[str(r[c]).replace("\n", " ") for c in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    lines = [" | ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in table]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


DIE_CHECKS = ("chip_health", "npu_link", "npu_ip", "npu_net_health")
PING_ENTRY = re.compile(r"^die (\d+): .*?(?:to |ping )(\d+\.\d+\.\d+\.\d+)")


def attribute_pings(rows: list[dict[str, Any]], npu_ips: dict[str, list[str]]) -> None:
    """A lost ping from die i of host A to host B is B's fault when B's die i (or B itself) already failed a check:
    name the peer, and drop such entries so the healthy sender is reported healthy."""
    owner = {ip: (host, die) for host, ips in npu_ips.items() for die, ip in enumerate(ips)}
    broken_hosts = {r["host"] for r in rows if not r["ok"] and r["check"] in ("ssh", "preflight")}
    broken_dies = set()
    for r in rows:
        if not r["ok"] and r["check"] in DIE_CHECKS:
            broken_dies |= {(r["host"], int(d)) for d in re.findall(r"die (\d+):", r["found"])}
    for r in rows:
        if r["check"] != "npu_ping" or r["ok"]:
            continue
        kept, explained = [], []
        for entry in r["found"].split("; "):
            m = PING_ENTRY.match(entry)
            peer = owner.get(m.group(2)) if m else None
            if m and peer:
                entry = f"{entry} ({peer[0]} die {peer[1]})"
                if peer[0] in broken_hosts or peer in broken_dies or (r["host"], int(m.group(1))) in broken_dies:
                    explained.append(entry)
                    continue
            kept.append(entry)
        r["found"] = "; ".join(kept) if kept else "lost pings explained by faults listed above: " + "; ".join(explained)
        r["ok"] = not kept
        r["fix"] = r["fix"] if kept else ""


def summarize(nodes: list[str], results: dict[str, Any], npu_ips: dict[str, list[str]] | None = None) -> dict[str, Any]:
    rows = []
    for name in nodes:
        rows += host_rows(name, results.get(name))
    attribute_pings(rows, npu_ips or {})
    failed = [r for r in rows if not r["ok"]]
    bad_hosts = sorted({r["host"] for r in failed}, key=nodes.index)
    healthy = [n for n in nodes if n not in bad_hosts]
    return {"rows": rows, "failures": failed, "failed_hosts": bad_hosts, "healthy_hosts": healthy}


class ActionModule(ActionBase):
    _requires_connection = False
    TRANSFERS_FILES = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        result["_ansible_verbose_always"] = True  # show the summary line on success too
        args = self._task.args
        var = args.get("result_var", "preflight_result")
        nodes = list(task_vars["groups"]["a3_nodes"])
        hostvars = task_vars["hostvars"]
        results = {n: hostvars[n].get(var) for n in nodes}
        npu_ips = {n: list(hostvars[n].get("a3_npu_ips") or []) for n in nodes}
        summary = summarize(nodes, results, npu_ips)
        report = args.get("report_file")
        if report:
            os.makedirs(os.path.dirname(report), exist_ok=True)
            with open(report, "w", encoding="utf-8") as fh:
                json.dump(summary, fh, indent=1)
        result.update(changed=False, failed_hosts=summary["failed_hosts"], healthy_hosts=summary["healthy_hosts"])
        checks_per_host = len(summary["rows"]) // max(1, len(nodes))
        healthy = ", ".join(summary["healthy_hosts"]) or "none"
        if summary["failures"]:
            result["failed"] = True
            result["msg"] = (
                f"PREFLIGHT FAILED: {len(summary['failures'])} problem(s) on {len(summary['failed_hosts'])} of "
                f"{len(nodes)} hosts ({', '.join(summary['failed_hosts'])}); nothing was changed.\n"
                + render(summary["failures"])
                + f"\nhealthy hosts: {healthy}"
            )
        else:
            result["msg"] = (
                f"preflight OK: {len(nodes)} hosts x {checks_per_host} checks passed (healthy hosts: {healthy})"
            )
        return result
