"""The restart wait (run/recovery.py) over a fake site whose lost host behaves as real hosts do: a power cut reboots
it (its Ray node comes back under a new ID, after its raylet listens again), a network cut keeps its node until Ray
gives it up (then the raylet exits on reconnect and the node service starts a new one), and Ray marks the old node
dead only after its own health checks (or at once, once the head drained it). The site is modelled from those
behaviours, never from what the wait reads, so a wrong rule fails here: the matrix covers host counts, outage
lengths, the kind of outage and whether Ray was told."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from verl_recipe.cluster.clusterwait import NodeView
from verl_recipe.exitcodes import EXIT_NOT_READY, EXIT_OK
from verl_recipe.run.recovery import LostNode, choose, wait_for_restart

PORT = 6380
WATCH_S = 10.0  # the run's watch names a silent node after this long (nodewatch.LOST_AFTER_S)
RAY_DEATH_S = 30.0  # Ray's health checks give a silent node up after about this long
LISTEN_S = 4.0  # a rebooted host's raylet listens this long after power-on ...
REGISTER_S = 7.0  # ... and its new node is in Ray's list this long after power-on
RESTART_WAIT = 300.0


@dataclass
class Site:
    """Hosts a3-01.. with a3-01 the head. The victim went silent at t = -WATCH_S (the watch named it at t = 0, when
    the restart wait starts) and is powered on / reconnected at t = outage - WATCH_S."""

    hosts: int
    victim: int  # index into the hosts
    outage: float
    kind: str  # "power" or "network"
    drained: bool  # the head told Ray the node is gone when its watch named it
    t: float = 0.0

    def name(self, i: int) -> str:
        return f"a3-{i + 1:02d}"

    def ip(self, i: int) -> str:
        return f"10.0.0.{i + 1}"

    @property
    def back_at(self) -> float:
        return self.outage - WATCH_S

    @property
    def old_dead_at(self) -> float:
        if self.drained:
            return 0.0
        if self.kind == "network" and self.outage < RAY_DEATH_S:
            return float("inf")  # back before Ray gave it up: the same node goes on
        return RAY_DEATH_S - WATCH_S

    @property
    def same_node_back(self) -> bool:
        return self.kind == "network" and self.old_dead_at == float("inf")

    def new_node_at(self) -> float:
        """When a new registration of the victim is in Ray's list (inf: never within the test)."""
        if self.same_node_back:
            return float("inf")
        if self.kind == "power":  # a reboot registers after power-on, whatever Ray still lists
            return self.back_at + REGISTER_S
        # a raylet cut off and given up (or drained) exits when it reconnects and the node service starts another
        return max(self.back_at, self.old_dead_at) + REGISTER_S

    def snapshot(self) -> list[NodeView]:
        views = []
        for i in range(self.hosts):
            name, ip = self.name(i), self.ip(i)
            if i != self.victim:
                views.append(NodeView(name, ip, 16, 16, 48, True, PORT, f"{name}-1"))
                continue
            views.append(NodeView(name, ip, 16, 16, 48, self.t < self.old_dead_at, PORT, f"{name}-1"))
            if self.t >= self.new_node_at():
                views.append(NodeView(name, ip, 16, 16, 48, True, PORT, f"{name}-2"))
        return views

    def knock(self, ip: str, _port: int) -> str | None:
        if ip != self.ip(self.victim):
            return None
        # a cut network answers again when it is back (the same raylet, or at once its successor); a powered-off
        # host once it has booted and its raylet listens
        listening = self.back_at if self.kind == "network" else self.back_at + LISTEN_S
        return None if self.t >= listening else "silent"

    def sleep(self, s: float) -> None:
        self.t += s

    def expected(self) -> tuple[tuple[str, str], ...]:
        return tuple((self.name(i), self.ip(i)) for i in range(self.hosts))

    def lost(self) -> dict[str, LostNode]:
        v = self.victim
        return {self.ip(v): LostNode(self.name(v), self.ip(v), f"{self.name(v)}-1")}

    def healthy_at(self, t: float) -> bool:
        """Whether the victim is whole at t by the site's own behaviour (not by the wait's rules)."""
        if self.same_node_back:  # answering, as long as the watch needed to name it, since the wait began
            return t >= max(self.back_at, 0.0) + WATCH_S
        return t >= self.new_node_at() and (self.old_dead_at <= t)


NNODES = 2
HOSTS = [1, NNODES, NNODES + 1, NNODES + 2]
OUTAGES = {
    "shorter than the watch": 6.0,
    "between the watch and Ray's death marking": 20.0,
    "longer than Ray's death marking": 60.0,
    "longer than RESTART_WAIT": RESTART_WAIT + 200.0,
}


def run(site: Site, deadline: float = RESTART_WAIT) -> tuple[int, tuple[NodeView, ...], float, dict[str, LostNode]]:
    lost = site.lost()
    seen: list[tuple[float, list[str]]] = []

    def snap() -> list[NodeView]:
        views = site.snapshot()
        seen.append((site.t, [v.node_id for v in views if v.alive]))
        return views

    rc, choice = wait_for_restart(
        snap, site.knock, lost, site.expected(), NNODES, 16, deadline,
        confirm_s=WATCH_S, poll_s=1.0, now=lambda: site.t, sleep=site.sleep,
    )  # fmt: skip
    return rc, choice.members, site.t, lost


@pytest.mark.parametrize(
    ("hosts", "victim", "outage", "kind", "drained"),
    [
        (h, v, o, k, d)
        for h, v, o, k, d in itertools.product(HOSTS, [1, -1], OUTAGES, ["power", "network"], [False, True])
        if (h > 2 or v == 1)
    ],
)
def test_the_wait_over_every_outage(hosts: int, victim: int, outage: str, kind: str, drained: bool) -> None:
    # a worker: the first or the last; on a one-host site its only host (a head the wait cannot outlive is
    # test_lifecycle's: the supervisor lives there)
    site = Site(hosts, 0 if hosts == 1 else victim % hosts, OUTAGES[outage], kind, drained)
    rc, members, t_end, lost = run(site)
    victim_ip = site.ip(site.victim)
    on_victim = [m for m in members if m.ip == victim_ip]
    others = hosts - 1
    if others >= NNODES:
        # a spare: as soon as Ray no longer lists the lost registration alive (drained: at once), or the host is
        # whole again, whichever comes first; never a rank where Ray could still place one on the lost node
        ready_at = next(t for t in range(0, int(RESTART_WAIT)) if site.old_dead_at <= t or site.healthy_at(t))
        assert rc == EXIT_OK and ready_at <= t_end <= ready_at + 2.0, (rc, t_end, ready_at)
        assert len(members) >= NNODES
        if not site.same_node_back:
            assert all(m.node_id != f"{site.name(site.victim)}-1" for m in members), members
        if drained:
            assert t_end <= 1.0 and not on_victim, "drained: at once, without it"
        return
    if hosts < NNODES:
        assert rc == EXIT_NOT_READY and t_end >= RESTART_WAIT
        return
    # no spare: the wait ends when the host is whole again by its own behaviour, or on the deadline
    whole_at = next((t for t in range(0, int(RESTART_WAIT) + 1) if site.healthy_at(float(t))), None)
    if whole_at is None:
        assert rc == EXIT_NOT_READY and t_end >= RESTART_WAIT, (rc, t_end)
        assert victim_ip in lost
        return
    assert rc == EXIT_OK, (rc, t_end, whole_at)
    assert whole_at <= t_end <= whole_at + 2.0, (t_end, whole_at)
    (node,) = on_victim
    # never the registration that was lost, unless the network came back before Ray gave that node up
    assert node.node_id == f"{site.name(site.victim)}-{1 if site.same_node_back else 2}", node


def test_a_node_silent_during_the_wait_is_left_out_and_named(capsys: pytest.CaptureFixture[str]) -> None:
    # 4 hosts for NNODES=2, a3-02 lost; a3-03 stops answering during the wait: the wait goes on with a3-01 and a3-04
    site = Site(4, 1, 10_000, "power", True)
    silent_from = 0.0

    def knock(ip: str, port: int) -> str | None:
        return "silent" if ip == site.ip(2) and site.t >= silent_from else site.knock(ip, port)

    lost = site.lost()
    rc, choice = wait_for_restart(
        site.snapshot, knock, lost, site.expected(), 3, 16, 60, confirm_s=WATCH_S, poll_s=1.0,
        now=lambda: site.t, sleep=site.sleep,
    )  # fmt: skip
    assert rc == EXIT_NOT_READY  # 3 nodes needed, 2 left answering
    assert set(lost) == {site.ip(1), site.ip(2)}
    err = capsys.readouterr().err
    assert "a3-03 (10.0.0.3) lost: the host does not answer at all" in err
    assert "still out: a3-02 (10.0.0.2), a3-03 (10.0.0.3)" in err and "fix:" in err


def test_two_live_nodes_at_one_address_are_never_counted() -> None:
    ghost = NodeView("a3-02", "10.0.0.2", 16, 16, 48, True, PORT, "old")
    new = NodeView("a3-02", "10.0.0.2", 16, 16, 48, True, PORT, "new")
    head = NodeView("a3-01", "10.0.0.1", 16, 16, 48, True, PORT, "h")
    answering = {"10.0.0.1": 60.0, "10.0.0.2": 60.0}
    lost = {"10.0.0.2": LostNode("a3-02", "10.0.0.2", "old")}
    c = choose([head, ghost, new], lost, answering, (), 2, 16)
    assert not c.ready and c.out == (lost["10.0.0.2"],)
    c = choose([head, new], lost, answering, (), 2, 16)
    assert c.ready and {m.node_id for m in c.members} == {"h", "new"} and c.back == (lost["10.0.0.2"],)


@settings(max_examples=300, deadline=None)
@given(
    hosts=st.integers(1, 6),
    victim=st.integers(0, 5),
    outage=st.floats(0.5, 700),
    kind=st.sampled_from(["power", "network"]),
    drained=st.booleans(),
    nnodes=st.integers(1, 5),
    deadline=st.floats(0, 400),
)
def test_invariants(
    hosts: int, victim: int, outage: float, kind: str, drained: bool, nnodes: int, deadline: float
) -> None:
    """Whatever the site: the wait ends by its deadline (plus one poll); a ready choice has NNODES members, none at a
    silent address, none the lost registration unless the same node came back; never two members at one address."""
    site = Site(hosts, victim % hosts, outage, kind, drained)
    lost = site.lost()
    rc, choice = wait_for_restart(
        site.snapshot, site.knock, lost, site.expected(), nnodes, 16, deadline, confirm_s=WATCH_S, poll_s=1.0,
        now=lambda: site.t, sleep=site.sleep,
    )  # fmt: skip
    assert site.t <= deadline + 1.0
    if rc != EXIT_OK:
        assert rc == EXIT_NOT_READY
        return
    ips = [m.ip for m in choice.members]
    assert len(ips) >= nnodes and len(set(ips)) == len(ips)
    for m in choice.members:
        assert site.knock(m.ip, PORT) is None, m
        if m.ip == site.ip(site.victim):
            assert m.node_id != f"{site.name(site.victim)}-1" or site.same_node_back, m
