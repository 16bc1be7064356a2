"""The restart policy of `verl-recipe train`: whether a failed attempt starts again by itself, decided from how it
ended and from its diagnosis, never blindly.

Restarted (up to RESTARTS times, each after the cluster is whole again within RESTART_WAIT seconds, then validated
again and resumed from the latest complete checkpoint): a node lost during the run (exit 3), and a failure whose
first diagnosis finding is transient (signatures.py, `transient=True`: an HCCL link or connect timeout with no earlier
cause). Not restarted, with the reason recorded: a run a person stopped (exit 7), one a HEALTH_STOP rule stopped (exit
5), any other failure (bad configuration, an import error, out of memory: the same inputs fail the same way), an
unknown failure, and the same failure at the same step as the attempt before."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..contracts import runfiles
from ..diagnosis.signatures import SIGNATURES
from ..exitcodes import EXIT_HEALTH, EXIT_NOT_READY, EXIT_OK, EXIT_STOPPED
from .steps import logged_steps

TRANSIENT = frozenset(s.id for s in SIGNATURES if s.transient)


@dataclass(frozen=True)
class Attempt:
    """How one attempt (one run folder) ended."""

    rc: int
    run_dir: Path
    failure: str  # "lost node a3-02", a diagnosis finding's id, or "" when it finished
    transient: bool
    step: int | None  # the last step it logged
    lost: tuple[tuple[str, str], ...] = ()  # (host, address) of each node its watch named lost

    @property
    def kind(self) -> str:
        return self.failure.split(" ", 2)[0] if self.failure.startswith("lost ") else self.failure


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def attempt_of(rc: int, run_dir: Path) -> Attempt:
    """An attempt's failure from its own record: outcome.json's lost nodes, else diagnosis.json's first finding."""
    steps = logged_steps(run_dir)
    step = steps[-1] if steps else None
    outcome = _read(run_dir / runfiles.OUTCOME) or {}
    lost = outcome.get("lost_nodes") if isinstance(outcome, dict) else None
    if rc == EXIT_NOT_READY and lost:
        named = tuple((str(x.get("host")), str(x.get("ip"))) for x in lost if isinstance(x, dict))
        hosts = ", ".join(h for h, _ in named)
        return Attempt(rc, run_dir, f"lost node {hosts}", True, step, named)
    diagnosis = _read(run_dir / runfiles.DIAGNOSIS) or {}
    findings = diagnosis.get("findings") if isinstance(diagnosis, dict) else None
    head = findings[0] if isinstance(findings, list) and findings else None
    first = str(head.get("id", "")) if isinstance(head, dict) else ""
    return Attempt(rc, run_dir, str(first), first in TRANSIENT, step)


def decide(now: Attempt, before: list[Attempt], allowed: int) -> tuple[bool, str]:
    """Whether to start again, and the one line that says why (printed, and kept in outcome.json's `restart`)."""
    used = len(before)
    if now.rc == EXIT_OK:
        return False, "finished"
    if now.rc == EXIT_STOPPED:
        return False, "not restarted: a person stopped the run (verl-recipe stop)"
    if now.rc == EXIT_HEALTH:
        return False, "not restarted: a HEALTH_STOP rule stopped the run; a person decides what changes"
    if not now.transient:
        what = now.failure or "a failure with no known signature"
        return False, (
            f"not restarted: {what} (exit {now.rc}) is not transient, the same launch would fail the same way; "
            f"fix it, then run the same command (it resumes from the latest checkpoint)"
        )
    if before and (before[-1].kind, before[-1].step) == (now.kind, now.step):
        return False, f"not restarted: {now.failure} at step {now.step} twice in a row; a person looks first"
    if used >= allowed:
        return False, f"not restarted: RESTARTS={allowed} restarts used; run the same command to go on"
    at = "before its first step" if now.step is None else f"after step {now.step}"
    return True, f"restart {used + 1} of {allowed}: {now.failure} {at}"


RESUME_BY_HAND = "run the same command: it resumes from the latest checkpoint"


def record(now: Attempt, restarting: bool, why: str, attempt_no: int, **extra: Any) -> None:
    """The decision in the attempt's outcome.json (`restart`, and `next` when it restarts by itself). Written again
    with restarting false when a restart decided earlier did not happen (the wait ended, the supervisor failed), so
    that no record says "restarting" with nobody left to restart. `extra`: more of the decision (left_out, ...)."""
    path = now.run_dir / runfiles.OUTCOME
    outcome = _read(path)
    if not isinstance(outcome, dict):
        return
    earlier = outcome.get("restart")
    outcome["restart"] = {"restarting": restarting, "why": why, "attempt": attempt_no, **extra}
    if restarting:
        outcome["next"] = f"{why}: the head restarts it by itself once the cluster is whole again"
    elif isinstance(earlier, dict) and earlier.get("restarting"):
        outcome["restart"]["decided"] = earlier.get("why")
        outcome["next"] = f"{why.split('; fix: ')[-1] if '; fix: ' in why else RESUME_BY_HAND}"
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(json.dumps(outcome, indent=2) + "\n")
        tmp.replace(path)
    except OSError as exc:  # the line was printed; the record keeps the outcome without the decision
        print(f"warning: {path} not updated with the restart decision ({exc.strerror})", file=sys.stderr)
