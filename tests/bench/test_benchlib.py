"""The bench driver's pure parts: ratios, medians, output parsers, the results table and the merge of runs."""

from __future__ import annotations

import pytest

from bench.benchlib import (
    Figure,
    Recovery,
    build_steps,
    cpu_ticks,
    faults_named,
    layers_rebuilt,
    median,
    merge,
    ping_coverage,
    ratio,
    ready_after,
    recovery,
    recovery_figures,
    table,
)

BUILD = """Sending build context to Docker daemon  1.2MB
Step 1/6 : ARG RUNTIME_IMAGE
Step 2/6 : FROM ${RUNTIME_IMAGE}
 ---> c363e449f2f5
Step 3/6 : COPY docker/versions.yaml compose.yam[l] /opt/verl-recipe/
 ---> Using cache
 ---> 1111
Step 4/6 : COPY entrypoints/ /tmp/verl-recipe-src/entrypoints/
 ---> 2222
Step 5/6 : RUN python -m pip install /tmp/verl-recipe-src
 ---> Running in 3333
 ---> 4444
Step 6/6 : LABEL a=b
 ---> Running in 5555
Successfully built 5555
"""


def test_ratio_rounds_and_refuses_a_zero_denominator() -> None:
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(1.0, 3.0, 3) == 0.333
    assert ratio(5.0, 0.0) is None
    assert ratio(5.0, -1.0) is None


def test_median_odd_even_and_empty() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    with pytest.raises(ValueError):
        median([])


def test_build_steps_and_layers_rebuilt() -> None:
    assert build_steps(BUILD) == (6, 1)
    # ARG before FROM and FROM make no layer; step 3 is cached; 4 (COPY), 5 and 6 (containers) are rebuilt.
    assert layers_rebuilt(BUILD) == 3


def test_ready_after_parses_the_entrypoint_line() -> None:
    assert ready_after("3 nodes, 48 NPU dies - ready after 12.5 s") == 12.5
    assert ready_after("waiting: 2 of 3 nodes") is None


def test_faults_named_needs_a_failed_row_for_host_and_check() -> None:
    rows = [
        {"host": "a3-02", "check": "npu_link", "ok": False},
        {"host": "a3-02", "check": "chip_health", "ok": True},
        {"host": "a3-03", "check": "driver_version", "ok": False},
    ]
    injected = [("a3-02", "npu_link"), ("a3-02", "chip_health"), ("a3-02", "driver_version")]
    assert faults_named(rows, injected) == [("a3-02", "npu_link")]


def test_ping_coverage_counts_unordered_pairs_and_receiving_dies() -> None:
    plan = {
        "a3-01": [{"die": 0, "peer": "a3-02", "peer_die": 0}, {"die": 1, "peer": "a3-03", "peer_die": 1}],
        "a3-02": [{"die": 0, "peer": "a3-01", "peer_die": 1}, {"die": 1, "peer": "a3-03", "peer_die": 1}],
        "a3-03": [],
    }
    report = {"meta": {"hosts": {h: {"rank": i, "ping_plan": p} for i, (h, p) in enumerate(plan.items())}}}
    cov = ping_coverage(report)
    # 01-02 twice is one pair; 03 never pings but is pinged; die 1 of a3-03 received two pings: one die
    assert cov == {"hosts": 3, "pings": 4, "host_pairs": 3, "host_pairs_total": 3, "dies_pinged": 3}
    assert ping_coverage({"rows": []})["host_pairs_total"] == 0


def test_table_has_a_row_per_figure_and_aligned_columns() -> None:
    figs = [
        Figure("1", "deploy first run: 16 hosts / 1 host", 1.42, "1.0", "how", "quick-x"),
        Figure("3", "faults named", 8, "8 of 8", "how", "quick-x"),
        Figure("2", "bytes / tarball", None, "1.0", "how", "quick-x"),
    ]
    lines = table(figs).splitlines()
    assert len(lines) == 2 + len(figs)
    assert len({len(line) for line in lines}) == 1, "every line has the same width"
    assert "| 1.42 " in lines[2] and "| 8 " in lines[3] and "| n/a " in lines[4]


def test_merge_replaces_same_figure_and_keeps_others_with_their_run() -> None:
    old = [
        Figure("1", "a", 1.0, "1.0", "m", "quick-1").as_dict(),
        Figure("6", "b", 2.0, "1.0", "m", "quick-1").as_dict(),
    ]
    new = [Figure("1", "a", 1.5, "1.0", "m", "full-2")]
    merged = merge(old, new)
    assert [(d["name"], d["value"], d["run"]) for d in merged] == [("a", 1.5, "full-2"), ("b", 2.0, "quick-1")]


def test_merge_replaces_a_figure_whose_name_quotes_seconds() -> None:
    old = [
        Figure("4", "render: median / start-up (median 0.38 s)", 14.6, "1.0", "m", "quick-1").as_dict(),
        Figure("6", "memory per host (1 hosts)", 55, "counts", "m", "quick-1").as_dict(),
        Figure("6", "memory per host (4 hosts)", 56, "counts", "m", "quick-1").as_dict(),
    ]
    new = [
        Figure("4", "render: median / start-up (median 0.09 s)", 9.9, "1.0", "m", "quick-2"),
        Figure("6", "memory per host (4 hosts)", 57, "counts", "m", "quick-2"),
    ]
    merged = merge(old, new)
    assert [(d["name"], d["run"]) for d in merged] == [
        ("render: median / start-up (median 0.09 s)", "quick-2"),
        ("memory per host (1 hosts)", "quick-1"),  # host counts are not seconds: still a figure of its own
        ("memory per host (4 hosts)", "quick-2"),
    ]


def test_cpu_ticks_counts_busy_without_idle_and_iowait() -> None:
    stat = "cpu  100 5 50 800 40 3 2 0 7 0\ncpu0 50 2 25 400 20 1 1 0 3 0\nintr 1\n"
    # guest (7) is already inside user: it is not added again
    assert cpu_ticks(stat) == (160, 1000)
    with pytest.raises(ValueError):
        cpu_ticks("intr 1\n")


def test_recovery_reads_the_loss_and_the_first_step_after_the_return() -> None:
    lines = [
        (10.0, "progress: step 1/6  2.1 s/step"),
        (12.0, "progress: step 2/6  2.0 s/step"),
        (14.5, "lost node a3-02 (10.0.0.2)"),  # the loss at 13: step 3 was training, step 2 saved
        (40.0, "progress: step 3/6  9.0 s/step"),  # resumed from step 2 after the return at 30
        (42.0, "progress: step 4/6  2.0 s/step"),
    ]
    r = recovery(lines, lost_at=13.0, back_at=30.0)
    assert (r.last_before, r.first_after, r.return_to_step_s, r.redone) == (2, 3, 10.0, 0)
    # resumed from an older checkpoint: step 2 is trained again
    again = recovery([*lines[:3], (35.0, "progress: step 2/6"), (37.0, "progress: step 3/6")], 13.0, 30.0)
    assert (again.first_after, again.return_to_step_s, again.redone) == (2, 5.0, 1)
    assert recovery(lines[:2], 13.0, 30.0).redone is None, "no step after the return: nothing to count"


def test_recovery_figures_ratio_only_when_both_paths_have_a_step() -> None:
    a, m = Recovery(2, 3, 30.0), Recovery(2, 3, 40.0)
    figs = {f.name: f.value for f in recovery_figures(a, m, "r", "how", {})}
    assert figs["host back -> next step, restart policy / person at once"] == 0.75
    figs = {f.name: f.value for f in recovery_figures(a, Recovery(2, None, None), "r", "how", {})}
    assert figs["host back -> next step, restart policy / person at once"] is None
