"""Follow verl's own metric stream (metrics.jsonl in the run record, verl's "file" logger) while a run goes on.

verl appends one JSON line per step ({"step": k, "data": {...}}) and flushes it; the last line may still be
half-written when we look. Lines are read whole, in order, each handed to the callbacks once.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import statistics
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..contracts import metrics as verl_metrics

Record = dict[str, Any]

# A step is a count: beyond 2**53 a float (a plot's axis, a JSON reader elsewhere) no longer holds it exactly.
MAX_STEP = 2**53
# More digits than a float holds (1.8e308): such an integer reads as inf, so it is left out like any non-finite value
# (and int() of a 5000-digit number raises, math.isfinite of a 400-digit one overflows).
MAX_INT_DIGITS = 308
# A line longer than this is no verl step (those are ~5 KB): the tail stops keeping it while it waits for its end.
MAX_LINE_BYTES = 16 * 2**20


def _int_or_inf(text: str) -> int | float:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        return -math.inf if text.startswith("-") else math.inf
    return int(text)


def load_json(text: bytes | str) -> Any:
    """JSON text of a run record's file (a metric line, settings.json, a baseline ...) as Python values.

    Raises ValueError, with the reason as its message, for anything that is not JSON: bytes that are not UTF-8,
    text nested too deep for the parser (json's RecursionError), a syntax error. Integers of more digits than a
    float holds read as inf."""
    try:
        return json.loads(text, parse_int=_int_or_inf)
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 (byte {exc.start})") from None
    except RecursionError:
        raise ValueError("nested too deep to read") from None
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None


def read_file(path: Path, limit: int) -> bytes:
    """At most `limit` bytes of a regular file of the run record (a symlink to one is followed).

    Raises OSError: FileNotFoundError when absent, IsADirectoryError for a folder, and one with strerror "not a
    regular file" for a fifo, a socket or a device (opened without blocking: reading a fifo would wait for ever)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "a folder, not a file", str(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        chunks, left = [], limit
        while left > 0 and (chunk := os.read(fd, min(left, 2**24))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def finite_number(value: Any) -> float | None:
    """A finite int or float (not a bool) as a float, else None (NaN, inf, null, an int beyond a float, text)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def is_step(value: Any) -> bool:
    """A step number: an int (not a bool) within +-MAX_STEP."""
    return isinstance(value, int) and not isinstance(value, bool) and -MAX_STEP <= value <= MAX_STEP


def parse_record(line: bytes | str) -> Record | None:
    """One line of the stream as a {"step": int, "data": {...}} record, or None for anything else: the one
    definition the live tail, compare and the run page share. A line nested thousands deep is None too (json's
    RecursionError would otherwise end the tail's thread, and the health rules with it, silently); so is a line that
    is not UTF-8, and one whose step is no int within +-MAX_STEP. Integers too large for a float read as inf."""
    try:
        rec = load_json(line)
    except ValueError:
        return None
    if isinstance(rec, dict) and is_step(rec.get("step")) and isinstance(rec.get("data"), dict):
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
        parts.append(f"ETA {_eta(statistics.median(step_times) * (total - step))}")
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
