"""`runs`, `attach` and `stop` from outside the run's own process: a launch of a stand-in verl (it writes a step a
second into the metric stream and ends on SIGTERM, as verl ends its Ray job) runs in a process of its own; these
commands see it and stop it through the run folder only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from verl_recipe.contracts import checkpoints, runfiles
from verl_recipe.exitcodes import EXIT_STOPPED
from verl_recipe.run import lifecycle

from .fixtures import install_fake_verl, make_shared, set_args
from .helpers import run

RECIPE = "qwen3.5-35b-fsdp"
FAKE_MAIN = """
import json, os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
with open(os.environ["VERL_FILE_LOGGER_PATH"], "a") as f:
    for step in range(1, 1000):
        f.write(json.dumps({"step": step, "data": {"timing_s/step": 0.5}}) + "\\n")
        f.flush()
        time.sleep(0.5)
"""


@pytest.fixture
def running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    install_fake_verl(tmp_path, monkeypatch, FAKE_MAIN)
    paths = make_shared(tmp_path / "shared", "qwen3.5-35b-a3b")
    argv = [str(Path(sys.executable).parent / "verl-recipe"), "launch", RECIPE, *set_args(paths)]
    argv += ["--set", "TOTAL_TRAINING_STEPS=100", "--set", "EXPERIMENT_NAME=long"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ)
    try:
        yield proc, paths
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def wait_for_step(log_dir: Path, step: int, proc: subprocess.Popen[str], within_s: float = 60) -> Path:
    end = time.monotonic() + within_s
    while time.monotonic() < end and proc.poll() is None:
        found = lifecycle.find_runs([log_dir])
        if found and (lifecycle.state_of(found[-1]).step or 0) >= step:
            return found[-1]
        time.sleep(0.2)
    out = "" if proc.poll() is None or proc.stdout is None else proc.stdout.read()
    raise AssertionError(f"no run reached step {step} under {log_dir}: {out[-2000:]}")


def test_runs_shows_a_run_and_stop_ends_it_cleanly_and_says_where(
    capsys: pytest.CaptureFixture[str], running: tuple[subprocess.Popen[str], dict[str, str]]
) -> None:
    proc, paths = running
    log_dir = Path(paths["LOG_DIR"])
    run_dir = wait_for_step(log_dir, 2, proc)
    listed = run(capsys, "runs", "--log-dir", str(log_dir))
    assert listed.rc == 0
    row = next(x for x in listed.out.splitlines() if x.startswith("long/"))
    assert " running " in row and "/100" in row, row
    # a complete checkpoint of step 2, as verl leaves it (the folder, then the tracker)
    ckpt = Path(paths["CKPT_DIR"]) / "verl_grpo_qwen3_5" / "long"
    (ckpt / checkpoints.step_dir(2)).mkdir(parents=True)
    (ckpt / checkpoints.TRACKER).write_text("2\n")

    stopped = run(capsys, "stop", "--log-dir", str(log_dir), "long")
    assert stopped.rc == 0, stopped.err
    assert f"last complete checkpoint: {ckpt / 'global_step_2'}" in stopped.out
    assert proc.wait(timeout=60) == EXIT_STOPPED
    out = proc.stdout.read() if proc.stdout else ""
    assert "stop requested by" in out, out[-2000:]
    outcome = json.loads((run_dir / runfiles.OUTCOME).read_text())
    who = outcome["stopped"]
    assert "@" in who["by"] and who["time_utc"].endswith("Z")
    assert who["at_step"] >= 2 and who["last_checkpoint"] == str(ckpt / "global_step_2")
    assert str(ckpt / "global_step_2") in outcome["next"]
    assert f"stopped by {who['by']}" in (run_dir / runfiles.RUN_PAGE).read_text(), "the run page marks it"

    state = lifecycle.state_of(run_dir)
    assert (state.state, state.exit_code) == ("stopped", EXIT_STOPPED)
    again = run(capsys, "stop", "--log-dir", str(log_dir), "long")
    assert again.rc == 2 and "is stopped, not running; nothing to stop" in again.err
    attached = run(capsys, "attach", "--log-dir", str(log_dir), f"long/{run_dir.name}")
    assert attached.rc == 0
    assert "progress: step 1/100" in attached.out and "long/" in attached.out.splitlines()[-1]


def test_a_run_whose_supervisor_is_gone_is_said_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "p" / "e" / "runs" / "20261204T100000Z"
    run_dir.mkdir(parents=True)
    (run_dir / runfiles.LAUNCH).write_text("{}")
    (run_dir / runfiles.SETTINGS).write_text(json.dumps({"recipe": RECIPE, "total_steps": 10}))
    beat = {"time": time.time() - lifecycle.HEARTBEAT_STALE_S - 5, "host": "a3-01", "pid": 1, "step": 3}
    (run_dir / runfiles.HEARTBEAT).write_text(json.dumps(beat))
    assert lifecycle.state_of(run_dir).state == "gone"
    beat["time"] = time.time()
    (run_dir / runfiles.HEARTBEAT).write_text(json.dumps(beat))
    assert lifecycle.state_of(run_dir).state == "running"
    res = run(capsys, "stop", "--log-dir", str(tmp_path / "runs"), "--wait", "1", "e")
    assert res.rc == 1 and "did not end within 1 s" in res.err
    assert json.loads((run_dir / runfiles.STOP_REQUEST).read_text())["by"]


def test_an_unknown_run_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    res = run(capsys, "attach", "--log-dir", str(tmp_path), "nosuch")
    assert res.rc == 2
    assert "no run 'nosuch' under" in res.err and "verl-recipe runs" in res.err


def test_a_record_that_ended_without_an_outcome_shows_its_exit_code(tmp_path: Path) -> None:
    """The simulated cluster's Megatron launch writes the record and exit_code 4, and no verl runs."""
    run_dir = tmp_path / "p" / "e" / "runs" / "20261204T100000Z"
    run_dir.mkdir(parents=True)
    (run_dir / runfiles.LAUNCH).write_text("{}")
    (run_dir / runfiles.CODE_FILE).write_text("4\n")
    state = lifecycle.state_of(run_dir)
    assert (state.state, state.exit_code) == ("failed", 4)
