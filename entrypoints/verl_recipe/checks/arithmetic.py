"""The small arithmetic the layout rules share."""

from __future__ import annotations


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def braces(numbers: list[int]) -> str:
    """A set of allowed values as a fix shows it: {1,2,4}."""
    return "{" + ",".join(str(x) for x in numbers) + "}"
