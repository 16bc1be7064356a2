"""The bench's node-loss figure from stamped output lines: the head's naming against Ray's own verdict."""

from __future__ import annotations

import pytest

from bench.benchlib import named_lost, nodeloss_figures, ray_dead_after, rfc3339_epoch

T0 = 1000.0
HEAD = [
    (990.0, "cluster: 16/16 nodes ready, 256/256 dies - ready after 0.4 s"),
    (995.0, "error: a3-16 (172.30.1.26) lost: an earlier run's line"),  # before the power loss: not counted
    (1012.3, "error: a3-16 (172.30.1.26) lost: the host does not answer at all (...) (during the rehearsal); fix"),
]


def test_named_lost_takes_the_first_line_naming_the_host_after_the_power_loss() -> None:
    assert named_lost(HEAD, "a3-16", "172.30.1.26", T0) == (12.3, HEAD[2][1])
    assert named_lost(HEAD, "a3-16", "172.30.1.26", 990.0) == (5.0, HEAD[1][1])
    assert named_lost(HEAD, "a3-15", "172.30.1.25", T0) is None, "another host is not this one"
    left = [(1040.0, "error: a3-16 (172.30.1.26) joined and then left the cluster; fix: ...")]
    assert named_lost(left, "a3-16", "172.30.1.26", T0) == (40.0, left[0][1]), "Ray's verdict reached first"
    assert named_lost([(1001.0, "waiting: cluster: 15/16 nodes ready")], "a3-16", "172.30.1.26", T0) is None


def test_ray_dead_after_reads_the_epoch_the_poll_printed() -> None:
    poll = [(995.0, "watching"), (1100.0, "dead 1031.250")]
    assert ray_dead_after(poll, T0) == 31.2
    assert ray_dead_after([(995.0, "watching")], T0) is None


def test_figures_compare_the_head_with_ray() -> None:
    figs = nodeloss_figures(16, 12.3, 31.2, 45.0, 3, "full-x", {"head_line": "..."})
    by_name = {f.name: f for f in figs}
    assert by_name["head naming / Ray's node-death detection (16 hosts)"].value == 0.39
    assert by_name["rehearsal exit status after the loss (16 hosts)"].value == 3
    assert all(f.section == "8" and f.run == "full-x" for f in figs)
    missing = nodeloss_figures(16, None, 31.2, None, None, "full-x", {})
    assert {f.name: f.value for f in missing}["head naming / Ray's node-death detection (16 hosts)"] is None


def test_docker_time_stamps_with_nanoseconds() -> None:
    assert rfc3339_epoch("2026-12-01T06:59:01.123456789Z") == pytest.approx(1796108341.123456789)
    assert rfc3339_epoch("2026-12-01T07:59:01+01:00") == 1796108341.0
    with pytest.raises(ValueError, match="not an RFC 3339"):
        rfc3339_epoch("0001-01-01 00:00:00")
