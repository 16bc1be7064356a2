"""A run's life seen from outside the process that supervises it: `verl-recipe runs` (every run under LOG_DIR with
its state), `attach RUN` (its progress lines from where it is) and `stop RUN` (a clean stop, recorded).

The supervisor (launcher.py) and these commands share only files in the run folder, on shared storage: it rewrites
`heartbeat` while it lives, and honours `stop_request.json` within a poll; so they work from another container, an
SSH session on another host, or after the session that started the run is gone."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..contracts import metrics as verl_metrics
from ..contracts import runfiles
from ..contracts.records import complete_records, finite_number, parse_record
from ..exitcodes import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from ..problems import error
from ..watch.metricstream import Progress, eta_text
from .steps import integrity, logged_steps

# A heartbeat older than this means the supervisor is gone (its host or container died) without writing the end.
HEARTBEAT_STALE_S = 90.0
HEARTBEAT_EVERY_S = 15.0
STOP_WAIT_S = 600.0
ATTACH_POLL_S = 2.0

RUNNING, FINISHED, FAILED, STOPPED, GONE = "running", "finished", "failed", "stopped", "gone"
RECOVERING, RESTARTED = "recovering", "restarted"  # a failed attempt the restart policy starts again


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _now_utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# Who asked, as the head's verl-train wrapper names the operator sudo let in (user@host): inside the `runs`
# container the account is root and the host name the container's.
BY_ENV = "VERL_RECIPE_BY"


def who() -> str:
    """Who asked, as the records name people: the account and the host it typed on."""
    if os.environ.get(BY_ENV):
        return os.environ[BY_ENV][:200]
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


# ---- the supervisor's side


def write_heartbeat(run_dir: Path, step: int | None) -> None:
    """The supervisor is alive: rewritten whole every HEARTBEAT_EVERY_S (readers never see half of it). `node`: the
    cluster host it runs on (the head), which a `gone` run names."""
    tmp = run_dir / f".{runfiles.HEARTBEAT}.tmp"
    beat = {
        "time": time.time(),
        "host": socket.gethostname(),
        "node": os.environ.get("NODE_NAME", ""),
        "pid": os.getpid(),
    }
    try:
        tmp.write_text(json.dumps({**beat, "step": step}))
        tmp.replace(run_dir / runfiles.HEARTBEAT)
    except OSError:
        pass  # shared storage hiccup: the next beat tries again; a reader sees an older beat meanwhile


def stop_request(run_dir: Path) -> dict[str, Any] | None:
    data = _read(run_dir / runfiles.STOP_REQUEST)
    return data if isinstance(data, dict) else None


# ---- what a run folder says


@dataclass
class RunState:
    run: str  # <experiment>/<stamp>
    path: str
    recipe: str
    state: str
    step: int | None
    total: int | None
    eta: str
    last_alert: str
    attempts: int
    exit_code: int | None
    detail: str = ""  # for a gone run: since when, where its supervisor was, and how to resume

    def cells(self) -> list[str]:
        step = "-" if self.step is None else f"{self.step}/{self.total}" if self.total else str(self.step)
        alert = (
            f"{self.detail}; {self.last_alert}" if self.detail and self.last_alert else self.detail or self.last_alert
        )
        return [self.run, self.state, step, self.eta or "-", str(self.attempts), alert or "-"]


def _eta(run_dir: Path, step: int | None, total: int | None) -> str:
    if step is None or not total or step >= total:
        return ""
    times = []
    try:
        with open(run_dir / runfiles.METRICS, "rb") as f:
            for line in f:
                rec = parse_record(line) if line.endswith(b"\n") else None
                secs = finite_number(rec["data"].get(verl_metrics.STEP_S)) if rec is not None else None
                if secs is not None:
                    times.append(secs)
    except OSError:
        return ""
    return eta_text(statistics.median(times) * (total - step)) if times else ""


def _exit_code(run_dir: Path) -> int | None:
    try:
        text = (run_dir / runfiles.CODE_FILE).read_text().strip()
    except OSError:
        return None
    return int(text) if text.lstrip("-").isdigit() else None


def _next_attempt(run_dir: Path) -> Path | None:
    later = sorted(p for p in run_dir.parent.iterdir() if p.name > run_dir.name and (p / runfiles.LAUNCH).is_file())
    return later[0] if later else None


def phase(run_dir: Path, now: float | None = None) -> tuple[str, dict[str, Any] | None, int | None]:
    """The run's state, its outcome.json and its exit code, from the small files only (attach and stop poll this:
    the metric stream is never read here)."""
    outcome = _read(run_dir / runfiles.OUTCOME)
    if isinstance(outcome, dict):
        code = outcome.get("exit_code")
        exit_code = code if isinstance(code, int) else None
        state = STOPPED if outcome.get("stopped") else FINISHED if exit_code == 0 else FAILED
        restart = outcome.get("restart")
        if isinstance(restart, dict) and restart.get("restarting"):
            # the head starts it again by itself: recovering until the next attempt's folder is there, while the
            # supervisor that waits to do so beats; with its heartbeat stale nobody is acting on it: gone
            state = RESTARTED if _next_attempt(run_dir) else RECOVERING if _beat_fresh(run_dir, now) else GONE
        return state, outcome, exit_code
    code = _exit_code(run_dir)
    if code is not None:  # a record that ended without outcome.json (the simulation's 4)
        return (FINISHED if code == 0 else FAILED), None, code
    return (RUNNING if _beat_fresh(run_dir, now) else GONE), None, None


def _beat(run_dir: Path) -> dict[str, Any]:
    beat = _read(run_dir / runfiles.HEARTBEAT)
    return beat if isinstance(beat, dict) else {}


def _beat_fresh(run_dir: Path, now: float | None = None) -> bool:
    t = finite_number(_beat(run_dir).get("time"))
    if t is None:
        # a run folder just written, whose supervisor has not beaten yet: its launch.json is its first sign of life
        try:
            t = (run_dir / runfiles.LAUNCH).stat().st_mtime
        except OSError:
            return False
    return t is not None and (time.time() if now is None else now) - t < HEARTBEAT_STALE_S


def gone_detail(run_dir: Path, recipe: str, now: float | None = None) -> str:
    """Why a run is gone and how it goes on: its supervisor's last beat, where it was, the command that resumes."""
    beat = _beat(run_dir)
    t = finite_number(beat.get("time"))
    where = str(beat.get("node") or beat.get("host") or "its host")
    if t is None:
        since = "no heartbeat"
    else:
        ago = (time.time() if now is None else now) - t
        since = f"no heartbeat since {time.strftime('%H:%M:%SZ', time.gmtime(t))} ({ago / 60:.0f} min)"
    experiment = run_dir.parent.parent.name
    return (
        f"{since}: its supervisor on {where} is gone (the head rebooted, or its container was removed); resume: "
        f"the same train command for {recipe or 'its recipe'} with EXPERIMENT_NAME={experiment} (from the control "
        f"node: make train RECIPE={recipe or '<recipe>'} ARGS='--set EXPERIMENT_NAME={experiment}')"
    )


def state_of(run_dir: Path, now: float | None = None) -> RunState:
    state, outcome, exit_code = phase(run_dir, now)
    settings = _read(run_dir / runfiles.SETTINGS) or {}
    total = settings.get("total_steps") if isinstance(settings.get("total_steps"), int) else None
    steps = logged_steps(run_dir)
    step = steps[-1] if steps else None
    alerts = _read(run_dir / runfiles.ALERTS)
    last_alert = (
        alerts[-1].get("line", "") if isinstance(alerts, list) and alerts and isinstance(alerts[-1], dict) else ""
    )
    if outcome is not None:
        verdict = outcome.get("steps")
        attempts = len(verdict.get("attempts") or [1]) if isinstance(verdict, dict) else 1
    elif state in (RUNNING, GONE):
        attempts = len(integrity(run_dir)["attempts"])  # this run and the earlier ones it resumed through
    else:
        attempts = 1
    return RunState(
        run=f"{run_dir.parent.parent.name}/{run_dir.name}",
        path=str(run_dir),
        recipe=str(settings.get("recipe") or ""),
        state=state,
        step=step,
        total=total,
        eta=_eta(run_dir, step, total) if state == RUNNING else "",
        last_alert=last_alert,
        attempts=attempts,
        exit_code=exit_code,
        detail=gone_detail(run_dir, str(settings.get("recipe") or ""), now) if state == GONE else "",
    )


def find_runs(log_dirs: Sequence[Path]) -> list[Path]:
    """Every run folder (one with a launch.json) under LOG_DIR/<project>/<experiment>/runs/, oldest first."""
    found = {p.parent for d in log_dirs for p in d.glob(f"*/*/runs/*/{runfiles.LAUNCH}")}
    return sorted(found, key=lambda p: (p.name, str(p)))


def resolve_run(name: str, log_dirs: Sequence[Path]) -> Path | None:
    """A run by its folder, its `<experiment>/<stamp>` as `runs` prints it, or an experiment (its latest run)."""
    path = Path(name)
    if (path / runfiles.LAUNCH).is_file():
        return path
    matches = [p for p in find_runs(log_dirs) if name in (f"{p.parent.parent.name}/{p.name}", p.parent.parent.name)]
    return matches[-1] if matches else None


# ---- the commands


def default_log_dirs() -> list[Path]:
    """LOG_DIR of every recipe, as this site's settings resolve it (the site file, the environment)."""
    from ..recipes import recipe_names
    from ..resolve import Request, resolve
    from ..settingtypes import SettingsError

    dirs: list[Path] = []
    for name in recipe_names():
        try:
            _, resolved = resolve(Request(recipe=name, sets=[], extra=[], site=None, skip_path_checks=True))
        except SettingsError as exc:  # a recipe the site file breaks: its runs are not listed, and the line says why
            error(f"{name}: {exc}; its LOG_DIR is left out (fix the site file, or give --log-dir)")
            continue
        d = Path(str(resolved.values["LOG_DIR"]))
        if d not in dirs:
            dirs.append(d)
    return dirs


def cmd_runs(log_dirs: list[Path], as_json: bool) -> int:
    rows = [state_of(p) for p in find_runs(log_dirs)]
    if as_json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
        return EXIT_OK
    if not rows:
        print(f"no runs under {', '.join(map(str, log_dirs))}")
        return EXIT_OK
    table = [["RUN", "STATE", "STEP", "ETA", "ATTEMPTS", "LAST ALERT"], *(r.cells() for r in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(5)]
    for row in table:
        print("  ".join(cell.ljust(widths[i]) if i < 5 else cell for i, cell in enumerate(row)).rstrip())
    return EXIT_OK


def cmd_attach(run_dir: Path, follow: bool = True, poll_s: float = ATTACH_POLL_S, recover_s: float = 3600.0) -> int:
    """The run's progress lines from its first step, then each new one as verl writes it, until the run ends; an
    attempt the restart policy starts again is followed into the next attempt's folder (for up to `recover_s`).
    Ctrl-C leaves only this view (the run goes on)."""
    st = state_of(run_dir)
    progress = Progress(st.total, host_memory=st.recipe != "" and _host_memory(run_dir))
    print(f"attached to {st.run} ({st.state}); Ctrl-C leaves the run running", flush=True)
    offset, rest = 0, b""
    try:
        while True:
            try:
                with open(run_dir / runfiles.METRICS, "rb") as f:
                    f.seek(offset)
                    chunk = f.read()
            except OSError:
                chunk = b""
            offset += len(chunk)
            records, rest = complete_records(rest + chunk)
            for rec in records:
                print(progress.line(rec), flush=True)
            state, _, exit_code = phase(run_dir)
            if follow and state in (RECOVERING, RESTARTED):
                end = time.monotonic() + recover_s
                nxt = _next_attempt(run_dir)
                while nxt is None and time.monotonic() < end and phase(run_dir)[0] == RECOVERING:
                    time.sleep(poll_s)
                    nxt = _next_attempt(run_dir)
                if nxt is not None:
                    print(f"{st.run}: {state}; following the next attempt {nxt.name}", flush=True)
                    run_dir, offset, rest = nxt, 0, b""
                    st = state_of(run_dir)
                    continue
            if state != RUNNING or not follow:
                break
            time.sleep(poll_s)
    except KeyboardInterrupt:
        print("detached; the run goes on", flush=True)
        return EXIT_OK
    print(f"{st.run}: {state}" + ("" if exit_code is None else f" (exit {exit_code})"), flush=True)
    return EXIT_OK if state in (RUNNING, FINISHED, STOPPED, RECOVERING, RESTARTED) else EXIT_FAILED


def _request_stop(run_dir: Path) -> dict[str, str]:
    """stop_request.json, whole or not at all (temp file, then rename): who asked and when."""
    request = {"by": who(), "time_utc": _now_utc()}
    tmp = run_dir / f".{runfiles.STOP_REQUEST}.tmp"
    tmp.write_text(json.dumps(request))
    tmp.replace(run_dir / runfiles.STOP_REQUEST)
    return request


def _stop_recovering(run_dir: Path, st: RunState, wait_s: float, poll_s: float) -> int:
    request = _request_stop(run_dir)
    print(f"stop requested for {st.run} (recovering) by {request['by']}; waiting up to {wait_s:.0f} s", flush=True)
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        state = phase(run_dir)[0]
        if state != RECOVERING:
            if state == RESTARTED:
                error(
                    f"{st.run} restarted before the stop was seen; fix: verl-recipe stop {run_dir.parent.parent.name}"
                )
                return EXIT_FAILED
            print(f"stopped: {st.run} while it waited to restart; the same command resumes from the latest checkpoint")
            return EXIT_OK
        time.sleep(poll_s)
    error(f"{st.run} still recovering {wait_s:.0f} s after the stop request; fix: look at {run_dir / runfiles.LOG}")
    return EXIT_FAILED


def _host_memory(run_dir: Path) -> bool:
    settings = _read(run_dir / runfiles.SETTINGS) or {}
    device = ((settings.get("settings") or {}).get("DEVICE") or {}).get("value")
    return device == "cpu"


def cmd_stop(run_dir: Path, wait_s: float = STOP_WAIT_S, poll_s: float = ATTACH_POLL_S) -> int:
    """Ask the run's supervisor to stop verl (SIGTERM: verl ends its Ray job), then wait for the run's end."""
    st = state_of(run_dir)
    if st.state == RECOVERING:  # its supervisor waits to restart it: asked in the attempt's folder, it ends the wait
        return _stop_recovering(run_dir, st, wait_s, poll_s)
    if st.state != RUNNING:
        error(f"{st.run} is {st.state}, not running; nothing to stop (verl-recipe runs lists the runs)")
        return EXIT_BAD_INPUT
    request = _request_stop(run_dir)
    print(f"stop requested for {st.run} by {request['by']}; waiting up to {wait_s:.0f} s for it to end", flush=True)
    end = time.monotonic() + wait_s
    state, outcome = RUNNING, None
    while time.monotonic() < end:
        state, outcome, _ = phase(run_dir)
        if state != RUNNING:
            break
        time.sleep(poll_s)
    stopped = outcome.get("stopped") if outcome is not None else None
    if state == RUNNING or not isinstance(stopped, dict):
        error(f"{st.run} did not end within {wait_s:.0f} s of the stop request; its supervisor's host may be gone "
              f"(verl-recipe runs shows its heartbeat); fix: look at {run_dir / runfiles.LOG}")  # fmt: skip
        return EXIT_FAILED
    print(
        f"stopped: {st.run} at step {stopped.get('at_step')}; last complete checkpoint: "
        f"{stopped.get('last_checkpoint') or 'none'}; the same command resumes from it",
        flush=True,
    )
    return EXIT_OK


def main(cmd: str, argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog=f"verl-recipe {cmd}")
    p.add_argument("--log-dir", type=Path, action="append", help="LOG_DIR (default: every recipe's, from the site)")
    if cmd == "runs":
        p.add_argument("--json", action="store_true")
    else:
        p.add_argument("run", help="a run folder, <experiment>/<stamp> as `runs` prints it, or an experiment")
    if cmd == "stop":
        p.add_argument("--wait", type=float, default=STOP_WAIT_S, help="seconds to wait for the end")
    ns = p.parse_args(list(argv))
    dirs = ns.log_dir or default_log_dirs()
    if cmd == "runs":
        return cmd_runs(dirs, ns.json)
    run_dir = resolve_run(ns.run, dirs)
    if run_dir is None:
        error(f"no run {ns.run!r} under {', '.join(map(str, dirs))}; fix: verl-recipe runs lists them")
        return EXIT_BAD_INPUT
    return cmd_attach(run_dir) if cmd == "attach" else cmd_stop(run_dir, ns.wait)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
