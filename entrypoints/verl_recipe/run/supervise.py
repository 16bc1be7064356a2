"""The attempts of one `verl-recipe train`: run, decide (restart.py), wait for healthy nodes (recovery.py), run
again; and whatever ends the loop, a record that says so. Written over hooks (an attempt, the wait, the validation
again, the heartbeat), so that the whole loop is tested over fakes (tests/unit/test_supervise.py) and cli/cluster.py
only binds them to Ray and verl.

What it guarantees: every attempt's decision is in its outcome.json; a restart decided and then not done (the wait
ended, the launch was refused on validation, a stop was asked for meanwhile, an exception, SIGTERM) is written back
as not restarting, with why; while it waits, the attempt's heartbeat goes on, so `runs` says recovering only while
somebody is acting on it (a supervisor killed outright is `gone` once its heartbeat is stale)."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from ..cluster.clusterwait import NodeView
from ..exitcodes import EXIT_OK, EXIT_STOPPED, EXIT_TERMINATED
from . import restart
from .lifecycle import stop_request
from .recovery import Choice, LostNode


class StopAsked(Exception):
    """`verl-recipe stop` asked for the run while it waited to restart."""

    def __init__(self, by: str) -> None:
        self.by = by
        super().__init__(f"stopped by {by} while it waited to restart")


@dataclass
class Hooks:
    # one attempt on these nodes, with the record's extra info: its exit code and its run folder
    attempt: Callable[[tuple[NodeView, ...], dict[str, Any]], tuple[int, Path]]
    # the restart wait for healthy nodes, given the lost ones and a callback for every poll
    wait: Callable[[dict[str, LostNode], Callable[[], None]], tuple[int, Choice]]
    # validated again after the wait: None to go on, else the line and exit code to end with (refused, complete)
    again: Callable[[], tuple[str, int] | None]
    # the attempt's heartbeat, while the loop waits on its behalf
    heartbeat: Callable[[Path, int | None], None]


def _raise_on_term(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(EXIT_TERMINATED)


def supervise(members: tuple[NodeView, ...], allowed: int, hooks: Hooks) -> int:
    """Attempts until one ends without a restart; the exit code of the run as a whole."""
    before: list[restart.Attempt] = []
    lost: dict[str, LostNode] = {}
    info: dict[str, Any] = {}
    pending: restart.Attempt | None = None  # an attempt whose restart is decided and not yet started
    term = signal.getsignal(signal.SIGTERM)
    try:
        while True:
            rc, run_dir = hooks.attempt(members, info)
            pending = None
            now = restart.attempt_of(rc, run_dir)
            again, why = restart.decide(now, before, allowed)
            if rc != EXIT_OK:
                print(why, file=sys.stderr, flush=True)
                restart.record(now, again, why, len(before) + 1)
            if not again:
                return rc
            before.append(now)
            pending = now
            ids = {m.ip: m.node_id for m in members}
            for host, ip in now.lost:
                lost[ip] = LostNode(host, ip, ids.get(ip, ""))
            # RunSupervisor forwards SIGTERM to verl, which is gone now: a stop of the container ends the wait
            signal.signal(signal.SIGTERM, _raise_on_term)

            def poll(attempt: restart.Attempt = now) -> None:
                hooks.heartbeat(attempt.run_dir, attempt.step)
                asked = stop_request(attempt.run_dir)
                if asked is not None:
                    raise StopAsked(str(asked.get("by", "?")))

            wait_rc, choice = hooks.wait(lost, poll)
            out = [x.label() for x in choice.out]
            if wait_rc:
                line = f"not restarted: the restart wait ended: {choice.line}"
                fix = "bring the host back (or add a spare host), then run the same command: it resumes"
                restart.record(now, False, f"{line}; fix: {fix}", len(before), left_out=out)
                pending = None
                return wait_rc
            for x in choice.back:
                lost.pop(x.ip, None)
            left = sorted(set(m.ip for m in members) - {m.ip for m in choice.members})
            members = choice.members
            info = {"left_out": out, "restart_of": now.run_dir.name}
            if out:
                print(f"restarting without {', '.join(out)} on {len(members)} healthy nodes", file=sys.stderr)
            elif left:
                print(f"restarting on {len(members)} nodes (not in: {', '.join(left)})", file=sys.stderr)
            ended = hooks.again()
            if ended is not None:
                line, code = ended
                restart.record(now, False, f"not restarted: {line}", len(before), left_out=out)
                pending = None
                return code
    except StopAsked as exc:
        if pending is not None:
            restart.record(pending, False, f"not restarted: {exc}", len(before))
            pending = None
        print(f"stopped: {exc}; the same command resumes from the latest checkpoint", flush=True)
        return EXIT_STOPPED
    except BaseException as exc:
        if pending is not None:
            what = f"exit {exc.code}" if isinstance(exc, SystemExit) else f"{type(exc).__name__}: {exc}"[:300]
            restart.record(pending, False, f"not restarted: the supervisor ended while it waited ({what})", len(before))
        raise
    finally:
        signal.signal(signal.SIGTERM, term)
