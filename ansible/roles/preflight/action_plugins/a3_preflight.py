"""Controller side of `a3_preflight`: plan each host's NPU pings, pass the cluster addresses, and judge the host's
clock against the control node."""

from __future__ import annotations

import time
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase


def ping_plan(
    order: list[str], me: str, dies: int, rotation: int, addresses: dict[str, list[str]], path: str = "roce"
) -> list[dict[str, Any]]:
    """One ping per local die, to another host and die, one after another on the host.

    Die d of the host at position i (rank order) pings host i + 1 + (d + rotation) mod (N - 1), die
    (d + rotation) mod dies. With N - 1 <= dies every host reaches every other host in one run, and since the
    mapping is a bijection every die of every host is pinged exactly once. The rotation (a new one each day by
    default) moves both the peer and the die index, so successive runs pair die d with every other index."""
    n = len(order)
    if n < 2 or me not in order:
        return []
    i = order.index(me)
    plan = []
    for d in range(dies):
        offset = 1 + (d + rotation) % (n - 1)
        peer = order[(i + offset) % n]
        peer_die = (d + rotation) % dies
        ips = addresses.get(peer) or []
        if peer_die < len(ips):
            plan.append({"die": d, "peer": peer, "peer_die": peer_die, "address": str(ips[peer_die]), "path": path})
    return plan


def coverage(order: list[str], dies: int, rotation: int) -> dict[str, Any]:
    """Host pairs and receiving dies one run of the plan covers (the bench and docs quote it)."""
    addresses = {h: [f"{h}/{d}" for d in range(dies)] for h in order}
    pairs, received = set(), set()
    for h in order:
        for item in ping_plan(order, h, dies, rotation, addresses):
            pairs.add(frozenset((h, item["peer"])))
            received.add((item["peer"], item["peer_die"]))
    n = len(order)
    return {
        "hosts": n,
        "pings_per_host": dies if n > 1 else 0,
        "host_pairs": len(pairs),
        "host_pairs_total": n * (n - 1) // 2,
        "dies_pinged": len(received),
        "dies_total": n * dies,
    }


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
        "status": "ok" if ok else "failed",
        "dies": [],
        "peers": [],
        "found": f"clock offset {offset:+.1f} s vs control node (no NTP status readable)",
        "expected": f"|offset| <= {max_skew:g} s",
        "fix": "" if ok else "run chrony or ntpd on every host and the control node",
    }


def rotation_of(value: Any) -> int:
    """`auto`: the day number, so each day's run pairs other die indices; an integer pins it (tests, repeats)."""
    if str(value) == "auto":
        return int(time.time() // 86400)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AnsibleActionFail(f"preflight_ping_rotation={value!r}: use auto or a whole number") from None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        max_skew = float(args.pop("max_clock_skew_s", 2))
        rotation = rotation_of(args.pop("ping_rotation", "auto"))
        hostvars = task_vars["hostvars"]
        nodes = [(int(hostvars[h]["a3_node_rank"]), h) for h in task_vars["groups"]["a3_nodes"]]
        order = [name for _, name in sorted(nodes)]
        me = task_vars["inventory_hostname"]
        path = str(args.get("inter_server_link", "roce"))
        key = "a3_vnic_ips" if path == "hccs" else "a3_npu_ips"
        addresses = {h: list(hostvars[h].get(key) or []) for h in order}
        args.setdefault("ping_plan", ping_plan(order, me, int(args["expected_dies"]), rotation, addresses, path))
        if path == "hccs":  # the module compares each die's vNIC with what the peers will ping
            args.setdefault("vnic_ips", [str(x) for x in addresses[me]])
        args.setdefault("cluster_peers", [str(hostvars[h]["a3_cluster_ip"]) for h in order if h != me])
        sent = time.time()
        out = self._execute_module(module_name="a3_preflight", module_args=args, task_vars=task_vars)
        returned = time.time()
        result.update(out)
        if out.get("failed"):
            return result
        if out.get("clock_source") == "none":
            result["checks"].append(clock_check(float(out["clock"]), sent, returned, max_skew))
        result["ping_rotation"] = rotation
        result["ping_plan"] = args["ping_plan"]  # the pairs tried (the readiness page draws them)
        result["changed"] = False
        return result
