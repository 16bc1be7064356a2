"""What the readiness page draws, built from the reports: each die's and host's status from the preflight rows,
the host pairs the NPU pings tried and lost, and the rehearsal's nodes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ...contracts.preflight import DIE, PING, entry_text, level, valid_entries
from .load import IPV4, SEVERITY, STATUS_WORDS, Source

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
    """(die, what was found on it) for every die a row names: its entries (the report's contract), else each die of
    its `dies` with the row's text."""
    entries = valid_entries(row.get("entries"))
    if entries:
        return [(e["die"], entry_text(e)) for e in entries]
    return [(d, str(row.get("found", ""))) for d in dict.fromkeys(_die_list(row.get("dies")))]


def is_ping(row: dict[str, Any]) -> bool:
    return row.get("check") == PING


@dataclass
class PageCell:
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
    die_checks: dict[tuple[str, int], list[tuple[PageCell, str]]] = field(default_factory=dict)
    host_checks: dict[str, list[PageCell]] = field(default_factory=dict)
    pairs: dict[tuple[str, str], Pair] = field(default_factory=dict)
    schedule_known: bool = False
    failures: list[PageCell] = field(default_factory=list)
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
    """NPU address -> (host, die), as the report's meta names them."""
    owner: dict[str, tuple[str, int]] = {}
    for s in sources:
        addresses = s.meta.get("addresses")
        for ip, where in addresses.items() if isinstance(addresses, dict) else []:
            if isinstance(where, list) and len(where) == 2 and isinstance(where[0], str) and isinstance(where[1], int):
                owner[str(ip)] = (where[0], where[1])
    return owner


def _dies_per_host(sources: list[Source], rows: list[dict[str, Any]]) -> int:
    counts = [0]
    for s in sources:
        dies = s.meta.get("dies_per_host")
        if isinstance(dies, int) and not isinstance(dies, bool) and 0 < dies <= 1024:
            counts.append(dies)
        if s.kind == "rehearsal":
            counts.append(int(s.data["summary"].get("dies_per_node") or 0))
    counts += [d + 1 for r in rows for d, _ in die_entries(r)]
    return max(counts)


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
    # Drawn on the die grid or as a host badge by the check's level in the report's contract, never by its wording.
    die_level = {r["check"] for r in rows if level(r["check"]) == DIE}
    for s in sources:
        if s.kind != "preflight":
            continue
        for r in s.data["rows"]:
            c = PageCell(
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
                _ping_row(model, r, c)
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
            # a ping lost to a peer that failed its own check (the report plugin marks it explained): a warning on
            # the sender's die, whatever the row's other entries say
            explained = {e["die"] for e in valid_entries(r.get("entries")) if is_ping(r) and e.get("explained")}
            warn = PageCell(c.host, c.check, "warn", c.found, c.expected, "fix the target die first", c.source)
            for d, text in entries:
                model.die_checks.setdefault((c.host, d), []).append((warn if d in explained else c, text))
            ok = PageCell(c.host, c.check, "ok", "no problem on this die", c.expected, "", c.source)
            for d in range(model.dies):
                if d not in named:
                    model.die_checks.setdefault((c.host, d), []).append((ok, ok.found))
    return model


def _ping_row(model: Model, r: dict[str, Any], c: PageCell) -> None:
    """A ping row: each entry's peer host and die (the report plugin names them) and whether its loss stands (a
    failed entry) or is explained by the target's own fault (an entry marked `explained`)."""
    for e in valid_entries(r.get("entries")):
        if "peer" not in e:
            continue
        key = (e["die"], e["peer_die"])
        p = model.pair(c.host, e["peer"])
        p.tried.add(key)
        if e.get("explained"):
            p.explained[key] = entry_text(e)
        elif c.status == "fail":
            p.lost[key] = entry_text(e)
