"""The readiness page as one self-contained HTML file (its CSS and script are package data, inlined), and the
`verl-recipe report JSON...` command that writes it."""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...contracts.records import finite_number as _num
from ...exitcodes import EXIT_BAD_INPUT, EXIT_OK
from ...problems import error
from ..kit import BASE_CSS, utc_now, write_atomic
from ..kit import esc as _e
from ..kit import short as _short
from .load import PAGE_SUFFIX, SEVERITY, ReportError, Source, load
from .model import Model, PageCell, Pair, build

# -------------------------------------------------------------------------------------------------------- render

# The page's own style and script, package data beside this module (inlined: the page loads nothing).
_HERE = Path(__file__).parent
CSS = BASE_CSS + (_HERE / "page.css").read_text(encoding="utf-8")

SCRIPT = (_HERE / "page.js").read_text(encoding="utf-8")

MARK = {"fail": "\u2715", "warn": "!", "nodata": "?", "ok": "", "skip": "", "untried": "", "self": "\u00b7"}


class Page:
    def __init__(self, model: Model) -> None:
        self.m = model
        self.details: dict[str, dict[str, Any]] = {}
        self.row_ids: dict[str, int] = {}

    def detail(self, key: str, title: str, rows: list[list[str]], text: str = "") -> str:
        """Register what a click on `key` shows; returns the hover text. Rows are stored once (a 16 x 16 page
        repeats the same passed check on every die)."""
        ids = [self.row_ids.setdefault(json.dumps(r), len(self.row_ids)) for r in rows]
        self.details[key] = {"title": title, "rows": ids, "text": text}
        lines = [title] + [f"{r[0]}: {r[1]} \u2014 {_short(r[2], 90)}" for r in rows if r[1] not in ("ok", "skip")]
        if text:
            lines.append(text)
        if rows and all(r[1] in ("ok", "skip") for r in rows):
            lines.append(f"all {len(rows)} checks passed")
        return _e("\n".join(lines))

    # -- header
    def header(self) -> str:
        m = self.m
        inventories = sorted({str(s.meta["inventory"]) for s in m.sources if s.meta.get("inventory")})
        commits = sorted({str(s.meta["commit"]) for s in m.sources if s.meta.get("commit")})
        title = "Cluster readiness"
        if inventories:
            title += ": " + ", ".join(inventories)
        sim = '<span class="sim">SIMULATED cluster</span>' if m.simulated else ""
        rows = [
            ("inventory", ", ".join(inventories) or "not recorded in the reports"),
            ("hosts", f"{len(m.hosts) or len(self.rehearsal_nodes())} hosts x {m.dies} dies"),
            ("page made", utc_now()),
            ("commit", ", ".join(commits) or "not recorded in the reports"),
        ]
        for s in m.sources:
            when = s.meta.get("generated") or "time not recorded"
            rows.append((f"{s.kind} report", f"{s.path} ({when})"))
        meta = "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in rows)
        return (
            f'<header class="top"><h1>{_e(title)}{sim}</h1>'
            f'<table class="meta" id="meta">{meta}</table>{self.cards()}</header>'
        )

    def rehearsal_nodes(self) -> list[dict[str, Any]]:
        return [n for s in self.m.rehearsals for n in s.data["nodes"]]

    def cards(self) -> str:
        m = self.m
        cards = []
        if m.hosts:
            total = len(m.hosts) * m.dies
            bad = sum(1 for h in m.hosts for d in range(m.dies) if m.die_status(h, d) in ("fail", "warn"))
            nodata = sum(1 for h in m.hosts for d in range(m.dies) if m.die_status(h, d) == "nodata")
            cards.append(("fail" if bad else "ok", f"<b>{total - bad - nodata}</b> of {total} dies ready"))
            if bad:
                cards.append(("fail", f"<b>{bad}</b> dies failing"))
            if nodata:
                cards.append(("warn", f"<b>{nodata}</b> dies without data"))
            tried = [p for p in m.pairs.values() if p.tried]
            lost = [p for p in tried if p.lost]
            cards.append(("fail" if lost else "ok", f"<b>{len(lost)}</b> of {len(tried)} host pairs losing pings"))
            hbad = sum(1 for h in m.hosts if m.host_status(h) in ("fail", "warn"))
            cards.append(("fail" if hbad else "ok", f"<b>{hbad}</b> of {len(m.hosts)} hosts with host-level problems"))
        for s in m.rehearsals:
            nodes = s.data["nodes"]
            bad_nodes = [n for n in nodes if n.get("problems")]
            state = "fail" if bad_nodes or s.data["summary"].get("error") else "ok"
            cards.append((state, f"rehearsal: <b>{len(nodes) - len(bad_nodes)}</b> of {len(nodes)} nodes clean"))
        return '<div class="cards">' + "".join(f'<div class="card {c}">{t}</div>' for c, t in cards) + "</div>"

    # -- dies
    def die_grid(self) -> str:
        m = self.m
        if not m.hosts or not m.dies:
            return ""
        cols = f"grid-template-columns:max-content repeat({m.dies},26px)"
        out = [f'<section id="dies"><h2>Dies: {len(m.hosts)} hosts x {m.dies} dies, worst check per die</h2>']
        out.append(
            self.legend(
                [
                    ("ok", "all checks passed"),
                    ("fail", "a check failed"),
                    ("warn", "warning"),
                    ("nodata", "no die data (host unreachable?)"),
                ]
            )
        )
        out.append(f'<div class="grid" style="{cols}"><div class="colh">host \\ die</div>')
        out += [f'<div class="colh">{d}</div>' for d in range(m.dies)]
        for h in m.hosts:
            hs = m.host_status(h)
            out.append(f'<div class="rowh {hs}" title="{_e(h)}: host-level checks {hs}">{_e(h)}</div>')
            for d in range(m.dies):
                st = m.die_status(h, d)
                checks = m.die_checks.get((h, d), [])
                rows = sorted(
                    ([c.check, c.status, text, c.expected, c.fix] for c, text in checks),
                    key=lambda r: -SEVERITY[r[1]],
                )
                note = (
                    ""
                    if checks
                    else "no die check reported for this host: "
                    + "; ".join(f"{c.check}: {c.found}" for c in m.host_checks.get(h, []) if c.status == "fail")
                )
                key = f"d:{h}:{d}"
                title = self.detail(key, f"{h} die {d}: {st}", rows, note)
                out.append(
                    f'<button type="button" class="cell {st}" data-k="{_e(key)}" data-host="{_e(h)}" data-die="{d}" '
                    f'data-status="{st}" title="{title}">{MARK[st]}</button>'
                )
        out.append("</div></section>")
        return "".join(out)

    def legend(self, items: list[tuple[str, str]]) -> str:
        return (
            '<div class="legend">' + "".join(f'<span><i class="st {c}"></i>{_e(t)}</span>' for c, t in items) + "</div>"
        )

    # -- pairs
    def pair_matrix(self) -> str:
        m = self.m
        if len(m.hosts) < 2:
            return ""
        n = len(m.hosts)
        cols = f"grid-template-columns:max-content repeat({n},26px)"
        tried = sum(1 for p in m.pairs.values() if p.tried)
        lost = sum(1 for p in m.pairs.values() if p.lost)
        out = [
            f'<section id="pairs"><h2>NPU reachability: {tried} of {n * (n - 1)} ordered host pairs tried, '
            f"{lost} with lost pings</h2>"
        ]
        out.append(
            self.legend(
                [
                    ("ok", "tried, no loss"),
                    ("fail", "lost pings (number = die pairs)"),
                    ("warn", "lost, explained by the target die's own fault"),
                    ("untried", "not tried"),
                ]
            )
        )
        out.append(f'<div class="grid" style="{cols}"><div class="colh">from \\ to</div>')
        out += [f'<div class="colh" title="{_e(h)}">{i + 1}</div>' for i, h in enumerate(m.hosts)]
        for i, a in enumerate(m.hosts):
            out.append(f'<div class="rowh">{i + 1} {_e(a)}</div>')
            for b in m.hosts:
                if a == b:
                    out.append(f'<div class="cell self" title="{_e(a)}">{MARK["self"]}</div>')
                    continue
                p = m.pairs.get((a, b), Pair())
                st = p.status
                rows = [
                    ["ping", "fail", f"die {s} -> die {t}: {txt}", "0% loss", "check the NPU network route"]
                    for (s, t), txt in sorted(p.lost.items())
                ] + [
                    ["ping", "warn", f"die {s} -> die {t}: {txt}", "0% loss", "fix the target die first"]
                    for (s, t), txt in sorted(p.explained.items())
                ]
                pairs = ", ".join(f"{s}->{t}" for s, t in sorted(p.tried)) or "none"
                text = f"die pairs tried: {pairs}"
                key = f"p:{a}:{b}"
                title = self.detail(key, f"{a} -> {b}: {len(p.tried)} die pairs tried, {len(p.lost)} lost", rows, text)
                label = str(len(p.lost) or len(p.explained)) if st in ("fail", "warn") else ""
                out.append(
                    f'<button type="button" class="cell {st}" data-k="{_e(key)}" data-from="{_e(a)}" '
                    f'data-to="{_e(b)}" data-status="{st}" title="{title}">{label}</button>'
                )
        out.append("</div>")
        out.append(self.ping_plan_note())
        if not m.schedule_known:
            out.append(
                '<p class="note">The reports do not record the ping schedule: only pairs named by a lost '
                "ping are drawn.</p>"
            )
        out.append("</section>")
        return "".join(out)

    def ping_plan_note(self) -> str:
        """What the recorded ping plan covered (as the bench's ping coverage counts it): the pings sent, the host
        pairs (either way) and the dies pinged, of all there are."""
        m = self.m
        if not m.schedule_known:
            return ""
        tried = {k: p.tried for k, p in m.pairs.items() if p.tried}
        senders = {a for a, _ in tried}
        pings = sum(len({s for s, _ in t}) for t in tried.values())
        pairs = {frozenset(k) for k in tried}
        dies = {(b, t) for (_, b), got in tried.items() for _, t in got}
        n = len(m.hosts)
        rotations = {
            str(info["ping_rotation"])
            for s in m.sources
            if isinstance(s.meta.get("hosts"), dict)
            for info in s.meta["hosts"].values()
            if isinstance(info, dict) and isinstance(info.get("ping_rotation"), int | str)
        }
        rotation = f" (rotation {_e(rotations.pop())})" if len(rotations) == 1 else ""
        return (
            f'<p class="note" id="ping-plan">Ping plan{rotation}: {pings} pings from {len(senders)} of {n} hosts; '
            f"{len(pairs)} of {n * (n - 1) // 2} host pairs and {len(dies)} of {n * m.dies} dies pinged.</p>"
        )

    # -- host badges
    def badges(self) -> str:
        m = self.m
        names: list[str] = []
        for h in m.hosts:
            names += [c.check for c in m.host_checks.get(h, []) if c.check not in names]
        if not names:
            return ""
        by_host: dict[str, dict[str, PageCell]] = {}
        for h in m.hosts:
            for hc in m.host_checks.get(h, []):
                by_host.setdefault(h, {}).setdefault(hc.check, hc)
        same: list[tuple[str, list[PageCell]]] = []
        varying: list[tuple[str, list[PageCell]]] = []
        for n in names:
            found = [by_host[h][n] for h in m.hosts if n in by_host.get(h, {})]
            uniform = all(c.status in ("ok", "skip") and c.found == found[0].found for c in found)
            (same if uniform and len(m.hosts) > 1 else varying).append((n, found))
        out = ['<section id="hosts"><h2>Hosts: host-level checks</h2>']
        if same:
            out.append('<div class="same" id="same-on-all">')
            for n, found in same:
                key = f"h:*:{n}"
                where = f"the same on {len(found)} of {len(m.hosts)} hosts"
                title = self.detail(key, f"{n}: {where}", [found[0].cells()], ", ".join(c.host for c in found))
                out.append(
                    f'<button type="button" class="badge ok" data-k="{_e(key)}" data-check="{_e(n)}" '
                    f'data-status="ok" title="{title}">{_e(n)}: {_e(_short(found[0].found, 48))} '
                    f"({len(found)} hosts)</button>"
                )
            out.append("</div>")
        if varying:
            out.append('<table class="badges"><thead><tr><th class="hn">host</th>')
            out += [f"<th>{_e(n.replace('_', ' '))}</th>" for n, _ in varying]
            out.append("</tr></thead><tbody>")
            for h in m.hosts:
                out.append(f'<tr><td class="hn" title="{_e(h)}">{_e(h)}</td>')
                for n, _ in varying:
                    c = by_host.get(h, {}).get(n)
                    if c is None:
                        out.append(
                            f'<td><span class="badge nodata" title="{_e(h)}: {_e(n)} not reported">-</span></td>'
                        )
                        continue
                    key = f"h:{h}:{n}"
                    title = self.detail(key, f"{h}: {n} {c.status}", [c.cells()])
                    out.append(
                        f'<td><button type="button" class="badge {c.status}" data-k="{_e(key)}" data-host="{_e(h)}" '
                        f'data-check="{_e(n)}" data-status="{c.status}" title="{title}">{_e(_short(c.found, 40))}'
                        "</button></td>"
                    )
                out.append("</tr>")
            out.append("</tbody></table>")
        out.append("</section>")
        return "".join(out)

    # -- rehearsal
    def rehearsal(self) -> str:
        return "".join(self._rehearsal(s) for s in self.m.rehearsals)

    def _rehearsal(self, s: Source) -> str:
        summ, nodes = s.data["summary"], s.data["nodes"]
        timed = [n for n in nodes if isinstance(n.get("allreduce_ms"), int | float)]
        out = [
            f'<section class="rehearsal" data-source="{_e(s.path)}"><h2>Rehearsal: {_e(summ.get("nnodes", "?"))} '
            f"nodes x {_e(summ.get('dies_per_node', '?'))} bundles, {_e(summ.get('backend', '?'))} all-reduce of "
            f"{_e(summ.get('tensor_mb', '?'))} MB over {_e(summ.get('world', '?'))} ranks</h2>"
        ]
        if summ.get("error"):
            out.append(f'<p class="card fail" id="rehearsal-error">{_e(summ["error"])}</p>')
        if timed:
            slow = max(timed, key=lambda n: n["allreduce_ms"])
            times = sorted(n["allreduce_ms"] for n in timed)
            median = statistics.median(times)
            ratio = slow["allreduce_ms"] / median if median else 1.0
            out.append(
                f'<p class="slowest" id="slowest" data-node="{_e(slow["node"])}">slowest node: <b>{_e(slow["node"])}'
                f"</b>, {slow['allreduce_ms']:.3f} ms, {ratio:.2f}x the median ({median:.3f} ms)</p>"
            )
            max_ms = max(times) or 1.0
            max_bw = max((n.get("busbw_gbps") or 0.0) for n in timed) or 1.0
            out.append(
                '<div class="bars"><div class="hd">node</div><div class="hd">all-reduce time (ms)</div>'
                '<div class="hd">bus bandwidth (GB/s)</div>'
            )
            for n in nodes:
                ms, bw = n.get("allreduce_ms"), n.get("busbw_gbps")
                cls = "fail" if n.get("problems") else ("slow" if n is slow else "")
                key = f"r:{s.path}:{n['node']}"
                rows = [
                    ["rehearsal", "fail", p, "no problem", "see the rehearsal report"] for p in n.get("problems") or []
                ]
                title = self.detail(
                    key,
                    f"{n['node']} ({n.get('ip', '?')}): {n.get('bundles', 0)} bundles",
                    rows,
                    f"all-reduce {ms} ms, bus bandwidth {bw} GB/s, algorithm bandwidth {n.get('algbw_gbps')} GB/s",
                )
                wms = 100.0 * (ms or 0) / max_ms
                wbw = 100.0 * (bw or 0) / max_bw
                out.append(
                    f'<div class="rowh {"fail" if n.get("problems") else ""}" data-k="{_e(key)}" title="{title}">'
                    f"{_e(n['node'])}</div>"
                    f'<div class="bar {cls}" data-node="{_e(n["node"])}"><span style="width:{wms:.1f}%"></span>'
                    f"<em>{'-' if ms is None else f'{ms:.3f}'}</em></div>"
                    f'<div class="bar {cls}"><span style="width:{wbw:.1f}%"></span>'
                    f"<em>{'-' if bw is None else f'{bw:.3f}'}</em></div>"
                )
            out.append("</div>")
        out.append(self.alltoall(s))
        out.append(self.placement(s))
        out.append("</section>")
        return "".join(out)

    def alltoall(self, s: Source) -> str:
        """The expert-parallel all-to-alls: per node its slowest pattern's median time, the bus bandwidth that gives
        and the peer of its slowest pair, as bars like the all-reduce's (the slowest node amber, a node with problems
        red); then one row per pattern. A report without them (older, or a layout without expert parallelism, or a
        rehearsal stopped before its collectives) says so."""
        summ, nodes = s.data["summary"], s.data["nodes"]
        patterns = summ.get("alltoall") or []
        timed = [(n, ms) for n in nodes if (ms := _num(n.get("alltoall_ms"))) is not None]
        head = '<h2 class="a2a-h" style="margin-top:12px">All-to-all of the expert-parallel groups'
        if not patterns and not timed:
            return (
                f"{head}</h2>"
                '<p class="note a2a-absent">No all-to-all figures in this report: the layout has no expert-parallel '
                "groups across nodes, the rehearsal stopped before its collectives, or the report was written before "
                "the rehearsal timed them.</p>"
            )
        out = [f"{head} (per node: its slowest pattern)</h2>"]
        if timed:
            slow, slow_ms = max(timed, key=lambda x: x[1])
            median = statistics.median(ms for _, ms in timed)
            ratio = slow_ms / median if median else 1.0
            out.append(
                f'<p class="slowest a2a-slowest" data-node="{_e(slow["node"])}">slowest all-to-all node: '
                f"<b>{_e(slow['node'])}</b>, {slow_ms:.3f} ms, {ratio:.2f}x the median ({median:.3f} ms)</p>"
            )
        else:
            slow = None
        max_ms = max((ms for _, ms in timed), default=0.0) or 1.0
        max_bw = max((_num(n.get("alltoall_busbw_gbps")) or 0.0 for n in nodes), default=0.0) or 1.0
        out.append(
            '<div class="bars a2a"><div class="hd">node</div><div class="hd">all-to-all time (ms)</div>'
            '<div class="hd">bus bandwidth (GB/s)</div><div class="hd">slowest peer</div>'
        )
        for n in nodes:
            ms, bw = _num(n.get("alltoall_ms")), _num(n.get("alltoall_busbw_gbps"))
            peer = n.get("alltoall_slowest_peer")
            failed = bool(n.get("problems"))
            cls = "fail" if failed else ("slow" if n is slow else "")
            key = f"a:{s.path}:{n['node']}"
            rows = [["rehearsal", "fail", p, "no problem", "see the rehearsal report"] for p in n.get("problems") or []]
            figures = (
                f"all-to-all {ms} ms (its slowest pattern's median), bus bandwidth {bw} GB/s, slowest peer "
                f"{peer or '-'}"
                if ms is not None
                else "no all-to-all figure for this node (its ranks did not report one)"
            )
            title = self.detail(key, f"{n['node']} ({n.get('ip', '?')}): all-to-all", rows, figures)
            wms, wbw = 100.0 * (ms or 0) / max_ms, 100.0 * (bw or 0) / max_bw
            out.append(
                f'<div class="rowh {"fail" if failed else ""}" data-k="{_e(key)}" title="{title}">{_e(n["node"])}</div>'
                f'<div class="bar {cls}" data-node="{_e(n["node"])}"><span style="width:{wms:.1f}%"></span>'
                f"<em>{'-' if ms is None else f'{ms:.3f}'}</em></div>"
                f'<div class="bar {cls}"><span style="width:{wbw:.1f}%"></span>'
                f"<em>{'-' if bw is None else f'{bw:.3f}'}</em></div>"
                f'<div class="peer">{_e(peer or "-")}</div>'
            )
        out.append("</div>")
        if patterns:
            out.append(self.alltoall_patterns(s, patterns))
        return "".join(out)

    def alltoall_patterns(self, s: Source, patterns: list[dict[str, Any]]) -> str:
        """One row per pattern (the summary's): its groups, how they were rehearsed, the median and slowest node and
        the slowest pair; a click lists every node's figures of that pattern."""
        failed = {n["node"] for n in s.data["nodes"] if n.get("problems")}
        cols = ("pattern", "ranks per group", "groups", "rehearsed", "median node", "slowest node", "slowest pair")
        head = "".join(f"<th>{h}</th>" for h in cols)
        body = []
        for i, pat in enumerate(patterns):
            rows = [r for r in pat.get("nodes") or [] if _num(r.get("ms")) is not None]
            done = pat.get("rehearsed_ranks") or []
            sizes = "/".join(sorted({str(len(g)) for g in done}))
            how = (
                f"{len(done)} group{'s' if len(done) > 1 else ''} of {sizes} ranks"
                if done
                else "each within one node: not rehearsed"
            )
            median = f"{statistics.median(_num(r['ms']) or 0.0 for r in rows):.3f} ms" if rows else "-"
            slow_cell = "<td>-</td>"
            if rows:
                worst = max(rows, key=lambda r: _num(r["ms"]) or 0.0)
                bw = _num(worst.get("busbw_gbps"))
                who = str(worst.get("node", "?"))
                st = "fail" if who in failed else "slow"
                slow_cell = (
                    f'<td class="{st}" data-node="{_e(who)}"><b>{_e(who)}</b> '
                    f"{_num(worst['ms']) or 0.0:.3f} ms, {'-' if bw is None else f'{bw:.3f}'} GB/s</td>"
                )
            sp = pat.get("slowest_pair")
            pair = (
                f"{_e(sp['nodes'][0])} \u2194 {_e(sp['nodes'][1])}, {_num(sp.get('ms')) or 0.0:.3f} ms"
                if isinstance(sp, dict) and isinstance(sp.get("nodes"), list) and len(sp["nodes"]) == 2
                else "-"
            )
            name = str(pat.get("pattern", "?"))
            lines = [
                f"{r.get('node', '?')}: {_num(r['ms']) or 0.0:.3f} ms, {_num(r.get('busbw_gbps'))} GB/s bus, "
                f"slowest peer {r.get('peer') or '-'}"
                for r in rows
            ]
            key = f"t:{s.path}:{i}"
            title = self.detail(key, f"all-to-all {name}: every node", [], "\n".join(lines) or "no node timed it")
            body.append(
                f'<tr data-k="{_e(key)}" data-pattern="{_e(name)}" title="{title}"><td>{_e(name)}</td>'
                f"<td>{_e(pat.get('size', '?'))}</td><td>{_e(pat.get('groups', '?'))}</td><td>{_e(how)}</td>"
                f"<td>{median}</td>{slow_cell}<td>{pair}</td></tr>"
            )
        return f'<table class="a2a-patterns"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'

    def placement(self, s: Source) -> str:
        summ, nodes = s.data["summary"], s.data["nodes"]
        groups = summ.get("placement")
        dies = int(summ.get("dies_per_node") or 0)
        if not isinstance(groups, list):  # older reports: one group per node, in node order
            groups = [{"group": i, "node": n["node"], "ip": n.get("ip", "")} for i, n in enumerate(nodes)]
        problems = {n["node"]: " ".join(n.get("problems", [])) for n in nodes}
        out = ['<h2 style="margin-top:12px">Placement groups (STRICT_PACK, one per node; a square is a bundle)</h2>']
        for g in groups:
            node = str(g.get("node", "?"))
            bundles = g.get("bundles") if isinstance(g.get("bundles"), list) else [{"bundle": b} for b in range(dies)]
            out.append(
                f'<div class="pg" data-group="{_e(g.get("group"))}"><span class="lbl">group '
                f"{_e(g.get('group'))} \u2192 {_e(node)} ({_e(g.get('ip', ''))})</span>"
            )
            for b in bundles:
                idx = b.get("bundle")
                bad = f"bundle {idx}:" in problems.get(node, "") or f"bundle {idx} " in problems.get(node, "")
                elsewhere = b.get("ip") and g.get("ip") and b.get("ip") != g.get("ip")
                st = "fail" if bad or elsewhere else "ok"
                where = f"ran on {b.get('ip')}" if b.get("ip") else f"on {node}"
                npu = f", NPU {b.get('npu')}" if b.get("npu") not in (None, []) else ""
                tip = f"group {g.get('group')} bundle {idx} {where}{npu}"
                out.append(f'<span class="b st {st}" title="{_e(tip)}"></span>')
            out.append("</div>")
        return "".join(out)

    # -- problems as text
    def problems(self) -> str:
        rows = [[c.host, c.check, c.status, c.found, c.expected, c.fix] for c in self.m.failures]
        for s in self.m.rehearsals:
            if s.data["summary"].get("error"):
                rows.append(["cluster", "rehearsal", "fail", s.data["summary"]["error"], "placed", ""])
            for n in s.data["nodes"]:
                rows += [[n["node"], "rehearsal", "fail", p, "no problem", ""] for p in n.get("problems", [])]
        if not rows:
            return '<section id="problems"><h2>Problems</h2><p>None: every reported check passed.</p></section>'
        head = "".join(
            f"<th{w}>{h}</th>"
            for h, w in (
                ("host", ' style="width:8%"'),
                ("check", ' style="width:12%"'),
                ("status", ' style="width:6%"'),
                ("found", ""),
                ("expected", ' style="width:20%"'),
                ("fix", ' style="width:24%"'),
            )
        )
        body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
        return (
            f'<section id="problems"><h2>Problems ({len(rows)}), as in the text table</h2>'
            f'<table class="problems"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></section>'
        )

    def render(self) -> str:
        body = self.header() + self.die_grid() + self.pair_matrix() + self.badges() + self.rehearsal()
        body += self.problems()
        table = [json.loads(r) for r in self.row_ids]  # insertion order = id order
        data = json.dumps({"rows": table, "keys": self.details}, separators=(",", ":"), sort_keys=True)
        data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        title = "Cluster readiness" + (" (SIMULATED)" if self.m.simulated else "")
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{_e(title)}</title><style>{CSS}</style></head>"
            f'<body><main>{body}</main><aside id="details" aria-live="polite"></aside>'
            f'<script type="application/json" id="readiness-data">{data}</script>'
            f"<script>{SCRIPT}</script></body></html>\n"
        )


def render(sources: list[Source]) -> str:
    return Page(build(sources)).render()


def page_path(report: str | os.PathLike[str]) -> Path:
    return Path(report).with_suffix(PAGE_SUFFIX)


def write_page(reports: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str] | None = None) -> Path:
    """Render the page from saved reports and write it (atomically) next to the first one unless `out` is given."""
    sources = load(reports)
    dest = Path(out) if out else page_path(reports[0])
    return write_atomic(dest, render(sources))


def page_line(path: Path) -> str:
    return f"readiness page: {path.resolve().as_uri()}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="verl-recipe report",
        description="Write the readiness page (one self-contained HTML file) from saved preflight and rehearsal "
        "JSON reports. Given one run folder instead (verl-recipe report RUN_DIR), write RUN_DIR/run.html, the run "
        "page.",
    )
    parser.add_argument(
        "reports", nargs="+", metavar="JSON", help="preflight and/or rehearsal report files, or one run folder RUN_DIR"
    )
    parser.add_argument("-o", "--output", metavar="HTML", help="page to write (default: next to the first report)")
    ns = parser.parse_args(argv)
    try:
        dest = write_page(ns.reports, ns.output)
    except ReportError as exc:
        error(exc)
        return EXIT_BAD_INPUT
    except OSError as exc:
        error(f"cannot write the page: {exc}; fix: choose a writable --output")
        return EXIT_BAD_INPUT
    print(page_line(dest))
    return EXIT_OK
