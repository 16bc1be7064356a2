"""Section 10, recovery: a host powered off mid-run and on again, in `docker compose run train-35b-fsdp` (verl's own
trainer on the CPU stand-ins, two hosts), once with the restart policy (RESTARTS: the run resumes by itself) and
once on the manual path (RESTARTS=0: the run ends with exit 3 and a person types the same command the moment the
host is back, the best a person can do). The same step, the same time down: seconds from the host's return to the
next training step, and steps trained twice, for each."""

from __future__ import annotations

import re
import time

from bench.benchlib import Figure, Recovery, recovery, recovery_figures
from bench.common import COMPOSE, Stamped, log
from simkit.cluster import SimCluster

SERVICE = "train-35b-fsdp"
STEPS = 6  # the stand-ins' data gives 8 steps an epoch
LOSE_AT_STEP = 2
DOWN_S = 20  # longer than the head's knocks need to name the host lost (nodewatch.LOST_AFTER_S)
RAY_IP = re.compile(r"\bip=([0-9.]+)")


def _victim(c: SimCluster, lines: list[tuple[float, str]]) -> str | None:
    """A host other than the head that runs a rank: Ray prefixes its workers' lines with their node's address."""
    by_ip = {str(v["a3_cluster_ip"]): h for h, v in c.hostvars().items()}
    seen = {by_ip.get(m.group(1)) for _, line in lines for m in RAY_IP.finditer(line)}
    return next((h for h in sorted(x for x in seen if x) if h != c.hosts[0]), None)


def _lose_host(c: SimCluster, run: Stamped, what: str) -> tuple[str, float]:
    """At step LOSE_AT_STEP, power off the host of a second rank; returns it and the time of the loss."""
    if not run.wait(lambda s: f"progress: step {LOSE_AT_STEP}/" in s, 1200):
        raise RuntimeError(f"{what}: no step {LOSE_AT_STEP}; last lines {[x for _, x in run.lines[-8:]]}")
    victim = _victim(c, run.lines)
    if victim is None:
        raise RuntimeError(f"{what}: no rank on a second host in the output")
    lost_at = time.time()
    c.fault(victim, "down")
    return victim, lost_at


def _command(experiment: str, restarts: int) -> str:
    return (
        f"cd /opt/verl-recipe && {COMPOSE} run -e VERL_RECIPE_SHOW_VERL=1 --rm {SERVICE} "
        f"--set EXPERIMENT_NAME={experiment} --set TOTAL_TRAINING_STEPS={STEPS} "
        f"--set RESTARTS={restarts} --set RESTART_WAIT=900"
    )


def _finish(run: Stamped, what: str, want_rc: int) -> None:
    rc = run.proc.wait(timeout=1800)
    run.thread.join(timeout=30)
    if rc != want_rc:
        raise RuntimeError(f"{what}: exit {rc}, not {want_rc}; last lines {[x for _, x in run.lines[-10:]]}")


def policy_run(c: SimCluster, run_id: str) -> tuple[Recovery, dict[str, object]]:
    run = Stamped(c.popen("a3-01", _command(f"bench-recover-auto-{run_id}", 3)))
    victim = c.hosts[-1]
    try:
        victim, lost_at = _lose_host(c, run, "restart policy")
        time.sleep(DOWN_S)
        c.fault(victim, "clear")
        back_at = time.time()
        _finish(run, "restart policy", 0)
    finally:
        if run.proc.poll() is None:
            run.proc.terminate()
        c.make("sim-fault", f"HOST={victim}", "FAULT=clear")
    rec = recovery(run.lines, lost_at, back_at)
    return rec, {"victim": victim, "policy_tail": [x for _, x in run.lines[-5:]]}


def manual_run(c: SimCluster, run_id: str) -> tuple[Recovery, dict[str, object]]:
    experiment = f"bench-recover-manual-{run_id}"
    first = Stamped(c.popen("a3-01", _command(experiment, 0)))
    second: Stamped | None = None
    victim = c.hosts[-1]
    try:
        victim, lost_at = _lose_host(c, first, "manual path")
        time.sleep(DOWN_S)
        _finish(first, "manual path, first command", 3)  # named lost within DOWN_S: the command has ended
        c.fault(victim, "clear")
        back_at = time.time()
        second = Stamped(c.popen("a3-01", _command(experiment, 0)))  # the person, at once
        _finish(second, "manual path, the same command again", 0)
    finally:
        for st in (first, second):
            if st is not None and st.proc.poll() is None:
                st.proc.terminate()
        c.make("sim-fault", f"HOST={victim}", "FAULT=clear")
    assert second is not None
    rec = recovery(first.lines + second.lines, lost_at, back_at)
    return rec, {"manual_victim": victim, "manual_tail": [x for _, x in second.lines[-5:]]}


def recover_section(c: SimCluster, run_id: str) -> list[Figure]:
    log("recover: the restart policy")
    auto, d1 = policy_run(c, run_id)
    log(f"recover: {auto}; the manual path")
    manual, d2 = manual_run(c, run_id)
    log(f"recover: {manual}")
    how = (
        f"`docker compose run {SERVICE}` on a3-01 of {c.nodes} deployed hosts ({STEPS} steps, a checkpoint each "
        f"step); at step {LOSE_AT_STEP} the host of a second rank is powered off (`sim-fault FAULT=down`) for "
        f"{DOWN_S} s, then on; seconds from power-on to the first `progress:` line after it. Policy: RESTARTS=3 "
        "(one command, no person). Manual: RESTARTS=0, exit 3, then the same command typed the instant the host "
        "is powered on (a real person adds their reaction time)"
    )
    detail = {**d1, **d2, "policy": vars(auto), "manual": vars(manual)}
    return recovery_figures(auto, manual, run_id, how, detail)
