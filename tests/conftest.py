"""Shared fixtures: every test sees a process environment without launch settings."""

from __future__ import annotations

import pytest
from verl_recipe.recipes import load_recipe, recipe_names
from verl_recipe.settings import ALIASES, BY_NAME

_LAUNCH_ENV = set()
for _name in recipe_names():
    _r = load_recipe(_name)
    _LAUNCH_ENV |= set(_r.env) | set(_r.npu_env)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [*BY_NAME, *ALIASES, *_LAUNCH_ENV, "VERL_RECIPE_SITE", "WANDB_API_KEY", "WANDB_MODE"]:
        monkeypatch.delenv(key, raising=False)


@pytest.fixture(scope="session")
def sim_image() -> str:
    """verl-recipe:sim, built once per session the way CI builds it (docker layer cache makes reruns cheap)."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    subprocess.run(["make", "--no-print-directory", "-C", str(root), "image-sim"], check=True)
    return "verl-recipe:sim"
