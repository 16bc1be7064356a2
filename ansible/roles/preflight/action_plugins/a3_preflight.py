"""Controller side of `a3_preflight`: add each host's ping peer and judge its clock against the control node."""

from __future__ import annotations

import time
from typing import Any

from ansible.plugins.action import ActionBase


def ring_peer(nodes: list[tuple[int, str]], me: str) -> str | None:
    """The next host in rank order (wrapping), whose NPU addresses this host pings die by die."""
    order = [name for _, name in sorted(nodes)]
    if len(order) < 2 or me not in order:
        return None
    return order[(order.index(me) + 1) % len(order)]


def clock_check(host_clock: float, sent: float, returned: float, max_skew: float) -> dict[str, Any]:
    """The host read its clock somewhere between `sent` and `returned` (control-node time); fail only when the
    whole window is off by more than max_skew, so a slow SSH round trip never fails the check."""
    ahead = host_clock - returned  # the smallest possible offset
    behind = host_clock - sent  # the largest possible offset
    ok = ahead <= max_skew and behind >= -max_skew
    offset = ahead if ahead > 0 else (behind if behind < 0 else 0.0)
    return {
        "check": "time_sync",
        "ok": ok,
        "found": f"clock offset {offset:+.1f} s vs control node (no NTP status readable)",
        "expected": f"|offset| <= {max_skew:g} s",
        "fix": "" if ok else "run chrony or ntpd on every host and the control node",
    }


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        max_skew = float(args.pop("max_clock_skew_s", 2))
        hostvars = task_vars["hostvars"]
        nodes = [(int(hostvars[h]["a3_node_rank"]), h) for h in task_vars["groups"]["a3_nodes"]]
        me = task_vars["inventory_hostname"]
        peer = ring_peer(nodes, me)
        args.setdefault("ping_targets", list(hostvars[peer]["a3_npu_ips"]) if peer else [])
        sent = time.time()
        out = self._execute_module(module_name="a3_preflight", module_args=args, task_vars=task_vars)
        returned = time.time()
        result.update(out)
        if out.get("failed"):
            return result
        if out.get("clock_source") == "none":
            result["checks"].append(clock_check(float(out["clock"]), sent, returned, max_skew))
        result["ping_peer"] = peer
        result["changed"] = False
        return result
