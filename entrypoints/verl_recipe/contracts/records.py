"""verl's metric records and the run folder's JSON files as every reader takes them: one line of metrics.jsonl as
a {"step": int, "data": {...}} record or nothing, a JSON file read within a bound (never a fifo, never a traceback
on bytes that are not JSON), a finite number. The live tail (watch/metricstream.py), compare and the run page share
these, so they agree on what a record is. Standard library only."""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from . import runfiles

Record = dict[str, Any]
# A file's part to read: its first byte and the byte after its last (None: to its end).
Window = tuple[int, int | None]

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


def _log_sizes(run_dir: Path, name: str) -> dict[str, int]:
    """{"<host>.log": bytes} from one of the run folder's node-log size files; {} when absent or damaged."""
    try:
        doc = load_json(read_file(run_dir / name, 2**20))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {k: v for k, v in doc.items() if isinstance(k, str) and "/" not in k and type(v) is int and v >= 0}


def part_of(window: Window, size: int) -> tuple[int, int]:
    """The bytes [start, end) of a window in a file of `size` bytes now; the whole file when the window does not fit
    it (its start or end beyond the file's end, its end before its start): the file is not the one measured."""
    since, until = window
    end = size if until is None else until
    return (since, end) if 0 <= since <= end <= size else (0, size)


def node_log_windows(run_dir: Path) -> dict[str, Window]:
    """This run's part of each node log, by the log's name: from its size when the run started
    (NODE_LOGS_AT_START) to its size when the run ended (NODE_LOGS_AT_END). No start: from the beginning (a run
    folder written before the file existed, or a damaged one); no end: to the end (a run still going, or one whose
    supervisor died). Diagnose and the bundle read the same part."""
    starts = _log_sizes(run_dir, runfiles.NODE_LOGS_AT_START)
    ends = _log_sizes(run_dir, runfiles.NODE_LOGS_AT_END)
    return {name: (starts.get(name, 0), ends.get(name)) for name in sorted(starts.keys() | ends.keys())}
