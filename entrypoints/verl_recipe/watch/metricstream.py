"""Follow verl's own metric stream (metrics.jsonl in the run record, verl's "file" logger) while a run goes on.

verl appends one JSON line per step ({"step": k, "data": {...}}) and flushes it; the last line may still be
half-written when we look. Lines are read whole, in order, each handed to the callbacks once.

The watch never ends on a line (docs/watch.md): an exception in reading or judging one line is reported in one
line on stderr, naming the line and the exception type, and the watch goes on with the next line (Faults). The
file is read in bounded pieces, never opened in a way that waits (a fifo), and a line longer than any step is
skipped to its end, so one line can neither stop the watch nor hold its memory.
"""

from __future__ import annotations

import math
import os
import stat
import statistics
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..contracts import metrics as verl_metrics
from ..contracts.records import MAX_LINE_BYTES, Record, complete_records, finite_number, parse_record
from ..problems import one_line

# One record, as every reader takes it (contracts/records.py); named here too for the tail's callers.
__all__ = [
    "MAX_LINE_BYTES",
    "Faults",
    "MetricTail",
    "Progress",
    "Record",
    "complete_records",
    "parse_record",
    "progress_line",
]

READ_CHUNK = 4 * 2**20  # the tail reads at most this much at a time: a huge append is taken in pieces
SHOWN_PER_KIND = 3  # failures of one stage with one exception type shown on stderr; the rest are counted
T = TypeVar("T")


class Faults:
    """What the watch does with an exception in one line's handling: one line on stderr naming the stage, the
    line (or step) and the exception type, and nothing more: the caller goes on with the next line. The first
    SHOWN_PER_KIND failures of each (stage, exception type) are shown, then one line saying the rest are counted;
    `summary()` gives their number at the end. Thread-safe: the tail's thread and the launcher's both report."""

    def __init__(self) -> None:
        self.count = 0
        self._kinds: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def guard(self, stage: str, where: str, fn: Callable[..., T], *args: Any) -> T | None:
        """fn(*args), or None when it raised (reported)."""
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - the watch outlives any one line; the failure is said, not lost
            self.report(stage, where, exc)
            return None

    def report(self, stage: str, where: str, exc: BaseException) -> None:
        kind = (stage, type(exc).__name__)
        with self._lock:
            self.count += 1
            seen = self._kinds[kind] = self._kinds.get(kind, 0) + 1
        if seen > SHOWN_PER_KIND + 1:
            return
        if seen > SHOWN_PER_KIND:
            line = f"watch: {stage}: more {kind[1]} failures; counted, not shown (the watch goes on)"
        else:
            said = one_line(str(exc))[:200]
            said = f": {said}" if said else ""
            line = f"watch: {stage} failed at {where}: {kind[1]}{said}; the watch goes on with the next line"
        print(line, file=sys.stderr, flush=True)

    def summary(self) -> str | None:
        """One line when failures were counted but not all shown, else None."""
        with self._lock:
            hidden = sum(max(0, n - SHOWN_PER_KIND) for n in self._kinds.values())
            count = self.count
        if not hidden:
            return None
        return f"watch: {count} failures in all while reading or judging lines; {hidden} not shown"


class MetricTail:
    """A thread that reads `path` every `every_s` seconds and calls `on_record` for each new step; `stop()` reads
    what is left once more, so the last step of a run is never missed. An exception in `on_record` or `on_poll`
    is reported through `faults` and the tail goes on."""

    def __init__(
        self,
        path: Path,
        on_record: Callable[[Record], None],
        every_s: float = 1.0,
        on_poll: Callable[[], object] | None = None,
        faults: Faults | None = None,
    ) -> None:
        """`on_poll`: called after every read on the thread (the stall timer of the health rules)."""
        self.path, self.on_record, self.every_s, self.on_poll = path, on_record, every_s, on_poll
        self.faults = faults or Faults()
        self.lines = 0  # whole lines read so far: the line number in metrics.jsonl a report names
        self._offset = 0
        self._rest = b""
        self._overlong = False  # inside a line longer than MAX_LINE_BYTES: skipped up to its end
        self._not_a_file = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="verl-recipe-metrics", daemon=True)

    def __enter__(self) -> MetricTail:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.every_s + 5)
        self.faults.guard("reading the metric stream", str(self.path), self.poll)
        summary = self.faults.summary()
        if summary:
            print(summary, file=sys.stderr, flush=True)

    def poll(self) -> None:
        """Read what was appended since the last poll, in pieces of READ_CHUNK, and hand on each whole line."""
        try:
            # O_NONBLOCK: a fifo planted where the stream should be is opened without waiting for a writer.
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return  # verl has not opened it yet
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                if not self._not_a_file:
                    self._not_a_file = True
                    self.faults.report(
                        "reading the metric stream", str(self.path), OSError("not a regular file: no step is read")
                    )
                return
            if info.st_size < self._offset:  # truncated or replaced: read it again from its start
                self._offset, self._rest, self._overlong = 0, b"", False
            os.lseek(fd, self._offset, os.SEEK_SET)
            left = info.st_size - self._offset  # what is there now; what verl appends meanwhile waits for the next
            while left > 0 and (chunk := os.read(fd, min(left, READ_CHUNK))):
                self._offset += len(chunk)
                left -= len(chunk)
                self._take(chunk)
        finally:
            os.close(fd)

    def _take(self, chunk: bytes) -> None:
        if self._overlong:
            end = chunk.find(b"\n")
            if end == -1:
                return
            chunk, self._overlong = chunk[end + 1 :], False
            self.lines += 1
        *lines, self._rest = (self._rest + chunk).split(b"\n")
        for line in lines:
            self.lines += 1
            if len(line) <= MAX_LINE_BYTES:
                self.faults.guard("a metric line", f"{self.path.name} line {self.lines}", self._one, line)
        if len(self._rest) > MAX_LINE_BYTES:  # no step: stop holding it, and skip the rest of it when it ends
            self._rest, self._overlong = b"", True

    def _one(self, line: bytes) -> None:
        rec = parse_record(line)
        if rec is not None:
            self.on_record(rec)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.faults.guard("reading the metric stream", str(self.path), self.poll)
            if self.on_poll is not None:
                self.faults.guard("the watch's timer", "a poll", self.on_poll)


def _num(data: dict[str, Any], *keys: str) -> float | None:
    for key in keys:
        value = finite_number(data.get(key))
        if value is not None:
            return value
    return None


# The highest device memory of a step: the new engine workers write perf/..., the legacy workers actor/perf/....
DEVICE_MEM_KEYS, HOST_MEM_KEYS = verl_metrics.DEVICE_MEM, verl_metrics.HOST_MEM


ETA_STEPS = 1000  # the ETA is the median of this run's last ETA_STEPS step times
MAX_ETA_S = 100 * 365 * 86400.0


def eta_text(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def progress_line(
    rec: Record, total: int | None, step_times: list[float] | None = None, host_memory: bool = False
) -> str:
    """One line per step: step k/N, seconds per step, tokens/s, reward mean, response length, memory and an ETA
    (the median of `step_times`, this run's recent steps, times the steps left); absent metrics are left out.
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
        eta = statistics.median(step_times) * (total - step)
        if math.isfinite(eta) and 0 <= eta < MAX_ETA_S:  # a step time of 1e308 s has no ETA worth printing
            parts.append(f"ETA {eta_text(eta)}")
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
            del self.step_times[:-ETA_STEPS]  # the median of a bounded window: each line costs the same
        return progress_line(rec, self.total, self.step_times, self.host_memory)
