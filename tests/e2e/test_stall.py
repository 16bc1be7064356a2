"""A rank stopped on the simulated cluster's real training (verl's GRPO trainer on the CPU stand-ins, the shared
3-host cluster of tests/e2e/conftest.py): one FSDP rank on a second host is stopped with SIGSTOP at the run's first
step, and the stall rule (HEALTH_STOP=stall) ends the run with exit 5, its alert naming that host, the rank and its
pid, in state T (read by the host's own node service, cluster/hostsample.py), with no Ray node id and no actor of an
earlier job. Every host's node service samples its own memory onto shared storage meanwhile."""

from __future__ import annotations

import json
import re
import shlex
import time

import pytest

from simkit.cluster import SimCluster
from tests.e2e.test_train_fsdp import RUN_TIMEOUT_S, TRAIN, cluster, metrics, read_json, runs, worker_hosts
from tests.e2e.test_train_rehearsal import COMPOSE, on_host

pytestmark = pytest.mark.docker
__all__ = ["cluster"]  # the module-scoped fixture, shared with test_train_fsdp

EXPERIMENT = "e2e-stall"
# Long enough that the stop comes mid-run; no save before the last step (a save under way has its own allowance,
# HEALTH_SAVE_STALL_S, kept short here all the same); no restart after the rule stops the run.
ARGS = (
    f"--set EXPERIMENT_NAME={EXPERIMENT} --set TOTAL_TRAINING_STEPS=30 --set SAVE_FREQ=1000 "
    "--set HEALTH_STOP=stall --set HEALTH_SAVE_STALL_S=30 --set RESTARTS=0"
)
NODES = "/mnt/shared/runs/nodes"
# In the host's Ray node container: the first process whose title is one of verl's FSDP worker actors (Ray sets
# the title to ray::<class>[.<method>]), stopped with SIGSTOP; its pid is printed.
STOP_ONE_RANK = """
import os, signal
for p in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
    try:
        title = open(f"/proc/{p}/cmdline", "rb").read()
    except OSError:
        continue
    if title.startswith(b"ray::WorkerDict"):
        os.kill(int(p), signal.SIGSTOP)
        print(p)
        break
"""


def in_ray_node(c: SimCluster, host: str, code: str) -> str:
    service = "ray-head" if host == "a3-01" else "ray-worker"
    p = on_host(c, host, f"{COMPOSE} exec -T {service} python3 -c {shlex.quote(code)}")
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


# `make test-scenarios` (the stall account is unit-tested over Ray's state rows: tests/unit/test_stall.py).
@pytest.mark.scenario
def test_a_rank_stopped_with_sigstop_is_named_by_the_stall_alert(cluster: SimCluster) -> None:
    c = cluster
    before = set(runs(c, EXPERIMENT))
    proc = c.popen("a3-01", "sudo -n sh -c " + shlex.quote(f"cd /opt/verl-recipe && {TRAIN} {ARGS}"))
    victim, pid, out = "", "", ""
    try:
        end = time.monotonic() + RUN_TIMEOUT_S
        while time.monotonic() < end and proc.poll() is None and not victim:
            found = [r for r in runs(c, EXPERIMENT) if r not in before]
            hosts = worker_hosts(c, found[-1]) if found and metrics(c, found[-1]) else set()
            if hosts:
                victim = sorted(hosts)[0]
                pid = in_ray_node(c, victim, STOP_ONE_RANK)
            else:
                time.sleep(5)
        assert victim and pid.isdigit(), f"a rank on a second host was found and stopped ({victim!r}, {pid!r})"
        rc = proc.wait(timeout=600)
        out = proc.stdout.read() if proc.stdout else ""
    finally:
        if victim and pid.isdigit():
            in_ray_node(c, victim, f"import os, signal\ntry: os.kill({pid}, signal.SIGCONT)\nexcept OSError: pass")
        if proc.poll() is None:
            proc.kill()
    assert rc == 5, out[-4000:]
    (run_dir,) = [r for r in runs(c, EXPERIMENT) if r not in before]
    p = on_host(c, "a3-01", f"cat {run_dir}/alerts.json")
    stalls = [a for a in json.loads(p.stdout) if a["rule"] == "stall"]
    assert stalls, p.stdout
    line = stalls[0]["line"]
    # the host and the rank, by the inventory's name and verl's actor name, with the pid that was stopped
    assert re.search(
        rf"stopped making progress: {re.escape(victim)} rank \d+ \([^)]*WorkerDict_\d+:\d+\) pid {pid}", line
    )
    assert "state T" in line, line
    assert not re.search(r"on node [0-9a-f]{8}", line), "no Ray node id"
    assert "DEAD" not in line, "no actor of an earlier job (the lost-node tests' runs ended before this one)"
    assert "alert stall: " in out and victim in out
    outcome = read_json(c, f"{run_dir}/outcome.json")
    assert outcome["exit_code"] == 5 and outcome["health_stop"]["rule"] == "stall"


def test_every_host_samples_its_own_memory_on_shared_storage(cluster: SimCluster) -> None:
    c = cluster
    now = float(on_host(c, "a3-01", "date +%s").stdout.strip())
    for host in c.hosts:
        p = on_host(c, "a3-01", f"tail -n 1 {NODES}/{host}/hostmem.jsonl")
        assert p.returncode == 0, f"{host}: {p.stderr}"
        sample = json.loads(p.stdout)
        assert sample["host"] == host and sample["total_gb"] > 0 and 0 < sample["used_gb"] < sample["total_gb"]
        assert now - sample["t"] < 60, f"{host}'s sample is {now - sample['t']:.0f} s old: its sampler stopped"
        size = on_host(c, "a3-01", f"stat -c %s {NODES}/{host}/hostmem.jsonl").stdout.strip()
        assert int(size) <= 256 * 1024 + 200, "bounded (rotated once at 256 KiB)"


KILLED = "e2e-killed-rank"


def test_a_killed_rank_is_diagnosed_with_its_host_as_the_first_failure(cluster: SimCluster) -> None:
    """SIGKILL (what the kernel's OOM killer or a segfault does) to one FSDP rank on a second host: the run fails,
    and diagnose names that host as the first failure, from Ray's own report of the dead worker's address."""
    c = cluster
    before = set(runs(c, KILLED))
    args = f"--set EXPERIMENT_NAME={KILLED} --set TOTAL_TRAINING_STEPS=30 --set SAVE_FREQ=1000 --set RESTARTS=0"
    proc = c.popen("a3-01", "sudo -n sh -c " + shlex.quote(f"cd /opt/verl-recipe && {TRAIN} {args}"))
    victim, pid, out = "", "", ""
    try:
        end = time.monotonic() + RUN_TIMEOUT_S
        while time.monotonic() < end and proc.poll() is None and not victim:
            found = [r for r in runs(c, KILLED) if r not in before]
            hosts = worker_hosts(c, found[-1]) if found and metrics(c, found[-1]) else set()
            if hosts:
                victim = sorted(hosts)[0]
                pid = in_ray_node(c, victim, STOP_ONE_RANK.replace("SIGSTOP", "SIGKILL"))
            else:
                time.sleep(5)
        assert victim and pid.isdigit(), f"a rank on a second host was found and killed ({victim!r}, {pid!r})"
        rc = proc.wait(timeout=900)
        out = proc.stdout.read() if proc.stdout else ""
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc not in (0, 5), out[-4000:]
    (run_dir,) = [r for r in runs(c, KILLED) if r not in before]
    diagnosis = read_json(c, f"{run_dir}/diagnosis.json")
    first = diagnosis.get("first_failure") or {}
    assert first.get("host") == victim, json.dumps(diagnosis, indent=1)[-4000:]
    assert diagnosis["findings"], "the failure is put in its family, not 'no known failure signature'"
    assert victim in out, "the launcher's last line names the host"
