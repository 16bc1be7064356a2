"""Section 1, deploy scaling: deploy.yml twice (first run, re-run) on 1 host and on N hosts, with the machine's CPU
time around each run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench.benchlib import Figure, cpu_ticks, ratio
from bench.common import deploy_yml
from simkit.cluster import SimCluster
from simkit.playbook import changed_total, recap, role_times
from simkit.procs import checked


def cpu_sample() -> tuple[int, int]:
    return cpu_ticks(Path("/proc/stat").read_text())


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    """Share of the machine's CPU time that was busy between two samples (1.0: every core busy throughout)."""
    return ratio(after[0] - before[0], after[1] - before[1], 3)


def deploy_pair(c: SimCluster) -> dict[str, Any]:
    hz = os.sysconf("SC_CLK_TCK")
    s0 = cpu_sample()
    first_s, first = deploy_yml(c)
    s1 = cpu_sample()
    checked(first, f"deploy.yml first run on {c.nodes} hosts")
    rerun_s, second = deploy_yml(c)
    s2 = cpu_sample()
    checked(second, f"deploy.yml re-run on {c.nodes} hosts")
    return {
        "hosts": c.nodes,
        "first_s": round(first_s, 1),
        "rerun_s": round(rerun_s, 1),
        # Whole machine: control node, every simulated host and anything else running (load is in meta).
        "first_busy_share": busy_share(s0, s1),
        "rerun_busy_share": busy_share(s1, s2),
        "first_cpu_s": round((s1[0] - s0[0]) / hz, 1),
        "rerun_cpu_s": round((s2[0] - s1[0]) / hz, 1),
        "rerun_changed": changed_total(recap(second.stdout)),
        "first_changed": changed_total(recap(first.stdout)),
        "first_roles_s": role_times(first.stdout),
        "rerun_roles_s": role_times(second.stdout),
    }


def deploy_figures(one: dict[str, Any], big: dict[str, Any], run_id: str) -> list[Figure]:
    n = big["hosts"]
    how = (
        f"wall time of `ansible-playbook deploy.yml` (all plays, ansible.cfg forks=32) on {n} fresh simulated hosts "
        f"divided by the same on 1 fresh host, same run; the first run includes the image fan-out and docker load"
    )
    return [
        Figure(
            "1",
            f"deploy first run: {n} hosts / 1 host",
            ratio(big["first_s"], one["first_s"]),
            "1.0 (hosts in parallel)",
            how,
            run_id,
            {"1": one, str(n): big},
        ),
        Figure(
            "1",
            f"deploy re-run: {n} hosts / 1 host",
            ratio(big["rerun_s"], one["rerun_s"]),
            "1.0",
            "as above, the second run right after the first",
            run_id,
        ),
        Figure(
            "1",
            f"deploy re-run changed count ({n} hosts)",
            big["rerun_changed"],
            "0 (must)",
            "sum of changed= over the re-run's PLAY RECAP",
            run_id,
        ),
        Figure(
            "1",
            "deploy re-run changed count (1 host)",
            one["rerun_changed"],
            "0 (must)",
            "sum of changed= over the re-run's PLAY RECAP",
            run_id,
        ),
        Figure(
            "1",
            f"deploy first run on {n} hosts: busy share of this machine's CPU",
            big.get("first_busy_share"),
            "1.0 = CPU-bound: N / 1 above is this machine's limit, not serialisation",
            "busy jiffies / all jiffies of /proc/stat's cpu line over the run (all cores; includes ansible, every "
            f"simulated host and anything else running); 1 host: {one.get('first_busy_share')}",
            run_id,
        ),
        Figure(
            "1",
            f"deploy first run: machine CPU-seconds per host, {n} hosts / 1 host",
            ratio(big["first_cpu_s"] / n, one["first_cpu_s"]) if one.get("first_cpu_s") else None,
            "1.0 (per-host work does not grow with the cluster)",
            f"busy CPU-seconds of the whole machine over the run / hosts ({big.get('first_cpu_s')} s on {n}, "
            f"{one.get('first_cpu_s')} s on 1); on real hosts each brings its own cores, so this ratio, not the "
            "wall-time one, carries over",
            run_id,
        ),
        Figure(
            "1",
            f"deploy re-run / first run ({n} hosts)",
            ratio(big["rerun_s"], big["first_s"]),
            "small (a re-run only checks)",
            "wall time of the re-run / the first run, same hosts",
            run_id,
        ),
    ]
