"""Run a validated launch: write the run record, then run verl with its output teed into the run's log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from types import FrameType
from typing import Any

from .exitcodes import EXIT_NOT_READY
from .nodewatch import Loss, NodeWatch, RunWatch, lost_line
from .render import Launch
from .runrecord import new_run_dir, record_end, record_lost, write_run_record
from .settings import Resolved


def end_of_simulation(launch: Launch, resolved: Resolved, extra_info: dict[str, Any], exit_code: int) -> int:
    """The simulated cluster has no NPUs: the launch stops where the simulation ends, with its run record written."""
    run_dir = write_run_record(new_run_dir(resolved), launch, resolved, {**extra_info, "simulated": True})
    (run_dir / "exit_code").write_text(f"{exit_code}\n")
    print(
        f"simulated cluster: launch validated and rendered, verl not started (no NPUs here; exit {exit_code}). "
        f"`--rehearse` checks instead the placement groups, every die's bundle, the shared paths and a real "
        f"all-reduce across the nodes. Rendered command: {run_dir / 'command.sh'}",
        file=sys.stderr,
    )
    return exit_code


def run_launch(
    launch: Launch,
    resolved: Resolved,
    extra_info: dict[str, Any] | None = None,
    members: list[Any] | None = None,
    every_s: float = 5.0,
    watch: NodeWatch | None = None,
) -> int:
    """`members`: the joined nodes (clusterwait.NodeView) the run needs; one that is lost ends the run with exit 3
    and its name in the run record, instead of verl hanging in a collective until its own timeout."""
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
        lost: list[dict[str, Any]] = []

        def on_loss(losses: list[Loss]) -> None:
            lost.extend(x.as_dict() for x in losses)
            record_lost(run_dir, lost)
            line = f"error: {lost_line(losses, 'during the run')}\n"
            sys.stderr.write(line)
            log.write(line.encode())
            log.flush()
            proc.send_signal(signal.SIGTERM)  # verl cannot finish without the node; let it stop its Ray job
            timer = threading.Timer(60.0, kill_if_running)
            timer.daemon = True
            timer.start()

        def kill_if_running() -> None:
            if proc.poll() is None:
                proc.kill()

        assert proc.stdout is not None
        with RunWatch(members or [], on_loss, every_s=every_s, watch=watch):
            for chunk in iter(lambda: proc.stdout.readline(), b""):  # type: ignore[union-attr]
                log.write(chunk)
                log.flush()
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
            verl_rc = proc.wait()
    rc = EXIT_NOT_READY if lost else verl_rc
    record_end(run_dir, rc, lost, verl_rc)
    print(f"launch exited with {rc}; log: {log_path}; record: {run_dir / 'outcome.json'}", file=sys.stderr)
    return rc
