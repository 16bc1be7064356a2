"""The whole path on a 3-host simulated cluster: deploy.yml starts the Ray services, `docker compose run train-397b
--rehearse` (layout scaled to 3 nodes) runs on the head; a stopped worker and a host with 15 dies are named."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simkit.cluster import SimCluster

REPO = Path(__file__).resolve().parents[2]
# Typed exactly as a user types it in the install folder: deploy.yml's .env names the project, the compose files
# (compose.sim.yaml included on the simulated cluster) and every variable compose.yaml needs.
COMPOSE = "docker compose"
# README "Runs without --rm": the stopped containers `docker compose run` leaves, removed without touching Ray.
PRUNE_RUNS = (
    "docker container prune -f --filter label=com.docker.compose.project=verl-recipe "
    "--filter label=com.docker.compose.oneoff=True"
)


def scale(recipe: str, nodes: int) -> str:
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "sim_scale.py"), recipe, str(nodes)],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def on_host(c: SimCluster, host: str, command: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """A shell command in /opt/verl-recipe on a simulated host, as root (the site's administrator), over SSH with
    host key checking: the shared cluster is a real-site one, whose deploy account has no docker group."""
    return c.ssh(host, "sudo", "-n", "bash", "-c", f"cd /opt/verl-recipe && {command}", timeout=timeout)


def all_joined(c: SimCluster, within_s: float = 300) -> subprocess.CompletedProcess[str]:
    """The head's readiness report once every host's node is in again (a rebooted host rejoins by itself)."""
    end = time.monotonic() + within_s
    while True:
        p = on_host(c, "a3-01", f"{COMPOSE} exec -T ray-head verl-recipe wait-cluster --nodes 3 --deadline 30")
        if p.returncode == 0 or time.monotonic() > end:
            return p
        time.sleep(5)


@pytest.fixture(scope="module")
def deployed(e2e_cluster: tuple[SimCluster, subprocess.CompletedProcess[str]]) -> SimCluster:
    return e2e_cluster[0]  # the session's shared cluster (tests/e2e/conftest.py)


@pytest.fixture(autouse=True)
def whole_cluster(deployed: SimCluster) -> None:
    """Each test starts on the whole cluster: a test before it that cleared a fault may leave a node restarting."""
    p = all_joined(deployed)
    assert p.returncode == 0, f"the cluster did not come back whole: {p.stdout[-1500:]}{p.stderr[-1500:]}"


@pytest.mark.docker
def test_compose_run_rehearsal_on_three_hosts(deployed: SimCluster) -> None:
    p = on_host(deployed, "a3-01", f"docker compose run train-397b --rehearse {scale('qwen3.5-397b', 3)}")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    listing = "docker compose ps -a --format '{{.Service}} {{.State}}'"
    left = on_host(deployed, "a3-01", listing)
    assert "train-397b exited" in left.stdout, "a run without --rm is listed by `docker compose ps -a`"
    pruned = on_host(deployed, "a3-01", f"{PRUNE_RUNS} && {listing}")
    assert pruned.returncode == 0, pruned.stderr
    assert "train-397b" not in pruned.stdout and "ray-head running" in pruned.stdout, pruned.stdout
    rows = {line.split()[0]: line.split() for line in p.stdout.splitlines() if line.startswith("a3-")}
    assert set(rows) == {"a3-01", "a3-02", "a3-03"}
    for host, cols in rows.items():
        assert cols[2] == "16", f"{host}: every bundle probed"
        assert cols[-1] == "ok", f"{host}: {cols}"
        assert float(cols[3]) > 0, "a real all-reduce was timed"
    assert "gloo all-reduce" in p.stdout
    report = on_host(deployed, "a3-02", "cat /mnt/shared/runs/verl_grpo_qwen3_5/qwen3.5-397b/rehearsals/3-nodes.json")
    assert report.returncode == 0 and '"nnodes": 3' in report.stdout, "the report is on shared storage"


@pytest.mark.docker
def test_real_launch_from_the_control_node_ends_where_the_simulation_ends(deployed: SimCluster) -> None:
    p = subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO), "train", "RECIPE=qwen3.5-397b",
         f"INVENTORY={deployed.inventory}", f"ARGS={scale('qwen3.5-397b', 3)}"],
        capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert p.returncode != 0, "make reports the run's non-zero exit"
    assert "cluster: 3/3 nodes ready" in p.stdout + p.stderr, "the head's output streams to the control node"
    assert "simulated cluster: launch validated and rendered, verl not started" in p.stderr
    assert "exit 4" in p.stderr and "Traceback" not in p.stdout + p.stderr
    direct = on_host(deployed, "a3-01", f"docker compose run --rm train-397b {scale('qwen3.5-397b', 3)}")
    assert direct.returncode == 4, direct.stdout[-2000:] + direct.stderr[-2000:]


@pytest.mark.docker
def test_unprepared_host_names_what_is_missing_and_the_fix(deployed: SimCluster) -> None:
    # A folder deploy.yml did not prepare: the compose file alone, no .env/node.env (the deploy user may not touch
    # the real install folder, which is root's).
    p = on_host(
        deployed, "a3-03", 'd=$(mktemp -d) && cp compose.yaml "$d"/ && cd "$d" && docker compose run --rm train-397b'
    )
    assert p.returncode != 0
    assert "VERL_RECIPE_IMAGE" in p.stderr and "deploy.yml" in p.stderr and "make deploy" in p.stderr, p.stderr


@pytest.mark.docker
def test_bad_layout_is_refused_before_the_cluster_is_touched(deployed: SimCluster) -> None:
    p = on_host(deployed, "a3-01", f"{COMPOSE} run --rm train-397b --rehearse --set TP=3")
    assert p.returncode == 2
    assert "error: TP=3" in p.stderr and "nothing was started" in p.stderr


@pytest.mark.docker
def test_stopped_worker_is_named_before_the_deadline(deployed: SimCluster) -> None:
    stop = on_host(deployed, "a3-02", f"{COMPOSE} stop ray-worker")
    assert stop.returncode == 0, stop.stderr
    try:
        p = on_host(
            deployed,
            "a3-01",
            f"{COMPOSE} run --rm train-397b --rehearse --wait-deadline 120 {scale('qwen3.5-397b', 3)}",
        )
        assert p.returncode == 3, p.stdout[-2000:] + p.stderr[-2000:]
        assert f"a3-02 ({deployed.ip('a3-02')}" in p.stderr
    finally:
        start = on_host(deployed, "a3-02", f"{COMPOSE} up -d ray-worker")
        assert start.returncode == 0, start.stderr


@pytest.mark.docker
def test_host_with_fewer_dies_is_refused(deployed: SimCluster) -> None:
    deployed.simctl("fault", "a3-03", "dies:15")
    try:
        restart = on_host(deployed, "a3-03", f"{COMPOSE} up -d --force-recreate ray-worker")
        assert restart.returncode == 0, restart.stderr
        p = on_host(
            deployed, "a3-01", f"{COMPOSE} run --rm train-397b --rehearse --wait-deadline 60 {scale('qwen3.5-397b', 3)}"
        )
        assert p.returncode == 3, p.stdout[-2000:] + p.stderr[-2000:]
        assert f"a3-03 ({deployed.ip('a3-03')}" in p.stderr
        logs = on_host(deployed, "a3-03", f"{COMPOSE} logs ray-worker")
        assert "a3-03: 15 NPU dies visible" in logs.stdout + logs.stderr
    finally:
        deployed.simctl("fault", "a3-03", "clear")


@pytest.mark.docker
@pytest.mark.parametrize("host", ["a3-03", "a3-01"])
def test_a_firewall_that_drops_ephemeral_ports_is_named(deployed: SimCluster, host: str) -> None:
    # The simulated `firewall` fault: real iptables rules in the host's network namespace that drop new TCP from the
    # cluster except on a fixed port list, as a port-list firewalld/ufw setup does; the head (a3-01) and a worker.
    deployed.simctl("fault", host, "firewall")
    try:
        p = on_host(
            deployed,
            "a3-01",
            f"{COMPOSE} run --rm train-397b --rehearse --wait-deadline 120 {scale('qwen3.5-397b', 3)}",
        )
        out = p.stdout + p.stderr
        assert p.returncode == 1, out[-3000:]
        rows = {line.split()[0]: line for line in p.stdout.splitlines() if line.startswith("a3-")}
        others = ", ".join(h for h in ("a3-01", "a3-02", "a3-03") if h != host)
        assert f"a host firewall on {host} drops" in rows[host] and f"fails from {others}" in rows[host], rows
        assert all(r.endswith("ok") for h, r in rows.items() if h != host), rows
        assert "node pairs cannot open a TCP connection on an ephemeral port" in p.stdout
    finally:
        deployed.simctl("fault", host, "clear")
    again = on_host(deployed, "a3-01", f"{COMPOSE} run --rm train-397b --rehearse {scale('qwen3.5-397b', 3)}")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]


@pytest.mark.docker
def test_nothing_left_running_after_the_runs(deployed: SimCluster) -> None:
    for host in ("a3-01", "a3-02", "a3-03"):
        p = on_host(deployed, host, "docker ps --filter name=verl-recipe-train --format '{{.Names}}'")
        assert p.returncode == 0 and p.stdout.strip() == "", f"{host}: {shlex.quote(p.stdout)}"
