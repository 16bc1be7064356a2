"""The bench's figure for verl's own checks inside `validate`: the loop's output parsed into runs, and the medians
with and without the checks."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.benchlib import validate_runs, verl_check_share
from bench.launch import validate_loop_script

NOTE = "note: verl's own start-up checks ran in {} s (auto_set_device, validate_config)"
LOOP = "\n".join(
    [
        "ok: qwen3.5-397b",
        NOTE.format("3.5"),
        "=== validate rc=0 start=100.000 end=106.000",
        NOTE.format("4.0"),
        "=== validate rc=0 start=200.000 end=207.000",
        NOTE.format("3.0"),
        "=== validate rc=0 start=300.000 end=305.500",
    ]
)


def test_validate_runs_pairs_each_wall_time_with_its_own_note() -> None:
    assert validate_runs(LOOP) == [(6.0, 3.5), (7.0, 4.0), (5.5, 3.0)]


def test_a_run_without_the_note_has_no_check_time() -> None:
    text = "note: verl's own start-up checks were not run: ...\n=== validate rc=0 start=1.0 end=2.5"
    assert validate_runs(text) == [(1.5, None)]


def test_a_failed_validate_is_not_a_figure() -> None:
    with pytest.raises(ValueError, match="rc=2"):
        validate_runs("error: verl config: ...\n=== validate rc=2 start=1.0 end=2.0")


def test_share_is_the_medians_with_and_without_the_checks() -> None:
    share = verl_check_share(validate_runs(LOOP))
    assert share == {"with_s": 6.0, "without_s": 2.5, "checks_s": 3.5}


def test_share_refuses_runs_where_verl_did_not_run() -> None:
    with pytest.raises(ValueError, match="1 of 2 validate runs"):
        verl_check_share([(6.0, 3.5), (2.0, None)])
    with pytest.raises(ValueError, match="no validate runs"):
        verl_check_share([])


def test_loop_script_output_is_what_the_parser_reads(tmp_path: Path) -> None:
    # The loop itself, with a stand-in `verl-recipe` on PATH that prints the note and succeeds.
    fake = tmp_path / "verl-recipe"
    fake.write_text(f'#!/bin/sh\necho "{NOTE.format("1.25")}" >&2\n')
    fake.chmod(0o755)
    out = subprocess.run(
        ["bash", "-c", validate_loop_script(3)],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
    )
    runs = validate_runs(out.stdout)
    assert len(runs) == 3
    assert all(check == 1.25 and 0 <= wall < 5 for wall, check in runs)
