"""`verl-recipe`: list, render, validate and launch Qwen3.5 GRPO recipes; doctor; cluster start-up.

Exit codes: 0 success; 2 bad input (every problem printed, one per line); 3 cluster not ready in time;
other values are the training process's own exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .recipes import load_recipe, recipe_names
from .render import Launch, render, setting_keys
from .resolve import Request, resolve
from .settings import Resolved, SettingsError

EXIT_OK, EXIT_BAD_INPUT, EXIT_NOT_READY = 0, 2, 3
# A real (not --rehearse) launch on the simulated cluster: validated, rendered and recorded; verl not started.
EXIT_SIMULATED = 4


def split_extra(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    args = list(argv)
    if "--" in args:
        i = args.index("--")
        return args[:i], args[i + 1 :]
    return args, []


def add_request_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("recipe", help="recipe name (verl-recipe list)")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting (or env.VAR=VALUE for the launch environment); repeatable",
    )
    p.add_argument("--site", type=Path, default=None, help="site settings file (default: $VERL_RECIPE_SITE)")
    p.add_argument(
        "--skip-path-checks",
        action="store_true",
        help="do not check that MODEL_PATH, data and output paths exist (for rendering off-cluster)",
    )


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
    sub.add_parser("doctor", help="check this node and image against the versions manifest", add_help=False)
    sub.add_parser("report", help="the readiness page (HTML) from preflight/rehearsal JSON reports", add_help=False)
    from .cluster_cli import add_cluster_commands

    add_cluster_commands(sub, add_request_args)
    return parser


def request_of(ns: argparse.Namespace, extra: list[str]) -> Request:
    return Request(
        recipe=ns.recipe, sets=list(ns.sets), extra=extra, site=ns.site, skip_path_checks=bool(ns.skip_path_checks)
    )


def prepare(req: Request, *, compose: bool | None = None) -> tuple[Launch, Resolved, list[str]]:
    """Resolve, render and validate. Returns the launch, the resolved settings and problems as lines."""
    from .hydra_check import hydra_available
    from .validate import validate

    recipe, resolved = resolve(req)
    launch = render(recipe, resolved, req.extra)
    do_compose = hydra_available() if compose is None else compose
    problems, notes = validate(
        recipe,
        resolved.values,
        launch,
        setting_keys(recipe),
        environ=os.environ,
        env_overrides=resolved.env_overrides,
        path_checks=not req.skip_path_checks,
        compose=do_compose,
    )
    for line in [*resolved.warnings, *notes]:
        print(line, file=sys.stderr)
    return launch, resolved, [str(p) for p in problems]


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


def main(argv: Sequence[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["doctor"]:
        from .doctor import main as doctor_main

        return doctor_main(raw[1:])
    if raw[:1] == ["report"]:
        from .readiness_page import main as report_main

        return report_main(raw[1:])
    own, extra = split_extra(raw)
    parser = build_parser()
    ns = parser.parse_args(own)
    try:
        if ns.cmd == "list":
            return cmd_list(ns.json)
        if ns.cmd == "plan":
            from .plan import cmd_plan

            return cmd_plan(request_of(ns, extra), ns.nodes, ns.top, ns.json)
        if ns.cmd in ("render", "validate", "launch"):
            req = request_of(ns, extra)
            if ns.cmd == "render":
                recipe, resolved = resolve(req)
                launch = render(recipe, resolved, req.extra)
                for line in resolved.warnings:
                    print(line, file=sys.stderr)
                if ns.json:
                    sys.stdout.write(launch.to_json())
                else:
                    from .runrecord import shell_command

                    sys.stdout.write(shell_command(launch))
                return EXIT_OK
            launch, resolved, problems = prepare(req)
            if problems:
                print("\n".join(problems), file=sys.stderr)
                print(f"{len(problems)} problem(s) in {req.recipe}; nothing was started", file=sys.stderr)
                return EXIT_BAD_INPUT
            if ns.cmd == "validate":
                print(f"ok: {req.recipe} is valid ({len(launch.argv) - 3} overrides)")
                return EXIT_OK
            from .launcher import run_launch

            return run_launch(launch, resolved)
        from .cluster_cli import run_cluster_command

        return run_cluster_command(ns, extra)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
