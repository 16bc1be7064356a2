"""Collect every host's preflight result into one table (host, check, found, expected, fix) and one JSON report
(schema 2: each row also names its dies, peers and per-die entries and has a status; docs/contracts.md section 8).
Lost pings are attributed from the entries and the contract's table of checks, never from the text."""

from __future__ import annotations

import json
import os
from typing import Any

from ansible.plugins.action import ActionBase

# The report's contract (the control node runs Ansible from the project's virtual environment).
from verl_recipe.contracts.preflight import PING, SCHEMA, entries_text, explains_pings, valid_entries

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
    rows = [normalize({**c, "host": name}) for c in checks if isinstance(c, dict)]
    if len(rows) < len(checks):  # a module result of another shape (another version of the module on the host)
        rows.append(
            _row(
                name,
                "preflight",
                f"{len(checks) - len(rows)} check result(s) that are not rows",
                "preflight module rows",
                "run deploy.yml from one checkout: the module on the host is not this one's",
            )
        )
    return rows


def normalize(row: dict[str, Any]) -> dict[str, Any]:
    """Every row carries the same fields in the same order (the JSON report is read by other tools)."""
    ok = bool(row.get("ok"))
    return {
        "host": str(row.get("host", "")),
        "check": str(row.get("check", "")),
        "status": "ok" if ok else "failed",
        "ok": ok,
        "dies": [int(d) for d in _items(row.get("dies")) if _die_index(d)],
        "peers": [str(x) for x in _items(row.get("peers"))],
        "entries": valid_entries(row.get("entries")),
        "found": str(row.get("found", "")),
        "expected": str(row.get("expected", "")),
        "fix": "" if ok else str(row.get("fix", "")),
    }


def _items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _die_index(value: Any) -> bool:
    """A die index as the module writes it (an int; ASCII digits from an older result)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, str) and value.isascii() and value.isdigit())


def _row(host: str, check: str, found: str, expected: str, fix: str) -> dict[str, Any]:
    return normalize({"host": host, "check": check, "ok": False, "found": found, "expected": expected, "fix": fix})


def set_ok(row: dict[str, Any], ok: bool, found: str, fix: str = "", peers: list[str] | None = None) -> None:
    row.update(ok=ok, status="ok" if ok else "failed", found=found, fix="" if ok else fix)
    if peers is not None:
        row["peers"] = peers


CROSS_HOST = {
    "tls": (
        "npu_tls",
        "TLS switch",
        "make the TLS switch the same on every host (`hccn_tool -i <die> -tls -s enable <0|1>`): HCCL links "
        "between hosts with different switches never establish (EI0006 socket timeout)",
    ),
    "netmask": (
        "npu_netmask",
        "netmask",
        "give every die the cluster's NPU netmask in /etc/hccn.conf (netmask_<die>) and run "
        "`hccn_tool -a -cfg recovery`",
    ),
}


def compare_hosts(rows: list[dict[str, Any]], nodes: list[str], nets: dict[str, dict[str, str]]) -> None:
    """Settings that must agree between hosts: the value most hosts have is expected (a tie: the first host's in
    rank order), and every host with another value fails its row, naming the hosts it disagrees with."""
    for key, (name, label, fix) in CROSS_HOST.items():
        values = {h: str(nets[h][key]) for h in nodes if isinstance(nets.get(h), dict) and key in nets[h]}
        if not values:
            continue
        counts: dict[str, int] = {}
        for h in nodes:
            if h in values:
                counts[values[h]] = counts.get(values[h], 0) + 1
        want = max(counts, key=lambda v: (counts[v], -nodes.index(next(h for h in nodes if values.get(h) == v))))
        for h in nodes:
            if h not in values:
                continue
            row = next((r for r in rows if r["host"] == h and r["check"] == name), None)
            if row is None:
                row = normalize({"host": h, "check": name, "ok": True, "expected": "", "found": ""})
                rows.append(row)
            agree = [x for x in nodes if values.get(x) == want and x != h]
            row["expected"] = f"the same {label} on every host ({want} on {counts[want]} of {len(values)})"
            if values[h] == want and row["ok"] is not False:
                set_ok(row, True, f"{label} {values[h]}, as on {len(agree)} other host(s)")
            elif values[h] != want:
                set_ok(row, False, f"{label} {values[h]}; {', '.join(agree) or 'the others'}: {want}", fix, agree)


def render(rows: list[dict[str, Any]]) -> str:
    """Plain-text table with a header; cells are single lines."""
    table = [list(COLUMNS)] + [[str(r[c]).replace("\n", " ") for c in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    lines = [" | ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in table]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def attribute_pings(rows: list[dict[str, Any]], ping_ips: dict[str, list[str]], link: str = "roce") -> None:
    """A lost ping from die i of host A to host B is B's fault when B's die i (or B itself) already failed a check
    that explains lost pings on this path (the contract's CHECKS): each ping entry gets its peer host and die, and
    those the peer's own fault explains are marked `explained`, so the healthy sender is reported healthy. ping_ips
    are the addresses the pings went to (a3_vnic_ips in hccs mode)."""
    owner = {ip: (host, die) for host, ips in ping_ips.items() for die, ip in enumerate(ips)}
    broken_hosts = {r["host"] for r in rows if not r["ok"] and r["check"] in ("ssh", "preflight")}
    broken_dies = {(r["host"], d) for r in rows if not r["ok"] and explains_pings(r["check"], link) for d in r["dies"]}
    for r in rows:
        if r["check"] != PING or r["ok"]:
            continue
        kept, explained = [], []
        for entry in r["entries"]:
            peer = owner.get(entry.get("address", ""))
            if peer:
                entry["peer"], entry["peer_die"] = peer
                if peer[0] in broken_hosts or peer in broken_dies or (r["host"], entry["die"]) in broken_dies:
                    entry["explained"] = True
                    explained.append(entry)
                    continue
            kept.append(entry)
        if not r["entries"]:
            continue  # a ping row without entries (an older module): its text stands as it is
        found = (
            entries_text(kept) if kept else "lost pings explained by faults listed above: " + entries_text(explained)
        )
        set_ok(r, not kept, found, r["fix"])


def summarize(
    nodes: list[str], results: dict[str, Any], npu_ips: dict[str, list[str]] | None = None, link: str = "roce"
) -> dict[str, Any]:
    """The report: `rows` (every check of every host, each {host, check, status, ok, dies, peers, found,
    expected, fix}), `failures` (the failed rows), `failed_hosts`, `healthy_hosts`, `device_queries` per host."""
    rows = []
    for name in nodes:
        rows += host_rows(name, results.get(name))
    nets: dict[str, dict[str, str]] = {
        n: r["net"] for n, r in results.items() if isinstance(r, dict) and isinstance(r.get("net"), dict)
    }
    compare_hosts(rows, nodes, nets)
    attribute_pings(rows, npu_ips or {}, link)
    order = {n: i for i, n in enumerate(nodes)}
    rows.sort(key=lambda r: order.get(r["host"], len(nodes)))
    failed = [r for r in rows if not r["ok"]]
    bad_hosts = sorted({r["host"] for r in failed}, key=nodes.index)
    healthy = [n for n in nodes if n not in bad_hosts]
    queries = {
        n: r["device_queries"]
        for n, r in results.items()
        if isinstance(r, dict) and isinstance(r.get("device_queries"), dict)
    }
    return {
        "schema": SCHEMA,
        "rows": rows,
        "failures": failed,
        "failed_hosts": bad_hosts,
        "healthy_hosts": healthy,
        "device_queries": queries,
    }


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
        # the pings went to the vNIC addresses in hccs mode: those name the peer die of a lost one
        link = str(self._templar.template(task_vars.get("site_inter_server_link", "roce")))
        ping_ips = {n: list(hostvars[n].get("a3_vnic_ips") or []) for n in nodes} if link == "hccs" else npu_ips
        summary = summarize(nodes, results, ping_ips, link)
        report = args.get("report_file")
        page_note = ""
        if report:
            simulated = self._templar.template(task_vars.get("site_simulated", False))
            summary["meta"] = report_meta(task_vars, nodes, results, npu_ips, str(simulated).lower() in ("true", "1"))
            os.makedirs(os.path.dirname(report), exist_ok=True)
            with open(report, "w", encoding="utf-8") as fh:
                json.dump(summary, fh, indent=1)
            page_note = "\n" + write_readiness_page(report)
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
                + page_note
            )
        else:
            result["msg"] = (
                f"preflight OK: {len(nodes)} hosts x {checks_per_host} checks passed (healthy hosts: {healthy})"
                + page_note
            )
        return result


def _readiness_page() -> Any:
    """verl_recipe.pages.readiness (standard library only), from the project's virtual environment the control node
    runs Ansible from (validate_inventory refuses a Python without the package before any host is contacted)."""
    from verl_recipe.pages import readiness

    return readiness


def report_meta(
    task_vars: dict[str, Any],
    nodes: list[str],
    results: dict[str, Any],
    npu_ips: dict[str, list[str]],
    simulated: bool,
) -> dict[str, Any]:
    """What the readiness page draws besides the rows: inventory, time, commit, ranks, NPU addresses, ping plan."""
    hostvars = task_vars["hostvars"]
    hosts = {}
    for n in nodes:
        got = results.get(n)
        res: dict[str, Any] = got if isinstance(got, dict) else {}
        args = (res.get("invocation") or {}).get("module_args") or {}
        hosts[n] = {
            "rank": hostvars[n].get("a3_node_rank"),
            "npu_ips": npu_ips.get(n, []),
            # the pings this host was told to send (module arguments) and its ping peer: the tried pairs
            **{k: v for src in (args, res) for k, v in src.items() if k.startswith("ping")},
        }
    inventory = os.path.basename(str(task_vars.get("inventory_dir") or "").rstrip("/")) or None
    # Which host and die each NPU address belongs to, and the dies of a host: the page reads these, never text.
    addresses = {ip: [host, die] for host in nodes for die, ip in enumerate(npu_ips.get(host, []))}
    dies_per_host = max((len(npu_ips.get(host, [])) for host in nodes), default=0)
    return _readiness_page().report_meta(
        "preflight",
        simulated=simulated,
        commit_from=task_vars.get("playbook_dir"),
        inventory=inventory,
        hosts=hosts,
        addresses=addresses,
        dies_per_host=dies_per_host,
    )


def write_readiness_page(report: str) -> str:
    """The page next to the JSON report; a page that cannot be written is said, never fatal to the preflight."""
    try:
        page = _readiness_page()
        return page.page_line(page.write_page([report]))
    except Exception as exc:  # noqa: BLE001 - the table and JSON above stay the record; say why the page is missing
        return f"readiness page not written ({exc.__class__.__name__}: {exc}); run `verl-recipe report {report}`"
