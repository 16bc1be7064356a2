"""The readers section's pure parts: verl's record as the bench writes it, the watch's share of a step, the child's
JSON line, and the figures made from two measurements (no timing here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from verl_recipe.contracts import metrics as verl_metrics
from verl_recipe.contracts.records import parse_record

from bench.readers import (
    Usage,
    last_json,
    metric_names,
    pair_figures,
    verl_record,
    watch_figure,
    watch_share_pct,
    write_metrics,
    write_train_log,
)


def test_a_record_has_150_distinct_names_with_every_one_the_readers_read() -> None:
    names = metric_names(150)
    assert len(names) == len(set(names)) == 150
    rec = verl_record(7)
    assert parse_record(json.dumps(rec)) == rec and rec["data"]["training/global_step"] == 7
    read = {verl_metrics.STEP_S, verl_metrics.THROUGHPUT, verl_metrics.REWARD, verl_metrics.RESPONSE_LENGTH}
    assert read <= set(verl_record(1, 12)["data"]), "the million-line stream still holds what compare and report read"


def test_the_files_are_what_the_readers_take(tmp_path: Path) -> None:
    size = write_metrics(tmp_path / "metrics.jsonl", 30, 12)
    lines = (tmp_path / "metrics.jsonl").read_bytes().split(b"\n")
    records = [parse_record(x) for x in lines[:-1]]
    assert size > 0 and lines[-1] == b"" and [r and r["step"] for r in records] == list(range(1, 31))
    log = tmp_path / "train.log"
    assert write_train_log(log, 50_000) >= 50_000
    text = log.read_bytes()
    assert b"\r" in text and text.endswith(b"RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB\n")


def test_the_watch_share_is_cpu_per_line_over_the_step_time() -> None:
    assert watch_share_pct(0.46, 2000, 2.3) == 0.01  # 0.23 ms a line of a 2.3 s step
    assert watch_share_pct(1.0, 0, 2.3) is None and watch_share_pct(1.0, 10, 0) is None


def test_the_child_json_is_its_last_json_line() -> None:
    assert last_json('warning: x\n{"cpu_s": 0.5, "lines": 3}\n') == {"cpu_s": 0.5, "lines": 3}
    with pytest.raises(ValueError, match="no JSON line"):
        last_json("Traceback (most recent call last):\n")


def test_a_watch_that_failed_on_a_line_is_no_figure() -> None:
    good = {"cpu_s": 0.46, "lines": 2000, "shown": 2000, "faults": 0}
    fig = watch_figure(good, 2.3, 150, "r1")
    assert (fig.section, fig.value, fig.ideal) == ("readers", 0.01, "< 1 %")
    with pytest.raises(RuntimeError, match="failed on some lines"):
        watch_figure({**good, "faults": 1}, 2.3, 150, "r1")
    with pytest.raises(RuntimeError, match="failed on some lines"):
        watch_figure({**good, "shown": 1999}, 2.3, 150, "r1")


def test_a_pair_is_a_time_ratio_and_the_peak_rss() -> None:
    ours, plain = Usage(3.0, 2.5, 80.26, 0, ""), Usage(2.0, 1.9, 16.0, 0, "")
    time_fig, rss_fig = pair_figures("compare", ours, plain, "json.loads", "~1", "< 512", "how", "r1")
    assert (time_fig.name, time_fig.value) == ("compare: time / json.loads", 1.5)
    assert time_fig.detail["rss_mib"] == 80.3 and time_fig.detail["plain_wall_s"] == 2.0
    assert (rss_fig.name, rss_fig.value, rss_fig.ideal) == (
        "compare: peak RSS, MiB",
        80.3,
        "< 512 (the plain read: 16)",
    )
    with pytest.raises(RuntimeError, match="exit 2"):
        pair_figures("compare", Usage(1.0, 1.0, 1.0, 2, "error: x"), plain, "json.loads", "~1", "-", "how", "r1")
