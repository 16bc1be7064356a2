"""What every check reads (the recipe, the settings' values, the model, the launch's knobs) and the problems found."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..memory import Knobs
from ..models import ModelArch
from ..recipes import Recipe
from .problem import Problem


@dataclass
class Context:
    recipe: Recipe
    values: dict[str, Any]
    model: ModelArch
    knobs: Knobs | None = None
    problems: list[Problem] = field(default_factory=list)
    # `NAME=value` of each setting its domain refused (domains.py): a later rule about that value alone would blame
    # the same number again, so the user reads one line per bad number.
    out_of_domain: set[str] = field(default_factory=set)

    def add(self, subject: str, what: str, fix: str, rule: str = "") -> None:
        if subject in self.out_of_domain:
            return
        self.problems.append(Problem(subject, what, fix, rule))

    def show(self, *names: str) -> str:
        """The settings a problem is about, as the user wrote them: `TP=3 PP=4`."""
        return " ".join(f"{name}={self.values.get(name)}" for name in names)

    @property
    def engine(self) -> str:
        return self.recipe.engine

    @property
    def world(self) -> int:
        return int(self.values["NNODES"]) * int(self.values["NDEVICES_PER_NODE"])
