"""Name a node the moment it is lost, not when Ray gets round to it.

Ray marks a node dead only after its health checks fail several times in a row, and until then it still counts
the node's dies as free: a host that lost its power looks ready to the wait, and a job placed on it hangs in its
first collective. The head therefore also knocks on every joined node's raylet port (a TCP connect): a host that
lost its power or its network does not answer at all, a host whose Ray node stopped refuses. A node that fails
every knock for `confirm_s` seconds (at least two knocks), or that Ray itself has marked dead, is lost, and the
head names it: host, address and what was lost.
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

LOST_AFTER_S = 10.0  # unanswered knocks for this long make a node lost (Ray's own verdict takes 30 s or more)
KNOCK_TIMEOUT_S = 1.0


class View(Protocol):
    """What the watch reads of a joined node (clusterwait.NodeView)."""

    @property
    def name(self) -> str: ...
    @property
    def ip(self) -> str: ...
    @property
    def alive(self) -> bool: ...
    @property
    def port(self) -> int: ...


@dataclass(frozen=True)
class Loss:
    name: str
    ip: str
    what: str
    after_s: float

    def line(self) -> str:
        label = f"{self.name} ({self.ip})" if self.name != self.ip else self.ip
        return f"{label} lost: {self.what}"

    def as_dict(self) -> dict[str, Any]:
        return {"host": self.name, "ip": self.ip, "what": self.what, "detected_after_s": round(self.after_s, 1)}


class NodeLost(RuntimeError):
    def __init__(self, losses: list[Loss], during: str) -> None:
        self.losses, self.during = losses, during
        super().__init__(lost_line(losses, during))


def lost_line(losses: list[Loss], during: str) -> str:
    return (
        "; ".join(x.line() for x in losses)
        + f" ({during}); fix: bring the host back (its Ray node rejoins by itself after a reboot), or leave it out "
        "of the layout, then run again: a training run resumes from its last checkpoint"
    )


def knock(ip: str, port: int, timeout: float = KNOCK_TIMEOUT_S) -> str | None:
    """None when something accepts at ip:port; else why not: 'refused' (host up, nothing listening) or 'silent'."""
    try:
        with socket.create_connection((ip, port), timeout=timeout):
            return None
    except ConnectionRefusedError:
        return "refused"
    except OSError as exc:
        return "refused" if exc.errno == errno.ECONNREFUSED else "silent"


@dataclass
class NodeWatch:
    """Knocks on joined nodes; `check` returns the nodes lost since the watch began (each reported once)."""

    confirm_s: float = LOST_AFTER_S
    knock: Callable[[str, int], str | None] = knock
    now: Callable[[], float] = time.monotonic
    failing: dict[str, tuple[float, int, str]] = field(default_factory=dict)  # ip -> (since, knocks, last reason)
    known: dict[str, str] = field(default_factory=dict)  # ip -> name of every node seen alive
    reported: set[str] = field(default_factory=set)

    @property
    def suspect(self) -> set[str]:
        """Addresses that failed their last knock but are not lost yet."""
        return set(self.failing) - self.reported

    def check(self, views: Iterable[View], only: set[str] | None = None) -> list[Loss]:
        views = list(views)
        alive = {v.ip: v for v in views if v.alive and (only is None or v.ip in only)}
        for v in alive.values():
            self.known.setdefault(v.ip, v.name)
        t = self.now()
        lost: list[Loss] = []
        # Ray's own verdict: a node it marked dead and that did not come back under the same address.
        for v in views:
            gone = not v.alive and v.ip in self.known and v.ip not in alive and v.ip not in self.reported
            if gone and (only is None or v.ip in only):
                since = self.failing.get(v.ip, (t, 0, ""))[0]
                lost.append(Loss(self.known[v.ip], v.ip, "Ray marked its node dead", t - since))
        targets = [v for v in alive.values() if v.port > 0 and v.ip not in self.reported]
        if targets:
            with ThreadPoolExecutor(max_workers=min(16, len(targets))) as pool:
                answers = list(pool.map(lambda v: self.knock(v.ip, v.port), targets))
            for v, why in zip(targets, answers, strict=True):
                if why is None:
                    self.failing.pop(v.ip, None)
                    continue
                since, knocks, _ = self.failing.get(v.ip, (t, 0, why))
                self.failing[v.ip] = (since, knocks + 1, why)
                if knocks + 1 >= 2 and t - since >= self.confirm_s:
                    lost.append(Loss(v.name, v.ip, describe(why, v.ip, v.port, t - since), t - since))
        for x in lost:
            self.reported.add(x.ip)
        return lost

    def rejoining(self, views: Iterable[View]) -> set[str]:
        """Addresses that Ray lists only as dead (a node of an earlier boot) but whose raylet port answers again:
        a host that rebooted and whose node is registering. The wait counts them as missing, not as gone."""
        views = list(views)
        alive = {v.ip for v in views if v.alive}
        stale = {v.ip: v.port for v in views if not v.alive and v.ip not in alive and v.port > 0}
        stale = {ip: port for ip, port in stale.items() if ip not in self.known}
        if not stale:
            return set()
        with ThreadPoolExecutor(max_workers=min(16, len(stale))) as pool:
            answers = dict(zip(stale, pool.map(lambda ip: self.knock(ip, stale[ip]), stale), strict=True))
        return {ip for ip, why in answers.items() if why is None}


def describe(why: str, ip: str, port: int, secs: float) -> str:
    if why == "refused":
        return f"the host answers but its Ray node does not (connection refused at {ip}:{port} for {secs:.0f} s)"
    return f"the host does not answer at all (no reply at {ip}:{port} for {secs:.0f} s: power or network lost)"


class Guard:
    """Raises NodeLost from inside a long wait on Ray: call it between short waits."""

    def __init__(self, watch: NodeWatch, views: Callable[[], list[Any]], during: str, every_s: float = 2.0) -> None:
        self.watch, self.views, self.during, self.every_s = watch, views, during, every_s
        self.only: set[str] | None = None
        self._last = float("-inf")

    def __call__(self, force: bool = False) -> None:
        t = self.watch.now()
        if not force and t - self._last < self.every_s:
            return
        self._last = t
        lost = self.watch.check(self.views(), self.only)
        if lost:
            raise NodeLost(lost, self.during)


class RunWatch:
    """During a training run: knock on the run's nodes every `every_s` seconds from a thread; on a loss, call
    `on_loss` once with the lost nodes (the launcher records them and stops verl, which cannot finish without them)."""

    def __init__(
        self,
        members: list[Any],
        on_loss: Callable[[list[Loss]], None],
        every_s: float = 5.0,
        watch: NodeWatch | None = None,
    ) -> None:
        import threading

        self.members = [m for m in members if m.alive and m.port > 0]
        self.on_loss, self.every_s = on_loss, every_s
        self.watch = watch or NodeWatch()
        self.lost: list[Loss] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="verl-recipe-nodewatch", daemon=True)

    def __enter__(self) -> RunWatch:
        if self.members:
            self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.every_s + 5)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            lost = self.watch.check(self.members)
            if lost:
                self.lost += lost
                self.on_loss(lost)
