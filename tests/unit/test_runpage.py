"""The run page on synthetic run folders shaped as the run record contract says (verl's {"step", "data"} lines as in
verl 0.8.0's file logger): plots with one point per finite value, alerts marked at their step, the diagnosis of a
failed run, the stand-in note, bounded and half-written input, bad folders in one line with exit 2."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from verl_recipe.cli import main as cli_main
from verl_recipe.pages import run_page as runpage


def make_run(d: Path, steps: int = 6, *, cpu: bool = False, outcome: dict | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    settings = {
        "recipe": "qwen35-9b-grpo",
        "host": "head",
        "started_utc": "2026-12-02T10:00:00Z",
        "total_steps": 10,
        "settings": {"DEVICE": {"value": "cpu" if cpu else "npu", "from": "recipe"}, "NNODES": {"value": 2}},
    }
    if cpu:
        settings["standin"] = "verl's own trainer on the CPU STAND-INS"
    (d / "settings.json").write_text(json.dumps(settings))
    lines = []
    for k in range(1, steps + 1):
        data = {
            "timing_s/step": 2.0 + k,
            "perf/throughput": 60.0,
            "critic/rewards/mean": 0.1 * k,
            "response_length/mean": 12.0,
            "actor/perf/max_memory_allocated_gb": 0.5 + k,
            "actor/perf/cpu_memory_used_gb": 4.0 + k,
        }
        lines.append(json.dumps({"step": k, "data": data}))
    (d / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    if outcome is not None:
        (d / "outcome.json").write_text(json.dumps(outcome))
    return d


def figure(page: str, pid: str) -> str:
    m = re.search(rf'<figure class="plot" id="{pid}"[^>]*>.*?</figure>', page, re.S)
    assert m, f"no plot {pid}"
    return m.group(0)


def test_plots_one_point_per_step_and_memory_is_max_over_ranks(tmp_path: Path) -> None:
    page = runpage.write_run_page(make_run(tmp_path / "r")).read_text()
    for pid in ("step-time", "throughput", "reward", "response-length", "memory", "host-memory"):
        fig = figure(page, pid)
        assert 'data-points="6"' in fig and fig.count('<circle class="pt"') == 6, pid
    assert "actor/perf/max_memory_allocated_gb" in figure(page, "memory")
    assert "maximum over ranks" in figure(page, "memory")
    assert '<meta http-equiv="refresh"' in page  # no outcome.json: still running
    assert "qwen35-9b-grpo" in page and "step <b>6</b> of 10" in page


def test_per_node_memory_series_are_drawn_per_node(tmp_path: Path) -> None:
    d = make_run(tmp_path / "r", steps=3)
    recs = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
    for r in recs:
        r["data"]["actor/perf/max_memory_allocated_gb/a3-01"] = 1.0
        r["data"]["actor/perf/max_memory_allocated_gb/a3-02"] = 2.0
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    fig = figure(runpage.render(runpage.load_run(d)), "memory")
    assert 'data-series="a3-01"' in fig and 'data-series="a3-02"' in fig and "per node" in fig


def test_cpu_run_draws_host_memory_and_the_standin_note(tmp_path: Path) -> None:
    page = runpage.render(runpage.load_run(make_run(tmp_path / "r", cpu=True)))
    assert "actor/perf/cpu_memory_used_gb" in figure(page, "memory") and 'id="host-memory"' not in page
    assert 'id="standin"' in page and "CPU STAND-INS" in page and "SIMULATED cluster" in page


def test_alerts_marked_at_their_step_and_listed(tmp_path: Path) -> None:
    d = make_run(tmp_path / "r")
    alert = {
        "rule": "mem_growth",
        "metric": "actor/perf/max_memory_allocated_gb",
        "value": 4.5,
        "threshold": 1.0,
        "step": 4,
        "time_utc": "x",
        "line": "alert: memory grew <fast>",
        "stops_run": False,
    }
    (d / "alerts.json").write_text(json.dumps([alert, {**alert, "step": None, "rule": "stall"}]))
    page = runpage.render(runpage.load_run(d))
    mem = figure(page, "memory")
    assert 'data-marks="1"' in mem and '<g class="mark" data-step="4">' in mem and 'class="alert-at"' in mem
    step = figure(page, "step-time")
    assert 'data-marks="1"' in step and 'class="alert-at"' not in step  # a line on every plot, a dot on its own
    assert "Alerts (2)" in page and "memory grew &lt;fast&gt;" in page and "<fast>" not in page


def test_failed_run_shows_its_diagnosis(tmp_path: Path) -> None:
    d = make_run(tmp_path / "r", outcome={"exit_code": 1, "ended_utc": "e", "lost_nodes": []})
    finding = {"id": "npu_oom", "title": "NPU out of memory", "cause": "c1", "fix": "f1", "prevent": "p1"}
    (d / "diagnosis.json").write_text(json.dumps({"findings": [finding], "unknown": None}))
    page = runpage.render(runpage.load_run(d))
    assert 'id="diagnosis"' in page and "NPU out of memory" in page and "f1" in page
    assert "failed: exit code 1" in page and "http-equiv" not in page
    (d / "diagnosis.json").unlink()
    assert "verl-recipe diagnose" in runpage.render(runpage.load_run(d))


def test_partial_last_line_nan_null_and_garbage_are_tolerated(tmp_path: Path) -> None:
    d = make_run(tmp_path / "r", steps=3)
    with (d / "metrics.jsonl").open("a") as fh:
        fh.write('{"step": 4, "data": {"timing_s/step": NaN, "perf/throughput": null}}\nnot json\n')
        fh.write('{"step": 5, "data": {"timing_s/st')
    (d / "alerts.json").write_text("[{")  # half-written
    page = runpage.render(runpage.load_run(d))
    assert 'data-points="3"' in figure(page, "step-time")
    # "not json" is skipped; step 5's half-written line is no line yet (verl is still writing it), as the tail reads
    assert "1 line(s) skipped" in page and "alerts.json: not readable" in page


def test_cli_report_run_dir_writes_run_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = make_run(tmp_path / "r")
    assert cli_main(["report", str(d)]) == 0
    assert capsys.readouterr().out.strip() == f"run page: {(d / 'run.html').as_uri()}"
    assert not list(d.glob(".*.tmp"))
    page = (d / "run.html").read_text()
    assert not re.search(r"https?:|\b(src|href)\s*=|url\(", page.replace("<!DOCTYPE html>", ""))


def test_bad_run_folder_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "r"
    d.mkdir()
    assert cli_main(["report", str(d)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no settings.json or metrics.jsonl" in err and str(d) in err
    assert not (d / "run.html").exists()


@pytest.mark.parametrize(
    ("name", "text", "note"),
    [
        ("settings.json", "[1]", "settings.json: not a JSON object, not drawn"),
        ("settings.json", "{", "settings.json: not readable: not JSON"),
        ("settings.json", '{"settings": {"TP": {"value": [4]}}}', 'settings.json: "settings.TP" is not a single value'),
        ("outcome.json", '{"exit_code": "1"}', 'outcome.json: "exit_code" is not a whole number, not drawn'),
        ("lost_nodes.json", '{"host": "a3-02"}', "lost_nodes.json: not a list of nodes, not drawn"),
        ("alerts.json", '[{"step": 2, "metric": ["x"]}]', 'alerts.json: entry 1: "metric" is not a single value'),
    ],
)
def test_a_record_file_of_another_shape_is_set_aside_and_the_plots_drawn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, note: str
) -> None:
    d = make_run(tmp_path / "r")
    (d / name).write_text(text)
    assert cli_main(["report", str(d)]) == 0, capsys.readouterr().err
    page = (d / "run.html").read_text()
    assert html.escape(note) in page and 'data-points="6"' in figure(page, "step-time")


def test_not_a_folder_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert runpage.main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a folder" in err
