"""The launch's Hydra values the plan reads: rendered overrides, then extra overrides, else verl's defaults."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..hydra_syntax import parse_value
from ..settingtypes import ARR
from .coefficients import VERL_DEFAULTS


class Knobs:
    """The launch's Hydra values the estimate reads (rendered overrides, then extra overrides), else verl's."""

    def __init__(self, hydra: Mapping[str, Any], env: Mapping[str, str]) -> None:
        self.hydra = {str(k).lstrip("+"): v for k, v in hydra.items()}
        self.env = dict(env)

    @classmethod
    def from_launch(cls, overrides: Mapping[str, Any], extra: list[str], env: Mapping[str, str]) -> Knobs:
        hydra = dict(overrides)
        for arg in extra:
            key, sep, raw = arg.partition("=")
            if sep:
                hydra[key.lstrip("~")] = raw
        return cls(hydra, env)

    def get(self, key: str) -> Any:
        return parse_value(self.hydra.get(key, VERL_DEFAULTS.get(key)))

    def flag(self, key: str) -> bool:
        return bool(self.get(key))

    def num(self, key: str, default: float) -> float:
        value = self.get(key)
        if not isinstance(value, int | float) or isinstance(value, bool):
            return default
        # An extra override of inf, nan or 1e400 is verl's to refuse; the plan keeps to verl's default meanwhile
        # (int(inf) would raise, and an int beyond a float's range overflows the byte counts).
        try:
            number = float(value)
        except OverflowError:
            return default
        return number if math.isfinite(number) else default

    def token_budget(self, key: str) -> float:
        """A dynamic-batching token budget per device; the log-prob ones fall back to the actor's (verl's rule)."""
        return self.num(key, self.num(f"{ARR}.actor.ppo_max_token_len_per_gpu", 16384))
