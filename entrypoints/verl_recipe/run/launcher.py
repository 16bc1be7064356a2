"""Run a validated launch: write the run record, then run verl with its output teed into the run's log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from types import FrameType
from typing import Any, BinaryIO

from ..checks import resume
from ..cluster.evidence import AFTER, BEFORE, request_snapshots
from ..cluster.hostsample import memory_reader
from ..cluster.nodewatch import Loss, NodeWatch, RunWatch, lost_line
from ..contracts import checkpoints, runfiles
from ..diagnosis.diagnose import write_diagnosis
from ..exitcodes import EXIT_HEALTH, EXIT_NOT_READY, EXIT_STOPPED
from ..layers import Resolved
from ..pages.run_page import RunPageError, write_run_page
from ..recipes import load_recipe
from ..render import Launch, with_env
from ..watch.health import Alert, Health, Thresholds, host_mem_total_gb
from ..watch.metricstream import Faults, MetricTail, Progress
from ..watch.notify import Notifier
from ..watch.stall import StallProbe
from .lifecycle import HEARTBEAT_EVERY_S, stop_request, write_heartbeat
from .record import (
    METRICS_ENV,
    METRICS_FILE,
    new_run_dir,
    record_end,
    record_lost,
    record_node_log_ends,
    record_resume,
    resumed_step,
    write_checkpoint_identity,
    write_run_record,
)
from .retention import prune, save_bytes

# verl's own output goes to the run's train.log in full; on the screen, one progress line per step unless this is 1.
SHOW_VERL_ENV = "VERL_RECIPE_SHOW_VERL"
# torch_npu's flight recorder: the ring's size per rank (0: off) and where each rank's dump goes (this prefix + rank)
FLIGHT_RECORDER_SIZE = "TORCH_HCCL_TRACE_BUFFER_SIZE"
FLIGHT_RECORDER_FILE = "TORCH_HCCL_DEBUG_INFO_TEMP_FILE"
FLIGHT_RECORDER_PREFIX = "hang-dump-rank-"


def _positive(text: str | None) -> bool:
    try:
        return int(str(text).strip()) > 0
    except ValueError:
        return False


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


# The run page redrawn after a step waits this many times its last drawing's time: at most ~5 % of the watch.
PAGE_SHARE_FACTOR = 19.0

# verl gets this long to stop its Ray job after SIGTERM (a health rule that stops the run, a stop) before a kill.
STOP_GRACE_S = 60.0
# ... and this long when a node is lost: no collective and no save can complete without it (a save cut short stays
# past verl's tracker and is never resumed), and the restart on a spare waits for verl's end.
LOST_STOP_GRACE_S = 10.0


def stop_process(proc: subprocess.Popen[bytes], grace_s: float) -> threading.Timer:
    """SIGTERM now, SIGKILL after `grace_s` if the process has not ended by then."""

    def kill_if_running() -> None:
        if proc.poll() is None:
            proc.kill()

    proc.send_signal(signal.SIGTERM)
    timer = threading.Timer(grace_s, kill_if_running)
    timer.daemon = True
    timer.start()
    return timer


class RunSupervisor:
    """One run of verl, from the run record to the diagnosis: verl's process with its output teed into train.log,
    the lost-node watch and the health rules over verl's metric stream (each may stop verl), the progress line, the
    end of the record, the diagnosis of a failed run and the run page.

    `members`: the joined nodes (clusterwait.NodeView) the run needs; one that is lost ends the run with exit 3 and
    its name in the run record, instead of verl hanging in a collective until its own timeout."""

    def __init__(
        self,
        launch: Launch,
        resolved: Resolved,
        extra_info: dict[str, Any] | None = None,
        members: list[Any] | None = None,
        every_s: float = 5.0,
        watch: NodeWatch | None = None,
    ) -> None:
        self.resolved = resolved
        self.members = members or []
        self.every_s, self.watch = every_s, watch
        self.run_dir = new_run_dir(resolved)
        # verl's own metric stream (its "file" logger) goes into the run record: the progress line and the watch read
        # it.
        extra_env = {METRICS_ENV: str(self.run_dir / METRICS_FILE)}
        # The hang-debugging profile (docs/troubleshooting.md): with torch_npu's flight recorder on and no dump path
        # given, each rank's dump goes into this run's folder, where the bundle and a person look.
        if _positive(launch.env.get(FLIGHT_RECORDER_SIZE)) and not launch.env.get(FLIGHT_RECORDER_FILE):
            extra_env[FLIGHT_RECORDER_FILE] = str(self.run_dir / FLIGHT_RECORDER_PREFIX)
        self.launch = with_env(launch, extra_env)
        self.run_dir = write_run_record(self.run_dir, self.launch, resolved, extra_info or {})
        if resolved.values.get("SAVE_FREQ") != -1:  # a run that saves nothing (a smoke) leaves no folder behind
            write_checkpoint_identity(launch.recipe, load_recipe(launch.recipe).engine, resolved.values)
        # every host's npu-smi before verl opens a die; at the end, after it, with the job's Ray logs (evidence.py)
        self.started_at = time.time()
        request_snapshots(self.run_dir, str(resolved.values["LOG_DIR"]), BEFORE)
        self.log_path = self.run_dir / runfiles.LOG
        self.show = os.environ.get(SHOW_VERL_ENV) == "1"
        self.lost: list[dict[str, Any]] = []
        self.stopped: list[Alert] = []
        self.resumed: list[int] = []
        self.stop_asked: dict[str, Any] | None = None  # `verl-recipe stop`'s request, once honoured
        self.last_step: int | None = None
        self._beat_at = 0.0
        # An exception in reading or judging one line is said once on stderr and the watch goes on (docs/watch.md).
        self.faults = Faults()
        self._page_due = 0.0  # the run page is redrawn from this time on (monotonic), so it costs a bounded share
        total = int(resolved.values.get("TOTAL_TRAINING_STEPS") or 0) or None
        # The simulated cluster's CPU ranks have no device memory to show: host RAM instead (the line says which).
        self.progress = Progress(total, host_memory=resolved.values.get("DEVICE") == "cpu")
        host_gib = float(resolved.values.get("HOST_MEM_GIB") or 0) or host_mem_total_gb()
        # Alerts out to a person (watch/notify.py); the stall alert's look at the hosts and ranks (watch/stall.py) and
        # every host's memory (cluster/hostsample.py) read the node folders the run folder links to.
        self.notifier = Notifier.from_values(resolved.values, self.run_dir, self._say)
        nodes_dir = self.run_dir / runfiles.NODES
        self.health = Health(
            Thresholds.from_values(resolved.values),
            self.run_dir,
            host_total_gb=host_gib,
            total_steps=total,
            emit=self.on_alert,
            describe_cluster=StallProbe.for_run(nodes_dir, self.members, self._verl_pid).describe,
            checkpoint_dir=resume.checkpoint_dir(resolved.values),
            host_samples=memory_reader(nodes_dir),
            save_bytes=save_bytes(launch.recipe, resolved.values),
            save_freq=int(resolved.values.get("SAVE_FREQ") or 0),
        )
        # CKPT_KEEP across attempts (run/retention.py): the saves of earlier attempts beyond it go before verl starts
        self.keep = int(resolved.values.get("CKPT_KEEP") or 0)
        self._prune()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: BinaryIO | None = None

    # ---- what stops verl

    def _say(self, line: str) -> None:
        """One line on stderr and in train.log."""
        sys.stderr.write(line + "\n")
        if self.log is not None:
            self.log.write(f"{line}\n".encode())
            self.log.flush()

    def stop_verl(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM, so that verl stops its Ray job; a kill after `grace_s` if it has not ended."""
        assert self.proc is not None
        stop_process(self.proc, grace_s)

    def _forward(self, signum: int, _frame: FrameType | None) -> None:
        # Ctrl-C or a stop: let verl shut its Ray job down cleanly; the exit code is reported at the end.
        if self.proc is not None:
            self.proc.send_signal(signum)

    def on_loss(self, losses: list[Loss]) -> None:
        """The lost-node watch named nodes: recorded at once, then verl is stopped (it cannot finish without them)."""
        self.lost.extend(x.as_dict() for x in losses)
        record_lost(self.run_dir, self.lost)
        self._say(f"error: {lost_line(losses, 'during the run')}")
        self.stop_verl(LOST_STOP_GRACE_S)

    def on_alert(self, alert: Alert) -> None:
        """A health rule fired (watch/health.py): one line as it happens, kept in alerts.json and in train.log; a rule
        HEALTH_STOP names stops verl (a step read after verl ended stops nothing)."""
        self._say(alert.line)
        self.notifier.send(asdict(alert))
        if alert.stops_run and not self.stopped and self.proc is not None and self.proc.poll() is None:
            self.stopped.append(alert)
            self.stop_verl()

    def _verl_pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def tick(self) -> None:
        """Every poll of the metric tail: the heartbeat `verl-recipe runs` reads, a stop `verl-recipe stop` asked
        for, and the health rules' stall timer."""
        now = time.monotonic()
        if now - self._beat_at >= HEARTBEAT_EVERY_S:
            self._beat_at = now
            write_heartbeat(self.run_dir, self.last_step)
        asked = None if self.stop_asked else stop_request(self.run_dir)
        if asked is not None and self.proc is not None and self.proc.poll() is None:
            self.stop_asked = asked
            self._say(f"stop requested by {asked.get('by', '?')} at step {self.last_step}: stopping verl")
            self.stop_verl()
        self.faults.guard("the stall rule", f"after step {self.last_step}", self.health.tick)

    # ---- what verl writes

    def on_step(self, rec: dict[str, Any]) -> None:
        """Each stage on its own: one that raises on this step is reported and the others still run."""
        self.last_step = rec["step"]
        where = f"step {rec['step']}"
        line = self.faults.guard("the progress line", where, self.progress.line, rec)
        if line is not None:
            print(line, flush=True)
        self.faults.guard("the health rules", where, self.health.on_record, rec)
        self.faults.guard("the checkpoint retention", where, self._prune)  # verl saves a step before it logs it
        self.faults.guard("the run page", where, self._refresh_page)

    def _prune(self) -> None:
        if self.resolved.values.get("SAVE_FREQ") == -1:
            return
        for path in prune(resume.checkpoint_dir(self.resolved.values), self.keep):
            self._say(f"retention: removed {path} (CKPT_KEEP={self.keep}: the newest {self.keep} saves stay)")

    def _refresh_page(self) -> None:
        """The run page after a step, unless the last drawing ended less than PAGE_SHARE_FACTOR times its own
        time ago: it reads the whole stream, so a long run's page would otherwise cost more with every step."""
        start = time.monotonic()
        if start < self._page_due:
            return
        refresh_run_page(self.run_dir)
        end = time.monotonic()
        self._page_due = end + PAGE_SHARE_FACTOR * (end - start)

    def on_output(self, chunk: bytes) -> None:
        assert self.log is not None
        self.log.write(chunk)
        self.log.flush()
        self.health.on_output(chunk)
        step = resumed_step(chunk)
        if step is not None and not self.resumed:
            self.resumed.append(step)
            record_resume(self.run_dir, step)
            print(f"resumed from step {step} (verl: {chunk.decode(errors='replace').strip()})", flush=True)
        if self.show:
            sys.stdout.buffer.write(chunk)
            sys.stdout.flush()

    # ---- the run

    def run(self) -> int:
        print(f"run record: {self.run_dir}", file=sys.stderr)
        env = {**os.environ, **self.launch.env}
        with open(self.log_path, "ab") as log:
            self.log = log
            self.proc = subprocess.Popen(self.launch.argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, self._forward)
            print(
                f"verl's whole output: {self.log_path}"
                + ("" if self.show else f" (shown here too with {SHOW_VERL_ENV}=1)"),
                file=sys.stderr,
                flush=True,
            )
            stdout = self.proc.stdout
            assert stdout is not None
            write_heartbeat(self.run_dir, None)
            tail = MetricTail(self.run_dir / METRICS_FILE, self.on_step, on_poll=self.tick, faults=self.faults)
            with RunWatch(self.members, self.on_loss, every_s=self.every_s, watch=self.watch), tail:
                for chunk in iter(stdout.readline, b""):
                    self.faults.guard("verl's output", "a line of train.log", self.on_output, chunk)
                verl_rc = self.proc.wait()
            self.notifier.close()  # the alerts queued (a stopping rule's last) go out, bounded
            self.log = None
        return self.finish(verl_rc)

    def finish(self, verl_rc: int) -> int:
        """The end of the record, the last lines of a failed run, its diagnosis, and the run page."""
        rc = (
            EXIT_NOT_READY
            if self.lost
            else EXIT_HEALTH
            if self.stopped
            else EXIT_STOPPED
            if self.stop_asked
            else verl_rc
        )
        stopped = None
        if self.stop_asked is not None:
            folder = resume.checkpoint_dir(self.resolved.values)
            step = resume.latest_step(folder)
            last = str(folder / checkpoints.step_dir(step)) if step is not None else None
            stopped = {**self.stop_asked, "at_step": self.last_step, "last_checkpoint": last}
        record_end(self.run_dir, rc, self.lost, verl_rc, asdict(self.stopped[0]) if self.stopped else None, stopped)
        request_snapshots(self.run_dir, str(self.resolved.values["LOG_DIR"]), AFTER, since=self.started_at)
        record_node_log_ends(self.run_dir)
        if rc and not self.show:
            sys.stderr.write(f"last lines of {self.log_path}:\n{last_lines(self.log_path, 30)}")
        outcome = self.run_dir / runfiles.OUTCOME
        print(f"launch exited with {rc}; log: {self.log_path}; record: {outcome}", file=sys.stderr)
        last = ""
        if rc:
            # A failed run diagnoses itself (diagnosis.json beside outcome.json); its first finding is the last line.
            try:
                finding = write_diagnosis(self.run_dir)
            except Exception as exc:  # noqa: BLE001 - the run is over and recorded: a diagnosis never undoes it
                why = exc.strerror if isinstance(exc, OSError) else type(exc).__name__
                last = f"diagnosis: not written ({why}); run `verl-recipe diagnose {self.run_dir}`"
            else:
                none = f"diagnosis: no known failure signature ({self.run_dir / runfiles.DIAGNOSIS})"
                last = finding.one_line() if finding else none
        page = refresh_run_page(self.run_dir)  # after the diagnosis, which the page shows
        if page is not None:
            print(f"run page: {page.resolve().as_uri()}", file=sys.stderr)
        if last:
            print(last, file=sys.stderr)
        return rc


def run_attempt(
    launch: Launch,
    resolved: Resolved,
    extra_info: dict[str, Any] | None = None,
    members: list[Any] | None = None,
    every_s: float = 5.0,
    watch: NodeWatch | None = None,
    on_run_dir: Callable[[Path], None] | None = None,
) -> tuple[int, Path]:
    """Run a validated launch under a RunSupervisor: its exit code (3: a node lost, 5: a health rule stopped it, 7:
    `verl-recipe stop` stopped it, else verl's) and the run folder it wrote (the restart policy reads how it ended).
    `on_run_dir`: called with the run folder once it exists, before verl starts (the supervisor's own log)."""
    sup = RunSupervisor(launch, resolved, extra_info, members, every_s, watch)
    if on_run_dir is not None:
        on_run_dir(sup.run_dir)
    return sup.run(), sup.run_dir


def refresh_run_page(run_dir: Path) -> Path | None:
    """The run page (run.html), redrawn after each step and at the end; a page that cannot be drawn never ends a run
    (`verl-recipe report RUN_DIR` draws it again)."""
    try:
        return write_run_page(run_dir)
    except (RunPageError, OSError) as exc:
        print(f"run page: not written ({str(exc)[:200]}); `verl-recipe report {run_dir}` draws it", file=sys.stderr)
        return None
    except Exception as exc:  # noqa: BLE001 - a bug in drawing: said with its type, and the run goes on
        print(f"run page: not written ({type(exc).__name__}); `verl-recipe report {run_dir}` says why", file=sys.stderr)
        return None


def last_lines(path: Path, n: int) -> str:
    lines = path.read_bytes().decode(errors="replace").splitlines()[-n:]
    return "".join(f"  {line}\n" for line in lines)
