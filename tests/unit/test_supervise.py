"""The attempts of one train (run/supervise.py) with the real decision (restart.py) and the real wait (recovery.py)
over the fake site of test_recovery.py: a matrix of host counts, outages, the kind of outage and the failure before,
and the invariants every ending keeps: attempts bounded, never a member at the lost registration, every ending
recorded (never "restarting" with nobody left to restart), the supervisor's lines in the run folder."""

from __future__ import annotations

import itertools
import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from verl_recipe.cluster.clusterwait import NodeView
from verl_recipe.contracts import runfiles
from verl_recipe.exitcodes import EXIT_NOT_READY, EXIT_OK, EXIT_STOPPED
from verl_recipe.run import lifecycle
from verl_recipe.run.ownlog import OwnLog
from verl_recipe.run.recovery import LostNode, wait_for_restart
from verl_recipe.run.supervise import Hooks, supervise

from tests.unit.test_recovery import OUTAGES, RESTART_WAIT, WATCH_S, Site

NNODES = 2
TOTAL = 8


class Harness:
    """Attempts as scripted ends: ("lost", step) loses the site's victim after that step, ("hccl", step) a transient
    HCCL failure, ("ok", None) trains to the end. Each attempt is a run folder as the launcher leaves it."""

    def __init__(self, tmp: Path, site: Site, script: list[tuple[str, int | None]]) -> None:
        self.tmp, self.site, self.script = tmp, site, list(script)
        self.attempts: list[tuple[Path, tuple[NodeView, ...]]] = []
        self.ended = ""
        self.kinds: list[str] = []
        self.own = OwnLog()

    def attempt(self, members: tuple[NodeView, ...], info: dict[str, Any]) -> tuple[int, Path]:
        d = self.tmp / "exp" / "runs" / f"2026120{len(self.attempts)}T000000Z"
        d.mkdir(parents=True)
        self.own.to(d)
        self.attempts.append((d, members))
        (d / runfiles.LAUNCH).write_text("{}")
        (d / runfiles.SETTINGS).write_text(json.dumps({"total_steps": TOTAL, "recipe": "qwen3.5-35b-fsdp"}))
        kind, step = self.script.pop(0) if self.script else ("ok", None)
        self.ended = kind
        self.kinds.append(kind)
        last = TOTAL if kind == "ok" else step or 0
        (d / runfiles.METRICS).write_text(
            "".join(json.dumps({"step": k, "data": {}}) + "\n" for k in range(1, last + 1))
        )
        lost = []
        if kind == "lost":
            v = self.site.victim
            lost = [{"host": self.site.name(v), "ip": self.site.ip(v)}]
        rc = EXIT_OK if kind == "ok" else EXIT_NOT_READY if kind == "lost" else 1
        (d / runfiles.OUTCOME).write_text(json.dumps({"exit_code": rc, "lost_nodes": lost}))
        if kind == "hccl":
            (d / runfiles.DIAGNOSIS).write_text(json.dumps({"findings": [{"id": "hccl-exec-timeout"}]}))
        print(f"attempt {len(self.attempts)} ended with {rc}")
        lifecycle.write_heartbeat(d, last)
        return rc, d

    def wait(self, lost: dict[str, LostNode], poll: Callable[[], None]) -> tuple[int, Any]:
        site = self.site
        self.site.t = 0.0  # each wait starts when the watch named the loss
        if self.ended != "lost":  # the outage is the lost host's: after another failure every host is whole
            site = Site(site.hosts, site.victim, 0.0, "network", drained=False)
        return wait_for_restart(
            site.snapshot, site.knock, lost, site.expected(), NNODES, 16, RESTART_WAIT,
            confirm_s=WATCH_S, poll_s=1.0, now=lambda: site.t, sleep=site.sleep, on_poll=poll,
        )  # fmt: skip

    def hooks(self, again: Callable[[], tuple[str, int] | None] = lambda: None) -> Hooks:
        return Hooks(attempt=self.attempt, wait=self.wait, again=again, heartbeat=lifecycle.write_heartbeat)

    def outcome(self, i: int) -> dict[str, Any]:
        return json.loads((self.attempts[i][0] / runfiles.OUTCOME).read_text())


BEFORE = {"none": [], "the same at the same step": [("lost", 4)], "another": [("hccl", 2)]}


@pytest.mark.parametrize(
    ("hosts", "outage", "kind", "before", "drained"),
    list(itertools.product([1, NNODES, NNODES + 1, NNODES + 2], OUTAGES, ["power", "network"], BEFORE, [True, False])),
)
def test_every_ending_is_recorded(
    tmp_path: Path, hosts: int, outage: str, kind: str, before: str, drained: bool
) -> None:
    # drained: Ray told at once (the supervisor drains the lost node); not: the drain failed and Ray's slow verdict
    site = Site(hosts, 1 if hosts > 1 else 0, OUTAGES[outage], kind, drained)
    h = Harness(tmp_path, site, [*BEFORE[before], ("lost", 4), ("ok", None)])
    members = tuple(site.snapshot())
    try:
        rc = supervise(members, 3, h.hooks())
    finally:
        h.own.close()
    n = len(h.attempts)
    assert 1 <= n <= 4  # RESTARTS=3
    victim_old = f"{site.name(site.victim)}-1"
    for i in range(1, n):
        if h.kinds[i - 1] != "lost":
            continue
        # after the loss, never the lost registration: unless the network came back before Ray gave that node up
        # (then it is the same, whole node)
        ok = site.same_node_back or victim_old not in {m.node_id for m in h.attempts[i][1]}
        assert ok, "a rank on the registration that was lost"
    # every attempt but the last ended with a restart that happened; the last says how the whole run ended
    for i in range(n - 1):
        assert h.outcome(i)["restart"]["restarting"] is True
        assert lifecycle.state_of(h.attempts[i][0]).state == "restarted"
    last = h.outcome(n - 1)
    final = lifecycle.state_of(h.attempts[-1][0]).state
    assert final in ("finished", "failed"), final
    assert (rc == EXIT_OK) == (final == "finished")
    if rc != EXIT_OK:
        assert last["restart"]["restarting"] is False and last["restart"]["why"].startswith("not restarted"), last
    if before == "the same at the same step" and n >= 2:
        assert "twice in a row" in last["restart"]["why"] and rc == EXIT_NOT_READY
    spare = hosts - 1 >= NNODES
    if spare and before != "the same at the same step":
        assert rc == EXIT_OK and n == len(BEFORE[before]) + 2
    if hosts < NNODES:
        assert rc == EXIT_NOT_READY and n == 1 and "the restart wait ended" in last["restart"]["why"]
        assert last["restart"]["decided"].startswith("restart 1 of 3")
        assert "bring the host back" in last["next"]
    # the supervisor's own lines, in the run folders (a detached run's container takes its terminal with it)
    own = "".join((d / runfiles.SUPERVISOR_LOG).read_text() for d, _ in h.attempts)
    assert "attempt 1 ended with" in own and ("restart 1 of 3" in own or n == 1 and rc == EXIT_OK)


def test_a_stop_while_recovering_ends_the_wait_and_is_recorded(tmp_path: Path) -> None:
    site = Site(NNODES, 1, 10_000, "power", drained=True)  # no spare, the host stays away
    h = Harness(tmp_path, site, [("lost", 4)])
    polls = {"n": 0}
    real_wait = h.wait

    def wait(lost: dict[str, LostNode], poll: Callable[[], None]) -> tuple[int, Any]:
        def poll_then_stop() -> None:
            polls["n"] += 1
            if polls["n"] == 5:  # `verl-recipe stop` from another container, while it waits
                assert lifecycle.state_of(h.attempts[0][0]).state == "recovering"
                (h.attempts[0][0] / runfiles.STOP_REQUEST).write_text(json.dumps({"by": "ops@ctl"}))
            poll()

        return real_wait(lost, poll_then_stop)

    hooks = h.hooks()
    hooks.wait = wait
    try:
        rc = supervise(tuple(site.snapshot()), 3, hooks)
    finally:
        h.own.close()
    assert rc == EXIT_STOPPED and len(h.attempts) == 1
    restart = h.outcome(0)["restart"]
    assert restart["restarting"] is False and "stopped by ops@ctl while it waited" in restart["why"]
    assert lifecycle.state_of(h.attempts[0][0]).state == "failed"


@pytest.mark.parametrize("how", ["exception", "sigterm"])
def test_a_supervisor_that_ends_while_it_waits_says_so(tmp_path: Path, how: str) -> None:
    site = Site(NNODES, 1, 10_000, "power", drained=True)
    h = Harness(tmp_path, site, [("lost", 4)])

    def wait(_lost: dict[str, LostNode], poll: Callable[[], None]) -> tuple[int, Any]:
        poll()
        if how == "sigterm":  # `docker stop` of the detached container
            signal.raise_signal(signal.SIGTERM)
        raise RuntimeError("GCS unreachable")

    hooks = h.hooks()
    hooks.wait = wait
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit if how == "sigterm" else RuntimeError):
        try:
            supervise(tuple(site.snapshot()), 3, hooks)
        finally:
            h.own.close()
    assert signal.getsignal(signal.SIGTERM) == before
    restart = h.outcome(0)["restart"]
    said = "exit 143" if how == "sigterm" else "RuntimeError: GCS unreachable"
    assert restart["restarting"] is False and f"the supervisor ended while it waited ({said})" in restart["why"]
    assert lifecycle.state_of(h.attempts[0][0]).state == "failed"


def test_refused_or_complete_after_the_wait_is_recorded(tmp_path: Path) -> None:
    site = Site(NNODES + 1, 1, 10_000, "power", drained=True)
    h = Harness(tmp_path, site, [("lost", 4)])
    try:
        rc = supervise(tuple(site.snapshot()), 3, h.hooks(lambda: ("the launch was refused on validation: X", 2)))
    finally:
        h.own.close()
    assert rc == 2 and len(h.attempts) == 1
    assert h.outcome(0)["restart"]["why"] == "not restarted: the launch was refused on validation: X"
    assert h.outcome(0)["restart"]["left_out"] == ["a3-02 (10.0.0.2)"]


@pytest.mark.parametrize(("age_s", "state"), [(10, "recovering"), (89, "recovering"), (91, "gone"), (600, "gone")])
def test_recovering_only_while_somebody_beats(tmp_path: Path, age_s: float, state: str) -> None:
    """A supervisor killed outright (the head lost its power, SIGKILL) writes nothing more: its last attempt says
    restarting, and `runs` says gone once the heartbeat is stale, with where it was and how to resume."""
    site = Site(NNODES, 1, 10_000, "power", drained=True)
    h = Harness(tmp_path, site, [("lost", 4)])
    d = h.attempt(tuple(site.snapshot()), {})[1]
    h.own.close()
    from verl_recipe.run import restart

    now = restart.attempt_of(EXIT_NOT_READY, d)
    restart.record(now, True, "restart 1 of 3: lost node a3-02 after step 4", 1)
    beat = json.loads((d / runfiles.HEARTBEAT).read_text())
    st = lifecycle.state_of(d, now=beat["time"] + age_s)
    assert st.state == state
    if state == "gone":
        assert "no heartbeat since" in st.detail and "EXPERIMENT_NAME=exp" in st.detail and "resume" in st.detail
