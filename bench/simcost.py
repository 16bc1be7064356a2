"""Section 6, the cost of the simulation: clusters of the given sizes brought up one after another with simctl's own
`up` and `teardown`, their start-up time and memory per host (`make sim-measure`, and the bench's section).

    python -m bench.simcost --sizes 1,4,16 --output build/sim-measure.json

One JSON row per size: hosts, up_total_s, host_ready_s_max, host_ready_s_mean, mem_per_host_mib_mean,
mem_per_host_mib_max, mem_total_mib_cgroups, rss_per_host_mib_mean, machine_used_delta_mib.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from bench.benchlib import Figure, ratio
from simkit.paths import REPO, simctl
from simkit.procs import CommandFailed, checked, run


def measure(
    name: str, sizes: list[int], subnet: str = "", inventory: str = "", image: str = "", settle: float = 20.0
) -> list[dict[str, Any]]:
    """Bring up clusters of the given sizes one after another; report start-up time and memory per host."""
    simctl.check_name(name)
    rows = []
    for n in sizes:
        ns = argparse.Namespace(
            name=name,
            nodes=n,
            subnet=subnet,
            inventory=inventory,
            image=image or simctl.HOST_IMAGE,
            shared_dir="",
            link="roce",
        )
        before = meminfo_used()
        try:
            res = simctl.up(ns)
            time.sleep(settle)  # let the engines finish their start-up work before reading memory
            mem = container_memory(name)
            rss = container_rss(name)
            after = meminfo_used()
        finally:
            simctl.teardown(name, Path(inventory) if inventory else simctl.default_inventory(name), quiet=True)
        per = list(res["per_host_s"].values())
        rows.append(
            {
                "hosts": n,
                "up_total_s": round(res["total_s"], 1),
                "host_ready_s_max": round(max(per), 1),
                "host_ready_s_mean": round(sum(per) / len(per), 1),
                "mem_per_host_mib_mean": round(sum(mem.values()) / len(mem), 1),
                "mem_per_host_mib_max": round(max(mem.values()), 1),
                "mem_total_mib_cgroups": round(sum(mem.values()), 1),
                "rss_per_host_mib_mean": round(sum(rss.values()) / len(rss), 1),
                "machine_used_delta_mib": round(after - before, 1),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def meminfo_used() -> float:
    info = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        k, v = line.split(":", 1)
        info[k] = int(v.split()[0])
    return (info["MemTotal"] - info["MemAvailable"]) / 1024


def container_memory(name: str) -> dict[str, float]:
    """Memory charged to each host container's cgroup (the engine, sshd, the tools), without its page cache."""
    cmd = ["docker", "stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}}", *simctl.labelled("container", name)]
    out = checked(run(cmd), "docker stats").stdout
    mem = {}
    units = {"B": 1 / 2**20, "KiB": 1 / 1024, "kB": 1 / 1024, "MiB": 1.0, "MB": 1.0, "GiB": 1024.0, "GB": 1024.0}
    for line in out.splitlines():
        cname, usage = line.split(" ", 1)
        m = re.match(r"([\d.]+)\s*([A-Za-z]+)", usage)
        if m:
            mem[cname] = float(m.group(1)) * units.get(m.group(2), 1.0)
    return mem


def container_rss(name: str) -> dict[str, float]:
    """Resident memory of every process in each host (shared libraries counted once per process)."""
    out = {}
    for cname in simctl.labelled("container", name):
        rss = checked(run(["docker", "exec", cname, "ps", "-eo", "rss="]), f"ps in {cname}").stdout.split()
        out[cname] = sum(int(x) for x in rss) / 1024
    return out


def simcost_section(sizes: str, run_id: str) -> list[Figure]:
    out = REPO / "build" / "bench" / "sim-measure.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    # A cluster of its own name; subnet, inventory and host image from the environment, as simctl reads them.
    env = os.environ
    rows = measure(
        f"bench{os.getpid()}-m",
        [int(x) for x in sizes.split(",")],
        env.get("SIM_SUBNET", ""),
        env.get("SIM_INVENTORY", ""),
        env.get("SIM_HOST_IMAGE", ""),
    )
    out.write_text(json.dumps(rows, indent=1) + "\n")
    data = {d["hosts"]: d for d in rows}
    lo, hi = min(data), max(data)
    a, b = data[lo], data[hi]
    how = (
        "bench/simcost.py (`python -m bench.simcost`, `make sim-measure`): clusters brought up one after another; "
        "memory = each host container's cgroup memory without page cache 20 s after start; ready = sshd, dockerd "
        "and the NPU responder up"
    )
    figs = [
        Figure(
            "6",
            f"memory per host: {hi} hosts / {lo} host",
            ratio(b["mem_per_host_mib_mean"], a["mem_per_host_mib_mean"]),
            "1.0 (flat)",
            how,
            run_id,
            {"measure": list(data.values())},
        ),
        Figure(
            "6",
            f"start-up per host (mean ready): {hi} hosts / {lo} host",
            ratio(b["host_ready_s_mean"], a["host_ready_s_mean"]),
            f"1.0; limit ~{hi}/2 on 2 cores",
            how,
            run_id,
        ),
    ]
    for n, d in sorted(data.items()):
        figs.append(
            Figure(
                "6",
                f"memory per host, MiB ({n} hosts; cgroup mean)",
                d["mem_per_host_mib_mean"],
                "counts; the A3 host itself has none of it",
                how,
                run_id,
            )
        )
    return figs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.simcost",
        description="Start-up time and memory per host of simulated clusters of the given sizes (make sim-measure).",
    )
    p.add_argument("--name", default=os.environ.get("SIM_NAME") or simctl.DEFAULT_NAME, help="cluster name (SIM_NAME)")
    p.add_argument("--inventory", default=os.environ.get("SIM_INVENTORY", ""), help="inventory folder to write")
    p.add_argument("--image", default=os.environ.get("SIM_HOST_IMAGE") or simctl.HOST_IMAGE)
    p.add_argument("--sizes", default="1,4,16", help="comma list of cluster sizes, brought up one after another")
    p.add_argument("--subnet", default=os.environ.get("SIM_SUBNET", ""), help="IPv4 subnet, or auto")
    p.add_argument("--settle", type=float, default=20.0, help="seconds after start-up before memory is read")
    p.add_argument("--output", default="", help="JSON file of the rows")
    a = p.parse_args(argv)
    try:
        rows = measure(a.name, [int(x) for x in a.sizes.split(",")], a.subnet, a.inventory, a.image, a.settle)
    except (simctl.SimError, CommandFailed) as e:
        print(f"simcost: {e}", file=sys.stderr)
        return 1
    if a.output:
        Path(a.output).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
