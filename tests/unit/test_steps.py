"""outcome.json's step-integrity verdict over a run and the attempts it resumed through."""

from __future__ import annotations

import json
from pathlib import Path

from verl_recipe.run.steps import integrity


def attempt(runs: Path, name: str, steps: list[int], resumed: int | None = None, total: int | None = 5) -> Path:
    d = runs / name
    d.mkdir(parents=True)
    settings: dict = {"total_steps": total}
    if resumed is not None:
        settings["resumed_from_step"] = resumed
    (d / "settings.json").write_text(json.dumps(settings))
    (d / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "data": {"x": 1.0}}) + "\n" for s in steps))
    return d


def test_one_whole_run_is_complete(tmp_path: Path) -> None:
    v = integrity(attempt(tmp_path, "20261204T100000Z", [1, 2, 3, 4, 5]))
    assert v["verdict"] == "complete"
    assert (v["last_step"], v["total"], v["attempts"]) == (5, 5, ["20261204T100000Z"])
    assert v["missing"] == v["twice"] == v["redone"] == []


def test_a_resume_through_a_lost_host_counts_every_step_once(tmp_path: Path) -> None:
    attempt(tmp_path, "20261204T090000Z", [1, 2, 3], total=5)  # an older experiment run, started from scratch
    attempt(tmp_path, "20261204T100000Z", [1, 2, 3])  # this chain's first attempt, from scratch
    attempt(tmp_path, "20261204T110000Z", [])  # lost before its first step and before verl said where it started
    last = attempt(tmp_path, "20261204T120000Z", [3, 4, 5], resumed=2)  # checkpoint of step 2; step 3 again
    v = integrity(last)
    assert v["verdict"] == "complete", v
    assert v["attempts"] == ["20261204T100000Z", "20261204T120000Z"]
    assert v["redone"] == [3], "the step trained again after the resume is the loss's cost"
    assert v["missing"] == [] and v["twice"] == []


def test_a_gap_or_a_step_twice_is_broken(tmp_path: Path) -> None:
    attempt(tmp_path, "a", [1, 2])
    assert integrity(attempt(tmp_path, "b", [4, 5], resumed=2))["missing"] == [3]
    assert integrity(attempt(tmp_path, "c", [4, 5], resumed=2))["verdict"] == "broken"
    twice = integrity(attempt(tmp_path / "x", "a", [1, 2, 2, 3, 4, 5]))
    assert (twice["verdict"], twice["twice"]) == ("broken", [2])


def test_a_run_short_of_its_total_says_where_it_stopped(tmp_path: Path) -> None:
    v = integrity(attempt(tmp_path, "a", [1, 2, 3], total=5))
    assert v["verdict"] == "stopped at step 3 of 5"
    assert integrity(attempt(tmp_path / "y", "a", [], total=5))["verdict"] == "no step logged"


def test_a_chain_whose_first_attempts_are_gone_starts_after_its_checkpoint(tmp_path: Path) -> None:
    v = integrity(attempt(tmp_path, "b", [4, 5], resumed=3))
    assert (v["verdict"], v["from_checkpoint_of_step"], v["missing"]) == ("complete", 3, [])


def test_a_half_written_last_line_is_not_a_step(tmp_path: Path) -> None:
    d = attempt(tmp_path, "a", [1, 2])
    with open(d / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "data": {"x"')
    assert integrity(d)["last_step"] == 2


def test_a_step_saved_but_not_logged_before_a_stop_is_unlogged_not_missing(tmp_path: Path) -> None:
    """verl saves step 6, then is stopped before its log line: the next attempt resumes from 6 and logs 7 on."""
    attempt(tmp_path, "a", [1, 2, 3, 4, 5])
    v = integrity(attempt(tmp_path, "b", [7, 8], resumed=6, total=8))
    assert (v["verdict"], v["missing"], v["unlogged"]) == ("complete", [], [6])
