"""Section 9, training: `docker compose run train-35b-fsdp` on the deployed cluster (verl's own trainer on the CPU
stand-ins, the simulated site's two-host layout) against verl's own `python -m verl.trainer.main_ppo` with the same
tiny model and batch on one host (a local Ray in a container of the same image), in the same run: start-up
overhead (command to verl's first step) and step time, as ratios."""

from __future__ import annotations

import re
import shlex
import statistics
import time

from bench.benchlib import Figure, ratio
from bench.common import COMPOSE, Stamped
from simkit.cluster import SimCluster

RECIPE, SERVICE = "qwen3.5-35b-fsdp", "train-35b-fsdp"
SECRETS_DIR = "/etc/verl-recipe/secrets"
# verl's own launch of the same recipe on one host: the launch verl-recipe renders from the same site file, with
# the site's two nodes made one and Ray started by main_ppo itself (its own resources, as verl's CPU runs do).
LOCAL = f"""
import os, sys
from verl_recipe.render import render
from verl_recipe.resolve import Request, resolve
recipe, res = resolve(Request({RECIPE!r}, sets=["NNODES=1", "EXPERIMENT_NAME=bench-verl-alone"]))
launch = render(recipe, res, [])
argv = [a for a in launch.argv if not a.startswith("+ray_kwargs.ray_init.address")]
argv += ["+ray_kwargs.ray_init.num_cpus=8", "+ray_kwargs.ray_init.resources={{cpu:1,NPU:1}}"]
os.execvpe(argv[0], argv, {{**os.environ, **launch.env}})
"""
STEP_TIME = re.compile(r"timing_s/step:([0-9.]+)")


def step_times(lines: list[tuple[float, str]], marker: str) -> list[float]:
    return [float(m.group(1)) for _, line in lines if marker in line and (m := STEP_TIME.search(line))]


def timed(c: SimCluster, command: str, first_step: str, timeout: float = 1800) -> tuple[float, Stamped]:
    t0 = time.time()
    run = Stamped(c.popen("a3-01", command))
    hit = run.wait(lambda s: first_step in s, timeout)
    rc = run.proc.wait(timeout=timeout)
    run.thread.join(timeout=30)
    if hit is None or rc != 0:
        raise RuntimeError(f"{command[:80]}: exit {rc}, no first step; last lines {[x for _, x in run.lines[-8:]]}")
    return hit[0] - t0, run


def train_section(c: SimCluster, run_id: str) -> list[Figure]:
    ours_s, ours = timed(
        c, f"cd /opt/verl-recipe && {COMPOSE} run -e VERL_RECIPE_SHOW_VERL=1 --rm {SERVICE} "
        f"--set EXPERIMENT_NAME=bench-{run_id}", "progress: step 1"
    )  # fmt: skip
    alone = (
        "docker run --rm --network none -v /mnt/shared:/mnt/shared -v /opt/verl-recipe/site.yaml:/site.yaml:ro "
        # the site's secret files, as the node containers mount them: the launch's worker hook reads them
        f"-v {SECRETS_DIR}:{SECRETS_DIR}:ro "
        "-e VERL_RECIPE_SITE=/site.yaml -e VERL_RECIPE_VERL_CHECKS=0 --entrypoint python3 "
        f"$(sed -n 's/^VERL_RECIPE_IMAGE=//p' /opt/verl-recipe/node.env) -c {shlex.quote(LOCAL)}"
    )
    alone_s, theirs = timed(c, alone, "step:1 - ")
    ours_steps = step_times(ours.lines, "step:")[1:]  # step 1 carries the first generation's warm-up
    their_steps = step_times(theirs.lines, "step:")[1:]
    method = (
        f"`docker compose run {SERVICE}` on a3-01 of {c.nodes} deployed hosts (wait, validate with verl's checks, "
        "record, job on the cluster's Ray, 2 hosts) vs verl's own main_ppo with the same tiny model on one host"
    )
    figures = [
        Figure("train", "start-up to verl's first step, compose run / verl alone", ratio(ours_s, alone_s),
               "~1 (the wait and validation cost seconds)", method, run_id,
               {"compose_run_s": round(ours_s, 1), "verl_alone_s": round(alone_s, 1)}),
    ]  # fmt: skip
    if ours_steps and their_steps:
        figures.append(
            Figure("train", "step time, 2 hosts / 1 host (median of steps 2..3)",
                   ratio(statistics.median(ours_steps), statistics.median(their_steps)),
                   ">= 1 (gloo across hosts; two cores for every host)", method, run_id,
                   {"two_hosts_s": ours_steps, "one_host_s": their_steps})
        )  # fmt: skip
    return figures
