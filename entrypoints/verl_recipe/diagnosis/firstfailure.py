"""Which host and rank failed first: every error line of every log as an event with its time, host and rank, ordered.

Where each part comes from:
- Time: the line's own stamp (Python logging and Ray "2024-08-25 19:21:02,241", CANN plogs "2025-04-08-18:07:20.444",
  vLLM "ERROR 06-09 06:57:48", torch's glog "[E324 13:00:25.428]"), else the last stamp above it in the same file
  (a log is written in order; a traceback's lines carry none). Stamps without a year take the latest year seen in
  the run. Hosts are assumed to keep their clocks in sync (preflight row time_sync) and to log in one zone.
- Host: a node log's own host (nodes/<host>.log or nodes/<host>/...); in train.log, Ray's prefix "(Actor pid=N,
  ip=X)" or "(raylet, ip=X)" mapped to a host; a line without one came from the head (Ray leaves the ip out for the
  driver's own node). A Ray death reason names the dead worker's own address ("ip: X", "Worker IP address: X",
  "IP: X"): the event is that host's. Addresses become host names through the run record: settings.json (the head's
  host and its Ray address, and "nodes" where a record holds them), lost_nodes.json, and each node log's "Local node
  IP: X" line (`ray start` prints it).
- Rank: "[rank3]:" (torch), "RankID:3" (torch_npu), a WorkerDict actor's name "WorkerDict_0:3"; the die: "Device:5",
  "(NPU 5;".
- HCCL's heartbeat (CANN HCCL guide, "cluster heartbeat": "[HeartbeatAbnormal]local rank [IP/ID]: crimer rank
  [IP/ID] status[LOST|STUCK|ERROR CQE] by informer rank [IP/ID]", and the ERROR line "Cluster Exception
  Location[IP/ID]:[IP/ID] ... ExceptionType:[...]") names the failed rank outright: the crimer is the first failure,
  ahead of any ordering by time.

The first failure is the crimer of a heartbeat line if there is one; else the earliest event that is a cause (not a
timeout or a broken link: those wait on another rank); else the earliest event. The first event of every other host
and rank is a consequence, in time order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePath
from typing import Any

from ..contracts import runfiles
from ..contracts.records import load_json, read_file

MAX_RECORD_BYTES = 4 * 2**20  # settings.json and lost_nodes.json are a few KB
STAMP_LOOKBACK = 200  # lines searched above an event for a time stamp
MAX_CONSEQUENCES = 32

# CANN's plogs write milliseconds and microseconds apart: "2025-04-08-18:07:20.444.966".
_FULL = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T-](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6})(?:\.(\d{3})\b)?)?")
_VLLM = re.compile(r"\b(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\b")
_GLOG = re.compile(r"\[[IWEF](\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?")
_IPV4 = r"(\d{1,3}(?:\.\d{1,3}){3})"
# Ray's prefix of a forwarded line: "(WorkerDict pid=123, ip=10.0.0.2)", "(raylet, ip=10.0.0.2)".
_PREFIX_IP = re.compile(r"^(?:\x1b\[[\d;]{0,20}m|`)?\(\s*[^)]*?\bip=" + _IPV4 + r"[^)]*\)")
# A host name a fan-out tool puts before each line: pdsh/clush "node-3: ", docker compose "node-3  | ". A name of
# lower-case letters, digits, dots and hyphens with a digit in it (so neither "RuntimeError: " nor "train.py: ").
# NCCL's own debug prefix is "host:pid:tid [die] NCCL ...".
_PREFIX_HOST = (
    re.compile(r"^([a-z][a-z0-9-]{0,40}\d[a-z0-9-]{0,20}(?:\.[a-z0-9-]{1,40}){0,4})(?::\s|\s{0,8}\|\s)"),
    re.compile(r"^" + _IPV4 + r"(?::\s|\s{0,8}\|\s)"),
    re.compile(r"^([\w.-]{1,80}):\d{1,10}:\d{1,10} \[\d{1,3}\] NCCL "),
)
# A Ray death reason's own address of the dead worker or node.
_DEAD_IP = (
    re.compile(r"^\s*ip:\s*\[?" + _IPV4),  # ActorDiedError's field list
    re.compile(r"Worker IP address:\s*" + _IPV4),
    re.compile(r"\(IP:\s*" + _IPV4),  # the memory monitor: "Memory on the node (IP: 10.20.49.141, ID: ...)"
    re.compile(r"\bIP:\s*" + _IPV4 + r"\)"),  # the raylet's OOM summary: "at node (ID: ..., IP: 172.31.105.218)"
    re.compile(r"and (?:address|ip):\s*" + _IPV4),  # a node marked dead
)
_RANK = (
    re.compile(r"\[rank(\d+)\]"),  # torch's "[rank3]:"
    re.compile(r"RankID:(\d+)"),  # torch_npu's "(PID:1, Device:0, RankID:3)"
    re.compile(r"WorkerDict_\d+:(\d+)"),
    re.compile(r"\[Rank (\d+)\]"),  # ProcessGroupNCCL's and ProcessGroupHCCL's "[Rank 3] Watchdog caught ..."
    re.compile(r"^\[\d+,(\d+)\]<std(?:out|err)>:"),  # Open MPI's --tag-output "[1,3]<stderr>:"
)
_DEVICE = (re.compile(r"\bDevice:(\d+)"), re.compile(r"\(NPU (\d+);"))
_LOCAL_IP = re.compile(r"Local node IP:\s*" + _IPV4)
# HCCL's heartbeat lines: an [IP/ID] is "10.0.0.2/3" (the rank's host address and its rank id).
HEARTBEAT = re.compile(
    r"\[HeartbeatAbnormal\]\s*local rank\s*\[([^\]]*)\]\s*[:：]\s*crimer rank\s*\[([^\]]*)\]\s*"
    r"status\s*\[([^\]]*)\]\s*by informer rank\s*\[([^\]]*)\]"
)
CLUSTER_EXCEPTION = re.compile(
    r"Cluster Exception Location\[IP/ID\]:\s*\[([^\]]*)\](?:.*?ExceptionType:\s*\[([^\]]*)\])?"
)
# The guide's priority of heartbeat events: a network fault explains a stuck or lost peer, a stuck one a lost one.
HEARTBEAT_PRIORITY = {"ERROR CQE": 0, "Error cqe Occurred": 0, "STUCK": 1, "Stuck Occurred": 1}
# A set-up that lists the ranks that never joined (codes.unconnected_ranks) comes after the heartbeat's own verdict.
NEVER_CONNECTED = "never connected"
HEARTBEAT_PRIORITY[NEVER_CONNECTED] = 3
CONFIDENCE_ORDER = {"high": 0, "medium": 1, "low": 2}


@dataclass(frozen=True)
class Event:
    """One error line: what it is (a signature's or a general rule's id), where, when, on which host and rank."""

    id: str
    title: str
    family: str
    confidence: str
    symptom: bool
    file: str
    line: int
    excerpt: str
    time: datetime | None
    host: str | None
    rank: str | None
    device: str | None
    order: int  # the table's position: causes before symptoms where times tie
    seq: int  # reading order
    crimer: tuple[str | None, str | None] | None = None  # a heartbeat line's failed (host, rank)
    crimer_status: str = ""
    file_no: int = 0  # its log's place in reading order (train.log first)
    cause: str = ""  # a general rule's cause (a signature's is in its row)
    basis: str = ""  # which general rule put it in its family
    fix: str = ""  # a general rule's own fix (empty: its family's)
    specific: int = 2  # taxonomy.py: 0 a wrapper, 1 a code's class, 2 a rule on the message, 3 a signature
    reach: int = 0  # lines under it that may say more: a wrapper's cause, an exception's message

    def where(self) -> str:
        parts = [self.host or "an unknown host"]
        if self.rank is not None:
            parts.append(f"{'ranks' if ',' in self.rank else 'rank'} {self.rank}")
        if self.device is not None:
            parts.append(f"die {self.device}")
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "family": self.family,
            "confidence": self.confidence,
            "host": self.host,
            "rank": self.rank,
            "device": self.device,
            "time": self.time.isoformat(sep=" ") if self.time else None,
            "file": self.file,
            "line": self.line,
            "excerpt": self.excerpt,
        }


def stamp(line: str, year: int) -> datetime | None:
    """The time a line carries, or None. Stamps without a year get `year`."""
    try:
        m = _FULL.search(line)
        if m:
            y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
            ms = m.group(7) or "0"
            frac = int((ms + m.group(8)) if m.group(8) and len(ms) == 3 else ms.ljust(6, "0")[:6])
            return datetime(y, mo, d, h, mi, s, frac)
        m = _VLLM.search(line)
        if m:
            mo, d, h, mi, s = (int(g) for g in m.groups())
            return datetime(year, mo, d, h, mi, s)
        m = _GLOG.search(line)
        if m:
            mo, d, h, mi, s = (int(g) for g in m.groups()[:5])
            frac = int((m.group(6) or "0").ljust(6, "0")[:6])
            return datetime(year, mo, d, h, mi, s, frac)
    except ValueError:  # a month 13 in a line that only looks like a stamp
        return None
    return None


def time_above(lines: Sequence[str], i: int, year: int) -> datetime | None:
    """The stamp of lines[i], else of the nearest line above it (within STAMP_LOOKBACK)."""
    for j in range(i, max(-1, i - STAMP_LOOKBACK), -1):
        t = stamp(lines[j], year)
        if t is not None:
            return t
    return None


def year_of(texts: Iterable[Sequence[str]]) -> int:
    """The latest year of any full stamp in the first and last lines of the logs (for stamps without one)."""
    best = 1970
    for lines in texts:
        for line in list(lines[:50]) + list(lines[-50:]):
            m = _FULL.search(line)
            if m and 1970 < int(m.group(1)) < 10000:
                best = max(best, int(m.group(1)))
    return best


def _read_record(path: Path) -> Any:
    try:
        return load_json(read_file(path, MAX_RECORD_BYTES))
    except (OSError, ValueError):
        return None  # a record that is absent or damaged names no host: the logs still do


def _host_ip_pairs(doc: Any) -> Iterable[tuple[str, str]]:
    """(host, ip) of every entry of a list of {"host"|"name", "ip"} objects."""
    if not isinstance(doc, list):
        return
    for item in doc[:4096]:
        if isinstance(item, dict):
            host, ip = item.get("host") or item.get("name"), item.get("ip")
            if isinstance(host, str) and isinstance(ip, str) and host and ip:
                yield host, ip


@dataclass
class Hosts:
    """Addresses to host names, and the head's host (train.log's lines without a Ray address)."""

    by_ip: dict[str, str]
    head: str | None = None

    def name(self, ip: str | None) -> str | None:
        if ip is None:
            return None
        return self.by_ip.get(ip, ip)  # an address the record does not know is still a place


def hosts_of(run_dirs: Sequence[Path], node_logs: Mapping[str, Sequence[str]]) -> Hosts:
    """The run record's hosts: settings.json, lost_nodes.json, and each node log's "Local node IP" line."""
    hosts = Hosts({})
    for run_dir in run_dirs:
        settings = _read_record(run_dir / runfiles.SETTINGS)
        if isinstance(settings, dict):
            head = settings.get("host")
            if isinstance(head, str) and head:
                hosts.head = head
                cluster = settings.get("cluster")
                if isinstance(cluster, str) and re.fullmatch(_IPV4 + r"(?::\d+)?", cluster):
                    hosts.by_ip.setdefault(cluster.split(":")[0], head)
            for key in ("nodes", "members"):
                for host, ip in _host_ip_pairs(settings.get(key)):
                    hosts.by_ip.setdefault(ip, host)
        for host, ip in _host_ip_pairs(_read_record(run_dir / runfiles.LOST_NODES)):
            hosts.by_ip.setdefault(ip, host)
    for host, lines in node_logs.items():
        for line in lines[:400]:  # `ray start` prints its address near the top of the node's log
            m = _LOCAL_IP.search(line)
            if m:
                hosts.by_ip.setdefault(m.group(1), host)
                break
    return hosts


def node_of(name: str) -> str | None:
    """The host a node log belongs to: nodes/<host>.log, or anything under nodes/<host>/."""
    parts = PurePath(name.removesuffix(" (tail)")).parts
    for k in range(len(parts) - 1, -1, -1):
        if parts[k] == runfiles.NODES and k + 1 < len(parts):
            nxt = parts[k + 1]
            return nxt.rsplit(".", 1)[0] if k + 2 == len(parts) else nxt
    return None


def rank_of(line: str) -> str | None:
    for rx in _RANK:
        m = rx.search(line)
        if m:
            return m.group(1)
    return None


def device_of(line: str) -> str | None:
    for rx in _DEVICE:
        m = rx.search(line)
        if m:
            return m.group(1)
    return None


def line_host(line: str, file_host: str | None, hosts: Hosts, is_driver_log: bool) -> str | None:
    """The host a line came from: its Ray prefix's address, else its file's host, else the head for train.log."""
    m = _PREFIX_IP.match(line)
    if m:
        return hosts.name(m.group(1))
    for rx in _PREFIX_HOST:
        m = rx.match(line)
        if m:
            return hosts.name(m.group(1))
    if file_host is not None:
        return file_host
    return hosts.head if is_driver_log else None


def dead_worker(lines: Sequence[str], i: int, hosts: Hosts) -> tuple[str | None, str | None]:
    """(host, rank) of the worker a Ray death reason at lines[i] names: its own address and actor name nearby."""
    host = rank = None
    for j in range(max(0, i - 8), min(len(lines), i + 12)):
        text = lines[j]
        if host is None:
            for rx in _DEAD_IP:
                m = rx.search(text)
                if m:
                    host = hosts.name(m.group(1))
                    break
        if rank is None and "WorkerDict_" in text and "name:" in text:
            rank = rank_of(text)
    return host, rank


def _ip_id(text: str, hosts: Hosts) -> tuple[str | None, str | None]:
    ip, _, rank = text.strip().partition("/")
    return hosts.name(ip.strip() or None), (rank.strip() or None)


def heartbeat_crimer(line: str, hosts: Hosts) -> tuple[tuple[str | None, str | None], str] | None:
    """((host, rank), status) of the rank a heartbeat line names as failed."""
    m = HEARTBEAT.search(line)
    if m:
        return _ip_id(m.group(2), hosts), m.group(3).strip()
    m = CLUSTER_EXCEPTION.search(line)
    if m:
        return _ip_id(m.group(1), hosts), (m.group(2) or "").strip()
    return None


def _sort_key(e: Event) -> tuple[Any, ...]:
    # A line with no time stamp of its own or above it is placed by its log's order: a log is written in order, so
    # an earlier line of the same log came first, whatever table found it.
    where = (e.file_no, e.line) if e.time is None else (0, 0)
    return (e.time is None, e.time or datetime.min, *where, CONFIDENCE_ORDER.get(e.confidence, 3), e.order, e.seq)


REFINE_LINES = 12  # a wrapper's own explanation (CANN's message, the exception under it) follows within these lines
WRAPPED = 2  # events less specific than a message rule: a wrapper (torch_npu's ERR code) or a code's class
GENERIC_FAMILY = "code-config"  # the family Python's generic exception types give (families.EXCEPTIONS, last)
# Python's errors that name the code itself, never a value it was given (docs.python.org "Built-in exceptions").
CODE_ITSELF = re.compile(r"\b(?:SyntaxError|IndentationError|TabError|NameError|UnboundLocalError)\b")
# What an exception causes: the worker that raised it dies (Ray's death reasons), so a death never outranks it.
CONSEQUENCES = ("ray-lost",)
MOMENT_S = 2  # stamps this close are one moment's: an exception's message and the lines logged with it


def _under_wrapper(first: Event, events: Sequence[Event]) -> Event:
    """The nearest more specific event printed just under `first` when `first` only wraps it (torch_npu's "ERR02200 call
    hccl api failed" above CANN's own message, CANN's code above its text, Ray's "error raised in its creation task"
    above the constructor's traceback): a chain followed to its root. A Python exception is read through only within
    its own message (torch_npu and CANN print their explanation under "RuntimeError: ..."), never into the next
    traceback: the root of a chain is the earliest traceback, which the order already puts first."""
    if first.specific >= WRAPPED:
        return first
    exception = first.id == "exception-type"
    reach = first.reach if exception else max(first.reach, REFINE_LINES)
    best = first
    for e in events:
        if e.file_no != first.file_no or not 0 < e.line - first.line <= reach or e.specific < first.specific:
            continue
        if e.specific == first.specific and not (exception and e.id != "exception-type"):
            continue  # a code's class in an exception's message says more than its type; nothing else of its rank
        if exception and not _same_moment(e, first):
            continue  # a line of a later moment is a new record, not the exception's message
        if best is first or e.line < best.line:
            best = e  # the nearest: in a chain, the first error under the wrapper is its cause
    return best


def _same_moment(a: Event, b: Event) -> bool:
    """Whether two events may be one moment's: either has no stamp, or their stamps are MOMENT_S apart at most."""
    return a.time is None or b.time is None or abs((a.time - b.time).total_seconds()) <= MOMENT_S


def _generic(e: Event) -> bool:
    """An error read only by a generic exception's type or place (code-config: TypeError, ValueError, AssertionError
    ..., or Ray's "error raised in its creation task" not read through): no rule on its message names it."""
    return e.family == GENERIC_FAMILY and e.specific < WRAPPED and not CODE_ITSELF.search(e.excerpt)


def _more_specific(first: Event, causes: Sequence[Event]) -> Event:
    """For a generic exception, the earliest cause of the same log and moment that a rule or a code names: Python's
    generic types are raised wherever a value is wrong, so the specific error beside one says more (a CANN code, a
    driver's, a rule on the message). Later moments keep their order: a stamp says what came first."""
    if not _generic(first):
        return first
    for e in causes:
        if e.file_no != first.file_no or e.family in (GENERIC_FAMILY, *CONSEQUENCES) or e.id == "exception-type":
            continue
        if _same_moment(e, first) and e.specific >= WRAPPED - 1:
            return e
    return first


@dataclass(frozen=True)
class Ordering:
    first: Event | None
    consequences: tuple[Event, ...]
    why: str  # how the first failure was chosen, one line


def order(events: Sequence[Event]) -> Ordering:
    """The first failure and the first event of every other host and rank (module docstring)."""
    if not events:
        return Ordering(None, (), "no error line found")
    ranked = sorted(events, key=_sort_key)
    beats = [e for e in events if e.crimer is not None]
    first: Event | None = None
    why = ""
    if beats:
        beat = min(beats, key=lambda e: (HEARTBEAT_PRIORITY.get(e.crimer_status, 2), _sort_key(e)))
        host, rank = beat.crimer or (None, None)
        if beat.crimer_status == NEVER_CONNECTED:  # no host: the ranks' own errors, wherever they were logged
            named = set((rank or "").split(","))
            own = [e for e in ranked if e.rank in named and not e.symptom and e.crimer is None]
        else:
            own = [e for e in ranked if e.host == host and host is not None and not e.symptom and e.crimer is None]
        if own and (rank is None or own[0].rank in (None, *(rank or "").split(","))):
            first = own[0]
        else:
            first = Event(**{**beat.__dict__, "host": host, "rank": rank, "device": None, "crimer": None})
        if beat.crimer_status == NEVER_CONNECTED:
            why = f"the communicator's set-up names {first.where()} as never connected: the others waited on it"
        else:
            why = f"HCCL's heartbeat names {first.where()} ({beat.crimer_status or 'failed'}) as the rank that failed"
    else:
        causes = [e for e in ranked if not e.symptom]
        if causes:
            first = causes[0]
            why = "the earliest error that is not a timeout or a broken link"
            specific = _more_specific(first, causes)
            if specific is not first:
                first = specific
                why += ", a specific error ahead of a generic Python exception beside it"
        else:
            first = ranked[0]
            why = "only timeouts and broken links were found: the rank they waited on may have hung without an error"
        root = _under_wrapper(first, events)
        if root is not first:
            first = root
            why += ", read through the error that wrapped it to the one printed under it"
    seen = {(first.host, first.rank)}
    rest: list[Event] = []
    for e in ranked:
        key = (e.host, e.rank)
        if key in seen or e.crimer is not None:
            continue
        seen.add(key)
        rest.append(e)
        if len(rest) >= MAX_CONSEQUENCES:
            break
    return Ordering(first, tuple(rest), why)
