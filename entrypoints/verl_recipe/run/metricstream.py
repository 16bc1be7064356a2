"""Follow verl's own metric stream (metrics.jsonl in the run record, verl's "file" logger) while a run goes on.

verl appends one JSON line per step ({"step": k, "data": {...}}) and flushes it; the last line may still be
half-written when we look. Lines are read whole, in order, each handed to the callbacks once.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..contracts import metrics as verl_metrics
from ..contracts.records import MAX_LINE_BYTES, Record, complete_records, finite_number, parse_record

# One record, as every reader takes it (contracts/records.py); named here too for the tail's callers.
__all__ = ["MAX_LINE_BYTES", "MetricTail", "Progress", "Record", "complete_records", "parse_record", "progress_line"]


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
        self._overlong = False  # inside a line longer than MAX_LINE_BYTES: skipped up to its end
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
        if self._overlong:
            end = chunk.find(b"\n")
            if end == -1:
                return
            chunk, self._overlong = chunk[end + 1 :], False
        records, self._rest = complete_records(self._rest + chunk)
        if len(self._rest) > MAX_LINE_BYTES:  # no step: stop holding it, and skip the rest of it when it ends
            self._rest, self._overlong = b"", True
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
        value = finite_number(data.get(key))
        if value is not None:
            return value
    return None


# The highest device memory of a step: the new engine workers write perf/..., the legacy workers actor/perf/....
DEVICE_MEM_KEYS, HOST_MEM_KEYS = verl_metrics.DEVICE_MEM, verl_metrics.HOST_MEM


def eta_text(seconds: float) -> str:
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
    secs = _num(d, verl_metrics.STEP_S)
    if secs is not None:
        parts.append(f"{secs:.1f} s/step")
    tokens = _num(d, verl_metrics.THROUGHPUT)
    if tokens is not None:
        parts.append(f"{tokens:.0f} tokens/s")
    reward = _num(d, verl_metrics.REWARD)
    if reward is not None:
        parts.append(f"reward {reward:.3f}")
    length = _num(d, verl_metrics.RESPONSE_LENGTH)
    if length is not None:
        parts.append(f"response {length:.0f} tokens")
    device = None if host_memory else _num(d, *DEVICE_MEM_KEYS)
    host = _num(d, *HOST_MEM_KEYS)
    if device is not None:
        parts.append(f"device memory max {device:.2f} GB")
    elif host is not None:
        parts.append(f"host RAM {host:.1f} GB")
    if total and step_times and step < total:
        parts.append(f"ETA {eta_text(statistics.median(step_times) * (total - step))}")
    return "progress: " + "  ".join(parts)


class Progress:
    """The progress line of each step, with this run's step times kept for the ETA."""

    def __init__(self, total: int | None, host_memory: bool = False) -> None:
        self.total, self.host_memory = total, host_memory
        self.step_times: list[float] = []

    def line(self, rec: Record) -> str:
        secs = _num(rec["data"], verl_metrics.STEP_S)
        if secs is not None:
            self.step_times.append(secs)
        return progress_line(rec, self.total, self.step_times, self.host_memory)
