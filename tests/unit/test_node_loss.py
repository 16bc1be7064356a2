"""A lost node is named by the head (host, address, what was lost) before any deadline: in the wait, in the
rehearsal and during a run, whose record then names it. No Ray needed: Ray's answers and the knocks are faked."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from verl_recipe.cluster.clusterwait import NodeView, wait_for_cluster
from verl_recipe.cluster.nodewatch import Guard, NodeLost, NodeWatch, knock
from verl_recipe.rehearse import _get, _wait_ready
from verl_recipe.render import render
from verl_recipe.resolve import Request, resolve
from verl_recipe.run.launcher import run_attempt

from tests.fakes import FakeClock

from .fixtures import install_fake_verl, make_shared, set_args

EXPECTED = (("a3-01", "10.9.0.11"), ("a3-02", "10.9.0.12"))


def view(name: str, ip: str, alive: bool = True) -> NodeView:
    return NodeView(name, ip, 16, 16, 48, alive=alive, port=6380)


def test_silent_node_is_lost_after_the_confirm_time_and_named_once() -> None:
    clock = FakeClock()
    answers = {"10.9.0.11": None, "10.9.0.12": "silent"}
    w = NodeWatch(confirm_s=10, knock=lambda ip, port: answers[ip], now=clock.now)
    views = [view("a3-01", "10.9.0.11"), view("a3-02", "10.9.0.12")]
    assert w.check(views) == [] and w.suspect == {"10.9.0.12"}, "one missed knock is a suspect, not a loss"
    clock.t = 9.0
    assert w.check(views) == []
    clock.t = 10.0
    lost = w.check(views)
    assert [(x.name, x.ip) for x in lost] == [("a3-02", "10.9.0.12")]
    assert "does not answer at all" in lost[0].what and "10.9.0.12:6380" in lost[0].what
    assert lost[0].line().startswith("a3-02 (10.9.0.12) lost: ")
    clock.t = 20.0
    assert w.check(views) == [], "reported once"


def test_a_node_that_answers_again_is_no_longer_suspect() -> None:
    clock = FakeClock()
    answers: dict[str, str | None] = {"10.9.0.12": "silent"}
    w = NodeWatch(confirm_s=10, knock=lambda ip, port: answers[ip], now=clock.now)
    views = [view("a3-02", "10.9.0.12")]
    w.check(views)
    answers["10.9.0.12"] = None
    clock.t = 5
    assert w.check(views) == [] and w.suspect == set()
    answers["10.9.0.12"] = "silent"
    clock.t = 12
    assert w.check(views) == [], "the failure clock starts again"


def test_refused_means_the_host_is_up_but_its_ray_node_is_not() -> None:
    clock = FakeClock()
    w = NodeWatch(confirm_s=3, knock=lambda ip, port: "refused", now=clock.now)
    w.check([view("a3-02", "10.9.0.12")])
    clock.t = 3
    (lost,) = w.check([view("a3-02", "10.9.0.12")])
    assert "the host answers but its Ray node does not" in lost.what


def test_rays_own_verdict_counts_at_once_for_a_node_seen_alive() -> None:
    w = NodeWatch(knock=lambda ip, port: None)
    assert w.check([view("a3-01", "10.9.0.11"), view("a3-02", "10.9.0.12")]) == []
    (lost,) = w.check([view("a3-01", "10.9.0.11"), view("a3-02", "10.9.0.12", alive=False)])
    assert (lost.name, lost.what) == ("a3-02", "Ray marked its node dead")
    fresh = NodeWatch(knock=lambda ip, port: None)
    assert fresh.check([view("a3-02", "10.9.0.12", alive=False)]) == [], "never seen alive: the wait names it"
    rejoined = NodeWatch(knock=lambda ip, port: None)
    rejoined.check([view("a3-02", "10.9.0.12")])
    back = [view("a3-02", "10.9.0.12", alive=False), view("a3-02", "10.9.0.12")]
    assert rejoined.check(back) == [], "an old dead entry of a node that rejoined at its address is no loss"


def test_only_the_nodes_in_use_are_watched() -> None:
    clock = FakeClock()
    w = NodeWatch(confirm_s=0, knock=lambda ip, port: "silent" if ip == "10.9.0.13" else None, now=clock.now)
    views = [view("a3-01", "10.9.0.11"), view("a3-03", "10.9.0.13")]
    w.check(views, only={"10.9.0.11"})
    clock.t = 1
    assert w.check(views, only={"10.9.0.11"}) == [] and w.suspect == set(), "a3-03 was never knocked on"
    assert w.check(views) == []
    clock.t = 2
    assert [x.name for x in w.check(views)] == ["a3-03"]


def test_knock_tells_listening_from_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert knock("127.0.0.1", port) is None
    assert knock("127.0.0.1", port) == "refused"


def test_wait_does_not_count_a_silent_node_and_names_it_before_the_deadline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The paused-host bug: Ray still lists the node with free dies; the head must not call the cluster ready."""
    clock = FakeClock()
    w = NodeWatch(knock=lambda ip, port: "silent" if ip == "10.9.0.12" else None, now=clock.now)
    views = [view("a3-01", "10.9.0.11"), view("a3-02", "10.9.0.12")]
    rc = wait_for_cluster(lambda: views, EXPECTED, 2, 16, 60, now=clock.now, sleep=clock.sleep, watch=w)
    err = capsys.readouterr().err
    assert rc == 3, err
    assert "ready" not in err.split("error:")[0].replace("nodes ready", ""), "never declared ready"
    assert "error: a3-02 (10.9.0.12) lost: the host does not answer at all" in err
    assert "while the head waited" in err
    assert 10 <= clock.t < 15, "named within the confirm time, long before the 60 s deadline"


def test_wait_with_every_node_answering_is_ready_at_once() -> None:
    clock = FakeClock()
    w = NodeWatch(knock=lambda ip, port: None, now=clock.now)
    views = [view("a3-01", "10.9.0.11"), view("a3-02", "10.9.0.12")]
    assert wait_for_cluster(lambda: views, EXPECTED, 2, 16, 60, now=clock.now, sleep=clock.sleep, watch=w) == 0
    assert clock.t == 0


class NeverReady:
    """A Ray whose objects never complete: a collective blocked on a peer that lost its power."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    def wait(self, refs: list[Any], num_returns: int, timeout: float) -> tuple[list[Any], list[Any]]:
        self.clock.t += timeout
        return [], list(refs)

    def get(self, refs: Any, timeout: float) -> Any:
        raise AssertionError("never reached: the guard ends the wait first")


def test_rehearsal_waits_end_when_a_node_is_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(time, "monotonic", clock.now)
    w = NodeWatch(knock=lambda ip, port: "silent" if ip == "10.9.0.12" else None, now=clock.now)
    views = [view("a3-01", "10.9.0.11"), view("a3-02", "10.9.0.12")]
    guard = Guard(w, lambda: views, "during the rehearsal")
    with pytest.raises(NodeLost) as exc:
        _get(NeverReady(clock), ["ref"], 600, guard)
    assert "a3-02 (10.9.0.12) lost" in str(exc.value) and "during the rehearsal" in str(exc.value)
    assert clock.t < 20, "named in seconds, not after the 600 s timeout"

    clock2 = FakeClock()
    monkeypatch.setattr(time, "monotonic", clock2.now)
    w2 = NodeWatch(knock=lambda ip, port: "silent" if ip == "10.9.0.12" else None, now=clock2.now)

    class Group:
        def ready(self) -> str:
            return "pg"

    with pytest.raises(NodeLost):
        _wait_ready(NeverReady(clock2), [Group()], 600, Guard(w2, lambda: views, "during the rehearsal"))
    assert clock2.t < 20


# A stand-in for verl's trainer that runs until it is stopped (placed first on PYTHONPATH).
FAKE_MAIN = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
print("fake verl running", flush=True)
time.sleep(60)
"""


def test_run_that_loses_a_node_is_stopped_and_its_record_names_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install_fake_verl(tmp_path, monkeypatch, FAKE_MAIN)
    paths = make_shared(tmp_path / "shared")
    sets = [s for s in set_args(paths) if s != "--set"]
    recipe, resolved = resolve(Request("qwen3.5-397b", sets=sets))
    launch = render(recipe, resolved, [])
    knocks = {"n": 0}

    def flaky(ip: str, port: int) -> str | None:
        knocks["n"] += 1
        return "silent" if ip == "10.9.0.12" and knocks["n"] > 2 else None

    members = [view("a3-01", "10.9.0.11"), view("a3-02", "10.9.0.12")]
    t0 = time.monotonic()
    rc, _ = run_attempt(launch, resolved, {}, members=members, every_s=0.2, watch=NodeWatch(confirm_s=0.5, knock=flaky))
    assert rc == 3
    assert time.monotonic() - t0 < 30, "stopped at once, not after verl's own 60 s"
    err = capsys.readouterr().err
    assert "error: a3-02 (10.9.0.12) lost: the host does not answer at all" in err and "during the run" in err
    (run_dir,) = (Path(paths["LOG_DIR"]) / "verl_grpo_qwen3_5" / "qwen3.5-397b" / "runs").iterdir()
    assert (run_dir / "exit_code").read_text() == "3\n"
    outcome = json.loads((run_dir / "outcome.json").read_text())
    assert outcome["exit_code"] == 3 and outcome["verl_exit_code"] == 143
    assert [(x["host"], x["ip"]) for x in outcome["lost_nodes"]] == [("a3-02", "10.9.0.12")]
    assert "resume_mode=auto" in outcome["next"]
    assert json.loads((run_dir / "lost_nodes.json").read_text()) == outcome["lost_nodes"]
    assert "lost: the host does not answer" in (run_dir / "train.log").read_text()


# verl's driver blocked in a Ray call to the lost node does not end on SIGTERM.
DEAF_MAIN = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("fake verl running", flush=True)
time.sleep(120)
"""


def test_a_verl_deaf_to_sigterm_is_killed_after_the_lost_node_grace_not_the_stop_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verl_recipe.run import launcher

    install_fake_verl(tmp_path, monkeypatch, DEAF_MAIN)
    monkeypatch.setattr(launcher, "LOST_STOP_GRACE_S", 1.0)
    assert launcher.STOP_GRACE_S >= 30, "a stop or a health rule still gives verl its time to end its job"
    paths = make_shared(tmp_path / "shared")
    recipe, resolved = resolve(Request("qwen3.5-397b", sets=[s for s in set_args(paths) if s != "--set"]))
    members = [view("a3-01", "10.9.0.11"), view("a3-02", "10.9.0.12")]

    def gone(ip: str, port: int) -> str | None:
        return "silent" if ip == "10.9.0.12" else None

    t0 = time.monotonic()
    rc, _ = run_attempt(
        render(recipe, resolved, []), resolved, {}, members=members, every_s=0.2,
        watch=NodeWatch(confirm_s=0.3, knock=gone),
    )  # fmt: skip
    took = time.monotonic() - t0
    assert rc == 3 and took < 20, f"ended after {took:.1f} s"
    (run_dir,) = (Path(paths["LOG_DIR"]) / "verl_grpo_qwen3_5" / "qwen3.5-397b" / "runs").iterdir()
    assert json.loads((run_dir / "outcome.json").read_text())["verl_exit_code"] == -9, "killed, not ended by itself"


def test_run_without_losses_keeps_verls_exit_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake_verl(tmp_path, monkeypatch, "import sys; sys.exit(7)\n")
    paths = make_shared(tmp_path / "shared")
    recipe, resolved = resolve(Request("qwen3.5-397b", sets=[s for s in set_args(paths) if s != "--set"]))
    members = [view("a3-01", "10.9.0.11")]
    rc, _ = run_attempt(
        render(recipe, resolved, []), resolved, {}, members=members, watch=NodeWatch(knock=lambda i, p: None)
    )
    assert rc == 7
    (run_dir,) = (Path(paths["LOG_DIR"]) / "verl_grpo_qwen3_5" / "qwen3.5-397b" / "runs").iterdir()
    outcome = json.loads((run_dir / "outcome.json").read_text())
    assert outcome["exit_code"] == 7 and outcome["lost_nodes"] == [] and "next" not in outcome


def test_a_rebooted_node_that_answers_again_is_waited_for_not_called_gone(capsys: pytest.CaptureFixture[str]) -> None:
    """Ray still lists a3-02's node of the previous boot as dead; its new raylet answers: wait for it to join."""
    clock = FakeClock()
    w = NodeWatch(knock=lambda ip, port: None, now=clock.now)
    stale = view("a3-02", "10.9.0.12", alive=False)

    def snapshot() -> list[NodeView]:
        rejoined = [view("a3-02", "10.9.0.12")] if clock.t >= 8 else []
        return [view("a3-01", "10.9.0.11"), stale, *rejoined]

    rc = wait_for_cluster(snapshot, EXPECTED, 2, 16, 60, now=clock.now, sleep=clock.sleep, watch=w)
    assert rc == 0 and 8 <= clock.t < 12, capsys.readouterr().err
    down = NodeWatch(knock=lambda ip, port: "silent" if ip == "10.9.0.12" else None, now=clock.now)
    rc = wait_for_cluster(lambda: [view("a3-01", "10.9.0.11"), stale], EXPECTED, 2, 16, 60, watch=down)
    assert rc == 3 and "a3-02 (10.9.0.12) joined and then left" in capsys.readouterr().err, "still down: at once"


class ResetByPeer:
    """A Ray whose collective fails at once: the lost peer's connection was reset."""

    def wait(self, refs: list[Any], num_returns: int, timeout: float) -> tuple[list[Any], list[Any]]:
        return list(refs), []

    def get(self, refs: Any, timeout: float) -> Any:
        raise RuntimeError("gloo: Read error [10.9.0.12]:2209: Connection reset by peer")


def test_a_collective_error_from_a_lost_peer_names_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(time, "monotonic", clock.now)
    monkeypatch.setattr(time, "sleep", clock.sleep)
    views = [view("a3-01", "10.9.0.11"), view("a3-02", "10.9.0.12")]
    lost = NodeWatch(knock=lambda ip, port: "silent" if ip == "10.9.0.12" else None, now=clock.now)
    with pytest.raises(NodeLost, match=r"a3-02 \(10.9.0.12\) lost"):
        _get(ResetByPeer(), ["ref"], 600, Guard(lost, lambda: views, "during the rehearsal"))
    assert clock.t < 15
    healthy = NodeWatch(knock=lambda ip, port: None, now=clock.now)
    with pytest.raises(RuntimeError, match="reset by peer"):
        _get(ResetByPeer(), ["ref"], 600, Guard(healthy, lambda: views, "during the rehearsal"))


def test_a_ghost_of_a_rebooted_node_is_not_counted_until_ray_drops_it() -> None:
    """After a reboot Ray lists the host's new node and, for a while, its old one as alive: work placed on the old
    one never runs. The wait counts the host only once Ray has marked the ghost dead."""
    clock = FakeClock()
    w = NodeWatch(knock=lambda ip, port: None, now=clock.now)

    def snapshot() -> list[NodeView]:
        ghost = view("a3-02", "10.9.0.12", alive=clock.t < 20)
        return [view("a3-01", "10.9.0.11"), ghost, view("a3-02", "10.9.0.12")]

    assert wait_for_cluster(snapshot, EXPECTED, 2, 16, 60, now=clock.now, sleep=clock.sleep, watch=w) == 0
    assert 20 <= clock.t < 24
