"""scripts/sim_scale.py: a recipe scaled to any simulated size from 1 to 16 nodes is a valid launch."""

from __future__ import annotations

from pathlib import Path

import pytest
from verl_recipe.recipes import recipe_names
from verl_recipe.render import render
from verl_recipe.resolve import Request, resolve
from verl_recipe.validate import validate

from simkit.paths import load_by_path

sim_scale = load_by_path("sim_scale", Path(__file__).resolve().parents[2] / "scripts" / "sim_scale.py")


@pytest.mark.parametrize("recipe", recipe_names())
@pytest.mark.parametrize("nodes", list(range(1, 17)))
def test_scaled_layout_validates(recipe: str, nodes: int) -> None:
    sets = [a.removeprefix("--set ") for a in sim_scale.scaled(recipe, nodes)]
    r, res = resolve(Request(recipe, sets=sets), environ={})
    assert res.values["NNODES"] == nodes
    launch = render(r, res, [])
    checked = validate(r, res.values, launch, environ={}, env_overrides={}, path_checks=False, compose=False)
    assert checked.problems == [], [str(p) for p in checked.problems]


def test_recipe_size_is_unchanged() -> None:
    assert sim_scale.scaled("qwen3.5-397b", 16) == []
