"""How a command tells its user what is wrong: on stderr, one line per problem, errors prefixed `error: `."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable

from .exitcodes import EXIT_BAD_INPUT

# What would break a problem over lines or hide part of it in a terminal: every control character but tab, and what
# str.splitlines() also splits on (file/group/record separators, NEL, line and paragraph separators).
_BREAKS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]")


def one_line(message: object) -> str:
    """The message as one printable line: a user's value with a newline or an escape in it is shown escaped."""
    return _BREAKS.sub(lambda m: m.group().encode("unicode_escape").decode(), str(message))


def print_lines(lines: Iterable[object]) -> None:
    for line in lines:
        print(one_line(line), file=sys.stderr)


def refuse(problems: list[str], recipe: str) -> int:
    """Every problem of a request, then how many and that nothing was started; returns the bad-input code."""
    print_lines(problems)
    print(f"{len(problems)} problem(s) in {recipe}; nothing was started", file=sys.stderr)
    return EXIT_BAD_INPUT


def error(message: object, *, flush: bool = False) -> None:
    print(f"error: {one_line(message)}", file=sys.stderr, flush=flush)
