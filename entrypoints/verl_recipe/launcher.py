"""Run a validated launch: write the run record, then run verl with its output teed into the run's log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from types import FrameType
from typing import Any

from .render import Launch
from .runrecord import new_run_dir, write_run_record
from .settings import Resolved


def run_launch(launch: Launch, resolved: Resolved, extra_info: dict[str, Any] | None = None) -> int:
    run_dir = write_run_record(new_run_dir(resolved), launch, resolved, extra_info or {})
    log_path = run_dir / "train.log"
    print(f"run record: {run_dir}", file=sys.stderr)
    env = {**os.environ, **launch.env}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(launch.argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

        def forward(signum: int, _frame: FrameType | None) -> None:
            # Let verl shut its Ray job down cleanly; the exit code is reported below.
            proc.send_signal(signum)

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, forward)
        assert proc.stdout is not None
        for chunk in iter(lambda: proc.stdout.readline(), b""):  # type: ignore[union-attr]
            log.write(chunk)
            log.flush()
            sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
        rc = proc.wait()
    (run_dir / "exit_code").write_text(f"{rc}\n")
    print(f"launch exited with {rc}; log: {log_path}", file=sys.stderr)
    return rc
