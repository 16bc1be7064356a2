"""The restart policy: a lost node or a transient failure starts again by itself, bounded; anything else, a stop by a
person or the same failure at the same step twice does not, and the record says why."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from verl_recipe.contracts import runfiles
from verl_recipe.diagnosis.signatures import SIGNATURES
from verl_recipe.exitcodes import EXIT_HEALTH, EXIT_NOT_READY, EXIT_STOPPED
from verl_recipe.run import lifecycle, restart


def ended(tmp_path: Path, name: str, rc: int, steps: int, lost: str = "", finding: str = "") -> restart.Attempt:
    d = tmp_path / "runs" / name
    d.mkdir(parents=True)
    (d / runfiles.LAUNCH).write_text("{}")
    (d / runfiles.SETTINGS).write_text(json.dumps({"total_steps": 10}))
    (d / runfiles.METRICS).write_text("".join(json.dumps({"step": k, "data": {}}) + "\n" for k in range(1, steps + 1)))
    lost_nodes = [{"host": lost, "ip": "10.0.0.2"}] if lost else []
    (d / runfiles.OUTCOME).write_text(json.dumps({"exit_code": rc, "lost_nodes": lost_nodes}))
    if finding:
        (d / runfiles.DIAGNOSIS).write_text(json.dumps({"findings": [{"id": finding}, {"id": "npu-oom"}]}))
    return restart.attempt_of(rc, d)


def test_a_lost_node_restarts_and_says_which_restart_it_is(tmp_path: Path) -> None:
    now = ended(tmp_path, "a", EXIT_NOT_READY, 4, lost="a3-02")
    assert (now.failure, now.transient, now.step) == ("lost node a3-02", True, 4)
    assert restart.decide(now, [], 3) == (True, "restart 1 of 3: lost node a3-02 after step 4")


def test_a_transient_first_finding_restarts_a_deterministic_one_does_not(tmp_path: Path) -> None:
    assert {"hccl-connect-timeout", "hccl-exec-timeout"} <= restart.TRANSIENT
    assert "npu-oom" not in restart.TRANSIENT and len(restart.TRANSIENT) < len(SIGNATURES)
    hccl = ended(tmp_path, "a", 1, 2, finding="hccl-exec-timeout")
    assert restart.decide(hccl, [], 3)[0] is True
    oom = ended(tmp_path, "b", 1, 2, finding="npu-oom")
    again, why = restart.decide(oom, [], 3)
    assert not again and "npu-oom (exit 1) is not transient" in why
    unknown = ended(tmp_path, "c", 1, 0)
    again, why = restart.decide(unknown, [], 3)
    assert not again and "a failure with no known signature" in why


@pytest.mark.parametrize(
    ("rc", "said"),
    [(EXIT_STOPPED, "a person stopped the run"), (EXIT_HEALTH, "a HEALTH_STOP rule stopped the run")],
)
def test_a_stop_is_never_restarted(tmp_path: Path, rc: int, said: str) -> None:
    again, why = restart.decide(ended(tmp_path, "a", rc, 3), [], 3)
    assert not again and said in why


def test_restarts_are_bounded_and_the_same_failure_twice_stops(tmp_path: Path) -> None:
    first = ended(tmp_path, "a", EXIT_NOT_READY, 4, lost="a3-02")
    second = ended(tmp_path, "b", EXIT_NOT_READY, 4, lost="a3-03")
    again, why = restart.decide(second, [first], 3)
    assert not again and "at step 4 twice in a row" in why
    third = ended(tmp_path, "c", EXIT_NOT_READY, 6, lost="a3-02")
    assert restart.decide(third, [first], 3)[0] is True
    again, why = restart.decide(third, [first, second], 2)
    assert not again and "RESTARTS=2 restarts used" in why
    assert restart.decide(first, [], 0)[0] is False, "RESTARTS=0: never"


def test_the_decision_is_recorded_and_runs_says_recovering_then_restarted(tmp_path: Path) -> None:
    now = ended(tmp_path, "20261204T100000Z", EXIT_NOT_READY, 4, lost="a3-02")
    again, why = restart.decide(now, [], 3)
    restart.record(now, again, why, 1)
    outcome = json.loads((now.run_dir / runfiles.OUTCOME).read_text())
    assert outcome["restart"] == {"restarting": True, "why": why, "attempt": 1}
    assert "restarts it by itself" in outcome["next"]
    # recovering only while the supervisor that waits beats; without a beat nobody acts on the decision (a folder
    # just written counts from its launch.json until the first beat)
    launch = now.run_dir / runfiles.LAUNCH
    old = time.time() - lifecycle.HEARTBEAT_STALE_S - 5
    os.utime(launch, (old, old))
    assert lifecycle.state_of(now.run_dir).state == "gone"
    os.utime(launch, None)
    assert lifecycle.state_of(now.run_dir).state == "recovering", "a folder just written is not gone"
    lifecycle.write_heartbeat(now.run_dir, 4)
    assert lifecycle.state_of(now.run_dir).state == "recovering"
    late = lifecycle.state_of(now.run_dir, now=time.time() + lifecycle.HEARTBEAT_STALE_S + 1)
    assert late.state == "gone" and "EXPERIMENT_NAME=" in late.detail, late
    nxt = now.run_dir.parent / "20261204T101000Z"
    nxt.mkdir()
    (nxt / runfiles.LAUNCH).write_text("{}")
    assert lifecycle.state_of(now.run_dir).state == "restarted"


def test_attach_follows_a_restarted_attempt_into_the_next(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    now = ended(tmp_path, "20261204T100000Z", EXIT_NOT_READY, 2, lost="a3-02")
    restart.record(now, True, "restart 1 of 3: lost node a3-02 after step 2", 1)
    nxt = now.run_dir.parent / "20261204T101000Z"
    nxt.mkdir()
    (nxt / runfiles.LAUNCH).write_text("{}")
    (nxt / runfiles.SETTINGS).write_text(json.dumps({"total_steps": 4, "resumed_from_step": 2}))
    (nxt / runfiles.METRICS).write_text("".join(json.dumps({"step": k, "data": {}}) + "\n" for k in (3, 4)))
    (nxt / runfiles.OUTCOME).write_text(json.dumps({"exit_code": 0}))
    assert lifecycle.cmd_attach(now.run_dir, poll_s=0.01) == 0
    out = capsys.readouterr().out
    assert [f"progress: step {k}/10" in out for k in (1, 2, 3, 4)] == [True] * 4, out
    assert "following the next attempt 20261204T101000Z" in out and out.rstrip().endswith("finished (exit 0)"), out
