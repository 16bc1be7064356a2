"""The readiness page: one self-contained HTML file that draws preflight and rehearsal JSON reports.

Standard library only: the Ansible controller (the preflight report plugin) imports this module as it is, and the
image runs it after `--rehearse`. The page holds its CSS, script and data inline and loads nothing.

What it draws, all from the reports:
- hosts x dies, each die coloured by its worst check. A preflight row is drawn generically from its fields
  (host, check, ok or status, found, expected, fix, and die/dies/peer/peer_die when a row carries them); a row that
  names no die lists its dies in `found` as "die N: ..." entries joined by "; " (the preflight module's format);
- host x host NPU reachability: the pairs a ping row or the recorded ping schedule tried, and the die pairs lost;
- every other preflight row of a host as a badge (OS, HDK versions, time, disk, runtime, storage, ...);
- from a rehearsal: per-node all-reduce time and bus bandwidth, the slowest node, the placement groups;
- a header with the inventory, time, commit and sources, and "SIMULATED cluster" when a report says so.

`verl-recipe report <json>...` regenerates the page from saved reports.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exitcodes import EXIT_BAD_INPUT, EXIT_OK
from ..problems import error
from .kit import BASE_CSS, source_commit, utc_now, write_atomic
from .kit import esc as _e
from .kit import short as _short

SEVERITY = {"ok": 0, "skip": 0, "nodata": 1, "warn": 2, "fail": 3}
STATUS_WORDS = {
    "fail": ("fail", "failed", "error", "bad", "critical"),
    "warn": ("warn", "warning", "degraded"),
    "ok": ("ok", "pass", "passed", "success", "healthy"),
    "skip": ("skip", "skipped", "n/a", "na", "not applicable"),
}
# "die 7: DOWN", "dies 0-15: ...", or a lead-in before the first entry ("lost pings explained ...: die 7: ...")
ENTRY_DIE = re.compile(r"^(?:[^:;]*:\s*)?dies? (\d+)(?:\s*(?:-|\.\.)\s*(\d+))?\b")
ANY_DIE_WORD = re.compile(r"\bdies?\b")
IPV4 = re.compile(r"\b(\d{1,3}(?:\.\d{1,3}){3})\b")
PEER_NOTE = re.compile(r"\(([A-Za-z0-9_.:-]+) die (\d+)\)")
PAGE_SUFFIX = ".html"
# A preflight writes some 50 rows per host: 50,000 rows are a thousand hosts. Bigger files are not reports and would
# take minutes to draw into a page no browser opens.
MAX_REPORT_ROWS = 50_000
MAX_REPORT_BYTES = 64 * 1024 * 1024


class ReportError(ValueError):
    """A report that cannot be drawn; the message is one line naming the file and the fix."""


# ---------------------------------------------------------------------------------------------------------- meta


def report_meta(kind: str, *, simulated: bool | None = None, commit_from: str | None = None, **extra: Any) -> dict:
    """The `meta` block a report writer adds to its JSON so the page can say when, from what and where."""
    return {"kind": kind, "generated": utc_now(), "commit": source_commit(commit_from), "simulated": simulated, **extra}


# -------------------------------------------------------------------------------------------------------- loading


@dataclass
class Source:
    path: str
    kind: str  # "preflight" or "rehearsal"
    data: dict[str, Any]

    @property
    def meta(self) -> dict[str, Any]:
        meta = self.data.get("meta")
        return meta if isinstance(meta, dict) else {}


def _texts(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(i, str) for i in v)


def _number(v: Any) -> bool:
    return v is None or (isinstance(v, int | float) and not isinstance(v, bool))


def _count(v: Any) -> bool:
    return v is None or (isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_REPORT_ROWS)


# The fields of a rehearsal report (rehearse.py NodeReport and summary) the page draws, each with the test its value
# must pass and what that is in words: a report of another shape is named in one line instead of breaking the page.
REHEARSAL_NODE_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "ip": (lambda v: isinstance(v, str), "text"),
    "bundles": (_count, "a count"),
    "problems": (_texts, "a list of text"),
    "allreduce_ms": (_number, "a number"),
    "algbw_gbps": (_number, "a number"),
    "busbw_gbps": (_number, "a number"),
}
REHEARSAL_SUMMARY_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "dies_per_node": (_count, "a count"),
    "error": (lambda v: v is None or isinstance(v, str), "text"),
    "placement": (lambda v: v is None or (isinstance(v, list) and all(isinstance(g, dict) for g in v)), "objects"),
}


def _odd_field(where: str, data: dict[str, Any], fields: dict[str, tuple[Callable[[Any], bool], str]]) -> str | None:
    for key, (ok, what) in fields.items():
        if key in data and not ok(data[key]):
            return f"{where}.{key} is {type(data[key]).__name__} {str(data[key])[:40]!r}, expected {what}"
    return None


def classify(path: str, data: Any) -> Source:
    if not isinstance(data, dict):
        raise ReportError(f"{path}: not a JSON object; fix: give a preflight or rehearsal report")
    for key in ("rows", "nodes"):
        if isinstance(data.get(key), list) and len(data[key]) > MAX_REPORT_ROWS:
            raise ReportError(
                f"{path}: {len(data[key])} {key}, more than the page draws ({MAX_REPORT_ROWS}); "
                "fix: give one site's report"
            )
    if isinstance(data.get("rows"), list):
        for i, row in enumerate(data["rows"]):
            if (
                not isinstance(row, dict)
                or not isinstance(row.get("host"), str)
                or not isinstance(row.get("check"), str)
            ):
                raise ReportError(
                    f"{path}: rows[{i}] has no host/check fields; fix: give the preflight JSON written by deploy.yml"
                )
        return Source(path, "preflight", data)
    if isinstance(data.get("summary"), dict) and isinstance(data.get("nodes"), list):
        for i, node in enumerate(data["nodes"]):
            if not isinstance(node, dict) or not isinstance(node.get("node"), str):
                raise ReportError(
                    f"{path}: nodes[{i}] has no node name; fix: give the rehearsal JSON `--rehearse` wrote"
                )
        odd = _odd_field("summary", data["summary"], REHEARSAL_SUMMARY_FIELDS) or next(
            (o for i, n in enumerate(data["nodes"]) if (o := _odd_field(f"nodes[{i}]", n, REHEARSAL_NODE_FIELDS))),
            None,
        )
        if odd:
            raise ReportError(f"{path}: {odd}; fix: give the rehearsal JSON `--rehearse` wrote")
        return Source(path, "rehearsal", data)
    raise ReportError(
        f"{path}: neither a preflight report (with 'rows') nor a rehearsal report (with 'summary' and 'nodes'); "
        "fix: give ansible/.cache/reports/preflight-<inventory>.json or <LOG_DIR>/.../rehearsals/<N>-nodes.json"
    )


def load(paths: Sequence[str | os.PathLike[str]]) -> list[Source]:
    """Every report, checked before anything is written: all problems in one error."""
    if not paths:
        raise ReportError("no report given; fix: name at least one preflight or rehearsal JSON file")
    sources, problems = [], []
    for p in paths:
        name = str(p)
        try:
            size = Path(p).stat().st_size
            if size > MAX_REPORT_BYTES:
                raise ReportError(
                    f"{name}: {size} bytes is not a report (at most {MAX_REPORT_BYTES}); fix: give the report"
                )
            data = json.loads(Path(p).read_text(encoding="utf-8"))
            sources.append(classify(name, data))
        except FileNotFoundError:
            problems.append(f"{name}: no such file; fix: give the path of a saved report")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{name}: unreadable ({exc.__class__.__name__}); fix: check the file's permissions")
        except json.JSONDecodeError as exc:
            problems.append(f"{name}: not JSON (line {exc.lineno}: {exc.msg}); fix: give the report file itself")
        except RecursionError:
            problems.append(f"{name}: JSON nested too deep to be a report; fix: give the report file itself")
        except ReportError as exc:
            problems.append(str(exc))
    if problems:
        raise ReportError("; ".join(problems))
    return sources


# -------------------------------------------------------------------------------------------------------- model


def row_status(row: dict[str, Any]) -> str:
    """`ok` decides pass or fail, as in the text table (the report plugin may turn a failed ping ok once its loss is
    explained by the target's own fault); a `status` word adds warn or skip. A row without `ok` has its status."""
    word = str(row.get("status", "")).strip().lower()
    status = next((st for st, words in STATUS_WORDS.items() if word in words), "")
    if "ok" not in row:
        return status or "fail"
    if row["ok"] is True:
        return status if status in ("warn", "skip") else "ok"
    return "warn" if status == "warn" else "fail"


def _die_list(value: Any) -> list[int]:
    """`die`/`dies` field: an int, a list of ints, "7", "0-15" or "3, 5"."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [d for v in value for d in _die_list(v)]
    out: list[int] = []
    for part in str(value).split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:(?:-|\.\.)\s*(\d+)\s*)?", part)
        if m:
            lo = int(m.group(1))
            out += list(range(lo, int(m.group(2) or lo) + 1))
    return out


def die_entries(row: dict[str, Any]) -> list[tuple[int, str]]:
    """(die, what was found on it) for every die a row names: its die/dies field (with the text of its "die N: ..."
    entry when `found` has one), else the "die N: ..." entries of `found`."""
    found = str(row.get("found", ""))
    texts: list[tuple[int, str]] = []
    for entry in found.split("; "):
        m = ENTRY_DIE.match(entry)
        if m:
            lo = int(m.group(1))
            texts += [(d, entry.strip()) for d in range(lo, int(m.group(2) or lo) + 1)]
    named = [d for key in ("die", "dies") if row.get(key) is not None for d in _die_list(row[key])]
    if not named:
        return texts
    by_die = dict(texts)
    return [(d, by_die.get(d, found)) for d in dict.fromkeys(named)]


def is_ping(row: dict[str, Any]) -> bool:
    return "ping" in str(row.get("check", "")).lower() or row.get("peer") is not None


@dataclass
class Check:
    """One row as the page shows it."""

    host: str
    check: str
    status: str
    found: str
    expected: str
    fix: str
    source: str

    def cells(self) -> list[str]:
        return [self.check, self.status, self.found, self.expected, self.fix]


@dataclass
class Pair:
    tried: set[tuple[int, int]] = field(default_factory=set)
    lost: dict[tuple[int, int], str] = field(default_factory=dict)
    explained: dict[tuple[int, int], str] = field(default_factory=dict)

    @property
    def status(self) -> str:
        if self.lost:
            return "fail"
        if self.explained:
            return "warn"
        return "ok" if self.tried else "untried"


@dataclass
class Model:
    hosts: list[str] = field(default_factory=list)
    dies: int = 0
    die_checks: dict[tuple[str, int], list[tuple[Check, str]]] = field(default_factory=dict)
    host_checks: dict[str, list[Check]] = field(default_factory=dict)
    pairs: dict[tuple[str, str], Pair] = field(default_factory=dict)
    schedule_known: bool = False
    failures: list[Check] = field(default_factory=list)
    rehearsals: list[Source] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    simulated: bool = False

    def die_status(self, host: str, die: int) -> str:
        checks = self.die_checks.get((host, die), [])
        if not checks:
            return "nodata"
        return max((c.status for c, _ in checks), key=SEVERITY.__getitem__)

    def host_status(self, host: str) -> str:
        checks = self.host_checks.get(host, [])
        return max((c.status for c in checks), key=SEVERITY.__getitem__, default="nodata")

    def pair(self, a: str, b: str) -> Pair:
        return self.pairs.setdefault((a, b), Pair())


def _host_order(sources: list[Source]) -> list[str]:
    hosts: list[str] = []
    for s in sources:
        if s.kind != "preflight":
            continue
        meta_hosts = s.meta.get("hosts")
        if isinstance(meta_hosts, dict):
            ranked = sorted(meta_hosts, key=lambda h: (_rank(meta_hosts[h]), list(meta_hosts).index(h)))
            hosts += [h for h in ranked if h not in hosts]
        hosts += [r["host"] for r in s.data["rows"] if r["host"] not in hosts]
    return list(dict.fromkeys(hosts))


def _rank(info: Any) -> int:
    try:
        return int(info.get("rank"))
    except (AttributeError, TypeError, ValueError):
        return 1 << 30


def _npu_owner(sources: list[Source]) -> dict[str, tuple[str, int]]:
    owner: dict[str, tuple[str, int]] = {}
    for s in sources:
        meta_hosts = s.meta.get("hosts")
        if not isinstance(meta_hosts, dict):
            continue
        for host, info in meta_hosts.items():
            ips = info.get("npu_ips") if isinstance(info, dict) else None
            for die, ip in enumerate(ips or []):
                owner[str(ip)] = (host, die)
    return owner


def _dies_per_host(sources: list[Source], rows: list[dict[str, Any]]) -> int:
    counts = [0]
    for s in sources:
        meta_hosts = s.meta.get("hosts")
        if isinstance(meta_hosts, dict):
            counts += [len(i.get("npu_ips") or []) for i in meta_hosts.values() if isinstance(i, dict)]
        if s.kind == "rehearsal":
            counts.append(int(s.data["summary"].get("dies_per_node") or 0))
    for r in rows:
        counts += [d + 1 for d, _ in die_entries(r)]
        m = re.match(r"\s*(\d+) dies\b", str(r.get("found", "")))
        if m:
            counts.append(int(m.group(1)))
    return max(counts)


def _peer_of(entry: str, owner: dict[str, tuple[str, int]], hosts: list[str]) -> tuple[str, int | None] | None:
    note = PEER_NOTE.search(entry)
    if note and note.group(1) in hosts:
        return note.group(1), int(note.group(2))
    for ip in IPV4.findall(entry):
        if ip in owner:
            return owner[ip]
    return None


def _schedule(model: Model, sources: list[Source], owner: dict[str, tuple[str, int]]) -> None:
    """Tried pairs from what the reports recorded of the ping schedule (meta.hosts[h] keys starting with ping:
    `ping_peer`, `ping_targets`, `ping_plan`, ...); keys that are no schedule (a rotation number) are passed over."""
    for s in sources:
        meta_hosts = s.meta.get("hosts")
        if not isinstance(meta_hosts, dict):
            continue
        for host, info in meta_hosts.items():
            if not isinstance(info, dict):
                continue
            for key, value in info.items():
                if not key.startswith("ping"):
                    continue
                for sender, peer, peer_die in _schedule_items(value, owner, model.dies):
                    if peer not in model.hosts or peer == host:
                        continue
                    model.schedule_known = True
                    model.pair(host, peer).tried.add((sender, peer_die))


def _schedule_items(value: Any, owner: dict[str, tuple[str, int]], dies: int) -> list[tuple[int, str, int]]:
    """(sender die, peer host, peer die) from a recorded schedule: a peer host name (every die to the same die),
    a list of peer addresses by sender die, or a list of {die, peer, peer_die} / {die, address} items."""
    if isinstance(value, str):
        if value in (h for h, _ in owner.values()) or not IPV4.fullmatch(value):
            return [(d, value, d) for d in range(dies)]
        return [(0, *owner[value])] if value in owner else []
    out: list[tuple[int, str, int]] = []
    if isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, str) and item in owner:
                out.append((i, *owner[item]))
            elif isinstance(item, str) and item and not IPV4.fullmatch(item):
                out += [(d, item, d) for d in range(dies)]
            elif isinstance(item, dict):
                die = _first_int(item, ("die", "src_die", "from_die"), i)
                addr = next((str(item[k]) for k in ("address", "ip", "target_ip") if item.get(k)), "")
                peer = next((str(item[k]) for k in ("peer", "host", "target", "to") if item.get(k)), "")
                if addr in owner:
                    out.append((die, *owner[addr]))
                elif peer:
                    out.append((die, peer, _first_int(item, ("peer_die", "dst_die", "target_die", "to_die"), die)))
    return out


def _first_int(item: dict[str, Any], keys: tuple[str, ...], default: int) -> int:
    for k in keys:
        try:
            return int(item[k])
        except (KeyError, TypeError, ValueError):
            continue
    return default


def build(sources: list[Source]) -> Model:
    model = Model(sources=sources)
    rows = [r for s in sources if s.kind == "preflight" for r in s.data["rows"]]
    model.hosts = _host_order(sources)
    model.dies = _dies_per_host(sources, rows)
    model.simulated = any(s.meta.get("simulated") is True for s in sources)
    model.rehearsals = [s for s in sources if s.kind == "rehearsal"]
    owner = _npu_owner(sources)
    _schedule(model, sources, owner)
    die_level = {r["check"] for r in rows if die_entries(r)}
    die_level |= {
        r["check"]
        for r in rows
        if ANY_DIE_WORD.search(f"{r.get('found', '')} {r.get('expected', '')}") and r["check"] not in ("ssh",)
    }
    for s in sources:
        if s.kind != "preflight":
            continue
        for r in s.data["rows"]:
            c = Check(
                host=r["host"],
                check=r["check"],
                status=row_status(r),
                found=str(r.get("found", "")),
                expected=str(r.get("expected", "")),
                fix=str(r.get("fix", "")),
                source=s.path,
            )
            if c.status in ("fail", "warn"):
                model.failures.append(c)
            if is_ping(r):
                _ping_row(model, r, c, owner)
            if r["check"] not in die_level:
                model.host_checks.setdefault(c.host, []).append(c)
                continue
            entries = die_entries(r)
            if c.status in ("ok", "skip") or not entries:
                # a passed die check, or a failed one that names no die (e.g. its tool is missing): every die
                for d in range(model.dies):
                    model.die_checks.setdefault((c.host, d), []).append((c, c.found))
                continue
            named = {d for d, _ in entries}
            for d, text in entries:
                model.die_checks.setdefault((c.host, d), []).append((c, text))
            ok = Check(c.host, c.check, "ok", "no problem on this die", c.expected, "", c.source)
            for d in range(model.dies):
                if d not in named:
                    model.die_checks.setdefault((c.host, d), []).append((ok, ok.found))
    return model


def _ping_row(model: Model, r: dict[str, Any], c: Check, owner: dict[str, tuple[str, int]]) -> None:
    """A ping row: the peer (field `peer`, or the address or "(host die N)" note of each "die N: ..." entry) and
    whether its loss stands (failed row) or is explained by the target's own fault (passed row that says so)."""
    explicit_peer = r.get("peer")
    entries = die_entries(r)
    peers = [str(x) for x in r.get("peers") or [] if str(x) in model.hosts] if isinstance(r.get("peers"), list) else []
    if explicit_peer is not None and isinstance(explicit_peer, str):
        dies = _die_list(r.get("die")) or list(range(model.dies))
        peer_dies = _die_list(r.get("peer_die"))
        for i, d in enumerate(dies):
            key = (d, peer_dies[i] if i < len(peer_dies) else (peer_dies[0] if peer_dies else d))
            p = model.pair(c.host, str(explicit_peer))
            p.tried.add(key)
            if c.status == "fail":
                p.lost[key] = c.found
            elif c.status == "warn":
                p.explained[key] = c.found
        return
    explained_row = c.status in ("ok", "skip") and "explained" in c.found
    for d, text in entries:
        peer = _peer_of(text, owner, model.hosts) or ((peers[0], None) if len(peers) == 1 else None)
        if peer is None:
            continue
        host, peer_die = peer
        key = (d, d if peer_die is None else peer_die)
        p = model.pair(c.host, host)
        p.tried.add(key)
        if c.status == "fail":
            p.lost[key] = text
        elif c.status == "warn" or explained_row:
            p.explained[key] = text


# -------------------------------------------------------------------------------------------------------- render

CSS = (
    BASE_CSS
    + """.legend{display:flex;flex-wrap:wrap;gap:12px;font-size:12px;color:var(--mute);margin:4px 0 8px}
.legend i{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-2px;margin-right:4px}
.grid{display:grid;gap:2px;align-items:center;width:max-content}
.grid .colh{font-size:11px;color:var(--mute);text-align:center}
.rowh{font-size:12px;white-space:nowrap;padding-right:6px;text-align:right}
.rowh.fail{color:var(--fail);font-weight:600}.rowh.warn{color:#8a6100;font-weight:600}
.cell{width:26px;height:22px;border:0;border-radius:3px;padding:0;font-size:12px;line-height:22px;color:#fff;
cursor:pointer;text-align:center;font-weight:700}
.cell:focus,.sel{outline:2px solid var(--ink);outline-offset:1px}
.cell.ok,.st.ok{background:var(--ok)}.cell.fail,.st.fail{background:var(--fail)}
.cell.warn,.st.warn{background:var(--warn)}.cell.nodata,.st.nodata{background:var(--nodata)}
.cell.skip,.st.skip{background:#8fbf9f}.cell.untried,.st.untried{background:var(--untried);color:var(--mute)}
.cell.self{background:#fff;color:#c0c4c8;cursor:default}
.same{display:flex;flex-wrap:wrap;gap:4px;margin:0 0 8px}.same .badge{display:inline-block;width:auto;max-width:100%}
table.badges{table-layout:fixed;width:100%;border-collapse:separate;border-spacing:2px}
table.badges th{font-size:11px;font-weight:600;color:var(--mute);text-align:left;vertical-align:bottom;
overflow-wrap:anywhere;padding:0 2px}
table.badges th.hn{width:7.5em}
table.badges td.hn{font-size:12px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.badge{display:block;width:100%;border:0;border-radius:10px;padding:2px 6px;font-size:11px;color:#fff;
white-space:nowrap;overflow:hidden;text-overflow:ellipsis;cursor:pointer;text-align:left}
.badge.ok{background:#e6f4ea;color:#1e6b34}.badge.skip{background:#eef2ee;color:var(--mute)}
.badge.fail{background:var(--fail);color:#fff}.badge.warn{background:var(--warn);color:#222}
.badge.nodata{background:#eceff1;color:var(--mute)}
.bars{display:grid;grid-template-columns:8em 1fr 1fr;gap:3px 12px;align-items:center;max-width:1000px}
.bars .hd{font-size:12px;color:var(--mute);font-weight:600}
.bar{position:relative;height:18px;background:#eef1f4;border-radius:3px}
.bar span{position:absolute;left:0;top:0;bottom:0;border-radius:3px;background:#4c78a8}
.bar.slow span{background:var(--warn)}.bar.fail span{background:var(--fail)}
.bar em{position:absolute;left:6px;top:0;font-style:normal;font-size:11px;line-height:18px;color:#111}
.pg{display:flex;flex-wrap:wrap;align-items:center;gap:2px;margin:2px 0}
.pg .lbl{width:17em;font-size:12px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.pg .b{width:14px;height:14px;border-radius:2px}
table.problems{border-collapse:collapse;width:100%;font-size:12px;table-layout:fixed}
table.problems th,table.problems td{border-bottom:1px solid var(--line);padding:3px 6px;text-align:left;
vertical-align:top;overflow-wrap:anywhere}
#details{position:fixed;right:16px;bottom:16px;width:min(640px,calc(100vw - 32px));max-height:45vh;overflow:auto;
background:#fff;border:2px solid var(--ink);border-radius:8px;padding:10px 12px;box-shadow:0 4px 18px #0004;
display:none;font-size:12px}
#details.open{display:block}
#details table{border-collapse:collapse;width:100%;table-layout:fixed}
#details td,#details th{border-bottom:1px solid var(--line);padding:2px 4px;text-align:left;vertical-align:top;
overflow-wrap:anywhere}
#details tr.st-fail td:nth-child(2){color:var(--fail);font-weight:700}
#details tr.st-warn td:nth-child(2){color:#8a6100;font-weight:700}
#details .close{float:right;border:1px solid var(--line);background:#fff;border-radius:4px;cursor:pointer}
.note{color:var(--mute);font-size:12px;margin:6px 0 0}
"""
)

SCRIPT = """
(function(){
  var data = JSON.parse(document.getElementById('readiness-data').textContent);
  var box = document.getElementById('details');
  function esc(s){ var d = document.createElement('div'); d.textContent = s; return d.innerHTML; }
  function show(key){
    var d = data.keys[key]; if(!d){ return; }
    var h = '<button class="close" type="button" aria-label="close">close</button><h2>' + esc(d.title) + '</h2>';
    if(d.rows.length){
      h += '<table><thead><tr><th style="width:18%">check</th><th style="width:9%">status</th><th>found</th>' +
           '<th style="width:22%">expected</th><th style="width:24%">fix</th></tr></thead><tbody>';
      d.rows.forEach(function(i){
        var r = data.rows[i];
        h += '<tr class="st-' + esc(r[1]) + '">' + r.map(function(c){ return '<td>' + esc(c) + '</td>'; }).join('') +
             '</tr>';
      });
      h += '</tbody></table>';
    }
    if(d.text){ h += '<p>' + esc(d.text) + '</p>'; }
    box.innerHTML = h; box.className = 'open'; box.setAttribute('data-key', key);
    box.querySelector('.close').addEventListener('click', function(){ box.className = ''; });
  }
  document.addEventListener('click', function(ev){
    var el = ev.target.closest ? ev.target.closest('[data-k]') : null;
    if(el){
      var prev = document.querySelector('.sel'); if(prev){ prev.classList.remove('sel'); }
      el.classList.add('sel'); show(el.getAttribute('data-k'));
    }
  });
  document.addEventListener('keydown', function(ev){ if(ev.key === 'Escape'){ box.className = ''; } });
  document.body.setAttribute('data-ready', '1');
})();
"""

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
        if not m.schedule_known:
            out.append(
                '<p class="note">The reports do not record the ping schedule: only pairs named by a lost '
                "ping are drawn.</p>"
            )
        out.append("</section>")
        return "".join(out)

    # -- host badges
    def badges(self) -> str:
        m = self.m
        names: list[str] = []
        for h in m.hosts:
            names += [c.check for c in m.host_checks.get(h, []) if c.check not in names]
        if not names:
            return ""
        by_host: dict[str, dict[str, Check]] = {}
        for h in m.hosts:
            for hc in m.host_checks.get(h, []):
                by_host.setdefault(h, {}).setdefault(hc.check, hc)
        same: list[tuple[str, list[Check]]] = []
        varying: list[tuple[str, list[Check]]] = []
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
        out.append(self.placement(s))
        out.append("</section>")
        return "".join(out)

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
        "JSON reports.",
    )
    parser.add_argument("reports", nargs="+", metavar="JSON", help="preflight and/or rehearsal report files")
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


if __name__ == "__main__":
    sys.exit(main())
