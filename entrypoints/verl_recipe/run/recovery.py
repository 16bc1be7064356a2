"""Where a restarted attempt runs, and when the cluster can take it: pure functions over the head's view of the
cluster (Ray's node list and a knock on each raylet's port), so that every outage is a test case (tests/unit/
test_recovery.py) and `verl-recipe train` only feeds them.

A node the attempt's own watch named lost stays out of the next attempt until it is back for real: Ray lists one
live node at its address, and that node answers the knock: at once when it is a new registration (the host rebooted
and its node joined again), after as long as the watch took to name it lost when it is the same registration (the
network came back before Ray gave the node up). Ray's view alone is never enough: it counts a powered-off host's dies
as free until its health checks give up, 30 s or more, and a job placed there hangs. A node that stops answering
during the wait joins the lost ones. With more healthy nodes than NNODES (a spare host) the next attempt starts at
once on the healthy ones, the same layout and world size, so the same checkpoint; without, it waits for the lost host
up to RESTART_WAIT and then ends, naming it."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ..cluster.clusterwait import NodeView, assess
from ..cluster.nodewatch import LOST_AFTER_S, describe
from ..exitcodes import EXIT_NOT_READY, EXIT_OK
from ..problems import error


@dataclass(frozen=True)
class LostNode:
    """A node named lost: its host, address and Ray's ID of the registration that was lost ("" when unknown)."""

    name: str
    ip: str
    node_id: str = ""
    what: str = ""

    def label(self) -> str:
        return f"{self.name} ({self.ip})" if self.name != self.ip else self.ip


@dataclass(frozen=True)
class Choice:
    """The nodes a next attempt may run on (verl's placement picks among them), and who is left out."""

    ready: bool
    members: tuple[NodeView, ...]
    out: tuple[LostNode, ...]  # lost and not back
    back: tuple[LostNode, ...]  # lost before, back for real
    spares: int  # healthy nodes beyond NNODES
    line: str


def is_back(lost: LostNode, views: Iterable[NodeView], answering_s: Mapping[str, float], confirm_s: float) -> bool:
    """Whether a lost node counts again. `answering_s`: address -> seconds its raylet has answered every knock
    (absent: its last knock failed, or it was not knocked)."""
    live = [v for v in views if v.alive and v.ip == lost.ip]
    if len(live) != 1 or lost.ip not in answering_s:
        return False  # not joined; not answering; or an earlier boot's node beside the new one (work there never runs)
    if lost.node_id and live[0].node_id and live[0].node_id != lost.node_id:
        return True  # a new registration that answers
    return answering_s[lost.ip] >= confirm_s  # the same one: as long as it took to name it lost, and it answered


def choose(
    views: list[NodeView],
    lost: Mapping[str, LostNode],
    answering_s: Mapping[str, float],
    expected: tuple[tuple[str, str], ...],
    nnodes: int,
    dies: int,
    confirm_s: float = LOST_AFTER_S,
) -> Choice:
    """Ready when NNODES nodes that are neither lost-and-not-back nor silent can take their share of the job."""
    back = tuple(x for x in lost.values() if is_back(x, views, answering_s, confirm_s))
    out = tuple(x for x in lost.values() if x not in back)
    out_ips = {x.ip for x in out}
    live: dict[str, int] = {}
    for v in views:
        live[v.ip] = live.get(v.ip, 0) + int(v.alive)
    # Alive, not left out, answering (a node that failed its last knock is not counted until it answers), and not
    # one of two live entries at one address (a rebooted host whose earlier node Ray has not dropped yet).
    usable = [
        v for v in views if v.alive and v.ip not in out_ips and (v.port <= 0 or v.ip in answering_s) and live[v.ip] < 2
    ]
    a = assess(usable, expected, nnodes, dies)
    line = a.line
    if out:
        line += "; left out: " + ", ".join(f"{x.label()} (lost, not back)" for x in out)
    # Ray places the job on any node it lists alive with free dies: while a node it still lists is lost, silent or
    # a ghost of a rebooted host, a rank could land there and never run. The restart waits for Ray to give it up
    # (drained: at once; else its health checks, about 30 s), however many healthy nodes there are.
    hazards = sorted(
        {
            f"{v.name} ({v.ip})" if v.name != v.ip else v.ip
            for v in views
            if v.alive and (v.ip in out_ips or live[v.ip] > 1 or (v.port > 0 and v.ip not in answering_s))
        }
    )
    if hazards:
        line += (
            f"; waiting for Ray to give up {', '.join(hazards)} (alive in its view, not usable: work placed there "
            "would never run)"
        )
    return Choice(a.ready and not hazards, tuple(a.good), out, back, max(0, len(a.good) - nnodes), line)


@dataclass
class Knocks:
    """Each address's run of answered (or failed) knocks, from which `choose` reads answering_s and the wait names
    a node that stopped answering."""

    now: Callable[[], float] = time.monotonic
    answering_since: dict[str, float] = field(default_factory=dict)
    failing_since: dict[str, tuple[float, int, str]] = field(default_factory=dict)

    def update(self, views: list[NodeView], knock: Callable[[str, int], str | None]) -> None:
        t = self.now()
        for v in views:
            if not v.alive or v.port <= 0:
                continue
            why = knock(v.ip, v.port)
            if why is None:
                self.answering_since.setdefault(v.ip, t)
                self.failing_since.pop(v.ip, None)
            else:
                self.answering_since.pop(v.ip, None)
                since, n, _ = self.failing_since.get(v.ip, (t, 0, why))
                self.failing_since[v.ip] = (since, n + 1, why)

    def answering_s(self) -> dict[str, float]:
        t = self.now()
        return {ip: t - since for ip, since in self.answering_since.items()}

    def silent(self, views: list[NodeView], confirm_s: float) -> list[LostNode]:
        """Nodes that failed every knock for confirm_s (at least two knocks): lost, as the run's watch says it."""
        t = self.now()
        out = []
        for v in views:
            since, n, why = self.failing_since.get(v.ip, (t, 0, ""))
            if v.alive and n >= 2 and t - since >= confirm_s:
                out.append(LostNode(v.name, v.ip, v.node_id, describe(why, v.ip, v.port, t - since)))
        return out


def wait_for_restart(
    snapshot: Callable[[], list[NodeView]],
    knock: Callable[[str, int], str | None],
    lost: dict[str, LostNode],
    expected: tuple[tuple[str, str], ...],
    nnodes: int,
    dies: int,
    deadline_s: float,
    confirm_s: float = LOST_AFTER_S,
    poll_s: float = 2.0,
    report_every_s: float = 10.0,
    now: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_poll: Callable[[], None] = lambda: None,
) -> tuple[int, Choice]:
    """0 and the choice once NNODES healthy nodes can take the job; 3 and the last choice on the deadline, with one
    line naming the hosts still out. `lost` grows with any node that stops answering meanwhile (the caller records
    it and keeps it out of later attempts)."""
    start = now()
    knocks = Knocks(now)
    last_report = -report_every_s
    while True:
        views = snapshot()
        knocks.update(views, knock)
        for x in knocks.silent(views, confirm_s):
            if x.ip not in lost:
                lost[x.ip] = x
                error(f"{x.label()} lost: {x.what} (while the head waited to restart)", flush=True)
        c = choose(views, lost, knocks.answering_s(), expected, nnodes, dies, confirm_s)
        elapsed = now() - start
        if c.ready:
            print(f"{c.line} - ready after {elapsed:.1f} s", file=sys.stderr, flush=True)
            return EXIT_OK, c
        if elapsed >= deadline_s:
            who = ", ".join(x.label() for x in c.out) or c.line
            error(
                f"the restart waited {deadline_s:.0f} s (RESTART_WAIT) for {nnodes} healthy nodes; still out: {who}; "
                "fix: bring the host back (or add a spare host to the site), then run the same command: it resumes "
                "from the latest checkpoint",
                flush=True,
            )
            return EXIT_NOT_READY, c
        if elapsed - last_report >= report_every_s:
            print(f"waiting: {c.line}", file=sys.stderr, flush=True)
            last_report = elapsed
        on_poll()
        sleep(poll_s)
