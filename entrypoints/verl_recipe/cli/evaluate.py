"""`verl-recipe eval RUN [--step N | --model DIR] [--val-files F ...]`: the run's trained model scored against its base
model by verl's own validation, on the cluster the run trained on (evaluation/, docs/export.md)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

from ..checks.problem import Problem
from ..exitcodes import EXIT_BAD_INPUT, EXIT_SIMULATED
from ..problems import print_lines
from .cluster import DEFAULT_WAIT_DEADLINE_S


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="verl-recipe eval",
        description="Score a run's save (or an export) and its base model with verl's own validation, side by side.",
    )
    p.add_argument("run", help="a run folder, <experiment>/<stamp> or an experiment, as `verl-recipe runs` prints them")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--step", type=int, default=None, help="the save to score (default: the newest complete one)")
    which.add_argument("--model", type=Path, default=None, help="score this Hugging Face folder (an export) instead")
    p.add_argument("--val-files", nargs="+", default=None, help="validation files (default: the run's VAL_FILES)")
    p.add_argument("--log-dir", type=Path, action="append", help="LOG_DIR (default: every recipe's, from the site)")
    p.add_argument(
        "--wait-deadline", type=float, default=DEFAULT_WAIT_DEADLINE_S, help="seconds to wait for the run's nodes"
    )
    return p


def main(argv: Sequence[str]) -> int:
    ns = parser().parse_args(list(argv))
    from ..cluster.nodeenv import from_environ
    from ..evaluation.run import evaluate, plan
    from ..run.lifecycle import default_log_dirs, resolve_run, who

    dirs = ns.log_dir or default_log_dirs()
    run_dir = resolve_run(ns.run, dirs)
    if run_dir is None:
        where = ", ".join(map(str, dirs))
        print_lines([str(Problem(ns.run, f"is no run under {where}", "verl-recipe runs lists the runs"))])
        return EXIT_BAD_INPUT
    p = plan(run_dir, ns.step, ns.model, ns.val_files)
    if isinstance(p, Problem):
        print_lines([str(p)])
        return EXIT_BAD_INPUT
    ne = from_environ()
    if ne.simulated and p.values.get("DEVICE") != "cpu":
        print(
            f"simulated cluster: {run_dir} ran on {p.values.get('DEVICE')}, which this cluster does not have: "
            "nothing to score (only the CPU stand-ins' runs can be scored here)",
            flush=True,
        )
        return EXIT_SIMULATED
    # verl's driver joins this cluster's head with the token, as a training launch does (cli/cluster.py _train).
    os.environ.setdefault("RAY_ADDRESS", ne.gcs_address)
    from ..cluster.raynode import QUIET_RAY, require_token_auth
    from .cluster import cmd_wait, start_local_head

    for key, value in QUIET_RAY.items():
        os.environ.setdefault(key, value)
    require_token_auth()
    nnodes, dies = int(p.values.get("NNODES") or 1), int(p.values.get("NDEVICES_PER_NODE") or 1)
    if nnodes == 1:
        start_local_head(ne)
    rc = cmd_wait(ne, nnodes, dies, ns.wait_deadline)
    if rc:
        return rc
    from ..run.launcher import SHOW_VERL_ENV

    return evaluate(p, who(), show=os.environ.get(SHOW_VERL_ENV) == "1")
