"""The step-integrity verdict of a run and the attempts it goes on from (outcome.json's "steps"): the last step
against the requested total, no step missing, no step logged twice. The attempts are the experiment's earlier run
folders this one resumed through: each resumed from a checkpoint (settings.json's resumed_from_step, from verl's own
"Resuming from" line), so of an earlier attempt only the steps up to that checkpoint stand; the ones after it were
trained again ("redone": the work a loss cost), and the ones up to it that no attempt logged were trained all the
same ("unlogged": the checkpoint proves them)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from ..contracts import runfiles
from ..contracts.records import MAX_LINE_BYTES, is_step, parse_record


def logged_steps(run_dir: Path) -> list[int]:
    """The steps of a run's metric stream in the order written (a half-written last line is left out)."""
    steps: list[int] = []
    try:
        with open(run_dir / runfiles.METRICS, "rb") as f:
            for line in f:
                if not line.endswith(b"\n") or len(line) > MAX_LINE_BYTES:
                    continue
                rec = parse_record(line)
                if rec is not None:
                    steps.append(rec["step"])
    except OSError:
        pass
    return steps


def _settings(run_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((run_dir / runfiles.SETTINGS).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _resumed_from(settings: dict[str, Any]) -> int | None:
    value = settings.get("resumed_from_step")
    return value if is_step(value) else None


def integrity(run_dir: Path) -> dict[str, Any]:
    """The verdict over this run and the attempts it resumed through."""
    here = _settings(run_dir)
    total = here.get("total_steps")
    total = int(total) if isinstance(total, int | str) and str(total).isdigit() else None
    try:
        earlier = sorted(p for p in run_dir.parent.iterdir() if p.is_dir() and p.name < run_dir.name)
    except OSError:
        earlier = []
    attempts = [run_dir.name]
    twice: set[int] = set()
    redone: set[int] = set()
    stands: set[int] = set()
    mine = logged_steps(run_dir)
    twice |= {s for s, n in Counter(mine).items() if n > 1}
    stands |= set(mine)
    cut = _resumed_from(here)
    # verl trains in order and saves a step before it logs it (ray_trainer.py fit(): _save_checkpoint, then
    # logger.log), so the checkpoint this run resumed from proves every step up to it trained, logged or not: an
    # attempt ended between a save and its log line leaves that step unlogged, not missing.
    proven = cut or 0
    for prev in reversed(earlier):
        if cut is None:
            break  # the attempt started from scratch: nothing before it counts
        steps = logged_steps(prev)
        resumed = _resumed_from(_settings(prev))
        if not steps and resumed is None:
            continue  # ended before its first step and before saying where it started: passes nothing on
        attempts.append(prev.name)
        twice |= {s for s, n in Counter(steps).items() if s <= cut and n > 1}
        stands |= {s for s in steps if s <= cut}
        redone |= {s for s in steps if s > cut}
        cut = min(cut, resumed) if resumed is not None else None
    last = max(stands, default=0)
    # A chain that reaches back to a checkpoint whose run is not here (cut is not None) starts after that step.
    start = cut + 1 if cut is not None else 1
    missing = sorted(set(range(max(start, proven + 1), last + 1)) - stands)
    unlogged = sorted(set(range(max(start, 1), proven + 1)) - stands)
    if not stands:
        verdict = "no step logged"
    elif missing or twice:
        verdict = "broken"
    elif total is not None and last < total:
        verdict = f"stopped at step {last} of {total}"
    else:
        verdict = "complete"
    out: dict[str, Any] = {
        "verdict": verdict,
        "last_step": last,
        "total": total,
        "attempts": list(reversed(attempts)),
        "missing": missing,
        "unlogged": unlogged,
        "twice": sorted(twice),
        "redone": sorted(redone),
    }
    if cut is not None and stands:
        out["from_checkpoint_of_step"] = cut  # resumed from a checkpoint no run folder here logged
    return out
