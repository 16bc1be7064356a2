"""The memory plan (memory.py) as validate reports it: refusals, or warnings on a simulated cluster."""

from __future__ import annotations

from typing import Any

from ..memory import Knobs, estimate, summary
from ..memory import problems as memory_problems
from ..models import ModelArch
from ..recipes import Recipe
from .problem import Problem


def check(recipe: Recipe, model: ModelArch, values: dict[str, Any], knobs: Knobs) -> tuple[list[Problem], list[str]]:
    """(problems, notes): what does not fit, then the warnings and the plan's one-line summary."""
    est = estimate(recipe.name, recipe.engine, model, values, knobs)
    found, warnings = memory_problems(est, recipe.name, int(values["NNODES"]))
    problems = [Problem(*p) for p in found]
    if values.get("MEMORY_CHECK") == "warn":
        return [], [*warnings, *(p.as_warning("MEMORY_CHECK=warn") for p in problems), summary(est)]
    return problems, [*warnings, summary(est)]
