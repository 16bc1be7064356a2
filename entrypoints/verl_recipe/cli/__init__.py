"""`verl-recipe`: list, render, validate and launch Qwen3.5 GRPO recipes; doctor; cluster start-up.

Exit codes: exitcodes.py (0 success; 1 a check found problems, e.g. a rehearsal; 2 bad input, every problem printed,
one per line; 3 cluster not ready in time or a node lost; 4 a real launch on the simulated cluster; 5 a health rule
in HEALTH_STOP stopped the run; 6 `compare` found a regression; 7 `stop` stopped the run); other values are the
training process's own exit code. docs/cli.md has the table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..checks import resume
from ..exitcodes import EXIT_BAD_INPUT, EXIT_BROKEN_PIPE, EXIT_OK
from ..exitcodes import EXIT_NOT_READY as EXIT_NOT_READY  # these two also named here, with the others
from ..exitcodes import EXIT_SIMULATED as EXIT_SIMULATED
from ..prepare import add_request_args, prepare, request_of
from ..problems import error, print_lines, refuse
from ..recipes import load_recipe, recipe_names
from ..render import render
from ..resolve import resolve
from ..settingtypes import SettingsError
from .cluster import add_cluster_commands, run_cluster_command

# Commands that parse their own arguments: listed in --help, and handed everything after their name.
FORWARDED = {
    "doctor": "check this node and image against the versions manifest",
    "report": "the readiness page (HTML) from preflight/rehearsal JSON reports, or RUN_DIR/run.html from a run folder",
    "diagnose": "known failure signatures in a run's logs: cause, fix, what prevents it next time",
    "compare": "a run against a baseline run or file (verl's metrics); --save-baseline FILE saves one",
    "runs": "every run under LOG_DIR: state, step of total, ETA, attempts, last alert",
    "attach": "a run's progress lines from its first step, following it until it ends (Ctrl-C leaves the run)",
    "stop": "stop a run cleanly (verl ends its Ray job), wait for its end, and record who stopped it and where",
    "export": "a run's save as a Hugging Face folder, checked against the base model (or --check DIR --base PATH)",
    "eval": "a run's save (or an export) and its base model scored by verl's own validation, side by side",
    "bundle": "one .tar.gz of a run's evidence from every host (logs, plogs, npu-smi, kernel tail), secrets redacted",
}


def split_extra(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    args = list(argv)
    if "--" in args:
        i = args.index("--")
        return args[:i], args[i + 1 :]
    return args, []


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="verl-recipe",
        description="Validated verl 0.8.0 GRPO launches of Qwen3.5 on Ascend A3. Settings precedence: recipe "
        "defaults < site file < environment < --set KEY=VALUE < extra Hydra overrides after '--'.",
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_list = sub.add_parser("list", help="recipes and their layouts")
    p_list.add_argument("--json", action="store_true")
    p_render = sub.add_parser("render", help="print the whole launch: environment and argv")
    add_request_args(p_render)
    p_render.add_argument("--json", action="store_true", help='print {"recipe", "env", "argv", "memory"} (byte-stable)')
    p_val = sub.add_parser("validate", help="run every check; exit 2 listing all problems")
    add_request_args(p_val)
    p_launch = sub.add_parser("launch", help="validate, write the run record, then run the launch")
    add_request_args(p_launch)
    p_plan = sub.add_parser("plan", help="layouts for N nodes that pass every rule and fit the memory plan")
    add_request_args(p_plan)
    p_plan.add_argument("--nodes", type=int, required=True, help="nodes in the cluster")
    p_plan.add_argument("--json", action="store_true")
    p_plan.add_argument("--top", type=int, default=15, help="layouts to list (default 15)")
    for name, about in FORWARDED.items():
        sub.add_parser(name, help=about, add_help=False)
    add_cluster_commands(sub)
    return parser


def cmd_list(as_json: bool) -> int:
    rows: list[dict[str, Any]] = []
    for name in recipe_names():
        r = load_recipe(name)
        s = r.settings
        rows.append(
            {
                "recipe": name,
                "model": r.model.name,
                "engine": r.engine,
                "nodes": s.get("NNODES"),
                "devices_per_node": s.get("NDEVICES_PER_NODE"),
                "layout": {
                    k: s.get(k)
                    for k in ("TP", "PP", "CP", "EP", "ETP", "FSDP_SIZE", "SP_SIZE", "GEN_TP", "GEN_DP", "GEN_EP")
                    if s.get(k) is not None
                },
                "description": r.description,
            }
        )
    if as_json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    for row in rows:
        layout = " ".join(f"{k}={v}" for k, v in row["layout"].items())
        print(f"{row['recipe']:<18} {row['engine']:<9} {row['nodes']}x{row['devices_per_node']:<3} {layout}")
    return EXIT_OK


def run_forwarded(cmd: str, args: list[str]) -> int:
    if cmd == "doctor":
        from .. import doctor

        return doctor.main(args)
    if cmd == "diagnose":
        from ..diagnosis import diagnose

        return diagnose.main(args)
    if cmd == "compare":
        from ..review import compare

        return compare.main(args)
    if cmd == "export":
        from . import export

        return export.main(args)
    if cmd == "eval":
        from . import evaluate

        return evaluate.main(args)
    if cmd == "bundle":
        from ..review import bundle

        return bundle.main(args)
    if cmd in ("runs", "attach", "stop"):
        from ..run import lifecycle

        return lifecycle.main(cmd, args)
    from pathlib import Path

    if len(args) == 1 and Path(args[0]).is_dir():  # a run folder: the run page
        from ..pages import run_page as runpage

        return runpage.main(args)
    from ..pages import readiness as readiness_page

    return readiness_page.main(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Every command; a reader that closes its output early (`verl-recipe diagnose RUN | head`) ends it quietly."""
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # here, not at the interpreter's exit, where a closed pipe prints "Exception ignored"
    except BrokenPipeError:
        # Nothing more can be said on stdout: point it at /dev/null so that no later flush fails (Python's signal
        # module docs, "Note on SIGPIPE").
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _main(argv: Sequence[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] and raw[0] in FORWARDED:
        return run_forwarded(raw[0], raw[1:])
    own, extra = split_extra(raw)
    parser = build_parser()
    ns = parser.parse_args(own)
    try:
        if ns.cmd == "list":
            return cmd_list(ns.json)
        if ns.cmd == "plan":
            from ..plan import cmd_plan

            return cmd_plan(request_of(ns, extra), ns.nodes, ns.top, ns.json)
        if ns.cmd in ("render", "validate", "launch"):
            req = request_of(ns, extra)
            if ns.cmd == "render":
                recipe, resolved = resolve(req)
                launch = render(recipe, resolved, req.extra)
                print_lines(resolved.warnings)
                if ns.json:
                    from ..validate import rendered_memory

                    launch.memory = rendered_memory(recipe, launch, resolved.values)
                    sys.stdout.write(launch.to_json())
                else:
                    from ..run.record import shell_command

                    sys.stdout.write(shell_command(launch))
                return EXIT_OK
            launch, resolved, problems = prepare(req)
            if problems:
                return refuse(problems, req.recipe)
            if ns.cmd == "validate":
                print(f"ok: {req.recipe} is valid ({len(launch.argv) - 3} overrides)")
                return EXIT_OK
            done = resume.complete(resolved.values)
            if done:  # the same command after a finished run trains nothing
                print(done, flush=True)
                return EXIT_OK
            from ..run.launcher import run_attempt

            return run_attempt(launch, resolved)[0]
        return run_cluster_command(ns, extra)
    except SettingsError as exc:
        error(exc)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
