"""verl's metric stream as the launcher follows it: whole lines only, a half-written last line kept for later,
each step handed on once, and the progress line drawn from verl's own names (a recorded 3-step CPU run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from verl_recipe.watch import metricstream
from verl_recipe.watch.metricstream import MetricTail, Progress, complete_records, parse_record, progress_line

STEP = {"step": 2, "data": {"timing_s/step": 2.3097, "critic/rewards/mean": 0.0798, "perf/throughput": 61.9}}


def test_a_half_written_line_waits_for_its_end() -> None:
    line = json.dumps(STEP).encode()
    records, rest = complete_records(line + b"\n" + line[:10])
    assert records == [STEP] and rest == line[:10]
    records, rest = complete_records(rest + line[10:] + b"\n")
    assert records == [STEP] and rest == b""


def test_lines_that_are_not_step_records_are_skipped() -> None:
    records, _ = complete_records(b'not json\n{"step": "x", "data": {}}\n[1]\n' + json.dumps(STEP).encode() + b"\n")
    assert records == [STEP]


def test_tail_hands_each_step_on_once_including_the_last(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    seen: list[int] = []
    tail = MetricTail(path, lambda r: seen.append(r["step"]), every_s=0.05)
    tail.poll()  # the file does not exist yet: nothing, no error
    with tail, path.open("ab") as fh:
        for k in (1, 2, 3):
            fh.write(json.dumps({"step": k, "data": {}}).encode() + b"\n")
    assert seen == [1, 2, 3]


def test_progress_line_names_step_total_seconds_and_reward() -> None:
    assert progress_line(STEP, 3) == "progress: step 2/3  2.3 s/step  62 tokens/s  reward 0.080"
    assert progress_line({"step": 4, "data": {}}, None) == "progress: step 4"


SAMPLE = Path(__file__).parent / "data" / "sample-metrics.jsonl"


def test_progress_of_the_recorded_run_has_every_part_and_an_eta_from_the_median_step() -> None:
    records = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    progress = Progress(10)
    lines = [progress.line(r) for r in records]
    # Step 1's 9.9 s includes warm-up; the median of 9.9, 2.3, 2.4 is 2.37 s, times 7 steps left = 17 s.
    assert lines[2] == (
        "progress: step 3/10  2.4 s/step  65 tokens/s  reward 0.070  response 16 tokens  "
        "device memory max 0.59 GB  ETA 0:00:17"
    )
    assert lines[0].endswith("ETA 0:01:29")  # one step so far: 9.9 s x 9 steps left
    host = Progress(3, host_memory=True).line(records[2])
    assert "host RAM 4.2 GB" in host and "device memory" not in host and "ETA" not in host  # last step: no ETA


def test_progress_leaves_out_what_is_missing_or_not_a_number() -> None:
    rec = {"step": 5, "data": {"timing_s/step": None, "perf/throughput": float("nan"), "critic/rewards/mean": 0.5}}
    assert Progress(None).line(rec) == "progress: step 5  reward 0.500"


DEEP_LINE = b'{"step": 1, "data": ' + b"[" * 5000 + b"]" * 5000 + b"}"


def test_a_line_nested_thousands_deep_is_no_record_and_the_tail_goes_on(tmp_path: Path) -> None:
    """json's RecursionError would end the tail's thread, and the health rules with it, without a word."""
    assert parse_record(DEEP_LINE) is None
    assert parse_record(b"\xff\xfe") is None and parse_record(b'{"step": true, "data": {}}') is None
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(DEEP_LINE + b"\n")
    seen: list[int] = []
    with MetricTail(path, lambda r: seen.append(r["step"]), every_s=0.05), path.open("ab") as fh:
        fh.write(json.dumps({"step": 2, "data": {}}).encode() + b"\n")
    assert seen == [2]


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(blob=st.binary(max_size=300) | st.sampled_from([DEEP_LINE, b"\x00\n", b'{"step": 1e400, "data": {}}\n']))
def test_any_bytes_give_records_or_nothing(blob: bytes) -> None:
    records, rest = complete_records(blob + b"\n" + json.dumps(STEP).encode() + b"\n")
    assert records[-1] == STEP and rest == b""
    assert all(isinstance(r["step"], int) and isinstance(r["data"], dict) for r in records)


def test_a_line_longer_than_any_step_is_dropped_up_to_its_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tail does not hold a line without end for ever; the steps after it are still handed on."""
    monkeypatch.setattr(metricstream, "MAX_LINE_BYTES", 100)
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"step": 1, "data": {}}\n' + b" " * 150)
    seen: list[int] = []
    tail = MetricTail(path, lambda r: seen.append(r["step"]))
    tail.poll()
    assert seen == [1] and tail._rest == b""
    with path.open("ab") as fh:
        fh.write(b'{"step": 9, "data": {}}\n{"step": 3, "data": {}}\n')
    tail.poll()
    assert seen == [1, 3]  # the end of the long line is not read as a line of its own
