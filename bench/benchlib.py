"""Pure parts of the bench driver (no Docker, no clock): ratios, medians, output parsers and the results table.

tests/bench/test_benchlib.py covers them; the section modules of bench/ do the measuring. What ansible-playbook's
output says (PLAY RECAP, role times) is simkit.playbook's.
"""

from __future__ import annotations

import datetime
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


def ping_coverage(report: dict[str, Any]) -> dict[str, int]:
    """From a preflight report's meta: the host pairs and receiving dies its NPU pings tried, of all there are."""
    hosts = (report.get("meta") or {}).get("hosts") or {}
    pairs, dies, pings = set(), set(), 0
    for name, info in hosts.items():
        for item in info.get("ping_plan") or []:
            pings += 1
            pairs.add(frozenset((name, item["peer"])))
            dies.add((item["peer"], item["peer_die"]))
    n = len(hosts)
    return {
        "hosts": n,
        "pings": pings,
        "host_pairs": len(pairs),
        "host_pairs_total": n * (n - 1) // 2,
        "dies_pinged": len(dies),
    }


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


def named_lost(lines: list[tuple[float, str]], host: str, ip: str, t0: float) -> tuple[float, str] | None:
    """Seconds from t0 (the power loss) to the first stamped line of the head naming `host (ip)` as lost (its own
    knock) or as having left (Ray's verdict reached first), with that line."""
    label = f"{host} ({ip})"
    for t, line in lines:
        if t >= t0 and label in line and (" lost" in line or "left the cluster" in line):
            return round(t - t0, 1), line
    return None


def ray_dead_after(lines: list[tuple[float, str]], t0: float) -> float | None:
    """Seconds from t0 to Ray's own verdict: the first `dead <epoch seconds>` line of the Ray-side poll (the epoch
    is read inside the head's container, on the same kernel clock as t0)."""
    for _, line in lines:
        parts = line.split()
        if len(parts) == 2 and parts[0] == "dead":
            return round(float(parts[1]) - t0, 1)
    return None


def nodeloss_figures(
    n: int, named_s: float | None, dead_s: float | None, rejoin_s: float | None, rc: int | None, run_id: str,
    detail: dict[str, Any],
) -> list[Figure]:  # fmt: skip
    how = (
        f"{n} deployed hosts, a rehearsal of all {n} nodes running on the head (a long all-reduce); `make sim-fault "
        f"HOST=a3-{n:02d} FAULT=down` (power loss: the host and its engine's containers killed at once); seconds "
        "from that command until the head's output names the host, and until Ray's own node table marks the node "
        "dead (`ray.nodes()` polled every 0.5 s in the ray-head container)"
    )
    return [
        Figure("8", f"power loss -> the head names the host ({n} hosts), s", named_s,
               "10-13 (10 s of knocks every 2 s)", how, run_id, detail),
        Figure("8", f"power loss -> Ray marks the node dead ({n} hosts), s", dead_s, "-", how, run_id),
        Figure("8", f"head naming / Ray's node-death detection ({n} hosts)",
               ratio(named_s, dead_s) if named_s is not None and dead_s is not None else None, "< 1", how, run_id),
        Figure("8", f"rehearsal exit status after the loss ({n} hosts)", rc, "3", "exit status of the rehearsal above",
               run_id),
        Figure("8", f"reboot -> every node joined again ({n} hosts), s", rejoin_s, "-",
               f"`FAULT=clear` on a3-{n:02d} (boot: engine, then its ray-worker by restart policy unless-stopped) "
               f"until the head's `verl-recipe wait-cluster --nodes {n}` returns", run_id),
    ]  # fmt: skip


def rfc3339_epoch(stamp: str) -> float:
    """Epoch seconds of a Docker time stamp (`2026-12-01T06:59:01.123456789Z`: nanoseconds, UTC)."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", stamp.strip())
    if not m:
        raise ValueError(f"not an RFC 3339 time stamp: {stamp!r}")
    base = datetime.datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) == "Z" else m.group(3)))
    return base.timestamp() + float("0." + (m.group(2) or "0"))


VERL_NOTE = re.compile(r"note: verl's own start-up checks ran in ([0-9]+(?:\.[0-9]+)?) s")
VALIDATE_END = re.compile(r"=== validate rc=(\d+) start=([0-9.]+) end=([0-9.]+)")


def validate_runs(output: str) -> list[tuple[float, float | None]]:
    """(wall seconds, seconds of verl's own checks or None) of each `validate` in a loop's output: a run's lines end
    with `=== validate rc=N start=EPOCH end=EPOCH`; its note `verl's own start-up checks ran in X s` says what verl's
    checks took inside it. A run that failed (rc != 0) is an error, not a figure."""
    runs: list[tuple[float, float | None]] = []
    check: float | None = None
    for line in output.splitlines():
        m = VERL_NOTE.search(line)
        if m:
            check = float(m.group(1))
            continue
        end = VALIDATE_END.fullmatch(line.strip())
        if end:
            if int(end.group(1)) != 0:
                raise ValueError(f"validate failed (rc={end.group(1)}): not a figure")
            runs.append((round(float(end.group(3)) - float(end.group(2)), 3), check))
            check = None
    return runs


def verl_check_share(runs: list[tuple[float, float | None]]) -> dict[str, float]:
    """Medians of validate with verl's checks (the wall time) and without them (wall minus what the note says the
    checks took), and the seconds the checks add. Every run must have run verl's checks."""
    if not runs:
        raise ValueError("no validate runs")
    missing = sum(1 for _, check in runs if check is None)
    if missing:
        raise ValueError(f"{missing} of {len(runs)} validate runs did not run verl's own checks (verl not imported?)")
    walls = [wall for wall, _ in runs]
    checks = [float(check or 0.0) for _, check in runs]
    with_s = median(walls)
    without_s = median([wall - check for wall, check in zip(walls, checks, strict=True)])
    return {"with_s": round(with_s, 3), "without_s": round(without_s, 3), "checks_s": round(median(checks), 3)}


PROGRESS = re.compile(r"progress: step (\d+)(?:/\d+)?\b")


def progress_steps(lines: list[tuple[float, str]]) -> list[tuple[float, int]]:
    """(time, step) of every `progress: step k/N` line of a launch's stamped output, in order."""
    return [(t, int(m.group(1))) for t, line in lines if (m := PROGRESS.search(line))]


@dataclass
class Recovery:
    """One host loss in a training run, from the stamped progress lines of the run's commands: the last step logged
    before the loss, the first step after the host's return and when it came."""

    last_before: int | None
    first_after: int | None
    return_to_step_s: float | None

    @property
    def redone(self) -> int | None:
        """Steps trained twice: logged before the loss and trained again after it (resume from an older checkpoint)."""
        if self.last_before is None or self.first_after is None:
            return None
        return max(0, self.last_before - self.first_after + 1)


def recovery(lines: list[tuple[float, str]], lost_at: float, back_at: float) -> Recovery:
    """Read a host loss at `lost_at` and its return at `back_at` from progress lines (of one or more commands)."""
    steps = progress_steps(lines)
    before = [k for t, k in steps if t < lost_at]
    after = [(t, k) for t, k in steps if t >= back_at]
    return Recovery(
        before[-1] if before else None,
        after[0][1] if after else None,
        round(after[0][0] - back_at, 1) if after else None,
    )


def recovery_figures(auto: Recovery, manual: Recovery, run_id: str, how: str, detail: dict[str, Any]) -> list[Figure]:
    """Section 10: the restart policy against a person who types the same command the moment the host is back."""
    both = auto.return_to_step_s is not None and manual.return_to_step_s is not None
    return [
        Figure("10", "host back -> next training step, restart policy, s", auto.return_to_step_s, "-", how, run_id,
               detail),
        Figure("10", "host back -> next training step, a person re-typing at once, s", manual.return_to_step_s, "-",
               how, run_id),
        Figure("10", "host back -> next step, restart policy / person at once",
               ratio(auto.return_to_step_s, manual.return_to_step_s) if both else None,  # type: ignore[arg-type]
               "<= ~1 (and no person: the manual path adds their reaction time, minutes to hours)", how, run_id),
        Figure("10", "steps trained twice, restart policy", auto.redone, "<= 1 (a checkpoint every step)", how,
               run_id),
        Figure("10", "steps trained twice, person at once", manual.redone, "<= 1 (a checkpoint every step)", how,
               run_id),
    ]  # fmt: skip
