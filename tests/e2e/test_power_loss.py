"""Power loss and reboot on a 2-host simulated cluster after deploy.yml: a host that goes down is named by the head
(host, what was lost) before the deadline, in the wait and in the middle of a rehearsal, with exit 3 and nothing of
that run left on the head; a worker and then the head that come back rejoin by themselves (restart policy
unless-stopped) and a rehearsal passes with both nodes."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from simkit.cluster import SimCluster, deployed_cluster
from tests.e2e.test_train_rehearsal import COMPOSE, on_host, scale

# A 2-host cluster of its own, power-cycled: `make test-scenarios` (tests/README.md), outside CI's time budget.
pytestmark = [pytest.mark.docker, pytest.mark.scenario]

REPO = Path(__file__).resolve().parents[2]
LAYOUT = scale("qwen3.5-397b", 2)
REPORT = "/mnt/shared/runs/verl_grpo_qwen3_5/qwen3.5-397b/rehearsals/2-nodes.json"
DEADLINE_S = 120


@pytest.fixture(scope="module")
def cluster(sim_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    name = f"{os.environ.get('SIM_TEST_PREFIX', 'pwr')}{os.getpid() % 100000}"
    with deployed_cluster(name, 2, tmp_path_factory.mktemp("power")) as (c, _):
        yield c


def both_joined(c: SimCluster, within_s: float = 300) -> subprocess.CompletedProcess[str]:
    """The head's readiness report (what deploy.yml prints) once both nodes are in. Until a rebooted worker is back,
    the head still lists its node of the previous boot as dead and the wait says so at once: ask again."""
    end = time.monotonic() + within_s
    while True:
        p = on_host(c, "a3-01", f"{COMPOSE} exec -T ray-head verl-recipe wait-cluster --nodes 2 --deadline 30")
        if p.returncode == 0 or time.monotonic() > end:
            return p
        time.sleep(5)


def power_cycle(c: SimCluster, host: str) -> None:
    c.simctl("fault", host, "down")
    assert c.ssh(host, "true").returncode == 255, f"{host} still answers SSH while down"
    c.simctl("fault", host, "clear")


def nothing_of_the_run_left(c: SimCluster) -> None:
    """No container of the run on the head, and no rehearsal worker left in its Ray node."""
    end = time.monotonic() + 60
    while True:
        ps = on_host(c, "a3-01", "docker ps -a --filter label=com.docker.compose.oneoff=True --format '{{.Names}}'")
        ranks = on_host(c, "a3-01", f"{COMPOSE} exec -T ray-head pgrep -f 'AllReduceRank|probe'")
        if ps.returncode == 0 and ps.stdout.strip() == "" and ranks.returncode == 1:
            return
        if time.monotonic() > end:
            pytest.fail(f"left on a3-01 after the run: containers {ps.stdout.split()}, processes {ranks.stdout!r}")
        time.sleep(3)


def test_host_down_while_the_head_waits_is_named_before_the_deadline(cluster: SimCluster) -> None:
    cluster.simctl("fault", "a3-02", "down")
    try:
        t0 = time.monotonic()
        p = on_host(cluster, "a3-01", f"{COMPOSE} run --rm train-397b --rehearse --wait-deadline {DEADLINE_S} {LAYOUT}")
        took = time.monotonic() - t0
        assert p.returncode == 3, p.stdout[-2000:] + p.stderr[-2000:]
        # "lost" when the head's knock names it first, "joined and then left" when Ray already marked it dead
        assert f"error: a3-02 ({cluster.ip('a3-02')})" in p.stderr, p.stderr[-2000:]
        assert "rehearsal:" not in p.stdout, "nothing was rehearsed on a cluster with a host down"
        assert took < DEADLINE_S, f"named after {took:.0f} s, not before the {DEADLINE_S} s deadline"
        nothing_of_the_run_left(cluster)
    finally:
        cluster.simctl("fault", "a3-02", "clear")
    joined = both_joined(cluster)
    assert joined.returncode == 0, joined.stdout + joined.stderr[-2000:]
    assert "a3-02" in joined.stdout and "NOT READY" not in joined.stdout, "the rebooted worker rejoined by itself"


def test_host_down_during_a_rehearsal_is_named_and_recorded(cluster: SimCluster) -> None:
    assert both_joined(cluster).returncode == 0
    cmd = f"{COMPOSE} run --rm train-397b --rehearse --wait-deadline {DEADLINE_S} --iters 100000 {LAYOUT}"
    proc = subprocess.Popen(
        [*cluster.ssh_argv("a3-01"), f"cd /opt/verl-recipe && {cmd}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    err: list[str] = []
    started = threading.Event()

    def read_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err.append(line)
            if "ready after" in line:
                started.set()

    reader = threading.Thread(target=read_err, daemon=True)
    reader.start()
    try:
        assert started.wait(DEADLINE_S), "the rehearsal did not start: " + "".join(err)[-2000:]
        time.sleep(3)  # placement groups and probes under way
        t0 = time.monotonic()
        cluster.simctl("fault", "a3-02", "down")
        out, _ = proc.communicate(timeout=DEADLINE_S * 3)
        took = time.monotonic() - t0
        reader.join(timeout=10)
        text = "".join(err)
        assert proc.returncode == 3, out[-3000:] + text[-6000:]
        assert f"a3-02 ({cluster.ip('a3-02')}) lost" in out, out[-2000:]
        assert "during the rehearsal" in out
        assert took < DEADLINE_S, f"named {took:.0f} s after the power loss, not before the deadline"
        report = on_host(cluster, "a3-01", f"cat {REPORT}")
        summary = json.loads(report.stdout)["summary"]
        assert summary["exit_code"] == 3
        assert [(x["host"], x["ip"]) for x in summary["lost"]] == [("a3-02", cluster.ip("a3-02"))]
        nothing_of_the_run_left(cluster)
        print(f"power loss -> named by the head: {took:.1f} s ({summary['lost'][0]['what']})")
    finally:
        if proc.poll() is None:
            proc.kill()
        cluster.simctl("fault", "a3-02", "clear")


def test_worker_and_head_come_back_by_themselves_and_a_rehearsal_passes(cluster: SimCluster) -> None:
    power_cycle(cluster, "a3-02")
    joined = both_joined(cluster)
    assert joined.returncode == 0, joined.stdout + joined.stderr[-2000:]
    t0 = time.monotonic()
    power_cycle(cluster, "a3-01")
    joined = both_joined(cluster)
    rejoin_s = time.monotonic() - t0
    assert joined.returncode == 0, joined.stdout + joined.stderr[-2000:]
    p = on_host(cluster, "a3-01", f"{COMPOSE} run --rm train-397b --rehearse --wait-deadline {DEADLINE_S} {LAYOUT}")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = {line.split()[0]: line.split() for line in p.stdout.splitlines() if line.startswith("a3-")}
    assert set(rows) == {"a3-01", "a3-02"} and all(cols[-1] == "ok" for cols in rows.values()), p.stdout
    print(f"head power-cycled: both nodes back in {rejoin_s:.0f} s")


def test_an_operator_stop_survives_a_reboot(cluster: SimCluster) -> None:
    """unless-stopped: a node the operator stopped stays stopped when its host reboots."""
    stop = on_host(cluster, "a3-02", f"{COMPOSE} stop ray-worker")
    assert stop.returncode == 0, stop.stderr
    try:
        power_cycle(cluster, "a3-02")
        state = on_host(cluster, "a3-02", f"{COMPOSE} ps -a --format '{{{{.Service}}}} {{{{.State}}}}' ray-worker")
        assert state.stdout.split() == ["ray-worker", "exited"], state.stdout
    finally:
        start = on_host(cluster, "a3-02", f"{COMPOSE} up -d ray-worker")
        assert start.returncode == 0, start.stderr
