"""Validate a rendered launch: every check that can be made before a device is touched, all problems at once.

The checks live in checks/, one module per concern; this module folds extra Hydra overrides back into the
settings, runs the checks in order, then Hydra's composition and verl's own start-up checks. Rules: megatron-core
0.16.0 (M*), verl 0.8.0 config and runtime asserts (V*), rollout (R*); docs/rules.md lists each id with the
upstream file and lines that enforce it. Each problem names the setting and value, what is wrong, and a fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import checks
from .checks import memory_rules, policy
from .checks.context import Context
from .checks.paths import check_paths as check_paths
from .checks.problem import Problem
from .hydra_syntax import bare_key, list_text, unquoted
from .memory import Knobs
from .recipes import Recipe
from .render import Launch
from .settings import BY_NAME, coerce


def apply_extra(launch: Launch, values: dict[str, Any], key_to_setting: dict[str, str]) -> list[str]:
    """Extra Hydra overrides win: fold the ones that drive a setting back into the values that are checked."""
    notes: list[str] = []
    for arg in launch.extra:
        key, _, raw = arg.partition("=")
        name = key_to_setting.get(bare_key(key))
        if name is None:
            continue
        text = list_text(raw) if BY_NAME[name].kind == "list" else unquoted(raw)
        values[name] = coerce(name, text, f"extra override {key}")
        notes.append(f"note: extra override '{arg}' sets {name}")
    return notes


def validate(
    recipe: Recipe,
    values: dict[str, Any],
    launch: Launch,
    key_to_setting: dict[str, str],
    *,
    environ: Mapping[str, str],
    env_overrides: Mapping[str, str],
    path_checks: bool,
    compose: bool,
) -> tuple[list[Problem], list[str]]:
    values = dict(values)
    notes = apply_extra(launch, values, key_to_setting)
    path_problems: list[Problem] = []
    model = recipe.model
    if path_checks:
        path_problems, model = check_paths(values, recipe.model)
    knobs = Knobs.from_launch(launch.overrides, launch.extra, {**launch.env, **env_overrides})
    ctx = Context(recipe, values, model, knobs)
    layout_ok = checks.layout(ctx)
    policy.check(ctx, environ, env_overrides)
    problems = ctx.problems + path_problems
    if layout_ok:
        memory_found, memory_notes = memory_rules.check(recipe, model, values, knobs)
        problems += memory_found
        notes += memory_notes
    if compose:
        from .hydra_check import composition_errors

        cfg, errors = composition_errors(launch.hydra_args)
        problems += [Problem("verl config", what, fix) for what, fix in errors]
        if cfg is not None and not problems:
            # verl's own start-up checks, only on a launch that passed ours (no line is reported twice)
            from omegaconf import OmegaConf

            from .verl_check import run_verl_checks

            refused, note = run_verl_checks(OmegaConf.to_yaml(cfg))
            problems += [Problem("verl config", what, fix) for what, fix in refused]
            notes.append(note)
    return problems, notes
