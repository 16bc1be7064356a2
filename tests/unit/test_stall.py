"""The stall alert's look at the cluster (watch/stall.py): this run's Ray job found by verl's driver process, actors of
earlier jobs left out, Ray's node ids mapped to the inventory's host names, and the rank that stopped chosen from
each host's process samples (cluster/hostsample.py). Rows are shaped as Ray 2.54's state API returns them
(ray.util.state list_jobs / list_nodes / list_actors); the live part runs on the simulated cluster
(tests/e2e/test_stall.py)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from verl_recipe.watch.stall import (
    Actor,
    StallProbe,
    as_dict,
    choose_suspects,
    current_job,
    job_actors,
    node_hosts,
    ranks,
)

NOW = 1_800_000_000.0
HEAD, W1, W2 = "a" * 56, "b" * 56, "c" * 56
MEMBERS = [("a3-01", "10.0.0.11"), ("a3-02", "10.0.0.12"), ("a3-03", "10.0.0.13")]
NODES = [
    {"node_id": HEAD, "node_ip": "10.0.0.11", "node_name": "a3-01", "state": "ALIVE"},
    {"node_id": W1, "node_ip": "10.0.0.12", "node_name": "10.0.0.12", "state": "ALIVE"},
    {"node_id": W2, "node_ip": "10.0.0.13", "node_name": "", "state": "ALIVE"},
]
JOBS = [
    # an earlier run's job (ended) and the doctor's connection, then this run's: verl's driver is pid 4242
    {"job_id": "01000000", "status": "SUCCEEDED", "start_time": (NOW - 7200) * 1000, "driver_info": {"pid": "311"}},
    {"job_id": "02000000", "status": "RUNNING", "start_time": (NOW - 50) * 1000, "driver_info": {"pid": "999"}},
    {"job_id": "03000000", "status": "RUNNING", "start_time": (NOW - 60) * 1000, "driver_info": {"pid": "4242"}},
]


def actor(
    name: str, node: str, pid: int, job: str = "03000000", state: str = "ALIVE", cls: str = "WorkerDict"
) -> dict[str, Any]:
    return {"name": name, "class_name": cls, "state": state, "job_id": job, "node_id": node, "pid": pid}


ROWS = [
    actor("", HEAD, 100, cls="TaskRunner"),
    actor("abcWorkerDict_0:0", HEAD, 101),
    actor("abcWorkerDict_0:1", W1, 201),
    actor("abcWorkerDict_1:0", W2, 301),
    actor("abcWorkerDict_1:1", W2, 302),
    # an earlier job's actors, dead and alive: never in this run's alert
    actor("oldWorkerDict_0:0", W1, 55, job="01000000", state="DEAD"),
    actor("oldWorkerDict_0:1", W1, 56, job="01000000"),
]


Procs = dict[str, dict[int, tuple[str, int]]]


def samples(cur: Procs, prev: Procs, t: float = NOW) -> dict[str, dict[str, Any]]:
    """host -> procs.json as a host's sampler writes it."""

    def side(procs: dict[int, tuple[str, int]], at: float) -> dict[str, Any]:
        return {"t": at, "procs": {str(p): [s, n] for p, (s, n) in procs.items()}}

    return {h: {"host": h, "prev": side(prev.get(h, {}), t - 5), "cur": side(cur[h], t)} for h in cur}


def test_the_current_job_is_the_one_whose_driver_is_verls_process() -> None:
    assert current_job(JOBS, 4242, NOW - 120) == "03000000"
    # an earlier run's driver in another container had the same pid (containers number processes from 1)
    reused = [{**JOBS[0], "driver_info": {"pid": "4242"}}, *JOBS[1:]]
    assert current_job(reused, 4242, NOW - 120) == "03000000"
    assert current_job(list(reversed(reused)), 4242, NOW - 120) == "03000000"
    # without the pid (not known yet): the newest running job since the run began, never an ended one
    assert current_job(JOBS, None, NOW - 120) == "02000000"
    assert current_job(JOBS, None, NOW) is None
    assert current_job([], 4242, 0) is None


def test_node_ids_map_to_the_inventorys_host_names() -> None:
    hosts = node_hosts(NODES, MEMBERS)
    assert hosts == {HEAD: "a3-01", W1: "a3-02", W2: "a3-03"}
    # without the members: the name the node joined with, else its address
    assert node_hosts(NODES, []) == {HEAD: "a3-01", W1: "10.0.0.12", W2: "10.0.0.13"}


def test_actors_of_earlier_jobs_are_left_out_and_ranks_follow_verls_names() -> None:
    actors = job_actors(ROWS, "03000000")
    assert {a.job_id for a in actors} == {"03000000"} and len(actors) == 5
    assert ranks(actors) == {
        "abcWorkerDict_0:0": 0,
        "abcWorkerDict_0:1": 1,
        "abcWorkerDict_1:0": 2,
        "abcWorkerDict_1:1": 3,
    }
    assert len(job_actors(ROWS, None)) == 7, "an unknown job keeps every actor (the alert says so)"


def test_a_stopped_process_is_the_suspect_named_with_its_host_and_rank() -> None:
    actors = job_actors(ROWS, "03000000")
    hosts = node_hosts(NODES, MEMBERS)
    cur = {"a3-01": {100: ("S", 900), 101: ("S", 520)}, "a3-02": {201: ("T", 400)}, "a3-03": {301: ("S", 700)}}
    cur["a3-03"][302] = ("S", 650)
    prev = {"a3-01": {100: ("S", 890), 101: ("S", 520)}, "a3-02": {201: ("R", 400)}, "a3-03": {301: ("S", 690)}}
    found, stale = choose_suspects(actors, hosts, samples(cur, prev), NOW)
    assert stale == []
    # the stopped rank first; rank 0 and rank 3 (no progress while others ran) follow as weaker suspects
    assert [(s.host, s.actor, s.pid) for s in found][0] == ("a3-02", "rank 1 (abcWorkerDict_0:1)", 201)
    assert "state T" in found[0].why


def test_no_cpu_progress_singles_out_a_rank_only_while_others_progress() -> None:
    actors = [a for a in job_actors(ROWS, "03000000") if a.class_name == "WorkerDict"]
    hosts = node_hosts(NODES, MEMBERS)
    prev = {"a3-01": {101: ("S", 500)}, "a3-02": {201: ("S", 400)}, "a3-03": {301: ("S", 700), 302: ("S", 600)}}
    cur = {"a3-01": {101: ("R", 530)}, "a3-02": {201: ("S", 400)}, "a3-03": {301: ("R", 720), 302: ("R", 640)}}
    found, _ = choose_suspects(actors, hosts, samples(cur, prev), NOW)
    assert [(s.host, s.actor) for s in found] == [("a3-02", "rank 1 (abcWorkerDict_0:1)")]
    assert "no CPU time in the last 5 s" in found[0].why
    # every rank idle (all waiting in one collective): nobody to single out
    idle = {h: dict(v) for h, v in prev.items()}
    assert choose_suspects(actors, hosts, samples(idle, prev), NOW)[0] == []


def test_a_process_gone_or_exited_and_a_host_without_recent_samples() -> None:
    actors = [a for a in job_actors(ROWS, "03000000") if a.class_name == "WorkerDict"]
    hosts = node_hosts(NODES, MEMBERS)
    cur = {"a3-01": {101: ("Z", 530)}, "a3-02": {}, "a3-03": {301: ("S", 1), 302: ("S", 1)}}
    data = samples(cur, {})
    data["a3-03"]["cur"]["t"] = NOW - 600  # its node service stopped sampling
    found, stale = choose_suspects(actors, hosts, data, NOW)
    assert [(s.host, s.pid, s.order) for s in found] == [("a3-01", 101, 1), ("a3-02", 201, 2)]
    assert stale == ["a3-03"]


def write_procs(nodes: Path, data: dict[str, dict[str, Any]]) -> None:
    for host, doc in data.items():
        (nodes / host).mkdir(parents=True, exist_ok=True)
        (nodes / host / "procs.json").write_text(json.dumps(doc))


def test_the_account_reads_the_hosts_samples_and_names_host_and_rank(tmp_path: Path) -> None:
    cur = {"a3-01": {100: ("S", 9), 101: ("S", 5)}, "a3-02": {201: ("T", 4)}, "a3-03": {301: ("S", 7), 302: ("S", 6)}}
    write_procs(tmp_path, samples(cur, cur))
    probe = StallProbe(tmp_path, MEMBERS, since=NOW - 120, driver_pid=lambda: 4242, clock=lambda: NOW)
    text = probe.account(ROWS, NODES, current_job(JOBS, 4242, NOW - 120))
    assert text.startswith("stopped making progress: a3-02 rank 1 (abcWorkerDict_0:1) pid 201: process stopped")
    assert "Ray actors of job 03000000:" in text and "2x WorkerDict ALIVE on a3-03" in text
    assert "old" not in text and "DEAD" not in text and W1[:8] not in text, "no earlier job, no Ray node id"


def test_an_account_without_samples_says_which_hosts_are_missing(tmp_path: Path) -> None:
    probe = StallProbe(tmp_path, MEMBERS, since=NOW - 120, clock=lambda: NOW)
    text = probe.account(ROWS, NODES, "03000000")
    assert "no rank stands out" in text and "no recent sample from a3-01, a3-02, a3-03" in text


def test_a_host_name_that_is_no_plain_name_is_never_a_path(tmp_path: Path) -> None:
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "procs.json").write_text(json.dumps(samples({"x": {201: ("T", 1)}}, {})["x"]))
    nodes = [{"node_id": W1, "node_ip": "10.9.9.9", "node_name": "../nodes/secret"}]
    probe = StallProbe(tmp_path / "nodes", [], since=0, clock=lambda: NOW)
    assert "process stopped" not in probe.account([actor("abcWorkerDict_0:1", W1, 201)], nodes, "03000000")


def test_the_look_is_bounded_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    probe = StallProbe(None, [], since=0, timeout_s=0.2)
    monkeypatch.setattr(probe, "_look", lambda: (release.wait(5), "late")[1])
    start = time.monotonic()
    assert probe.describe() == "Ray's state API gave no answer within 0.2 s"
    assert time.monotonic() - start < 2
    release.set()


def test_a_failing_look_is_one_phrase_not_an_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = StallProbe(None, [], since=0)

    def boom() -> str:
        raise KeyError("node_id")

    monkeypatch.setattr(probe, "_look", boom)
    assert probe.describe() == "the look at the cluster failed (KeyError)"


def test_state_api_rows_of_every_shape_become_dicts() -> None:
    from ray.util.state.common import ActorState, JobState

    row = ActorState(actor_id="x", class_name="WorkerDict", state="ALIVE", job_id="03000000", name="a_0:0",
                     node_id=W1, pid=7, ray_namespace="n")  # fmt: skip
    assert job_actors([as_dict(row)], "03000000") == [Actor("a_0:0", "WorkerDict", "ALIVE", "03000000", W1, 7)]
    job = JobState(type="DRIVER", job_id="03000000", status="RUNNING", entrypoint="", start_time=1,
                   driver_info={"id": "03000000", "node_ip_address": "10.0.0.11", "pid": "4242"})  # fmt: skip
    assert current_job([as_dict(job)], 4242, 0) == "03000000"
    assert as_dict({"a": 1}) == {"a": 1} and as_dict(3) == {}


def test_the_look_asks_rays_state_api_for_this_jobs_actors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ray.util.state as state

    asked: dict[str, Any] = {}

    def list_actors(**kw: Any) -> list[dict[str, Any]]:
        asked.update(kw)
        wanted = kw["filters"][0][2] if kw["filters"] else None
        return [r for r in ROWS if wanted is None or r["job_id"] == wanted]

    monkeypatch.setattr(state, "list_jobs", lambda **kw: JOBS)
    monkeypatch.setattr(state, "list_actors", list_actors)
    monkeypatch.setattr(state, "list_nodes", lambda **kw: NODES)
    cur = {"a3-01": {100: ("S", 9), 101: ("S", 5)}, "a3-02": {201: ("T", 4)}, "a3-03": {301: ("S", 7), 302: ("S", 6)}}
    write_procs(tmp_path, samples(cur, cur, t=time.time()))
    probe = StallProbe(tmp_path, MEMBERS, since=NOW - 120, driver_pid=lambda: 4242)
    text = probe.describe()
    assert asked["filters"] == [("job_id", "=", "03000000")] and asked["timeout"] == 10
    assert "a3-02 rank 1 (abcWorkerDict_0:1) pid 201: process stopped" in text and "oldWorkerDict" not in text

    def no_jobs(**kw: Any) -> list[Any]:
        raise TimeoutError("jobs")

    monkeypatch.setattr(state, "list_jobs", no_jobs)  # the jobs unknown: every actor, and the alert says so
    assert "Ray actors of all jobs (this run's job not found)" in probe.describe() and asked["filters"] is None
