"""The logs a diagnosis reads: which files under a run folder (train.log, the other logs beside it, the hosts' node
logs under nodes/, then every other log below: CANN plogs, Ray session logs, an extracted bundle), and each one's
tail as numbered lines. Bounded: the last MAX_TAIL_BYTES of a file, at most MAX_FILES files and MAX_TOTAL_BYTES in
all, MAX_DEPTH folders deep; bytes that are not UTF-8 replaced; never a fifo, a link loop or an unreadable folder."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..contracts import runfiles
from ..contracts.records import Window, part_of
from ..contracts.records import node_log_windows as windows_of
from ..problems import one_line

MAX_TAIL_BYTES = 8 * 2**20  # the end of a log is where a run's failure is
MAX_TOTAL_BYTES = 128 * 2**20
MAX_COUNT_BYTES = 512 * 2**20  # above this much skipped, lines are numbered from the start of the tail read
MAX_FILES = 400  # a Ray session folder can hold thousands of worker logs
MAX_DEPTH = 8
MAX_WALK_ENTRIES = 200_000  # names looked at below a run folder before the walk stops going deeper
# Within the byte budgets, the lines themselves are bounded too: a line's regular-expression work grows with its
# length (one 80,000-character line took 69 s), and each line costs about 50 bytes of memory beyond its text (16 logs
# of 8 MB of short lines took 3.3 GB). A longer line keeps its start and its end, where errors are; a file keeps its
# last MAX_TAIL_LINES lines and a diagnosis MAX_TOTAL_LINES in all.
MAX_LINE_CHARS = 4096
LINE_CUT = " [...] "
MAX_TAIL_LINES = 250_000
MAX_TOTAL_LINES = 2_000_000
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class LogText:
    name: str  # as shown: relative to the run folder, or the path given
    lines: tuple[str, ...]
    first_line: int  # the number of lines[0] in the whole file (the tail may start deep in it)


def _candidates(root: Path) -> Iterator[Path]:
    """Log files under a folder, in reading order: train.log, the other top-level logs, nodes/, the rest."""
    top = root / runfiles.LOG
    if top.is_file():
        yield top
    yield from _logs_in(root)
    nodes = root / runfiles.NODES  # the run record's symlink to LOG_DIR/nodes: os.walk below does not follow links
    if nodes.is_dir():
        yield from _logs_in(nodes)
    base_depth = len(root.parts)
    entries = 0
    # os.walk skips a folder it cannot list (its onerror is None) and follows no symlink: no loop, no unreadable end.
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames.sort()
        entries += len(dirnames) + len(filenames)
        if len(here.parts) - base_depth >= MAX_DEPTH or entries > MAX_WALK_ENTRIES:
            dirnames.clear()  # a tree of millions of files is not walked to its end
        for name in sorted(filenames):
            if name.endswith(LOG_SUFFIXES):
                yield here / name


def _logs_in(folder: Path) -> list[Path]:
    """The log files directly in `folder`, sorted; none when it cannot be listed (the walk still goes on)."""
    try:
        return sorted(p for p in folder.iterdir() if p.suffix in LOG_SUFFIXES and p.is_file())
    except OSError:
        return []


def _shown_name(name: str) -> str:
    """A file name as printed: bytes that are not UTF-8 (os.fsdecode's surrogates) and control characters
    escaped, so printing it never fails and a name with a newline stays on its line."""
    return one_line(os.fsencode(name).decode("utf-8", "backslashreplace"))


def log_files(paths: Sequence[Path], base: Path | None = None) -> list[tuple[Path, str]]:
    """(file, name shown) for every log to read, each once, at most MAX_FILES."""
    out: list[tuple[Path, str]] = []
    seen: set[Path] = set()
    for given in paths:
        try:
            for path in _candidates(given) if given.is_dir() else iter([given]):
                # Only regular files (a symlink to one too): a fifo would block the read for ever, and a symlink
                # loop makes resolve() raise RuntimeError (Python 3.11).
                try:
                    if not path.is_file():
                        continue
                    real = path.resolve()
                except (OSError, RuntimeError):
                    continue
                if real in seen:
                    continue
                seen.add(real)
                name = str(path.relative_to(base)) if base is not None and path.is_relative_to(base) else str(path)
                out.append((path, _shown_name(name)))
                if len(out) >= MAX_FILES:
                    return out
        except OSError:
            continue  # a folder that cannot be listed: what was found before it still counts
    return out


def read_tail(
    path: Path, cap: int = MAX_TAIL_BYTES, since: int = 0, until: int | None = None, max_lines: int = MAX_TAIL_LINES
) -> tuple[tuple[str, ...], int | None]:
    """The last `cap` bytes of the file's window [since, until) as lines, and the number in the whole file of the
    first one. The window is the whole file when it does not fit the file now (it was replaced): `since` beyond its
    end, or `until` beyond its end or before `since`.

    The number is None when the part skipped is too large to count lines in within the time bound. A line is
    what "\\n" ends, as `grep -n` counts them: a progress bar's carriage returns do not end one.
    Raises OSError for anything that is not a regular file (opened without waiting: a fifo never blocks).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    with os.fdopen(fd, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        since, end = part_of((since, until), size)
        start = max(since, end - cap)
        skipped: int | None = 0
        cut = False
        if start:
            fh.seek(start - 1)
            cut = fh.read(1) != b"\n"  # the tail starts inside a line: that partial line is dropped
            if start <= MAX_COUNT_BYTES:
                fh.seek(0)
                left, counted = start, 0
                while left:  # bytes.count is fast enough for file:line to point into the real file
                    chunk = fh.read(min(left, 2**22))
                    if not chunk:
                        break
                    counted += chunk.count(b"\n")
                    left -= len(chunk)
                skipped = counted
            else:
                skipped = None
        fh.seek(start)
        data = fh.read(end - start)
    # Not str.splitlines(): it also splits on \r, \f, \x1c-\x1e, \x85 and \u2028, which would move every
    # file:line after a tqdm bar away from the line a person finds with `grep -n`.
    lines = data.decode("utf-8", errors="replace").split("\n")
    if lines[-1] == "":
        lines.pop()  # the end of the last line, not a line
    if cut and lines:
        lines = lines[1:]
    dropped = max(0, len(lines) - max_lines)
    if dropped:
        lines = lines[dropped:]
    first = None if skipped is None else skipped + 1 + int(cut) + dropped
    return tuple(_bounded(ANSI.sub("", line.removesuffix("\r"))) for line in lines), first


def _bounded(line: str) -> str:
    """A line of at most about MAX_LINE_CHARS: its start and its end, the middle cut."""
    if len(line) <= MAX_LINE_CHARS:
        return line
    half = MAX_LINE_CHARS // 2
    return line[:half] + LINE_CUT + line[-half:]


def read_logs(files: Sequence[tuple[Path, str]], windows: Mapping[Path, Window] | None = None) -> list[LogText]:
    """Each file's tail as numbered lines, within the budgets; `windows`: a file's part to read (a node log's sizes
    when the run started and ended)."""
    out: list[LogText] = []
    budget, line_budget = MAX_TOTAL_BYTES, MAX_TOTAL_LINES
    for path, name in files:
        if budget <= 0 or line_budget <= 0:
            break
        try:
            since, until = (windows or {}).get(path, (0, None))
            lines, first = read_tail(path, min(MAX_TAIL_BYTES, budget), since, until, min(MAX_TAIL_LINES, line_budget))
        except OSError:
            continue  # a log that vanished or cannot be read: the others still count
        budget -= sum(len(line) + 1 for line in lines)
        line_budget -= len(lines)
        if first is None:
            out.append(LogText(f"{name} (tail)", lines, 1))
        else:
            out.append(LogText(name, lines, first))
    return out


def node_log_windows(run_dirs: Sequence[Path]) -> dict[Path, Window]:
    """This run's part of each node log of each run folder (contracts/records.py node_log_windows), by its path."""
    return {run_dir / runfiles.NODES / name: w for run_dir in run_dirs for name, w in windows_of(run_dir).items()}
