"""What every part of `make inventory` shares: the refusal line, the time, text a host sent made safe to show."""

from __future__ import annotations

import datetime


def problem(subject: str, what: str, fix: str) -> str:
    """One refusal line, the shape of every inventory problem: `SUBJECT: WHAT; fix: FIX`."""
    return f"{subject}: {what}; fix: {fix}"


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def shown(text: str, limit: int = 100) -> str:
    """Text a host sent, as one printable line of bounded length (a problem line or a YAML comment)."""
    clean = "".join(c if c.isprintable() else "?" for c in text.strip())
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


def die_list(dies: list[int]) -> str:
    """The dies as ranges: 0-15, or 0-4,6-15."""
    runs: list[list[int]] = []
    for d in sorted(set(dies)):
        if runs and d == runs[-1][1] + 1:
            runs[-1][1] = d
        else:
            runs.append([d, d])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
