"""scripts/sim_scale.py: a recipe scaled to any simulated size from 1 to 16 nodes is a valid launch."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from verl_recipe.recipes import recipe_names
from verl_recipe.render import render
from verl_recipe.resolve import Request, resolve
from verl_recipe.validate import validate

SPEC = importlib.util.spec_from_file_location(
    "sim_scale", Path(__file__).resolve().parents[2] / "scripts" / "sim_scale.py"
)
assert SPEC is not None and SPEC.loader is not None
sim_scale = importlib.util.module_from_spec(SPEC)
sys.modules["sim_scale"] = sim_scale
SPEC.loader.exec_module(sim_scale)


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
