"""`verl-recipe compare`: a run against a baseline run or file, on verl's own metric stream.

The step lines are three of a recorded 3-step CPU run's metrics.jsonl (verl 0.8.0's file logger on the simulated
cluster), a few of their keys kept; longer runs repeat steps 2 and 3 (step 1 is the warm-up)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from verl_recipe.exitcodes import EXIT_BAD_INPUT, EXIT_OK, EXIT_REGRESSION
from verl_recipe.review.compare import BASELINE_FORMAT

from tests.unit.helpers import Result, run

RECORDED = [
    '{"step": 1, "data": {"timing_s/step": 9.900287999000057, "perf/throughput": 15.757117370298342, '
    '"perf/total_num_tokens": 156, "critic/rewards/mean": 0.07589744031429291, "response_length/mean": 16.0, '
    '"actor/grad_norm": 1.0384494066238403, "actor/perf/max_memory_allocated_gb": 0.5898818969726562, '
    '"actor/perf/cpu_memory_used_gb": 4.193870544433594, "training/global_step": 1}}',
    '{"step": 2, "data": {"timing_s/step": 2.3097918949999894, "perf/throughput": 61.91033932950945, '
    '"perf/total_num_tokens": 143, "critic/rewards/mean": 0.07983630895614624, "response_length/mean": 12.75, '
    '"actor/grad_norm": 1.1819393634796143, "actor/perf/max_memory_allocated_gb": 0.5936660766601562, '
    '"actor/perf/cpu_memory_used_gb": 4.1991119384765625, "training/global_step": 2}}',
    '{"step": 3, "data": {"timing_s/step": 2.3698112300000957, "perf/throughput": 64.98407892176027, '
    '"perf/total_num_tokens": 154, "critic/rewards/mean": 0.06975691020488739, "response_length/mean": 15.5, '
    '"actor/grad_norm": 1.0661535263061523, "actor/perf/max_memory_allocated_gb": 0.5940322875976562, '
    '"actor/perf/cpu_memory_used_gb": 4.228828430175781, "training/global_step": 3}}',
]
STEPS = [json.loads(line) for line in RECORDED]


def stream(n: int) -> list[dict[str, Any]]:
    """n steps: the recorded ones, then steps 2 and 3 again, renumbered."""
    out = []
    for k in range(1, n + 1):
        src = STEPS[k - 1] if k <= 3 else STEPS[1 + k % 2]
        out.append({"step": k, "data": dict(src["data"], **{"training/global_step": k})})
    return out


def make_run(
    root: Path, name: str, records: list[dict[str, Any]], recipe: str = "train-2b-fsdp", tail: bytes = b""
) -> Path:
    d = root / name
    d.mkdir()
    (d / "settings.json").write_text(json.dumps({"recipe": recipe, "settings": {}}))
    text = "".join(json.dumps(r) + "\n" for r in records).encode()
    (d / "metrics.jsonl").write_bytes(text + tail)
    return d


def scaled(records: list[dict[str, Any]], key: str, factor: float = 1.0, add: float = 0.0) -> list[dict[str, Any]]:
    return [{"step": r["step"], "data": dict(r["data"], **{key: r["data"][key] * factor + add})} for r in records]


def row(res: Result, label: str) -> str:
    lines = [line for line in res.out.splitlines() if line.startswith(label)]
    assert len(lines) == 1, res.out
    return lines[0]


def test_identical_runs_pass_over_steps_5_to_14(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_run(tmp_path, "a", stream(20)), make_run(tmp_path, "b", stream(20))
    res = run(capsys, "compare", str(a), "--baseline", str(b))
    assert res.rc == EXIT_OK, res.out + res.err
    assert "note:" not in res.out  # steps 5-14 are in both: nothing to say about the window
    for label in ("peak memory", "throughput", "step time", "reward mean"):
        assert row(res, label).endswith(" ok")
    # verl logs the probability difference only with rollout.calculate_log_probs=True: skipped, not an error
    assert row(res, "rollout/train probs diff").endswith("skip")
    assert "ok: every metric within its threshold" in res.out


def test_step_time_ten_percent_longer_fails_with_the_regression_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = make_run(tmp_path, "base", stream(14))
    slow = make_run(tmp_path, "slow", scaled(stream(14), "timing_s/step", 1.10))
    res = run(capsys, "compare", str(slow), "--baseline", str(base))
    assert res.rc == EXIT_REGRESSION == 6
    line = row(res, "step time")
    assert "+10.0 %" in line and "<= +5 %" in line and line.endswith("FAIL")
    assert row(res, "throughput").endswith(" ok")  # only the step time moved
    assert "regression: step time (s) crossed" in res.out
    # 10 % is within a looser threshold given on the command line
    assert run(capsys, "compare", str(slow), "--baseline", str(base), "--max-step-time-rise", "12").rc == EXIT_OK


def test_step_time_shorter_and_throughput_higher_never_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_run(tmp_path, "base", stream(14))
    fast = scaled(scaled(stream(14), "timing_s/step", 0.5), "perf/throughput", 2.0)
    res = run(capsys, "compare", str(make_run(tmp_path, "fast", fast)), "--baseline", str(base))
    assert res.rc == EXIT_OK, res.out


def test_throughput_six_percent_lower_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_run(tmp_path, "base", stream(14))
    slow = make_run(tmp_path, "slow", scaled(stream(14), "perf/throughput", 0.94))
    res = run(capsys, "compare", str(slow), "--baseline", str(base))
    assert res.rc == EXIT_REGRESSION
    assert "-6.0 %" in row(res, "throughput") and row(res, "throughput").endswith("FAIL")


def test_memory_two_gb_higher_fails_and_lower_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_run(tmp_path, "base", stream(14))
    key = "actor/perf/max_memory_allocated_gb"
    more = make_run(tmp_path, "more", scaled(stream(14), key, add=2.0))
    res = run(capsys, "compare", str(more), "--baseline", str(base))
    assert res.rc == EXIT_REGRESSION
    line = row(res, "peak memory")
    assert key in line and "+2" in line and "<= +1" in line and line.endswith("FAIL")
    less = make_run(tmp_path, "less", scaled(stream(14), key, add=-0.5))
    assert run(capsys, "compare", str(less), "--baseline", str(base)).rc == EXIT_OK


def test_reward_shift_either_way_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_run(tmp_path, "base", stream(14))
    for name, shift in (("up", 0.06), ("down", -0.06)):
        other = make_run(tmp_path, name, scaled(stream(14), "critic/rewards/mean", add=shift))
        res = run(capsys, "compare", str(other), "--baseline", str(base))
        assert res.rc == EXIT_REGRESSION, name
        assert row(res, "reward mean").endswith("FAIL")
    near = make_run(tmp_path, "near", scaled(stream(14), "critic/rewards/mean", add=0.04))
    assert run(capsys, "compare", str(near), "--baseline", str(base)).rc == EXIT_OK


def test_probs_diff_is_checked_when_both_runs_log_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def with_diff(value: float) -> list[dict[str, Any]]:
        return [
            {"step": r["step"], "data": dict(r["data"], **{"training/rollout_probs_diff_mean": value})}
            for r in stream(14)
        ]

    base = make_run(tmp_path, "base", with_diff(0.010))
    assert run(capsys, "compare", str(make_run(tmp_path, "same", with_diff(0.0104))), "--baseline", str(base)).rc == 0
    res = run(capsys, "compare", str(make_run(tmp_path, "off", with_diff(0.0110))), "--baseline", str(base))
    assert res.rc == EXIT_REGRESSION and "+10.0 %" in row(res, "rollout/train probs diff")


def test_a_three_step_run_compares_and_says_which_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_run(tmp_path, "a", stream(3)), make_run(tmp_path, "b", stream(3))
    res = run(capsys, "compare", str(a), "--baseline", str(b))
    assert res.rc == EXIT_OK, res.out + res.err
    assert "note: steps 5-14 are not in both runs: compared steps 1-3 instead" in res.out


def test_a_metric_missing_in_this_run_fails_and_in_both_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = make_run(tmp_path, "base", stream(14))
    gone = [
        {"step": r["step"], "data": {k: v for k, v in r["data"].items() if k != "perf/throughput"}} for r in stream(14)
    ]
    res = run(capsys, "compare", str(make_run(tmp_path, "gone", gone)), "--baseline", str(base))
    assert res.rc == EXIT_REGRESSION
    assert "missing in this run" in row(res, "throughput") and row(res, "throughput").endswith("FAIL")
    # in the baseline only: nothing to check this run's value against, so skipped (this run still passes)
    res = run(capsys, "compare", str(base), "--baseline", str(tmp_path / "gone"))
    assert res.rc == EXIT_OK and "missing in the baseline" in row(res, "throughput")
    # in neither: the comparison cannot be made; one line, no traceback
    other = make_run(tmp_path, "gone2", gone)
    res = run(capsys, "compare", str(other), "--baseline", str(tmp_path / "gone"))
    assert res.rc == EXIT_BAD_INPUT and res.out == ""
    assert res.err.count("\n") == 1 and "has perf/throughput in steps 5-14" in res.err and "fix:" in res.err


def test_a_line_nested_thousands_deep_is_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_run(tmp_path, "base", stream(14))
    deep = b'{"step": 15, "data": ' + b"[" * 5000 + b"]" * 5000 + b"}\n"
    res = run(capsys, "compare", str(make_run(tmp_path, "deep", stream(14), tail=deep)), "--baseline", str(base))
    assert res.rc == EXIT_OK, res.out + res.err
    assert "Traceback" not in res.err


def test_nan_null_and_a_half_written_last_line_are_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_run(tmp_path, "base", stream(14))
    recs = stream(14)
    recs[5]["data"]["timing_s/step"] = None  # orjson writes NaN as null
    recs[6]["data"]["critic/rewards/mean"] = float("nan")  # json.dumps writes NaN
    recs[7]["data"]["perf/throughput"] = float("inf")
    half = json.dumps({"step": 15, "data": {"timing_s/step": 999.0}}).encode()[:30]
    res = run(capsys, "compare", str(make_run(tmp_path, "odd", recs, tail=half)), "--baseline", str(base))
    assert res.rc == EXIT_OK, res.out + res.err  # the other steps' means are those of the baseline's


def test_save_baseline_then_compare_against_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_run(tmp_path, "base", stream(20))
    target = tmp_path / "train-2b.json"
    res = run(capsys, "compare", str(base), "--save-baseline", str(target))
    assert res.rc == EXIT_OK and f"saved: {target}" in res.out
    doc = json.loads(target.read_text())
    assert doc["format"] == BASELINE_FORMAT and doc["recipe"] == "train-2b-fsdp"
    assert doc["window"] == [5, 14] and doc["steps"] == list(range(5, 15))
    assert doc["source"]["run"] == str(base.resolve())
    # steps 5-14 alternate the recorded steps 3 and 2: the mean of the two
    want = (STEPS[1]["data"]["timing_s/step"] + STEPS[2]["data"]["timing_s/step"]) / 2
    assert doc["metrics"]["timing_s/step"] == pytest.approx(want)
    assert (
        doc["metrics"]["actor/perf/max_memory_allocated_gb"] == STEPS[2]["data"]["actor/perf/max_memory_allocated_gb"]
    )
    same = make_run(tmp_path, "same", stream(20))
    assert run(capsys, "compare", str(same), "--baseline", str(target)).rc == EXIT_OK
    slow = make_run(tmp_path, "slow", scaled(stream(20), "timing_s/step", 1.10))
    res = run(capsys, "compare", str(slow), "--baseline", str(target))
    assert res.rc == EXIT_REGRESSION and row(res, "step time").endswith("FAIL")


def test_a_short_baseline_file_still_compares(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "short.json"
    assert run(capsys, "compare", str(make_run(tmp_path, "a", stream(3))), "--save-baseline", str(target)).rc == 0
    assert json.loads(target.read_text())["steps"] == [1, 2, 3]
    res = run(capsys, "compare", str(make_run(tmp_path, "b", stream(3))), "--baseline", str(target))
    assert res.rc == EXIT_OK and "compared steps 1-3" in res.out


@pytest.mark.parametrize(
    ("setup", "needle"),
    [
        ("no-folder", "is not a folder"),
        ("no-stream", "has no metrics.jsonl"),
        ("empty-stream", "no step written yet"),
        ("baseline-not-json", "not JSON"),
        ("baseline-other-json", "not a verl-recipe-baseline/1 file"),
        ("baseline-missing", "cannot be read"),
        ("save-into-missing-folder", "not a file in an existing folder"),
    ],
)
def test_bad_input_is_one_line_naming_the_path_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: str, needle: str
) -> None:
    good = make_run(tmp_path, "good", stream(3))
    args = [str(good), "--baseline", str(good)]
    if setup == "no-folder":
        args[0] = str(tmp_path / "nope")
    elif setup == "no-stream":
        (good / "metrics.jsonl").unlink()
    elif setup == "empty-stream":
        (good / "metrics.jsonl").write_bytes(b'{"step": 1, "da')
    elif setup == "baseline-not-json":
        (tmp_path / "b.json").write_text("{oops")
        args[2] = str(tmp_path / "b.json")
    elif setup == "baseline-other-json":
        (tmp_path / "b.json").write_text('{"metrics": {}}')
        args[2] = str(tmp_path / "b.json")
    elif setup == "baseline-missing":
        args[2] = str(tmp_path / "absent.json")
    else:
        args = [str(good), "--save-baseline", str(tmp_path / "no" / "b.json")]
    res = run(capsys, "compare", *args)
    assert res.rc == EXIT_BAD_INPUT and res.out == ""
    assert res.err.startswith("error: compare: ") and res.err.count("\n") == 1, res.err
    assert needle in res.err and "fix:" in res.err


def test_neither_baseline_nor_save_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run(capsys, "compare", str(make_run(tmp_path, "a", stream(3))))
    assert exc.value.code == EXIT_BAD_INPUT
    assert "give --baseline" in capsys.readouterr().err


def test_host_ram_stands_in_where_no_device_memory_is_logged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def host_only(add: float) -> list[dict[str, Any]]:
        out = []
        for r in stream(14):
            data = {k: v for k, v in r["data"].items() if k != "actor/perf/max_memory_allocated_gb"}
            data["actor/perf/cpu_memory_used_gb"] += add
            out.append({"step": r["step"], "data": data})
        return out

    base = make_run(tmp_path, "base", host_only(0.0))
    res = run(capsys, "compare", str(make_run(tmp_path, "more", host_only(1.5))), "--baseline", str(base))
    assert res.rc == EXIT_REGRESSION
    line = row(res, "peak memory")
    assert "actor/perf/cpu_memory_used_gb" in line and line.endswith("FAIL")


def test_steps_flag_recipe_note_and_save_while_comparing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_run(tmp_path, "base", stream(30), recipe="train-35b-fsdp")
    recs = stream(30)
    for r in recs[19:]:  # steps 20-30: 20 % slower, outside the default window
        r["data"]["timing_s/step"] *= 1.2
    slow_late = make_run(tmp_path, "late", recs)
    target = tmp_path / "late.json"
    res = run(capsys, "compare", str(slow_late), "--baseline", str(base), "--save-baseline", str(target))
    assert res.rc == EXIT_OK, res.out
    assert "note: the recipes differ: this run train-2b-fsdp, the baseline train-35b-fsdp" in res.out
    assert json.loads(target.read_text())["steps"] == list(range(5, 15))  # saved as well as compared
    res = run(capsys, "compare", str(slow_late), "--baseline", str(base), "--steps", "20-30")
    assert res.rc == EXIT_REGRESSION and "+20.0 %" in row(res, "step time")
    with pytest.raises(SystemExit) as exc:
        run(capsys, "compare", str(slow_late), "--baseline", str(base), "--steps", "14-5")
    assert exc.value.code == EXIT_BAD_INPUT and "FIRST must be >= 0 and <= LAST" in capsys.readouterr().err


def test_a_file_baseline_over_other_steps_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "b.json"
    assert run(capsys, "compare", str(make_run(tmp_path, "a", stream(20))), "--save-baseline", str(target)).rc == 0
    res = run(capsys, "compare", str(make_run(tmp_path, "short", stream(9))), "--baseline", str(target))
    assert res.rc == EXIT_OK
    assert "note: compared steps 5-9; the baseline's figures are over its steps 5-14" in res.out
