"""STAND-IN: the `cpu` device of verl-recipe, registered under its `verl_recipe.devices` entry points (this package's
pyproject.toml): the part of a launch that DEVICE=cpu adds, and the tiny checkpoint and data it trains on."""

from __future__ import annotations

from . import overlay
from .seed import write_data, write_model

__all__ = ["overlay", "write_data", "write_model"]
