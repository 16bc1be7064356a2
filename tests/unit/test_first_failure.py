"""`verl-recipe diagnose` across hosts (issue 36): families by general rules, benign noise, the first failure.

Lines quoted from public threads say where from; lines no thread has (the simulated cluster's addresses, a run
record) are made up in the form of the real tools' output and say so.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from verl_recipe.diagnosis import codes
from verl_recipe.diagnosis import diagnose as dg
from verl_recipe.diagnosis import firstfailure as ff
from verl_recipe.diagnosis.families import BY_FAMILY, FAMILIES, RULES, is_noise
from verl_recipe.diagnosis.signatures import BY_ID
from verl_recipe.run import record, restart

# (rule id, family, confidence, source, verbatim excerpt): each general rule on the thread it was written from.
GENERAL: list[tuple[str, str, str, str, str]] = [
    (
        "custom-code-load",
        "code-config",
        "medium",
        "https://github.com/verl-project/verl/issues/3150",
        "[Error] Task failed: Can't pickle <function xxx>: it's not the same object as custom_module.char_count_reward_function, completion:",  # noqa: E501
    ),
    (
        "ray-worker-died",
        "ray-lost",
        "medium",
        "https://github.com/verl-project/verl/issues/2987",
        "(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the problem, check the logs for the dead worker. RayTask ID: ffffffffffffffff26112883fcf1df750a93627c01000000 Worker ID: 5a99776210c1e55677254183f9f6d529a6f8743b91de95c71c8b1fa7 Node ID: 15378de0f92800be5b731c682f1edc25c61fcbd5848584993efe6fda Worker IP address: 100.96.31.18 Worker port: 42283 Worker PID: 909447 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors.",  # noqa: E501
    ),
    (
        "ray-worker-died",
        "ray-lost",
        "medium",
        "https://github.com/verl-project/verl/issues/472",
        """\tname: 31cVuRWorkerDict_0:3
\tnamespace: 339a5d5d-4623-4811-8206-b1e9bdfd8cb0
\tip: 10.0.0.1
The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors.""",  # noqa: E501
    ),
    (
        "ray-node-dead",
        "ray-lost",
        "medium",
        "https://github.com/ray-project/ray/issues/44680",
        """2024-04-11 16:38:16,464\tWARNING worker.py:2037 -- The node with node id: <node id> and address: <adress> and node name: <node name> has been marked dead because the detector has missed too many heartbeats from it. This can happen when a \t(1) raylet crashes unexpectedly (OOM, preempted node, etc.)
(2) raylet has lagging heartbeats due to slow network or busy workload.""",  # noqa: E501
    ),
    (
        "watchdog-timeout",
        "timeout-hang",
        "medium",
        "https://github.com/verl-project/verl/issues/5607",
        "(WorkerDict pid=332524) [rank0]:[E316 03:31:19.370355626 ProcessGroupNCCL.cpp:683] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=78, OpType=COALESCED, NumelIn=68067328, NumelOut=136134656, Timeout(ms)=600000) ran for 600062 milliseconds before timing out.",  # noqa: E501
    ),
    (
        "cann-code",
        "kernel",
        "low",
        "https://github.com/vllm-project/vllm-ascend/issues/5695",
        "[Usage]: deploy GME-Qwen2-VL-2B-Instruct with vllm ascend error, error no is 561103 & error msg is ERR00100 PTA call acl api failed. EZ9999: Inner Error!",  # noqa: E501
    ),
    (
        "cann-code",
        "kernel",
        "low",
        "https://github.com/vllm-project/vllm-ascend/issues/13399",  # EE: the runtime's own class
        "EE9999: Inner Error!",
    ),
]

# MindSpeed's harmless mstx line, printed every step (verl-project/verl-ascend-recipe sapo/README.md, Q2).
MSTX = "[ERROR] Call range_end failed. Exception: mstx.range_end() missing 1 required positional argument: 'range_id'"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("rule", "family", "confidence", "source", "excerpt"), GENERAL, ids=[f"{g[0]}:{g[3]}" for g in GENERAL]
)
def test_a_failure_no_signature_knows_is_put_in_its_family(
    tmp_path: Path, rule: str, family: str, confidence: str, source: str, excerpt: str
) -> None:
    result = dg.diagnose([_write(tmp_path / "train.log", "INFO step 1 done\n" + excerpt)])
    first = result.findings[0]
    assert (first.id, first.family, first.confidence) == (rule, family, confidence), source
    assert first.basis, "a general rule says which rule it is"
    assert not any(f.confidence == "high" for f in result.findings), "no signature claims it"
    assert result.unknown is not None, "the last error block is still shown beside a general rule"
    assert "confidence: " + confidence in dg.render_text(result)


def test_a_dead_workers_own_address_is_its_host(tmp_path: Path) -> None:
    excerpt = GENERAL[1][4]  # verl-project/verl#2987: the raylet names the dead worker's address
    (finding,) = dg.diagnose([_write(tmp_path / "train.log", excerpt)]).findings
    assert finding.host == "100.96.31.18", "an address the run record does not know is still named"
    one = dg.diagnose([_write(tmp_path / "other.log", GENERAL[2][4])]).findings[0]
    assert (one.host, one.rank) == ("10.0.0.1", "3"), "verl-project/verl#472: ip and WorkerDict_0:3"
    assert any("ip: 10.0.0.1" in line for line in one.evidence)


def test_every_family_and_rule_is_complete() -> None:
    assert len({f.id for f in FAMILIES}) == len(FAMILIES) == 12
    for f in FAMILIES:
        assert f.title and f.fix and f.prevent, f.id
    for r in RULES:
        assert r.family in BY_FAMILY and r.confidence in ("medium", "low") and r.cause and r.basis, r.id
        assert all(n == n.lower() for n in r.needles), r.id
        assert r.id not in BY_ID, "a rule id is never a signature id"


@pytest.mark.parametrize(
    "line",
    [
        MSTX,
        "(raylet) [2026-12-02 10:00:01,000 I 88 88] (raylet) worker_pool.cc:520: Started worker process",  # made-up
        "(raylet) INFO: the memory monitor is enabled",  # made-up: a raylet INFO record forwarded to the driver
        "WARNING 06-09 06:57:48 [config.py:1]  error checking is off for this model",  # made-up, vLLM's form
        "/usr/lib/python3.11/site-packages/torch/cuda/__init__.py:61: FutureWarning: The pynvml package is deprecated",
    ],
)
def test_benign_noise_is_never_the_last_error(tmp_path: Path, line: str) -> None:
    assert is_noise(line)
    real = "ERROR 06-09 06:57:40 [worker.py:1] ValueError: a real failure"  # made-up
    result = dg.diagnose([_write(tmp_path / "train.log", "\n".join([real] + [line] * 3))])
    assert result.unknown is not None and result.unknown.block is not None
    assert result.unknown.block.splitlines()[-1] == line or real in result.unknown.block
    assert real in result.unknown.block
    assert result.unknown.line is not None and result.unknown.line <= 1 + 5


def test_a_healthy_log_gives_no_finding(tmp_path: Path) -> None:
    # The lines a healthy verl 0.8.0 GRPO run prints, in their real forms (made-up values), with MindSpeed's mstx
    # noise between them: no finding, no first failure, no error block.
    healthy = "\n".join(
        [
            "Local node IP: 172.30.0.11",
            "(TaskRunner pid=512) Using dataset class: RLHFDataset",
            "(WorkerDict pid=2301) INFO 12-02 10:00:01 [model_runner.py:1] Loading model weights took 0.9 GB",
            f"(WorkerDict pid=2301) {MSTX}",
            "(TaskRunner pid=512) step:1 - actor/pg_loss:0.01 - actor/grad_norm:0.5 - timing_s/step:2.3",
            "(raylet) [2026-12-02 10:00:05,000 I 88 88] (raylet) node_manager.cc:1: Sending Python GC request",
            "(TaskRunner pid=512) step:2 - actor/pg_loss:0.01 - actor/grad_norm:0.4 - timing_s/step:2.2",
            "(TaskRunner pid=512) local_global_step_folder: /mnt/shared/checkpoints/exp/global_step_2",
        ]
    )
    result = dg.diagnose([_write(tmp_path / "train.log", healthy)])
    assert result.findings == ()
    assert result.first_failure is None
    assert result.unknown is not None and result.unknown.block is None


# --- a worker rank killed with SIGKILL on the simulated cluster -------------------------------------------------
# What verl 0.8.0 prints on the head when a WorkerDict process dies (Ray 2.x's words, as verl-project/verl#4921 and
# #2987 show them), with the simulated cluster's hosts and addresses (docs/contracts.md section 4: a3-NN at
# 172.30.0.(10+NN)); the gloo line is made up in gloo's form. The lead checks these texts on the cluster: see
# test_a_killed_worker_is_named_by_its_host's docstring.
KILLED_TRAIN_LOG = """(TaskRunner pid=512) step:3 - actor/pg_loss:0.01 - timing_s/step:2.3
(WorkerDict pid=2207, ip=172.30.0.13) [2026-12-02 10:00:07,100 E 2207 2250] [rank2]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [172.30.0.12]:2517
(raylet, ip=172.30.0.12) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the problem, check the logs for the dead worker. RayTask ID: ffffffffffffffff26112883fcf1df750a93627c01000000 Worker ID: 5a99776210c1e55677254183f9f6d529a6f8743b91de95c71c8b1fa7 Node ID: 15378de0f92800be5b731c682f1edc25c61fcbd5848584993efe6fda Worker IP address: 172.30.0.12 Worker port: 42283 Worker PID: 2188 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors.
Error executing job with overrides: ['algorithm.adv_estimator=grpo']
Traceback (most recent call last):
  File "/usr/local/lib/python3.11/site-packages/verl/trainer/main_ppo.py", line 42, in main
    run_ppo(config)
ray.exceptions.RayTaskError(ActorDiedError): ray::TaskRunner.run() (pid=512, ip=172.30.0.11, actor_id=bd00e26f7735efb6a0f1093c01000000, repr=<verl.trainer.main_ppo.TaskRunner object at 0xffff7d84f8f0>)
ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.
\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict
\tactor_id: 5066c201b724a3936948a11201000000
\tpid: 2188
\tname: 07GxnAWorkerDict_0:1
\tnamespace: b8860f81-d334-496c-a8f4-c7ed6a6b49f3
\tip: 172.30.0.12
The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file."""  # noqa: E501


def _run_folder(tmp_path: Path, train_log: str, nodes: dict[str, str]) -> Path:
    """A run record as the launcher writes it (settings.json's host and Ray address), and one node log per host."""
    run_dir = tmp_path / "logs" / "proj" / "exp" / "runs" / "20261202T100000Z"
    _write(run_dir / "train.log", train_log)
    (run_dir / "settings.json").write_text(json.dumps({"host": "a3-01", "cluster": "172.30.0.11:6379"}))
    for host, text in nodes.items():
        _write(run_dir / "nodes" / f"{host}.log", text)
    return run_dir


def _ray_start(n: int) -> str:
    # `ray start` prints the node's address (the node service's log, cluster/raynode.py)
    return f"Local node IP: 172.30.0.{10 + n}\n--------------------\nRay runtime started."


def test_a_killed_worker_is_named_by_its_host(tmp_path: Path) -> None:
    """A rank SIGKILLed on a3-02: the first failure is a3-02 (rank 1), a3-03's broken gloo link a consequence.

    To verify on the simulated cluster (the lead): kill one WorkerDict process on a worker host during `make train`
    (`docker exec <sim>-a3-02 pkill -KILL -f WorkerDict` takes every rank there; `kill -KILL <pid>` of one), then
    check that train.log carries Ray's "A worker died or was killed" line with "Worker IP address:" and/or the
    ActorDiedError block with "ip:", and that `verl-recipe diagnose RUN_DIR` names a3-02 as the first failure.
    """
    nodes = {f"a3-0{n}": _ray_start(n) for n in (1, 2, 3)}
    run_dir = _run_folder(tmp_path, KILLED_TRAIN_LOG, nodes)
    first = dg.write_diagnosis(run_dir)
    assert first is not None
    assert (first.id, first.family, first.host, first.confidence) == ("ray-worker-died", "ray-lost", "a3-02", "medium")
    assert first.one_line().startswith("diagnosis: a Ray worker process died on a3-02")
    doc = json.loads((run_dir / "diagnosis.json").read_text())
    assert doc["first_failure"]["host"] == "a3-02" and doc["first_failure"]["family"] == "ray-lost"
    assert [(c["host"], c["id"]) for c in doc["consequences"]] == [("a3-03", "peer-gone")]
    assert doc["consequences"][0]["rank"] == "2"
    text = dg.render_text(dg.diagnose([run_dir], base=run_dir))
    assert "first failure: a3-02" in text and "then a3-03 rank 2" in text
    # The restart policy reads the first finding: a killed worker is not transient.
    assert restart.attempt_of(1, run_dir).transient is False


def test_hccls_heartbeat_names_the_crimer_ahead_of_time_order(tmp_path: Path) -> None:
    # Every rank logs its own EI0002 (lmdeploy#3354's words) before the heartbeat line; the heartbeat (CANN HCCL
    # guide's example, with the simulated addresses) says a3-03's rank 9 is the one that was LOST.
    ei0002 = (
        "EI0002: [PID: 198748] 2026-12-02-10:30:01.670.614 The wait execution of the Notify register times out. "
        "Reason: The Notify register has not received the Notify record from remote rank: [unknown]."
    )
    beat = (
        "[INFO] HCCL(686,python):2026-12-02-10:30:05.191.363 [heartbeat.cc:951] [8970][TaskExecStage]"
        "[HeartbeatAbnormal]local rank [172.30.0.11/1]: crimer rank [172.30.0.13/9] status[LOST] by informer rank "
        "[172.30.0.12/5]"
    )
    nodes = {"a3-01": _ray_start(1) + "\n" + ei0002 + "\n" + beat, "a3-02": _ray_start(2) + "\n" + ei0002}
    nodes["a3-03"] = _ray_start(3)
    run_dir = _run_folder(tmp_path, "(TaskRunner pid=512) step:3 - timing_s/step:2.3", nodes)
    result = dg.diagnose([run_dir], base=run_dir)
    assert result.first_failure is not None
    assert (result.first_failure.host, result.first_failure.rank) == ("a3-03", "9")
    assert "heartbeat" in result.why_first
    assert result.findings[0].id == "hccl-heartbeat"


def test_the_earliest_cause_across_hosts_is_the_first_failure(tmp_path: Path) -> None:
    # a3-01 fails to compile a kernel at 10:00:09 (vllm-ascend#7421's line, vLLM's stamp); a3-02 ran out of device
    # memory at 10:00:03 (vllm-ascend#1127's line) and a3-01's HCCL timed out at 10:00:02 waiting (a symptom).
    compile_error = (
        "(EngineCore_DP0 pid=276) ERROR 12-02 10:00:09 [core.py:1100] [ConvertLinalgRToBinary] encounters error:"
    )
    oom = (
        "(NPURayWorkerWrapper pid=45198) ERROR 12-02 10:00:03 worker_base.py:581] RuntimeError: NPU out of memory. "
        "Tried to allocate 30.00 MiB (NPU 5; 60.96 GiB total capacity; 60.34 GiB already allocated)"
    )
    timeout = "[ERROR] HCCL(1,python):2026-12-02-10:00:02.000.001 [x.cc:1] wait socket establish timeout, role[0]"
    nodes = {"a3-01": f"{_ray_start(1)}\n{timeout}\n{compile_error}", "a3-02": f"{_ray_start(2)}\n{oom}"}
    run_dir = _run_folder(tmp_path, "(TaskRunner pid=512) 2026-12-02 09:59:00,000 step:1", nodes)
    result = dg.diagnose([run_dir], base=run_dir)
    first = result.first_failure
    assert first is not None and (first.id, first.host, first.device) == ("npu-oom", "a3-02", "5")
    assert first.time == datetime(2026, 12, 2, 10, 0, 3)
    assert result.findings[0].id == "npu-oom", "the first failure's finding leads (the launcher's last line)"
    assert [(e.host, e.id) for e in result.consequences] == [("a3-01", "hccl-connect-timeout")]


@pytest.mark.parametrize(
    ("line", "when"),
    [
        (
            "[2024-08-25 19:21:02,241 E 1111013 1111013] (raylet) node_manager.cc:3064:",
            datetime(2024, 8, 25, 19, 21, 2, 241000),
        ),  # noqa: E501
        (
            "EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times out.",
            datetime(2025, 4, 8, 18, 7, 20, 444436),
        ),  # noqa: E501 - a plog's milliseconds and microseconds
        ("ERROR 06-09 06:57:48 worker_base.py:581] RuntimeError", datetime(2026, 6, 9, 6, 57, 48)),
        ("[rank1]:[E324 13:00:25.428029551 compiler_depend.ts:574] [Rank 1]", datetime(2026, 3, 24, 13, 0, 25, 428029)),
        ("2025-07-03T14:20:51.565839352Z Traceback (most recent call last):", datetime(2025, 7, 3, 14, 20, 51, 565839)),
        ("no stamp here 99-99", None),
    ],
)
def test_time_stamps_of_every_log_kind(line: str, when: datetime | None) -> None:
    assert ff.stamp(line, 2026) == when


def test_hosts_come_from_the_run_record_and_the_node_logs(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "settings.json").write_text(json.dumps({"host": "a3-01", "cluster": "10.10.0.11:6379"}))
    (run_dir / "lost_nodes.json").write_text(json.dumps([{"host": "a3-07", "ip": "10.10.0.17"}, "odd", {"ip": 3}]))
    hosts = ff.hosts_of([run_dir], {"a3-02": ["Local node IP: 10.10.0.12"]})
    assert hosts.by_ip == {"10.10.0.11": "a3-01", "10.10.0.17": "a3-07", "10.10.0.12": "a3-02"}
    assert hosts.head == "a3-01" and hosts.name("10.9.9.9") == "10.9.9.9"
    (run_dir / "settings.json").write_text("{not json")
    assert ff.hosts_of([run_dir], {}).head is None, "a damaged record names no host, and raises nothing"
    assert ff.node_of("nodes/a3-04.log") == "a3-04"
    assert ff.node_of("/x/run/nodes/a3-05/ascend/log/run/plog/plog-1_2026.log") == "a3-05"
    assert ff.node_of("train.log") is None


def test_the_docs_page_lists_every_family_and_rule() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "diagnose.md").read_text(encoding="utf-8")
    for f in FAMILIES:
        assert f"| `{f.id}` | {f.title} |" in page, f.id
    for r in RULES:
        assert f"| `{r.id}` | `{r.family}` | {r.confidence} |" in page, r.id


def test_a_node_logs_past_is_not_this_runs_failure(tmp_path: Path) -> None:
    """A node log holds the node's whole life: an error written before the run started (node start-up, an earlier
    run) is not this run's; the run folder's node_logs_at_start.json says where its part begins. The hosts' addresses
    come from settings.json's nodes, as the cluster launch records them, not from a `ray start` line far above."""
    old_failure = "Traceback (most recent call last):\nModuleNotFoundError: No module named 'acl'"
    nodes = {f"a3-0{n}": f"{_ray_start(n)}\n{old_failure}\n" for n in (1, 2, 3)}
    run_dir = _run_folder(tmp_path, "(TaskRunner pid=512) step:3 - timing_s/step:2.3\n", nodes)
    assert dg.diagnose([run_dir]).findings, "read whole, the old error is found"
    starts = {p.name: p.stat().st_size for p in (run_dir / "nodes").iterdir()}
    (run_dir / "node_logs_at_start.json").write_text(json.dumps(starts))
    assert dg.diagnose([run_dir]).findings == (), "from the run's start on: a healthy run"
    # the worker killed during the run, with settings.json's nodes naming the hosts of the addresses
    settings = {"host": "a3-01", "nodes": [{"host": f"a3-0{n}", "ip": f"172.30.0.{10 + n}"} for n in (1, 2, 3)]}
    (run_dir / "settings.json").write_text(json.dumps(settings))
    (run_dir / "train.log").write_text(KILLED_TRAIN_LOG)
    first = dg.write_diagnosis(run_dir)
    assert first is not None and first.host == "a3-02", first
    # a node log that is now shorter than its recorded start was replaced: read whole
    (run_dir / "node_logs_at_start.json").write_text(json.dumps({"a3-01.log": 10**9}))
    (run_dir / "train.log").write_text("(TaskRunner pid=512) step:3 - timing_s/step:2.3\n")
    assert [f.host for f in dg.diagnose([run_dir]).findings] == ["a3-01"]


def test_a_node_logs_future_is_not_this_runs_failure(tmp_path: Path) -> None:
    """A run diagnosed later reads only its own window of each node log: the node's restart after the run (on the
    simulated cluster, Ray's `No module named 'acl'` at node start) or the next run's failure is not this run's. The
    launcher records the sizes at the run's end (node_logs_at_end.json) just before its own diagnosis."""
    nodes = {f"a3-0{n}": f"{_ray_start(n)}\n" for n in (1, 2, 3)}
    run_dir = _run_folder(tmp_path, "(TaskRunner pid=512) step:3 - timing_s/step:2.3\n", nodes)
    sizes = {p.name: p.stat().st_size for p in (run_dir / "nodes").iterdir()}
    (run_dir / "node_logs_at_start.json").write_text(json.dumps(dict.fromkeys(sizes, 0)))
    assert json.loads(record.record_node_log_ends(run_dir).read_text()) == sizes, "what the launcher writes at the end"
    assert dg.diagnose([run_dir]).findings == (), "a healthy run"
    later = "Traceback (most recent call last):\nModuleNotFoundError: No module named 'acl'\n"
    with (run_dir / "nodes" / "a3-02.log").open("a") as fh:
        fh.write(later)
    assert dg.diagnose([run_dir]).findings == (), "what a3-02 wrote after the run ended is not read"
    (run_dir / "node_logs_at_end.json").unlink()
    assert [f.host for f in dg.diagnose([run_dir]).findings] == ["a3-02"], "no end recorded: read to the end"
    # an end beyond the file (the log was replaced since) or before the start is no window: the file is read whole
    for start, end in ((0, 10**9), (sizes["a3-02.log"], 1)):
        (run_dir / "node_logs_at_start.json").write_text(json.dumps({"a3-02.log": start}))
        (run_dir / "node_logs_at_end.json").write_text(json.dumps({"a3-02.log": end}))
        assert [f.host for f in dg.diagnose([run_dir]).findings] == ["a3-02"], (start, end)


# The simulated cluster's real training with a reward function that does not compile (a file written with literal
# "\n"s): verl's RewardLoopWorker on a3-03 fails in its creation task, and only then the TaskRunner on the head sees
# the dead actor. No line has a time stamp: the log's own order says which came first.
BROKEN_REWARD_LOG = """\
(TaskRunner pid=935) step:0 - starting
(RewardLoopWorker pid=469, ip=172.30.0.13) Exception raised in creation task: The actor died because of an error raised in its creation task, ray::reward_loop_worker_0:RewardLoopWorker.__init__() (pid=469, ip=172.30.0.13)
(RewardLoopWorker pid=469, ip=172.30.0.13) Traceback (most recent call last):
(RewardLoopWorker pid=469, ip=172.30.0.13)   File "/mnt/shared/data/e2e-faults/nan_reward.py", line 1
(RewardLoopWorker pid=469, ip=172.30.0.13) SyntaxError: unexpected character after line continuation character
(RewardLoopWorker pid=469, ip=172.30.0.13) RuntimeError: Error loading module from module_path='/mnt/shared/data/e2e-faults/nan_reward.py'
Traceback (most recent call last):
ray.exceptions.RayTaskError(ActorDiedError): ray::TaskRunner.run() (pid=935, ip=172.30.0.11, actor_id=7a95)
ray.exceptions.ActorDiedError: The actor died because of an error raised in its creation task, ray::reward_loop_worker_0:RewardLoopWorker.__init__() (pid=469, ip=172.30.0.13)
"""  # noqa: E501


def test_untimed_errors_keep_their_logs_order_and_user_code_is_its_own_family(tmp_path: Path) -> None:
    nodes = {f"a3-0{n}": _ray_start(n) for n in (1, 2, 3)}
    run_dir = _run_folder(tmp_path, BROKEN_REWARD_LOG, nodes)
    (run_dir / "node_logs_at_start.json").write_text(json.dumps({}))
    result = dg.diagnose([run_dir])
    first = result.first_failure
    assert first is not None and first.host == "a3-03", first
    assert first.family == "code-config" and "SyntaxError" in first.excerpt, first
    assert result.findings[0].family == "code-config"
    assert dg.write_diagnosis(run_dir) is not None
    attempt = restart.attempt_of(1, run_dir)
    assert attempt.failure == "exception-type" and attempt.transient is False, "the same launch fails the same way"


# The first failure across hosts and ranks from the prefixes each tool puts before a line. Every line below is made up
# in the form the named tool prints; the hosts, ranks and times are invented.
def _first(tmp_path: Path, text: str) -> ff.Event:
    result = dg.diagnose([_write(tmp_path / "train.log", text)])
    assert result.first_failure is not None, text
    return result.first_failure


def test_the_earliest_rank_by_torchs_glog_stamps_fails_first(tmp_path: Path) -> None:
    text = (
        "[rank0]:[E419 10:42:31.100000 11 ProcessGroupNCCL.cpp:1] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.\n"
        "[rank5]:[E419 10:42:28.500000 15 x.cpp:1] RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB\n"
        "[rank2]:[E419 10:42:29.000000 12 x.cpp:1] RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB\n"
    )
    first = _first(tmp_path, text)
    assert first.rank == "5" and first.family == "device-memory", first
    assert ff.rank_of("[E419 10:42:31.1 1 ProcessGroupNCCL.cpp:1] [Rank 7] Watchdog caught") == "7"
    assert ff.rank_of("[1,3]<stderr>:RuntimeError: boom") == "3", "Open MPI's --tag-output"


def test_plog_microseconds_order_two_lines_of_one_millisecond(tmp_path: Path) -> None:
    text = (
        "[ERROR] RUNTIME(2,python3):2026-03-01-08:00:00.125.900 [stream.cc:1] (PID:2, Device:1, RankID:1) "
        "rtStreamSynchronize failed, runtime result = 507018.\n"
        "[ERROR] RUNTIME(1,python3):2026-03-01-08:00:00.125.300 [stream.cc:1] (PID:1, Device:0, RankID:0) "
        "rtStreamSynchronize failed, runtime result = 507018.\n"
    )
    first = _first(tmp_path, text)
    assert first.rank == "0" and first.time == datetime(2026, 3, 1, 8, 0, 0, 125300)


@pytest.mark.parametrize(
    ("line", "host"),
    [
        ("npu-node-3: 2026-02-01 10:00:05,000 ERROR RuntimeError: NPU out of memory.", "npu-node-3"),  # pdsh/clush
        ("worker2.cluster.local  | 2026-02-01 10:00:05,000 RuntimeError: NPU out of memory.", "worker2.cluster.local"),
        ("10.1.2.3: 2026-02-01 10:00:05,000 RuntimeError: NPU out of memory.", "10.1.2.3"),
        ("gpu-7:4242:4300 [3] NCCL WARN NET/IB : Got completion from peer 10.1.2.4", "gpu-7"),  # NCCL's own prefix
        ("`(WorkerDict pid=9, ip=10.1.2.5) RuntimeError: NPU out of memory.", "10.1.2.5"),  # pasted in back-quotes
        ("RuntimeError: NPU out of memory.", None),
        ("train.py: error: unrecognized arguments: --x", None),
        ("step10: loss 1.0", "step10"),  # a host name in form: the tools' prefixes are read only on error lines
    ],
)
def test_a_fan_out_tools_host_prefix_names_the_host(line: str, host: str | None) -> None:
    assert ff.line_host(line, None, ff.Hosts({}), False) == host


def test_the_earliest_host_across_pdsh_prefixes_fails_first(tmp_path: Path) -> None:
    text = (
        "a3-01: 2026-02-01 10:00:09,000 [ERROR] Watchdog caught collective operation timeout: WorkHCCL(SeqNum=3)\n"
        "a3-02: 2026-02-01 10:00:07,500 RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB\n"
        "a3-01: 2026-02-01 10:00:08,000 RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB\n"
    )
    first = _first(tmp_path, text)
    assert first.host == "a3-02", first


def test_the_ranks_that_never_connected_fail_first(tmp_path: Path) -> None:
    # HCCL's root-info topology detection: the server lists the agents (ranks) that never reached it; the ranks that
    # did connect time out waiting. With no error of their own, the unconnected ranks are the first failure.
    text = (
        "[ERROR] HCCL(10,train):2026-02-01-10:00:00.000.100 [topoinfo_exchange_server.cc:1] [10][InitGroupStage]"
        "[RanktableDetect]topo exchange server get socket timeout! timeout[120 s]\n"
        "[ERROR] HCCL(10,train):2026-02-01-10:00:00.000.200 [topoinfo_exchange_base.cc:1] [10][InitGroupStage]"
        '[RanktableDetect] TopoDetect ERROR occur !!! fault_type[1], fault_info["Failed to connect agent[2,6,]"]\n'
    )
    first = _first(tmp_path, text)
    assert (first.host, first.rank) == (None, "2,6") and "ranks 2,6" in first.where()
    # one of them logged its own error: that is the first failure
    own = "[ERROR] 2026-02-01-09:58:00 (PID:7, Device:6, RankID:6) ERR02200 DIST call hccl api failed.\n"
    own += "EJ0001: 2026-02-01-09:58:00 HCCP init failed.\n"
    first = _first(tmp_path, text + own)
    assert first.rank == "6" and first.family == "communication", first
    assert codes.unconnected_ranks("[Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 30000 ms") == "1,3"
    assert codes.unconnected_ranks("List of unconnected ranks: [4, 5]") == "4,5"
    assert codes.unconnected_ranks("all 8 ranks connected") is None
