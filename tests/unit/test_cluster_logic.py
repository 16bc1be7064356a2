"""Node start and cluster wait logic (no Ray needed): resources, arguments, deadlines, who is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from verl_recipe.cluster.clusterwait import NodeView, assess, node_table, wait_for_cluster
from verl_recipe.cluster.nodeenv import from_environ, parse_cluster
from verl_recipe.cluster.raynode import NodeError, count_dies, node_resources, ray_start_argv
from verl_recipe.settingtypes import SettingsError

from tests.fakes import FakeClock

CLUSTER = "a3-01=10.9.0.11,a3-02=10.9.0.12,a3-03=10.9.0.13"


def node_env(tmp_path: Path, dies_present: int = 16, **extra: str) -> dict[str, str]:
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    for i in range(dies_present):
        (dev / f"davinci{i}").write_text("")
    (dev / "davinci_manager").write_text("")
    env = {
        "NODE_NAME": "a3-02",
        "NODE_IP": "10.9.0.12",
        "HEAD_ADDR": "10.9.0.11",
        "RAY_PORT": "6379",
        "NODE_DIES": "16",
        "CLUSTER_NODES": CLUSTER,
        "VERL_RECIPE_DEV_DIR": str(dev),
        "RAY_NUM_CPUS": "48",
    }
    env.update(extra)
    return env


def test_count_dies_sees_two_digit_ids(tmp_path: Path) -> None:
    ne = from_environ(node_env(tmp_path))
    assert count_dies(ne.dev_dir) == list(range(16)), "Ray's /dev/davinci? glob would stop at 10"


def test_node_with_fewer_dies_is_refused(tmp_path: Path) -> None:
    ne = from_environ(node_env(tmp_path, dies_present=15))
    with pytest.raises(NodeError, match=r"a3-02: 15 NPU dies visible .* 16 expected \(missing davinci15\)"):
        node_resources(ne)


def test_node_with_too_few_cpus_is_refused(tmp_path: Path) -> None:
    ne = from_environ(node_env(tmp_path, RAY_NUM_CPUS="32"))
    with pytest.raises(NodeError, match="32 CPUs for Ray, but verl needs 3 per die"):
        node_resources(ne)


def test_ray_start_binds_cluster_interface_with_npu_resources(tmp_path: Path) -> None:
    ne = from_environ(node_env(tmp_path))
    head = ray_start_argv("head", ne, 16, 48, dashboard=True)
    assert "--node-ip-address=10.9.0.12" in head
    assert "--dashboard-host=10.9.0.12" in head, "the dashboard listens on the cluster interface, not 0.0.0.0"
    assert "--num-cpus=48" in head
    assert {"--node-manager-port=6380", "--object-manager-port=6381", "--min-worker-port=10002"} <= set(head), (
        "fixed ports: the firewall list is exact"
    )
    res = next(a for a in head if a.startswith("--resources="))
    assert json.loads(res.split("=", 1)[1]) == {"NPU": 16}
    worker = ray_start_argv("worker", ne, 16, 48, dashboard=False)
    assert "--address=10.9.0.11:6379" in worker and "--head" not in worker
    assert not any(a.startswith(("--dashboard-host", "--dashboard-port")) for a in worker)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"NODE_IP": ""}, "NODE_IP not set"),
        ({"RAY_PORT": "sixty"}, "RAY_PORT='sixty' is not an integer"),
        ({"CLUSTER_NODES": "a3-01"}, "CLUSTER_NODES entry 'a3-01' is not NAME=IP"),
        ({"CLUSTER_NODES": "a3-01=1.1.1.1,a3-02=1.1.1.1"}, "lists an address twice"),
    ],
)
def test_bad_node_env(tmp_path: Path, env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        from_environ(node_env(tmp_path, **env))


def test_parse_cluster_order() -> None:
    assert parse_cluster(CLUSTER)[2] == ("a3-03", "10.9.0.13")


def view(
    name: str, ip: str, npu: float = 16, cpu: float = 48, avail: float | None = None, alive: bool = True
) -> NodeView:
    return NodeView(name, ip, npu, npu if avail is None else avail, cpu, alive)


EXPECTED = parse_cluster(CLUSTER)


def test_assess_names_missing_hosts() -> None:
    a = assess([view("a3-01", "10.9.0.11")], EXPECTED, 3, 16)
    assert not a.ready and a.fatal is None
    assert a.missing == ["a3-02 (10.9.0.12)", "a3-03 (10.9.0.13)"]
    assert "cluster: 1/3 nodes ready, 16/48 dies" in a.line


def test_assess_ready_and_single_node_recipe_on_bigger_cluster() -> None:
    views = [view("a3-01", "10.9.0.11"), view("a3-02", "10.9.0.12"), view("a3-03", "10.9.0.13")]
    assert assess(views, EXPECTED, 3, 16).ready
    assert assess(views[:1], EXPECTED, 1, 16).ready


def test_short_node_is_fatal_once_everyone_joined() -> None:
    views = [view("a3-01", "10.9.0.11"), view("a3-02", "10.9.0.12", npu=15), view("a3-03", "10.9.0.13")]
    a = assess(views, EXPECTED, 3, 16)
    assert not a.ready
    assert a.fatal is not None and "a3-02 (10.9.0.12) joined with 15 NPU / 48 CPU, needs 16 NPU / 48 CPU" in a.fatal


def test_held_npus_are_reported() -> None:
    views = [view("a3-01", "10.9.0.11", avail=0), view("a3-02", "10.9.0.12"), view("a3-03", "10.9.0.13")]
    a = assess(views, EXPECTED, 3, 16)
    assert not a.ready and "a3-01 (10.9.0.11) has 16 of 16 NPU held by another job" in a.line


def test_node_that_left_fails_fast() -> None:
    views = [view("a3-01", "10.9.0.11"), view("a3-02", "10.9.0.12", alive=False), view("a3-03", "10.9.0.13")]
    a = assess(views, EXPECTED, 3, 16)
    assert a.fatal is not None and a.fatal.startswith("a3-02 (10.9.0.12) joined and then left the cluster")


def test_wait_gives_up_on_deadline_naming_missing(capsys: pytest.CaptureFixture[str]) -> None:
    clock = FakeClock()
    rc = wait_for_cluster(
        lambda: [view("a3-01", "10.9.0.11")], EXPECTED, 3, 16, deadline_s=30, now=clock.now, sleep=clock.sleep
    )
    assert rc == 3
    err = capsys.readouterr().err
    assert "error: cluster not ready after 30 s: a3-02 (10.9.0.12), a3-03 (10.9.0.13)" in err
    assert "waiting: cluster: 1/3 nodes ready" in err
    assert clock.t >= 30


def test_wait_returns_when_the_last_node_joins() -> None:
    clock = FakeClock()
    joined = [view("a3-01", "10.9.0.11")]

    def snapshot() -> list[NodeView]:
        if clock.t >= 6:
            return [*joined, view("a3-02", "10.9.0.12"), view("a3-03", "10.9.0.13")]
        return joined

    assert wait_for_cluster(snapshot, EXPECTED, 3, 16, deadline_s=60, now=clock.now, sleep=clock.sleep) == 0
    assert 6 <= clock.t < 10, "the head notices the last node within one poll interval"


def test_node_table_one_row_per_host() -> None:
    table = node_table([view("a3-01", "10.9.0.11"), view("a3-03", "10.9.0.13", npu=15)], EXPECTED, 16)
    rows = [line.split() for line in table.splitlines()]
    assert rows[0] == ["host", "ip", "ray", "NPU", "CPU", "status"]
    assert rows[1] == ["a3-01", "10.9.0.11", "joined", "16", "48", "ok"]
    assert rows[2] == ["a3-02", "10.9.0.12", "missing", "0", "0", "NOT", "READY"]
    assert rows[3] == ["a3-03", "10.9.0.13", "joined", "15", "48", "NOT", "READY"]
