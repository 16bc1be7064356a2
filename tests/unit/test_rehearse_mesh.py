"""The rehearsal's cross-node TCP mesh on loopback: a node whose kernel drops new connections (a full accept queue,
which drops the SYN exactly as a DROP firewall rule does) or refuses them is named, with the nodes that could not
reach it; a healthy mesh reports every ordered pair and no problem."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from verl_recipe.rehearse import mesh as rehearse

NODES = {"127.0.0.11": "a3-01", "127.0.0.12": "a3-02", "127.0.0.13": "a3-03"}


class Call:
    """`actor.method.remote(...)` evaluated at once; FakeRay.get hands the values back."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def remote(self, *args: Any) -> Any:
        return self.fn(*args)


class FakeRank:
    """One node's first rank: its listener is a real socket on the node's loopback address."""

    def __init__(self, ip: str, mode: str) -> None:
        self.ip, self.mode = ip, mode
        self.sockets: list[socket.socket] = []
        self.listen, self.dial, self.unlisten = Call(self._listen), Call(self._dial), Call(self._unlisten)

    def _listen(self) -> tuple[str, int]:
        s = socket.socket()
        s.bind((self.ip, 0))
        port = int(s.getsockname()[1])
        self.sockets.append(s)
        if self.mode == "refuse":  # bound, never listening: the kernel answers RST, as a REJECT rule does
            return self.ip, port
        if self.mode == "drop":  # one connection fills the queue; the kernel then drops every further SYN
            s.listen(0)
            self.sockets.append(socket.create_connection((self.ip, port), timeout=2))
            return self.ip, port
        s.listen(16)  # the kernel completes the handshakes; nobody needs to accept for a connect to succeed
        return self.ip, port

    def _dial(self, targets: list[tuple[str, int]], timeout_s: float) -> list[tuple[str, int, str]]:
        return rehearse._dial(targets, timeout_s)

    def _unlisten(self) -> None:
        for s in self.sockets:
            s.close()


class FakeRay:
    @staticmethod
    def get(refs: Any, timeout: float | None = None) -> Any:
        return refs


@pytest.fixture
def short_connect(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(rehearse, "MESH_CONNECT_S", 1.0)
    yield


def mesh(modes: dict[str, str]) -> dict[str, Any]:
    ranks = {ip: FakeRank(ip, modes.get(ip, "ok")) for ip in NODES}
    try:
        return rehearse.cross_node_mesh(FakeRay(), ranks, NODES, timeout_s=30)
    finally:
        for r in ranks.values():
            r._unlisten()


def test_healthy_mesh_dials_every_ordered_pair(short_connect: None) -> None:
    m = mesh({})
    assert m["pairs"] == 6 and m["failed_pairs"] == 0 and m["problems"] == []


def test_a_node_that_drops_new_tcp_is_named_with_the_nodes_that_cannot_reach_it(short_connect: None) -> None:
    m = mesh({"127.0.0.13": "drop"})
    assert m["failed_pairs"] == 2
    assert [ip for ip, _ in m["problems"]] == ["127.0.0.13"]
    text = m["problems"][0][1]
    assert "from a3-01, a3-02" in text and "a host firewall on a3-03" in text
    assert "no answer in 1 s" in text and "fix: trust the cluster hosts' addresses on every port" in text


def test_a_node_that_refuses_is_named_too(short_connect: None) -> None:
    m = mesh({"127.0.0.12": "refuse"})
    assert m["failed_pairs"] == 2
    (ip, text), *rest = m["problems"]
    assert ip == "127.0.0.12" and not rest
    assert "Connection refused" in text and "a3-02" in text


def test_two_bad_nodes_each_get_one_problem(short_connect: None) -> None:
    m = mesh({"127.0.0.11": "drop", "127.0.0.13": "refuse"})
    # a3-01 and a3-03 each fail from the two others: 4 ordered pairs
    assert m["failed_pairs"] == 4
    assert sorted(ip for ip, _ in m["problems"]) == ["127.0.0.11", "127.0.0.13"]


def test_dial_is_concurrent_not_one_timeout_after_another(monkeypatch: pytest.MonkeyPatch) -> None:
    # Three dropping targets must cost one connect timeout, not three: every connect is in flight at once (a
    # barrier of three that one-after-another connects would never fill).
    import threading

    barrier = threading.Barrier(3, timeout=10)

    def dropped(target: tuple[str, int], timeout: float) -> socket.socket:
        barrier.wait()
        raise TimeoutError("timed out")

    monkeypatch.setattr(rehearse.socket, "create_connection", dropped)
    failed = rehearse._dial([(ip, 1) for ip in NODES], 1.0)
    assert [why for _, _, why in failed] == ["no answer in 1 s"] * 3
