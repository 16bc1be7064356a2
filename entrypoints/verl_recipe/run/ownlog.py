"""The supervisor's own lines (what an attached run shows on the terminal: the decisions, the waits, a traceback)
also in a file of the run folder, `supervisor.log`. A detached run's container goes with `--rm`, and with it
everything it printed; the run folder is on shared storage and outlives it.

Lines printed before the first run folder exists (validation, the cluster wait) are kept and written into it; each
later attempt's folder gets the lines from its own start on (the restart wait's lines stay with the attempt it
restarts)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TextIO

from ..contracts import runfiles

MAX_BUFFER = 1 << 20  # what is kept before the first run folder: far more than validation and a wait print


class _Tee:
    def __init__(self, stream: TextIO, owner: OwnLog) -> None:
        self._stream, self._owner = stream, owner

    def write(self, text: str) -> int:
        n = self._stream.write(text)
        self._owner.write(text)
        return n

    def flush(self) -> None:
        self._stream.flush()
        self._owner.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, buffer: the real stream's
        return getattr(self._stream, name)


class OwnLog:
    """Installed on sys.stdout and sys.stderr for the life of one `train`; `to(run_dir)` at each new attempt."""

    def __init__(self) -> None:
        self._pending: list[str] = []
        self._size = 0
        self._file: TextIO | None = None
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout = _Tee(sys.stdout, self)  # type: ignore[assignment]
        sys.stderr = _Tee(sys.stderr, self)  # type: ignore[assignment]

    def write(self, text: str) -> None:
        if self._file is not None:
            try:
                self._file.write(text)
            except OSError:
                self._file = None  # shared storage gone: the terminal (or the container log) still has it
        elif self._size < MAX_BUFFER:
            self._pending.append(text)
            self._size += len(text)

    def flush(self) -> None:
        if self._file is not None:
            try:
                self._file.flush()
            except OSError:
                self._file = None

    def to(self, run_dir: Path) -> None:
        if self._file is not None:
            self._file.close()
        try:
            self._file = open(run_dir / runfiles.SUPERVISOR_LOG, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
        except OSError:
            self._file = None
            return
        if self._pending:
            self._file.write("".join(self._pending))
            self._pending, self._size = [], 0
        self._file.flush()

    def close(self) -> None:
        sys.stdout, sys.stderr = self._saved
        if self._file is not None:
            self._file.close()
            self._file = None
