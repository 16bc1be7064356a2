"""Section 3, preflight with faults: a healthy preflight (false alarms, NPU ping coverage), then one fault of each
kind a site meets on the hosts, each of which the report must name."""

from __future__ import annotations

import json

from bench.benchlib import Figure, faults_named, ping_coverage, ratio
from bench.common import deploy_yml
from simkit.cluster import SimCluster
from simkit.paths import ANSIBLE_DIR
from simkit.procs import checked

# (fault, preflight check that must name it): one per kind of problem a site meets.
FAULTS = [
    ("link-down:3", "npu_link"),
    ("health-alarm:5", "chip_health"),
    ("driver-old", "driver_version"),
    ("dev-missing:7", "device_nodes"),
    ("ip-missing:9", "npu_ip"),
    ("no-shared", "shared_storage_mounted"),
    ("net-health:11", "npu_net_health"),
    ("firmware-old", "firmware_version"),
]


def preflight_section(c: SimCluster, run_id: str, deploy_s: float | None = None) -> list[Figure]:
    ok_s, p = deploy_yml(c, "--tags", "preflight")
    checked(p, "healthy preflight")
    healthy = json.loads((ANSIBLE_DIR / ".cache" / "reports" / f"preflight-{c.name}.json").read_text())
    cov = ping_coverage(healthy)
    false_alarms = [f"{r['host']} {r['check']}" for r in healthy["rows"] if not r.get("ok", True)]
    targets = c.hosts[1:] or c.hosts
    injected: list[tuple[str, str]] = []
    plan = []
    for i, (fault, check) in enumerate(FAULTS):
        host = targets[i % len(targets)]
        plan.append((host, fault))
        injected.append((host, check))
    try:
        for host, fault in plan:
            c.fault(host, fault)
        bad_s, p = deploy_yml(c, "--tags", "preflight")
        report = ANSIBLE_DIR / ".cache" / "reports" / f"preflight-{c.name}.json"
        rows = json.loads(report.read_text())["rows"] if report.is_file() else []
    finally:
        for host in sorted({h for h, _ in plan}):
            c.fault(host, "clear")
    named = faults_named(rows, injected)
    missed = [x for x in injected if x not in named]
    detail = {
        "healthy_s": round(ok_s, 1),
        "faulted_s": round(bad_s, 1),
        "rc": p.returncode,
        "injected": [f"{h} {f}" for h, f in plan],
        "missed": missed,
    }
    n = c.nodes
    return [
        Figure(
            "3",
            f"NPU ping host pairs covered in one healthy preflight / all pairs ({n} hosts)",
            ratio(cov["host_pairs"], cov["host_pairs_total"]),
            "1.0",
            f"the report's ping plan: {cov['host_pairs']} of {cov['host_pairs_total']} host pairs and "
            f"{cov['dies_pinged']} dies receiving a ping of {n} hosts' {cov['pings']} (one ping per die, one after "
            f"another per host, as the same-index plan before it sent); healthy preflight {ok_s:.0f} s",
            run_id,
            {**cov, "healthy_s": round(ok_s, 1)},
        ),
        Figure(
            "3",
            f"failed rows in a healthy preflight ({n} hosts)",
            len(false_alarms),
            "0",
            "rows with ok=false in the healthy run's report (false alarms): " + (", ".join(false_alarms) or "none"),
            run_id,
        ),
        Figure(
            "3",
            f"preflight faults named / injected ({n} hosts)",
            len(named),
            f"{len(injected)} of {len(injected)}",
            f"{len(injected)} faults on {len(targets)} hosts ({', '.join(f'{h} {f}' for h, f in plan)}); "
            "a fault is named when the report JSON has a failed row for its host and check",
            run_id,
            detail,
        ),
        Figure(
            "3",
            f"preflight time with faults / healthy ({n} hosts; full report after {bad_s:.0f} s)",
            ratio(bad_s, ok_s),
            "1.0 (faults add only ping time-outs)",
            "wall time of `deploy.yml --tags preflight` until the full report, faulted / healthy, same hosts",
            run_id,
        ),
    ] + (
        [
            Figure(
                "3",
                f"preflight report with faults / first full deploy ({n} hosts)",
                ratio(bad_s, deploy_s),
                "small: every fault is known before anything on the hosts changes",
                "wall time of the faulted `--tags preflight` run / the first `deploy.yml` run on the same hosts "
                "(section 1), same run",
                run_id,
            )
        ]
        if deploy_s
        else []
    )
