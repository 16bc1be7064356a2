"""Pure parts of the bench driver (no Docker, no clock): ratios, medians, output parsers and the results table.

tests/bench/test_benchlib.py covers them; bench/run.py does the measuring.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Figure:
    """One line of the results: a ratio or a count, its ideal or limit, and how it was measured."""

    section: str
    name: str
    value: float | int | None
    ideal: str
    method: str
    run: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def ratio(num: float, den: float, digits: int = 2) -> float | None:
    """num/den rounded; None when the denominator is not positive (nothing to compare against)."""
    if den <= 0:
        return None
    return round(num / den, digits)


def cpu_ticks(proc_stat: str) -> tuple[int, int]:
    """(busy, total) jiffies of the machine from /proc/stat's aggregate `cpu` line; busy excludes idle and iowait."""
    for line in proc_stat.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            # user nice system idle iowait irq softirq steal [guest guest_nice: already inside user/nice]
            vals = [int(v) for v in fields[1:9]]
            total = sum(vals)
            return total - vals[3] - vals[4], total
    raise ValueError("no aggregate cpu line in /proc/stat")


def median(values: list[float]) -> float:
    if not values:
        raise ValueError("median of no values")
    return float(statistics.median(values))


def recap(output: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP counters per host of an ansible-playbook run."""
    out: dict[str, dict[str, int]] = {}
    in_recap = False
    for line in output.splitlines():
        if line.startswith("PLAY RECAP"):
            in_recap = True
            continue
        if in_recap:
            m = re.match(r"^(\S+)\s+:\s+(.*)$", line)
            if not m:
                if line.strip() == "":
                    continue
                if out:
                    break
                continue
            out[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return out


def changed_total(counts: dict[str, dict[str, int]]) -> int:
    return sum(c.get("changed", 0) for c in counts.values())


def role_times(output: str) -> dict[str, float]:
    """ansible.posix.profile_roles' summary: seconds per role."""
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(\w+) -+ ([\d.]+)s$", output, re.M)}


def build_steps(output: str) -> tuple[int, int]:
    """(steps run, steps taken from cache) in the classic builder's output."""
    steps = len(re.findall(r"^Step \d+/\d+ :", output, re.M))
    cached = len(re.findall(r"^ ---> Using cache$", output, re.M))
    return steps, cached


def layers_rebuilt(output: str) -> int:
    """Steps that made a new layer: a `Running in` container, or a COPY/ADD not taken from cache.

    FROM and an ARG before it only name the base (`---> <id>`), so they are neither cached nor rebuilt."""
    count = 0
    for block in re.split(r"^(?=Step \d+/\d+ :)", output, flags=re.M):
        head = re.match(r"Step \d+/\d+ : (\w+)", block)
        if not head or " ---> Using cache" in block:
            continue
        if " ---> Running in " in block or head.group(1).upper() in ("COPY", "ADD"):
            count += 1
    return count


def ready_after(output: str) -> float | None:
    """Seconds from the entrypoint's 'ready after N s' line."""
    m = re.search(r"ready after ([\d.]+) s", output)
    return float(m.group(1)) if m else None


def faults_named(rows: list[dict[str, Any]], injected: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (host, check) pairs of `injected` that a failed row of the preflight report names."""
    failed = {(r.get("host"), r.get("check")) for r in rows if not r.get("ok", True)}
    return [pair for pair in injected if pair in failed]


def fmt(value: float | int | None) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def table(figures: list[Figure]) -> str:
    """Markdown table: section, figure, value, ideal or limit, run."""
    head = ["#", "figure", "value", "ideal / limit", "run"]
    rows = [[f.section, f.name, fmt(f.value), f.ideal, f.run] for f in figures]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(widths[i]) for i, c in enumerate(cells)) + " |"

    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out)


_SECONDS = re.compile(r"\b\d+(?:\.\d+)? s\b")


def figure_key(section: str, name: str) -> tuple[str, str]:
    """What makes two figures the same: section and name, with the seconds some names quote ("median 0.38 s")
    taken out, so a new run replaces the old line instead of adding one beside it."""
    return str(section), _SECONDS.sub("# s", name)


def merge(old: list[dict[str, Any]], new: list[Figure]) -> list[dict[str, Any]]:
    """Figures of this run replace those of the same key (figure_key); the others stay with their run label."""
    fresh = {figure_key(f.section, f.name) for f in new}
    kept = [d for d in old if figure_key(d.get("section", ""), d.get("name", "")) not in fresh]
    merged = kept + [f.as_dict() for f in new]
    return sorted(merged, key=lambda d: (str(d.get("section")), str(d.get("name"))))
