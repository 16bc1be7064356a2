"""Settings resolution: recipe defaults < site file < environment < --set."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .layers import (
    Layer,
    Resolved,
    default_site_file,
    layer_from_environ,
    layer_from_sets,
    layers_from_site_file,
    merge,
)
from .recipes import Recipe, load_recipe, recipe_names
from .settingtypes import SettingsError
from .suggest import suggest


@dataclass
class Request:
    """What the user asked for; render, validate and launch take exactly this."""

    recipe: str
    sets: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    site: Path | None = None
    skip_path_checks: bool = False


def known_recipe(name: str) -> str:
    """A recipe name from the list, before it becomes part of a path (a file name, the run record's folder)."""
    known = recipe_names()
    if name in known:
        return name
    hint = suggest(name[:100], known)
    did = f"did you mean '{hint}'? " if hint else ""
    raise SettingsError(f"unknown recipe {name[:80]!r}; fix: {did}use one of {', '.join(known)} (verl-recipe list)")


def resolve(req: Request, environ: Mapping[str, str] | None = None) -> tuple[Recipe, Resolved]:
    env = os.environ if environ is None else environ
    recipe = load_recipe(known_recipe(req.recipe))
    warnings: list[str] = []
    launch_env_keys = set(recipe.env) | set(recipe.npu_env)
    upper: list[Layer] = []
    site = req.site or default_site_file(env)
    if site is not None:
        upper.extend(layers_from_site_file(site, warnings, recipe.name))
    upper.append(layer_from_environ(env, launch_env_keys, warnings))
    upper.append(layer_from_sets(req.sets, warnings))
    # The recipe's defaults depend on the device, which a higher layer may choose.
    device = recipe.settings.get("DEVICE", "npu")
    for layer in upper:
        device = layer.values.get("DEVICE", device)
    defaults = dict(recipe.settings)
    if device == "gpu":
        defaults.update(recipe.gpu_settings)
    defaults["EXPERIMENT_NAME"] = defaults.get("EXPERIMENT_NAME") or recipe.name
    return recipe, merge([Layer(f"recipe {recipe.name}", defaults), *upper], warnings)
