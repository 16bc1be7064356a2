"""The small arithmetic the layout rules share."""

from __future__ import annotations

import math


def divisors(n: int) -> list[int]:
    """The divisors of n >= 1, ascending; up to sqrt(n) trial divisions, not n (plan asks for large worlds)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def braces(numbers: list[int]) -> str:
    """A set of allowed values as a fix shows it: {1,2,4}."""
    return "{" + ",".join(str(x) for x in numbers) + "}"
