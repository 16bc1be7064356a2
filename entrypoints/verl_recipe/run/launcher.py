"""Run a validated launch: write the run record, then run verl with its output teed into the run's log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from types import FrameType
from typing import Any

from ..cluster.nodewatch import Loss, NodeWatch, RunWatch, lost_line
from ..contracts import runfiles
from ..exitcodes import EXIT_HEALTH, EXIT_NOT_READY
from ..layers import Resolved
from ..pages.run_page import RunPageError, write_run_page
from ..render import Launch, with_env
from .diagnose import write_diagnosis
from .health import Alert, Health, Thresholds, host_mem_total_gb
from .metricstream import MetricTail, Progress
from .record import (
    METRICS_ENV,
    METRICS_FILE,
    new_run_dir,
    record_end,
    record_lost,
    record_resume,
    resumed_step,
    write_run_record,
)

# verl's own output goes to the run's train.log in full; on the screen, one progress line per step unless this is 1.
SHOW_VERL_ENV = "VERL_RECIPE_SHOW_VERL"


def end_of_simulation(launch: Launch, resolved: Resolved, extra_info: dict[str, Any], exit_code: int) -> int:
    """The simulated cluster has no NPUs: the launch stops where the simulation ends, with its run record written."""
    run_dir = write_run_record(new_run_dir(resolved), launch, resolved, {**extra_info, "simulated": True})
    (run_dir / runfiles.CODE_FILE).write_text(f"{exit_code}\n")
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
    run_dir = new_run_dir(resolved)
    # verl's own metric stream (its "file" logger) goes into the run record: the progress line and the watch read it.
    launch = with_env(launch, {METRICS_ENV: str(run_dir / METRICS_FILE)})
    run_dir = write_run_record(run_dir, launch, resolved, extra_info or {})
    log_path = run_dir / runfiles.LOG
    resumed: list[int] = []
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

        stopped: list[Alert] = []

        def on_alert(alert: Alert) -> None:
            # The health rules (health.py): one line as it happens, kept in alerts.json and in train.log.
            sys.stderr.write(alert.line + "\n")
            log.write(f"{alert.line}\n".encode())
            log.flush()
            if alert.stops_run and not stopped and proc.poll() is None:  # a step read after verl ended stops nothing
                stopped.append(alert)
                proc.send_signal(signal.SIGTERM)
                timer = threading.Timer(60.0, kill_if_running)
                timer.daemon = True
                timer.start()

        def on_step(rec: dict[str, Any]) -> None:
            print(progress.line(rec), flush=True)
            health.on_record(rec)
            refresh_run_page(run_dir)

        assert proc.stdout is not None
        total = int(resolved.values.get("TOTAL_TRAINING_STEPS") or 0) or None
        # The simulated cluster's CPU ranks have no device memory to show: host RAM instead (the line says which).
        progress = Progress(total, host_memory=resolved.values.get("DEVICE") == "cpu")
        host_gib = float(resolved.values.get("HOST_MEM_GIB") or 0) or host_mem_total_gb()
        thresholds = Thresholds.from_values(resolved.values)
        health = Health(thresholds, run_dir, host_total_gb=host_gib, total_steps=total, emit=on_alert)
        show = os.environ.get(SHOW_VERL_ENV) == "1"
        print(
            f"verl's whole output: {log_path}" + ("" if show else f" (shown here too with {SHOW_VERL_ENV}=1)"),
            file=sys.stderr,
            flush=True,
        )
        tail = MetricTail(run_dir / METRICS_FILE, on_step, on_poll=health.tick)
        with RunWatch(members or [], on_loss, every_s=every_s, watch=watch), tail:
            for chunk in iter(lambda: proc.stdout.readline(), b""):  # type: ignore[union-attr]
                log.write(chunk)
                log.flush()
                step = resumed_step(chunk)
                if step is not None and not resumed:
                    resumed.append(step)
                    record_resume(run_dir, step)
                    print(f"resumed from step {step} (verl: {chunk.decode(errors='replace').strip()})", flush=True)
                if show:
                    sys.stdout.buffer.write(chunk)
                    sys.stdout.flush()
            verl_rc = proc.wait()
    rc = EXIT_NOT_READY if lost else EXIT_HEALTH if stopped else verl_rc
    record_end(run_dir, rc, lost, verl_rc, asdict(stopped[0]) if stopped else None)
    if rc and not show:
        sys.stderr.write(f"last lines of {log_path}:\n{last_lines(log_path, 30)}")
    print(f"launch exited with {rc}; log: {log_path}; record: {run_dir / 'outcome.json'}", file=sys.stderr)
    last = ""
    if rc:
        # A failed run diagnoses itself (diagnosis.json beside outcome.json); its first finding is the last line.
        try:
            finding = write_diagnosis(run_dir)
        except OSError as exc:
            last = f"diagnosis: not written ({exc.strerror}); run `verl-recipe diagnose {run_dir}`"
        else:
            none = f"diagnosis: no known failure signature ({run_dir / 'diagnosis.json'})"
            last = finding.one_line() if finding else none
    page = refresh_run_page(run_dir)  # after the diagnosis, which the page shows
    if page is not None:
        print(f"run page: {page.resolve().as_uri()}", file=sys.stderr)
    if last:
        print(last, file=sys.stderr)
    return rc


def refresh_run_page(run_dir: Path) -> Path | None:
    """The run page (run.html), redrawn after each step and at the end; a page that cannot be drawn never ends a run
    (`verl-recipe report RUN_DIR` draws it again)."""
    try:
        return write_run_page(run_dir)
    except (RunPageError, OSError) as exc:
        print(f"run page: not written ({str(exc)[:200]}); `verl-recipe report {run_dir}` draws it", file=sys.stderr)
        return None


def last_lines(path: Path, n: int) -> str:
    lines = path.read_bytes().decode(errors="replace").splitlines()[-n:]
    return "".join(f"  {line}\n" for line in lines)
