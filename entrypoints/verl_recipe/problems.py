"""How a command tells its user what is wrong: on stderr, one line per problem, errors prefixed `error: `."""

from __future__ import annotations

import sys
from collections.abc import Iterable

from .exitcodes import EXIT_BAD_INPUT


def print_lines(lines: Iterable[object]) -> None:
    for line in lines:
        print(line, file=sys.stderr)


def refuse(problems: list[str], recipe: str) -> int:
    """Every problem of a request, then how many and that nothing was started; returns the bad-input code."""
    print_lines(problems)
    print(f"{len(problems)} problem(s) in {recipe}; nothing was started", file=sys.stderr)
    return EXIT_BAD_INPUT


def error(message: object, *, flush: bool = False) -> None:
    print(f"error: {message}", file=sys.stderr, flush=flush)
