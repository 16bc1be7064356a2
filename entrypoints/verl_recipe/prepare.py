"""A recipe request from the command line: its arguments, and the request resolved, rendered and validated."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .layers import Resolved
from .problems import print_lines
from .render import Launch, render
from .resolve import Request, resolve


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


def request_of(ns: argparse.Namespace, extra: list[str]) -> Request:
    return Request(
        recipe=ns.recipe, sets=list(ns.sets), extra=extra, site=ns.site, skip_path_checks=bool(ns.skip_path_checks)
    )


def prepare(
    req: Request, *, compose: bool | None = None, rehearse: bool = False, simulated: bool = False
) -> tuple[Launch, Resolved, list[str]]:
    """Resolve, render and validate. Returns the launch (with the memory plan validate checked), the resolved
    settings and problems as lines. `rehearse`, `simulated`: a launch that writes no checkpoint is not refused for
    the storage its saves would need."""
    from .checks.storage import no_saves
    from .hydra_check import hydra_available
    from .validate import validate

    recipe, resolved = resolve(req)
    launch = render(recipe, resolved, req.extra)
    do_compose = hydra_available() if compose is None else compose
    checked = validate(
        recipe,
        resolved.values,
        launch,
        environ=os.environ,
        env_overrides=resolved.env_overrides,
        path_checks=not req.skip_path_checks,
        compose=do_compose,
        secret_files=resolved.secret_files,
        no_saves=no_saves(rehearse, simulated, resolved.values),
    )
    # The plan validate checked, over the values the launch runs with, is the one the run record keeps.
    launch.memory = checked.memory
    print_lines([*resolved.warnings, *checked.notes])
    return launch, resolved, [str(p) for p in checked.problems]
