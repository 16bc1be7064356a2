"""`make bench`: deploy, image distribution, preflight, launch, rebuild and simulation cost on the simulated
cluster, each figure a ratio or a count measured in this run, with its ideal beside it.

Writes bench/results.json (every figure with its method and raw timings) and bench/results.md (the table).
Figures of sections not run this time are kept from the earlier run and labelled with that run.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.benchlib import Figure
from bench.common import IMAGE, TARBALL, log, machine
from bench.deploy import deploy_figures, deploy_pair
from bench.image import image_section
from bench.launch import launch_cli, launch_wait, verl_checks_section
from bench.nodeloss import nodeloss_section
from bench.preflight import preflight_section
from bench.readers import readers_section
from bench.rebuild import rebuild_section
from bench.recover import recover_section
from bench.results import render_results, write_results
from bench.simcost import simcost_section
from bench.train import train_section
from simkit.cluster import SimCluster
from simkit.paths import REPO
from simkit.procs import run

SECTIONS = (
    "deploy", "preflight", "launch", "image", "cli", "verl", "rebuild", "simcost", "nodeloss", "train", "recover",
    "readers",
)  # fmt: skip
# the sections on simulated hosts
ON_CLUSTERS = {"deploy", "preflight", "launch", "image", "nodeloss", "train", "recover"}


@dataclass
class BenchRun:
    """One run of the bench: what it measures, the figures it got, the sections that failed, its clusters."""

    run_id: str
    quick: bool
    sections: list[str]
    name: str  # prefix of the simulated clusters
    figures: list[Figure] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    clusters: list[SimCluster] = field(default_factory=list)

    @property
    def big_n(self) -> int:
        return 3 if self.quick else 16

    @property
    def reps(self) -> int:
        return 5 if self.quick else 10

    def cluster(self, nodes: int) -> SimCluster:
        """A cluster of this run, removed at the end whatever happens."""
        c = SimCluster(f"{self.name}{nodes}", nodes)
        self.clusters.append(c)
        return c

    def attempt(self, what: str, fn: Callable[[], list[Figure]]) -> bool:
        """One section; a failure is logged and recorded, and the bench goes on with the next one."""
        try:
            self.figures.extend(fn())
            return True
        except Exception as e:  # noqa: BLE001 - report what was measured, then fail at the end
            first = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
            self.errors.append(f"{what}: {first}")
            log(f"{what} failed: {str(e)[-3000:]}")
            return False


def up(c: SimCluster) -> None:
    """The cluster, fresh: what an interrupted earlier run left under its name is removed first."""
    c.down()
    c.up()
    c.seed()


def cluster_sections(r: BenchRun) -> None:
    """Deploy on 1 host, then on N hosts, and on those N the launch wait, preflight, image and node loss."""
    sections, big_n, run_id = r.sections, r.big_n, r.run_id
    one: dict[str, Any] = {}
    if "deploy" in sections:
        c1 = r.cluster(1)

        def small() -> list[Figure]:
            log(f"sim-up 1 host ({c1.name})")
            up(c1)
            log("deploy.yml x2 on 1 host")
            one.update(deploy_pair(c1))
            log(f"1 host: {one['first_s']} s / {one['rerun_s']} s")
            return []

        r.attempt("deploy on 1 host", small)
        c1.down()
    cn = r.cluster(big_n)
    deployed = False
    big_first_s: float | None = None

    def bring_up() -> list[Figure]:
        nonlocal deployed, big_first_s
        log(f"sim-up {big_n} hosts ({cn.name})")
        up(cn)
        if not set(sections) & {"deploy", "launch", "image", "nodeloss", "train", "recover"}:
            return []
        log(f"deploy.yml x2 on {big_n} hosts")
        big = deploy_pair(cn)
        deployed, big_first_s = True, big["first_s"]
        log(f"{big_n} hosts: {big['first_s']} s / {big['rerun_s']} s, changed {big['rerun_changed']}")
        return deploy_figures(one, big, run_id) if one else []

    up_ok = r.attempt(f"sim-up and deploy on {big_n} hosts", bring_up)
    if up_ok and deployed and "launch" in sections:
        log("launch: wait for the last node, entrypoint vs ray status loop")
        r.attempt("launch wait", lambda: launch_wait(cn, run_id))
    if up_ok and "preflight" in sections:
        log("preflight: healthy, then with faults")
        r.attempt("preflight", lambda: preflight_section(cn, run_id, big_first_s))
    if up_ok and deployed and "image" in sections:
        log("image: fan-out vs naive copy")
        r.attempt("image", lambda: image_section(cn, run_id))
    if up_ok and deployed and "train" in sections:
        log("train: compose run train-35b-fsdp (2 hosts) vs verl's own main_ppo on one host")
        r.attempt("train", lambda: train_section(cn, run_id))
    if up_ok and deployed and "recover" in sections:
        log("recover: a host lost mid-training, the restart policy vs a person re-typing the command at once")
        r.attempt("recover", lambda: recover_section(cn, run_id))
    if up_ok and deployed and "nodeloss" in sections:
        log("node loss: power loss named by the head vs Ray's node-death detection, then a reboot")
        r.attempt("nodeloss", lambda: nodeloss_section(cn, run_id))
    cn.down()


def local_sections(r: BenchRun) -> None:
    """The sections without a simulated cluster (simcost brings up its own, one size after another)."""
    if "cli" in r.sections:
        log("launch: render/validate medians")
        r.attempt("launch cli", lambda: launch_cli(r.reps, r.run_id))
    if "verl" in r.sections:
        log(f"launch: verl's own checks inside validate, in {IMAGE}")
        r.attempt("verl checks", lambda: verl_checks_section(r.reps, r.run_id))
    if "rebuild" in r.sections:
        log("rebuild: full no-cache build, then a one-line change")
        r.attempt("rebuild", lambda: rebuild_section(r.run_id))
    if "readers" in r.sections:
        log("readers: diagnose on a 100 MB train.log, compare and report on a million metric lines, the watch per step")
        r.attempt("readers", lambda: readers_section(r.run_id))
    if "simcost" in r.sections:
        sizes = "1,4" if r.quick else "1,4,16"
        log(f"simulation cost for {sizes} hosts")
        r.attempt("simcost", lambda: simcost_section(sizes, r.run_id))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="1 and 3 hosts, fewer repetitions")
    ap.add_argument("--sections", default=",".join(SECTIONS), help="comma list of " + ",".join(SECTIONS))
    ap.add_argument("--name", default="bench", help="prefix of the simulated clusters")
    ap.add_argument("--out", default=str(REPO / "bench"))
    ap.add_argument("--render", action="store_true", help="only rewrite results.md from results.json")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    # Full and QUICK runs measure different cluster sizes: each keeps its own file so neither hides the other.
    out, stem = Path(a.out), "results-quick" if a.quick else "results"
    if a.render:
        print(render_results(out / f"{stem}.json", out / f"{stem}.md"))
        return 0
    sections = [s for s in a.sections.split(",") if s]
    bad = [s for s in sections if s not in SECTIONS]
    if bad:
        print(f"bench: unknown section {bad[0]!r}; choose from {','.join(SECTIONS)}", file=sys.stderr)
        return 2
    if not TARBALL.is_file() and set(sections) & ON_CLUSTERS:
        print(f"bench: {TARBALL} is missing: run `make image-sim-tgz`", file=sys.stderr)
        return 2
    r = BenchRun(
        ("quick-" if a.quick else "full-") + time.strftime("%Y%m%dT%H%M", time.gmtime()), a.quick, sections, a.name
    )
    meta: dict[str, Any] = {
        "run": r.run_id,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": run(["git", "rev-parse", "HEAD"], cwd=REPO).stdout.strip(),
        "mode": f"{'QUICK' if a.quick else 'full'} (1 and {r.big_n} hosts)",
        "sections": sections,
        "machine": machine(),
    }

    def on_term(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        if set(sections) & ON_CLUSTERS:
            cluster_sections(r)
        local_sections(r)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - interrupted: still write what was measured
        r.errors.append(f"interrupted: {e!r}"[:300])
    finally:
        for c in r.clusters:
            c.down()
    meta["loadavg_end"] = list(os.getloadavg())
    meta["status"] = "complete" if not r.errors else "incomplete: " + "; ".join(r.errors)
    print(write_results(out / f"{stem}.json", out / f"{stem}.md", meta, r.figures))
    return 0 if not r.errors else 1


if __name__ == "__main__":
    sys.exit(main())
