"""What simkit.playbook reads from ansible-playbook's output: PLAY RECAP counters and profile_roles' role times."""

from __future__ import annotations

from simkit.playbook import changed_total, recap, role_times

RECAP = """
TASK [ray_node : Readiness] ****
ok: [a3-01]

PLAY RECAP *********************************************************************
a3-01                      : ok=41   changed=0    unreachable=0    failed=0    skipped=12   rescued=0    ignored=0
a3-02                      : ok=38   changed=2    unreachable=0    failed=0    skipped=12   rescued=0    ignored=0
localhost                  : ok=9    changed=0    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0

Sunday 29 November 2026  21:00:00 +0000 (0:00:01.234)       0:01:10.000 ****
===============================================================================
preflight -------------------------------------------------------------- 20.50s
image_dist ------------------------------------------------------------- 31.25s
"""


def test_recap_counts_per_host_and_changed_total() -> None:
    counts = recap(RECAP)
    assert set(counts) == {"a3-01", "a3-02", "localhost"}
    assert counts["a3-01"]["ok"] == 41 and counts["a3-02"]["changed"] == 2
    assert changed_total(counts) == 2
    assert recap("no recap here") == {}


def test_role_times_from_profile_roles() -> None:
    assert role_times(RECAP) == {"preflight": 20.5, "image_dist": 31.25}
