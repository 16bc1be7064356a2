"""The memory plan (memory.py) as validate reports it: refusals, or warnings on a simulated cluster."""

from __future__ import annotations

from typing import Any

from ..memory import Estimate, summary
from ..memory import problems as memory_problems
from ..recipes import Recipe
from .problem import Problem


def check(recipe: Recipe, values: dict[str, Any], est: Estimate) -> tuple[list[Problem], list[str]]:
    """(problems, notes) of the launch's one estimate: what does not fit, then the warnings and its summary."""
    found, warnings = memory_problems(est, recipe.name, int(values["NNODES"]))
    problems = [Problem(*p) for p in found]
    if values.get("MEMORY_CHECK") == "scaled":
        if not problems:
            return [], [summary(est)]
        # A layout scaled down for the simulated cluster (scripts/sim_scale.py): one line, not one per phase.
        return [], [
            f"note: memory: this layout was scaled down to {values['NNODES']} nodes for the simulation and would not "
            f"fit real dies (about {est.peak.total / 2**30:.0f} GiB per die of {est.device_bytes / 2**30:.0f}); "
            "the recipe's own layout "
            "is the one that fits (MEMORY_CHECK=scaled)"
        ]
    if values.get("MEMORY_CHECK") == "warn":
        return [], [*warnings, *(p.as_warning("MEMORY_CHECK=warn") for p in problems), summary(est)]
    return problems, [*warnings, summary(est)]
