"""Every error line of a run's logs as an Event (firstfailure.py): the signatures' lines (high confidence), the
general rules' (families.py: Ray's death reasons, watchdog timeouts, a broken peer), CANN's error codes by class and
the exception type of a traceback's last line (low). Bounded: at most MAX_HITS lines per pattern and log, found by
a substring search of lower-case needles before any regular expression runs."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import PurePath
from typing import Protocol

from . import codes
from . import families as fam
from . import taxonomy as tax
from .firstfailure import (
    NEVER_CONNECTED,
    REFINE_LINES,
    Event,
    Hosts,
    dead_worker,
    device_of,
    heartbeat_crimer,
    line_host,
    node_of,
    rank_of,
    time_above,
)
from .signatures import SIGNATURES

MAX_HITS = 64  # per pattern and log: ordering needs the first lines of each host, not every repeat
MAX_CANDIDATES = 4096  # needle hits looked at per pattern and log before giving up on that pattern
EXCERPT_CHARS = 400
EXCEPTION_NEEDLES = ("error", "exception", "stopiteration")
# The general rules: the taxonomies' first (more specific: they claim a line before families.RULES reads it).
GENERAL_RULES = tax.RULES + fam.RULES
# CANN codes of a known class in the lower-cased text (families.CANN_CLASSES and taxonomy.CANN_MORE).
CANN_LOW = re.compile(r"(?<![a-z0-9])e[eijlzhc136]\d{4}(?![0-9])")
ACL_NEEDLES = ("error code", "runtime result", "errno")
TORCH_NPU_NEEDLES = ("err0", "err9")
DRV_NEEDLES = ("drverr", "drvretcode", "drv_ret", "drvret")
# Families whose lines name a dead worker's or node's own address: the event is that host's.
DEATH_FAMILIES = ("ray-lost", "host-memory")
GENERAL_ORDER = 1000  # general events come after every signature where times tie
# Families whose lines may name the ranks that never joined (codes.unconnected_ranks): those ranks failed first.
RANKS_NAMED = ("communication", "timeout-hang")
# How far under a wrapper its cause is printed: Ray prints the constructor's whole traceback under its death reason,
# and the remote traceback between a RayTaskError line and the remote error itself.
REACH = {"ray-creation-task": 80, "ray-task-error": 80}


class Log(Protocol):
    """A log as diagnose reads it (diagnose.LogText): read-only, so a frozen dataclass fits."""

    @property
    def name(self) -> str: ...
    @property
    def lines(self) -> Sequence[str]: ...
    @property
    def first_line(self) -> int: ...


def excerpt_of(line: str) -> str:
    text = line.strip()
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 3] + "..."


class _Text:
    """A log's lines lower-cased and joined once, with each line's offset for finding a hit's line."""

    def __init__(self, lines: Sequence[str]) -> None:
        # Lower-cased line by line: str.lower() of a whole text may change its length, so offsets would drift.
        self.low = "\n".join(line.lower() for line in lines)
        self.starts = [0]
        pos = self.low.find("\n")
        while pos != -1:
            self.starts.append(pos + 1)
            pos = self.low.find("\n", pos + 1)

    def line_at(self, pos: int) -> int:
        return bisect.bisect_right(self.starts, pos) - 1

    def matching(self, rx: re.Pattern[str]) -> list[int]:
        """Indices of the lines `rx` finds in the lower-cased text, each line once, at most MAX_CANDIDATES."""
        out: list[int] = []
        m = rx.search(self.low)
        while m is not None and len(out) < MAX_CANDIDATES:
            i = self.line_at(m.start())
            out.append(i)
            if i + 1 >= len(self.starts):
                break
            m = rx.search(self.low, self.starts[i + 1])
        return out

    def candidates(self, needles: Sequence[str]) -> list[int]:
        """Indices of the lines holding a needle, ascending, at most MAX_CANDIDATES per needle."""
        found: set[int] = set()
        for needle in needles:
            pos, seen = self.low.find(needle), 0
            while pos != -1 and seen < MAX_CANDIDATES:
                i = self.line_at(pos)
                found.add(i)
                seen += 1
                nxt = self.starts[i + 1] if i + 1 < len(self.starts) else -1
                pos = -1 if nxt == -1 else self.low.find(needle, nxt)
        return sorted(found)


def _hits(rx: re.Pattern[str], needles: Sequence[str], text: _Text, lines: Sequence[str]) -> list[int]:
    out: list[int] = []
    for i in text.candidates(needles):
        if rx.search(lines[i]):
            out.append(i)
            if len(out) >= MAX_HITS:
                break
    return out


def log_events(log: Log, hosts: Hosts, year: int, seq: int = 0) -> list[Event]:
    """The error lines of one log as events, in reading order within each kind."""
    lines = log.lines
    text = _Text(lines)
    file_host = node_of(log.name)
    driver = PurePath(log.name.removesuffix(" (tail)")).name == "train.log"
    events: list[Event] = []
    claimed: set[int] = set()

    def add(i: int, place: tuple[str, str | None] | None = None, **kw: object) -> None:
        nonlocal seq
        line = lines[i]
        host = line_host(line, file_host, hosts, driver)
        rank = rank_of(line)
        if place is not None:  # an HCCL line that names the address (and rank) it points to
            host, rank = hosts.name(place[0]), place[1] or rank
        if kw.get("family") in DEATH_FAMILIES:
            dead_host, dead_rank = dead_worker(lines, i, hosts)
            host, rank = dead_host or host, dead_rank or rank
        crimer = heartbeat_crimer(line, hosts) if kw.get("id") == "hccl-heartbeat" else None
        if crimer is None and kw.get("family") in RANKS_NAMED:
            ranks = codes.unconnected_ranks(line)
            crimer = ((None, ranks), NEVER_CONNECTED) if ranks else None
        events.append(
            Event(
                file=log.name,
                line=log.first_line + i,
                excerpt=excerpt_of(line),
                time=time_above(lines, i, year),
                host=host,
                rank=rank,
                device=device_of(line),
                seq=seq,
                crimer=crimer[0] if crimer else None,
                crimer_status=crimer[1] if crimer else "",
                **kw,  # type: ignore[arg-type]
            )
        )
        seq += 1
        claimed.add(i)

    for k, sig in enumerate(SIGNATURES):
        for i in _hits(sig.regex, sig.needles, text, lines):
            add(
                i, id=sig.id, title=sig.title, family=sig.family, confidence=fam.HIGH, symptom=sig.symptom, order=k,
                specific=tax.SIGNATURE,
            )  # fmt: skip
    for k, rule in enumerate(GENERAL_RULES):
        for i in _hits(rule.regex, rule.needles, text, lines):
            if i in claimed or fam.is_noise(lines[i]):
                continue
            cause = rule.cause
            result = codes.hccl_result(lines[i]) if rule.id == "hccl-api" else None
            if result:
                cause = f"{cause}; HCCL returned {result}"
            add(
                i,
                place=codes.pointed_place(lines[i]) if rule.family == "communication" else None,
                id=rule.id,
                title=rule.title,
                family=rule.family,
                confidence=rule.confidence,
                symptom=rule.symptom,
                order=GENERAL_ORDER + k,
                cause=cause,
                basis=rule.basis,
                fix=rule.fix,
                specific=tax.specificity(rule.id, rule.confidence),
                reach=REACH.get(rule.id, REFINE_LINES),
            )
    _code_events(lines, text, claimed, add)
    return events


def _code_events(lines: Sequence[str], text: _Text, claimed: set[int], add: Callable[..., None]) -> None:
    """The lines read only by a code's class (CANN's, aclError's, torch_npu's) or by an exception's type and place."""
    base = GENERAL_ORDER + len(GENERAL_RULES)
    n = 0
    for i in text.matching(CANN_LOW):
        if n >= MAX_HITS:
            break
        code = None if i in claimed or fam.is_noise(lines[i]) else codes.cann_code(lines[i])
        if code is None:
            continue
        name, family, where, symptom = code
        n += 1
        add(
            i, id="cann-code", title=f"CANN error {name} from {where}", family=family, confidence=fam.LOW,
            symptom=symptom, order=base, specific=tax.CODE_CLASS, basis="CANN's error-code class",
            cause=f"CANN raised {name} ({where}); no known signature names this code, so only its class is read",
        )  # fmt: skip
    for ident, needles, read, order in (
        ("acl-code", ACL_NEEDLES, codes.acl_code, base + 1),
        ("torch-npu-code", TORCH_NPU_NEEDLES, codes.torch_npu_code, base + 2),
        ("drv-code", DRV_NEEDLES, codes.drv_code, base + 2),
    ):
        n = 0
        for i in text.candidates(needles):
            if n >= MAX_HITS:
                break
            found = None if i in claimed or fam.is_noise(lines[i]) else read(lines[i])
            if found is None:
                continue
            name, family, meaning = found
            n += 1
            add(
                i, id=ident, title=f"error {name}: {meaning}", family=family, confidence=fam.LOW, symptom=False,
                order=order, specific=tax.specificity(ident, fam.LOW), basis="the error code's class",
                cause=f"{meaning} (code {name}); only the code's class is read: the lines under it may say more",
            )  # fmt: skip
    n = 0
    for i in text.candidates(EXCEPTION_NEEDLES):
        if n >= MAX_HITS:
            break
        exc = None if i in claimed else codes.exception_family(lines, i)
        if exc is None:
            continue
        name, family, by_place = exc
        n += 1
        how = f"it was raised in the {family} code (its innermost frames)" if by_place else "only its type is read"
        add(
            i,
            id="exception-type",
            title=f"{name.rsplit('.', 1)[-1]} (by its exception type{' and place' if by_place else ''})",
            family=family,
            confidence=fam.LOW,
            symptom=family == "timeout-hang",
            order=base + 3,
            cause=f"the traceback ends in {name}; no known signature matches it: {how}",
            basis="the exception type and where it was raised" if by_place else "the exception type",
            specific=tax.CODE_CLASS,
            reach=codes.message_reach(lines, i),
        )


def all_events(logs: Sequence[Log], hosts: Hosts, year: int) -> list[Event]:
    out: list[Event] = []
    for n, log in enumerate(logs):
        out.extend(replace(e, file_no=n) for e in log_events(log, hosts, year, len(out)))
    return out
