"""Every error line of a run's logs as an Event (firstfailure.py): the signatures' lines (high confidence), the
general rules' (families.py: Ray's death reasons, watchdog timeouts, a broken peer), CANN's error codes by class and
the exception type of a traceback's last line (low). Bounded: at most MAX_HITS lines per pattern and log, found by
a substring search of lower-case needles before any regular expression runs."""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import PurePath
from typing import Protocol

from . import families as fam
from .firstfailure import (
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
# A traceback's last line: an exception name at the start, after a Ray "(Actor pid=N, ip=X)" prefix.
EXCEPTION_LINE = re.compile(r"^(?:\([^)]*\)\s*)?([A-Za-z_][\w.]*(?:Error|Exception|Exit|Iteration))\b")
EXCEPTION_NEEDLES = ("error", "exception", "stopiteration")
# Families whose lines name a dead worker's or node's own address: the event is that host's.
DEATH_FAMILIES = ("ray-lost", "host-memory")
GENERAL_ORDER = 1000  # general events come after every signature where times tie


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

    def add(i: int, **kw: object) -> None:
        nonlocal seq
        line = lines[i]
        host = line_host(line, file_host, hosts, driver)
        rank = rank_of(line)
        if kw.get("family") in DEATH_FAMILIES:
            dead_host, dead_rank = dead_worker(lines, i, hosts)
            host, rank = dead_host or host, dead_rank or rank
        crimer = heartbeat_crimer(line, hosts) if kw.get("id") == "hccl-heartbeat" else None
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
            add(i, id=sig.id, title=sig.title, family=sig.family, confidence=fam.HIGH, symptom=sig.symptom, order=k)
    for k, rule in enumerate(fam.RULES):
        for i in _hits(rule.regex, rule.needles, text, lines):
            if i in claimed or fam.is_noise(lines[i]):
                continue
            add(
                i,
                id=rule.id,
                title=rule.title,
                family=rule.family,
                confidence=rule.confidence,
                symptom=rule.symptom,
                order=GENERAL_ORDER + k,
                cause=rule.cause,
                basis=rule.basis,
            )
    n_cann = 0
    for i in text.candidates(("ei", "ej", "el", "ee", "ez")):
        if n_cann >= MAX_HITS:
            break
        if i in claimed or fam.is_noise(lines[i]):
            continue
        code = fam.cann_code(lines[i])
        if code is None:
            continue
        name, family, where, symptom = code
        n_cann += 1
        add(
            i,
            id="cann-code",
            title=f"CANN error {name} from {where}",
            family=family,
            confidence=fam.LOW,
            symptom=symptom,
            order=GENERAL_ORDER + len(fam.RULES),
            cause=f"CANN raised {name} ({where}); no known signature names this code, so only its class is read",
            basis="CANN's error-code class",
        )
    n_exc = 0
    for i in text.candidates(EXCEPTION_NEEDLES):
        if n_exc >= MAX_HITS:
            break
        if i in claimed:
            continue
        m = EXCEPTION_LINE.match(lines[i].strip())
        exc_family = fam.exception_family(lines[i]) if m else None
        if m is None or exc_family is None:
            continue
        n_exc += 1
        add(
            i,
            id="exception-type",
            title=f"{m.group(1).rsplit('.', 1)[-1]} (by its exception type)",
            family=exc_family,
            confidence=fam.LOW,
            symptom=exc_family == "timeout-hang",
            order=GENERAL_ORDER + len(fam.RULES) + 1,
            cause=f"the traceback ends in {m.group(1)}; no known signature matches it, so only the exception type "
            "is read",
            basis="the exception type",
        )
    return events


def all_events(logs: Sequence[Log], hosts: Hosts, year: int) -> list[Event]:
    out: list[Event] = []
    for n, log in enumerate(logs):
        out.extend(replace(e, file_no=n) for e in log_events(log, hosts, year, len(out)))
    return out
