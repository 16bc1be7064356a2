"""Follow verl's own metric stream (metrics.jsonl in the run record, verl's "file" logger) while a run goes on.

verl appends one JSON line per step ({"step": k, "data": {...}}) and flushes it; the last line may still be
half-written when we look. Lines are read whole, in order, each handed to the callbacks once.
"""

from __future__ import annotations

import json
import math
import statistics
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

Record = dict[str, Any]


def parse_record(line: bytes | str) -> Record | None:
    """One line of the stream as a {"step": int, "data": {...}} record, or None for anything else: the one
    definition the live tail, compare and the run page share. A line nested thousands deep is None too (json's
    RecursionError would otherwise end the tail's thread, and the health rules with it, silently)."""
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    step = rec.get("step") if isinstance(rec, dict) else None
    if isinstance(step, int) and not isinstance(step, bool) and isinstance(rec.get("data"), dict):
        return rec
    return None


def complete_records(buffer: bytes) -> tuple[list[Record], bytes]:
    """The whole lines of `buffer` as records (lines that are no record are skipped), and the rest."""
    *lines, rest = buffer.split(b"\n")
    return [rec for line in lines if (rec := parse_record(line)) is not None], rest


class MetricTail:
    """A thread that reads `path` every `every_s` seconds and calls `on_record` for each new step; `stop()` reads
    what is left once more, so the last step of a run is never missed."""

    def __init__(
        self,
        path: Path,
        on_record: Callable[[Record], None],
        every_s: float = 1.0,
        on_poll: Callable[[], object] | None = None,
    ) -> None:
        """`on_poll`: called after every read on the thread (the stall timer of the health rules)."""
        self.path, self.on_record, self.every_s, self.on_poll = path, on_record, every_s, on_poll
        self.records: list[Record] = []
        self._offset = 0
        self._rest = b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="verl-recipe-metrics", daemon=True)

    def __enter__(self) -> MetricTail:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.every_s + 5)
        self.poll()

    def poll(self) -> None:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except OSError:
            return  # verl has not opened it yet
        self._offset += len(chunk)
        records, self._rest = complete_records(self._rest + chunk)
        for rec in records:
            self.records.append(rec)
            self.on_record(rec)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.poll()
            if self.on_poll is not None:
                self.on_poll()


def _num(data: dict[str, Any], *keys: str) -> float | None:
    for key in keys:
        value = data.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


# The highest device memory of a step: the new engine workers write perf/..., the legacy workers actor/perf/....
DEVICE_MEM_KEYS = ("perf/max_memory_allocated_gb", "actor/perf/max_memory_allocated_gb")
HOST_MEM_KEYS = ("perf/cpu_memory_used_gb", "actor/perf/cpu_memory_used_gb")


def _eta(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def progress_line(
    rec: Record, total: int | None, step_times: list[float] | None = None, host_memory: bool = False
) -> str:
    """One line per step: step k/N, seconds per step, tokens/s, reward mean, response length, memory and an ETA
    (the median of `step_times`, this run's steps so far, times the steps left); absent metrics are left out.
    `host_memory`: show host RAM (perf/cpu_memory_used_gb) instead of device memory (the simulated cluster)."""
    d = rec["data"]
    step = rec["step"]
    parts = [f"step {step}/{total}" if total else f"step {step}"]
    secs = _num(d, "timing_s/step")
    if secs is not None:
        parts.append(f"{secs:.1f} s/step")
    tokens = _num(d, "perf/throughput")
    if tokens is not None:
        parts.append(f"{tokens:.0f} tokens/s")
    reward = _num(d, "critic/rewards/mean")
    if reward is not None:
        parts.append(f"reward {reward:.3f}")
    length = _num(d, "response_length/mean")
    if length is not None:
        parts.append(f"response {length:.0f} tokens")
    device = None if host_memory else _num(d, *DEVICE_MEM_KEYS)
    host = _num(d, *HOST_MEM_KEYS)
    if device is not None:
        parts.append(f"device memory max {device:.2f} GB")
    elif host is not None:
        parts.append(f"host RAM {host:.1f} GB")
    if total and step_times and step < total:
        parts.append(f"ETA {_eta(statistics.median(step_times) * (total - step))}")
    return "progress: " + "  ".join(parts)


class Progress:
    """The progress line of each step, with this run's step times kept for the ETA."""

    def __init__(self, total: int | None, host_memory: bool = False) -> None:
        self.total, self.host_memory = total, host_memory
        self.step_times: list[float] = []

    def line(self, rec: Record) -> str:
        secs = _num(rec["data"], "timing_s/step")
        if secs is not None:
            self.step_times.append(secs)
        return progress_line(rec, self.total, self.step_times, self.host_memory)
