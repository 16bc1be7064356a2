"""`verl-recipe diagnose`'s rules from the documented taxonomies (diagnosis/taxonomy.py): each rule names a short
made-up text in the form of the real tool's output, and leaves a benign near-miss alone; wrappers are read through to
the error under them; a traceback's place decides a generic type's family; every pattern stays linear on long lines.

Every line here is made up (no corpus text, no thread's text), in the form the named tool prints.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from verl_recipe.diagnosis import codes
from verl_recipe.diagnosis import diagnose as dg
from verl_recipe.diagnosis import events as ev
from verl_recipe.diagnosis import families as fam
from verl_recipe.diagnosis import taxonomy as tax
from verl_recipe.diagnosis.signatures import BY_ID

# (rule id, family, a made-up text it names first, a benign near-miss it must not name)
CASES: list[tuple[str, str, str, str]] = [
    (
        "hydra-override",
        "code-config",
        "Could not override 'trainer.bogus_key'.\nKey 'bogus_key' is not in struct",
        "overriding trainer.total_epochs=3 as asked",
    ),
    (
        "argparse-args",
        "code-config",
        "train.py: error: unrecognized arguments: --no-such-flag",
        "usage: train.py [-h] [--lr LR]",
    ),
    (
        "overlong-prompt",
        "data",
        "ValueError: Prompt length of 9000 is longer than the maximum model length of 4096.",
        "prompt length 900 of 4096 allowed",
    ),
    (
        "state-dict-mismatch",
        "checkpoint",
        'RuntimeError: Error(s) in loading state_dict for ToyModel:\n\tMissing key(s) in state_dict: "w1".',
        "loading state dict for ToyModel took 3 s",
    ),
    (
        "ckpt-file-missing",
        "checkpoint",
        "FileNotFoundError: [Errno 2] No such file or directory: '/ckpt/run1/global_step_40/actor/model.pt'",
        "saved /ckpt/run1/global_step_40/actor/model.pt",
    ),
    (
        "device-oom",
        "device-memory",
        "host1:12:34 [3] alloc.cc:10 NCCL WARN Cuda failure 2 'out of memory'",
        "device memory in use: 30 GiB of 64 GiB",
    ),
    (
        "ray-oom-doc",
        "host-memory",
        "Refer to https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html to address it.",
        "memory usage of the node is 40%",
    ),
    (
        "ray-gcs-unreachable",
        "ray-lost",
        "RuntimeError: Failed to connect to GCS at address 10.0.0.9:6379 within 60 seconds.",
        "Connected to Ray cluster at 10.0.0.9:6379",
    ),
    (
        "store-connect",
        "communication",
        "[E socket.cpp:1] [c10d] The client socket has timed out after 30s while trying to connect to (10.0.0.9, 29500).",  # noqa: E501
        "[I socket.cpp:1] [c10d] connected to (10.0.0.9, 29500)",
    ),
    (
        "hccl-api",
        "communication",
        "RuntimeError: init:x.cpp:1 HCCL function error: HcclCommInitRootInfo(n, &id, r, &c), error code is 11",
        "HCCL communicator created for 16 ranks",
    ),
    (
        "hccl-link-init",
        "communication",
        "[ERROR] HCCL(1,python):2026-01-02-03:04:05.000.001 [hccl_socket.cc:1] [1][HcclSocket][Listen] socket "
        "type[1], listen on ip[10.1.0.7] and specific port[16666] fail.",
        "[INFO] HCCL(1,python):2026-01-02-03:04:05.000.001 listening on port 16666",
    ),
    (
        "hccl-ranks-missing",
        "communication",
        "[ERROR] HCCL(1,t):2026-01-02-03:04:05.000.001 [topo.cc:1] topo exchange server get socket timeout! "
        "timeout[120 s]",
        "topo exchange server started with 8 ranks",
    ),
    (
        "net-completion-error",
        "communication",
        "h1:1:2 [0] net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with status=12",
        "h1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE",
    ),
    (
        "device-exception",
        "kernel",
        "EZ9999: The error from device(chipId:0, dieId:0), there is an exception of aivec error, core id is 3",
        "aicore utilisation 80%",
    ),
    (
        "op-binary-missing",
        "image-version",
        "EZ9999: Inner Error!\n        Op Foo does not has any binary.",
        "Op Foo compiled to a binary in 3 s",
    ),
    (
        "cann-python-env",
        "image-version",
        "EC0010: Failed to import Python module [ModuleNotFoundError: No module named 'te'].",
        "imported Python module te from /usr/local/Ascend",
    ),
    (
        "acl-graph-api",
        "rollout",
        "Exception: Capture cuda graph failed: end:x.cpp:1 NPU function error: AclmdlRICaptureEnd(s, &m), "
        "error code is 107033",
        "captured 12 graphs in 30 s",
    ),
    (
        "device-visibility",
        "code-config",
        "The argument is invalid.Reason: Set visible device failed, invalid device=3, input visible devices:0",
        "visible devices: 0,1,2,3",
    ),
    (
        "module-version",
        "image-version",
        "AttributeError: module 'torch_npu.npu' has no attribute 'new_api'",
        "torch_npu.npu has attribute current_device",
    ),
    (
        "dataset-load",
        "data",
        "datasets.exceptions.DataFilesNotFoundError: Unable to find '/data/gsm8k/train.parquet'",
        "read 7473 rows from /data/gsm8k/train.parquet",
    ),
    (
        "host-enomem",
        "host-memory",
        "OSError: [Errno 12] Cannot allocate memory",
        "allocated 12 GiB of host memory for the offload",
    ),
    (
        "sigkill",
        "host-memory",
        "torch.distributed.elastic.multiprocessing.api: Signal 9 (SIGKILL) received by PID 4242",
        "sent SIGTERM to PID 4242 at the end of the run",
    ),
    (
        "device-in-use",
        "device-busy",
        "OSError: [Errno 16] Device or resource busy: '/dev/davinci3'",
        "device 3 is free",
    ),
    (
        "vllm-engine-dead",
        "rollout",
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
        "EngineCore started in 20 s",
    ),
    (
        "aclnn-call",
        "kernel",
        "RuntimeError: call aclnnFoo failed, detail: see the plog",
        "aclnnFoo took 3 ms",
    ),
    (
        "host-shm-exhausted",
        "host-memory",
        "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that dataloader's "
        "workers are out of shared memory. Please try to raise your shared memory limit.",
        "shm-size=16g given to the container; DataLoader workers: 4",
    ),
    (
        "host-shm-exhausted",
        "host-memory",
        "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 37.2 GiB for an array with shape (9, 9)",
        "allocated 37.2 GiB of pinned buffers for the array cache",
    ),
    (
        "weights-file-unreadable",
        "checkpoint",
        "safetensors_rust.SafetensorError: Error while deserializing header: InvalidHeaderDeserialization",
        "loaded 4 safetensors shards in 12.0 s",
    ),
    (
        "weights-file-unreadable",
        "checkpoint",
        "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory",
        "PytorchStreamWriter wrote 3 records to model.pt",
    ),
    (
        "dataset-format",
        "data",
        "pyarrow.lib.ArrowInvalid: Could not open Parquet input source 'train.parquet': Parquet magic bytes not "
        "found in footer.",
        "read 3 parquet files (train.parquet, val.parquet, test.parquet) with pyarrow 17.0",
    ),
    (
        "dataset-format",
        "data",
        "KeyError: Caught KeyError in DataLoader worker process 3.",
        "DataLoader worker process 3 started",
    ),
    (
        "image-loader-model-type",
        "image-version",
        "OSError: libfoo_npu.so.8: cannot open shared object file: No such file or directory",
        "loaded shared object libfoo_npu.so.8 from /usr/local/lib",
    ),
    (
        "image-loader-model-type",
        "image-version",
        "ValueError: The checkpoint you are trying to load has model type `newmodel` but Transformers does not "
        "recognize this architecture.",
        "Transformers 4.57.1 recognizes the architecture newmodel",
    ),
    (
        "vllm-engine-dead",
        "rollout",
        "(EngineCore_DP0 pid=77) ERROR 01-02 03:04:05 [core.py:10] EngineCore failed to start.",
        "(EngineCore_DP0 pid=77) INFO 01-02 03:04:05 [core.py:10] EngineCore started in 3.1 s",
    ),
    (
        "device-in-use",
        "device-busy",
        "RuntimeError: npu init failed: the device is being used by another process (DRV_ERROR_BUSY)",
        "device 3 used 1.2 GiB at step 10",
    ),
    (
        "ray-task-error",
        "ray-lost",
        "ray.exceptions.RayTaskError(ActorDiedError): ray::Runner.run() (pid=12, ip=10.0.0.1, actor_id=ab)",
        "RayTaskError is re-raised by ray.get in the caller (docs)",
    ),
    (
        "acl-setup-internal",
        "image-version",
        "RuntimeError: InitDevice:x.cpp:1 NPU function error: aclrtSetDevice(0), error code is 500002",
        "NPU function error: aclrtSetDevice(0) retried and succeeded, error code is 0",
    ),
]


def _log(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "train.log"
    path.write_text(text + "\n", encoding="utf-8")
    return path


def test_every_rule_has_a_case_and_is_complete() -> None:
    assert {c[0] for c in CASES} | {"ray-creation-task"} == {r.id for r in tax.RULES}
    for r in tax.RULES:
        assert r.family in fam.BY_FAMILY and r.confidence in ("medium", "low") and r.cause and r.basis, r.id
        assert r.fix and "\n" not in r.fix and "\n" not in r.cause, r.id
        assert all(n == n.lower() for n in r.needles), r.id
        assert r.id not in BY_ID and r.id not in {f.id for f in fam.RULES}, r.id


@pytest.mark.parametrize(("rule_id", "family", "text", "benign"), CASES, ids=[c[0] for c in CASES])
def test_a_rule_names_its_text_and_not_its_near_miss(
    tmp_path: Path, rule_id: str, family: str, text: str, benign: str
) -> None:
    found = dg.diagnose([_log(tmp_path, text)]).findings
    assert found and found[0].family == family, (rule_id, found)
    assert any(f.id == rule_id for f in found), (rule_id, [f.id for f in found])
    rule = next(r for r in tax.RULES if r.id == rule_id)
    assert not rule.regex.search(benign), rule_id
    assert not any(f.id == rule_id for f in dg.diagnose([_log(tmp_path, benign)]).findings)


def test_a_general_finding_carries_its_rules_own_fix(tmp_path: Path) -> None:
    (finding,) = dg.diagnose([_log(tmp_path, "Could not override 'trainer.bogus'.")]).findings
    assert "--cfg job" in finding.fix and finding.confidence == "medium"


@pytest.mark.parametrize(
    ("line", "family"),
    [
        ("E39999: Inner Error!", "kernel"),  # AI CPU
        ("E69999: Inner Error!", "kernel"),  # operator tiling
        ("EH9999: wait for compute device to finish failed", "kernel"),
        ("EI9999: something in HCCL", "communication"),
        ("EC0010: Failed to import", "image-version"),
    ],
)
def test_cann_codes_by_class(line: str, family: str) -> None:
    code = codes.cann_code(line)
    assert code is not None and code[1] == family
    assert codes.cann_code("lr 1.5E10000 of 0xE39999 and abcE69999") is None, "not a code: inside a word or number"


def test_acl_and_torch_npu_codes_by_class() -> None:
    assert codes.acl_code("rtSync failed, runtime result = 507018.") == (
        "507018",
        "kernel",
        "a task failed on the device (aclError 507XXX: driver or execution)",
    )
    assert codes.acl_code("aclrtMalloc error code is 207001")[1] == "device-memory"  # type: ignore[index]
    assert codes.acl_code("open device failed, error code is 107001")[1] == "code-config"  # type: ignore[index]
    assert codes.acl_code("took 507018 ms") is None and codes.acl_code("error code is 100000") is None
    assert codes.torch_npu_code("[ERROR] (PID:1, Device:0, RankID:0) ERR02200 DIST call hccl api failed.")[1] == (  # type: ignore[index]
        "communication"
    )
    assert codes.torch_npu_code("ERR00100 PTA call acl api failed") is None, "an ACL call: its own code decides"
    assert codes.hccl_result("HCCL function error: HcclGetRootInfo(&id), error code is 7") == "HCCL_E_UNAVAIL"


def test_a_wrapper_is_read_through_to_the_error_under_it(tmp_path: Path) -> None:
    text = (
        "RuntimeError: x:1 HCCL function error: HcclGetRootInfo(&id), error code is 4\n"
        "[ERROR] (PID:1, Device:0, RankID:0) ERR02200 DIST call hccl api failed.\n"
        "EC0010: Failed to import Python module [ModuleNotFoundError: No module named 'tbe.x'].\n"
    )
    result = dg.diagnose([_log(tmp_path, text)])
    assert result.first_failure is not None and result.first_failure.id == "cann-python-env", result.first_failure
    assert result.findings[0].family == "image-version"
    assert "wrapped" in result.why_first
    alone = dg.diagnose([_log(tmp_path, text.splitlines()[0])])
    assert alone.findings[0].family == "communication" and "HCCL_E_INTERNAL" in alone.findings[0].cause


def test_a_python_chain_keeps_its_root(tmp_path: Path) -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/app/verl/utils/dataset/rl_dataset.py", line 9, in __getitem__\n'
        "KeyError: 'prompt'\n"
        "\n"
        "The above exception was the direct cause of the following exception:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/app/verl/trainer/main_ppo.py", line 3, in run\n'
        "RuntimeError: the trainer stopped\n"
    )
    result = dg.diagnose([_log(tmp_path, text)])
    assert result.findings[0].family == "data" and "KeyError" in result.findings[0].excerpt


@pytest.mark.parametrize(
    ("frames", "exception", "family"),
    [
        (['/app/megatron/training/checkpointing.py", line 9, in load_checkpoint'], "KeyError: 'args'", "checkpoint"),
        (['/app/verl/utils/dataset/rl_dataset.py", line 9, in __getitem__'], "AttributeError: x", "data"),
        (['/site/reward_fn.py", line 9, in compute_score'], "IndexError: list index", "code-config"),
        (['/site/vllm_ascend/worker/model_runner.py", line 9, in execute'], "RuntimeError: boom", "rollout"),
        (['/site/torch/utils/checkpoint.py", line 9, in forward'], "ValueError: bad", "code-config"),
    ],
)
def test_a_generic_exception_is_placed_by_where_it_was_raised(
    tmp_path: Path, frames: list[str], exception: str, family: str
) -> None:
    lines = ["(WorkerDict pid=1) Traceback (most recent call last):"]
    lines += [f'(WorkerDict pid=1)   File "{f}' for f in frames] + [f"(WorkerDict pid=1) {exception}"]
    found = dg.diagnose([_log(tmp_path, "\n".join(lines))]).findings
    assert found and found[0].family == family, found


def test_a_forwarded_exception_is_read_after_its_prefixes() -> None:
    line = "\x1b[36m(EngineCore_DP0 pid=2)\x1b[0m ERROR 03-03 10:59:11 [core.py:938] TimeoutError"
    assert codes.exception_at(line) == ("TimeoutError", "TimeoutError")
    assert codes.exception_at("[rank3]: ray.exceptions.RayTaskError(KeyError): boom") == (
        "ray.exceptions.RayTaskError",
        "KeyError",
    )
    assert codes.exception_at("raise TimeoutError") is None


def test_an_hccl_link_error_points_to_its_place(tmp_path: Path) -> None:
    text = (
        "[ERROR] HCCL(9,python):2026-01-02-03:04:05.000.001 [t.cc:1] Transport init error. Reason: [Create][DestLink]"
        "Create Dest error! creakLink para:rank[1]-localIpAddr[10.0.0.1], dst_rank[9]-remote_ip_addr[10.0.0.2]\n"
    )
    first = dg.diagnose([_log(tmp_path, text)]).first_failure
    assert first is not None and (first.host, first.rank) == ("10.0.0.2", "9")
    assert codes.pointed_place("listen on ip[10.0.0.5] and port[1] fail") == ("10.0.0.5", None)


@pytest.mark.parametrize(
    "line",
    [
        "h1:1:1 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file",
        "[2026-01-02 03:04:05,678 W 12 34] node_manager.cc:1: this node can be marked as dead mistakenly",
    ],
)
def test_trace_lines_stay_quiet(tmp_path: Path, line: str) -> None:
    assert fam.is_noise(line)
    assert dg.diagnose([_log(tmp_path, line)]).findings == ()


# Pathological lines: long runs of the characters the patterns look for, near each rule's literal text.
NEAR = [
    "Could not override '",
    "Key '",
    "No such file or directory: '",
    "CUDA ",
    "listen on ip[",
    "[HcclSocket][Listen]",
    "ranktable",
    "NCCL error in:",
    "HCCL function error: ",
    "dst_rank[1]",
    "remote_ip_addr[",
    "ModuleNotFoundError: No module named '",
    "ImportError: ",
    "(x) ",
    "[rank1]: ",
    "ERROR 01-02 03:04:05 [",
    'File "',
    "E1",
    "error code is ",
    "ERR0",
    "call aclnn",
    "Cannot parse json for config file",
    "size mismatch for ",
]
FILLERS = ["a", "'", "(", "[", " ", "1", ".", "_", "/", "E", "\\", ":", "x1"]


@settings(max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(
    near=st.sampled_from(NEAR),
    filler=st.sampled_from(FILLERS),
    tail=st.sampled_from(["", "'", "]", " fail", ")", "\n"]),
)
def test_rules_stay_linear_on_pathological_lines(near: str, filler: str, tail: str) -> None:
    line = near + filler * (100_000 // len(filler)) + tail
    lines = [line, near * 2000, line]
    start = time.monotonic()
    for rule in ev.GENERAL_RULES:
        rule.regex.search(line)
    codes.cann_code(line), codes.acl_code(line), codes.torch_npu_code(line), codes.hccl_result(line)
    codes.pointed_place(line), codes.exception_family(lines, 2), fam.is_noise(line)
    assert time.monotonic() - start < 5.0, (near, filler)


def test_a_log_of_pathological_lines_is_diagnosed_in_bounded_time(tmp_path: Path) -> None:
    lines = [n + "x" * 50_000 for n in NEAR] + ["EI0001 " * 20_000, 'File "' * 20_000, "(a) " * 30_000]
    path = _log(tmp_path, "\n".join(lines * 3))
    start = time.monotonic()
    dg.diagnose([path])
    assert time.monotonic() - start < 20.0


def test_driver_codes_by_meaning(tmp_path: Path) -> None:
    """drvError_t (the NPU driver's ascend_hal.h): only codes whose meaning names a family are read."""
    assert codes.drv_code("[ERROR] X(1,python3):2026-01-02-03:04:05.000.001 get info failed, drvErr=87.")[1] == (  # type: ignore[index]
        "device-busy"
    )
    assert codes.drv_code("halOpen failed, drvRetCode=13")[1] == "device-busy"  # type: ignore[index]
    assert codes.drv_code("device malloc failed, drvRetCode=6")[1] == "device-memory"  # type: ignore[index]
    assert codes.drv_code("drvErr=0") is None and codes.drv_code("drvErr=8") is None, "success, a parameter"
    line = "[ERROR] TRACE(7,python3):2026-01-02-03:04:05.000.001 [api.c:5](tid:7) query platform failed, drvErr=87."
    found = dg.diagnose([_log(tmp_path, line)]).findings
    assert found and found[0].family == "device-busy" and found[0].id == "drv-code"
    assert dg.diagnose([_log(tmp_path, "[INFO] TRACE(7,python3): platform queried, drvErr=0")]).findings == ()


def test_a_generic_exception_yields_to_a_specific_error_beside_it(tmp_path: Path) -> None:
    """A TypeError or AssertionError read by its type alone says less than a rule or a code on another line."""
    text = (
        "Traceback (most recent call last):\n"
        '  File "/app/verl/workers/fsdp_workers.py", line 9, in init_model\n'
        "AssertionError: the engine did not start\n"
        "EZ9999: Inner Error!\n"
        "[ERROR] 2026-01-02-03:04:05 (PID:1, Device:0, RankID:0) ERR01100 OPS call acl api failed\n"
    )
    result = dg.diagnose([_log(tmp_path, text)])
    assert result.findings[0].family == "kernel", result.findings
    alone = dg.diagnose([_log(tmp_path, "\n".join(text.splitlines()[:3]))])
    assert alone.findings[0].family == "code-config", "alone, the type is all there is"
    driver_first = "TypeError: 'NoneType' object is not subscriptable\n"
    driver_first += "(WorkerDict pid=3) RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB\n"
    assert dg.diagnose([_log(tmp_path, driver_first)]).findings[0].family == "device-memory"
    stamped = (
        "2026-01-02 03:04:05,000 step 3 failed:\nTypeError: bad value\n2026-01-02 03:09:05,000 NPU out of memory\n"
    )
    assert dg.diagnose([_log(tmp_path, stamped)]).findings[0].family == "code-config", "a stamp says which came first"


def test_an_exception_is_read_through_its_own_message_only(tmp_path: Path) -> None:
    """torch_npu prints CANN's explanation under "RuntimeError: ..."; the next traceback is not part of it."""
    text = (
        "Traceback (most recent call last):\n"
        '  File "/site/vllm_ascend/worker/model_runner.py", line 9, in execute\n'
        "RuntimeError: x.cpp:1 NPU function error: call aclnnFoo failed, error code is 561000\n"
        "[ERROR] 2026-01-02-03:04:05 (PID:1, Device:0, RankID:0) ERR00100 PTA call acl api failed\n"
        "EZ1001: the input shape of aclnnFoo is not supported\n"
    )
    result = dg.diagnose([_log(tmp_path, text)])
    assert result.first_failure is not None and result.first_failure.family == "kernel", result.first_failure
    assert codes.message_reach(text.splitlines(), 2) == 2
    chained = text.splitlines()[:3] + ["", "During handling of the above exception, another exception occurred:"]
    assert codes.message_reach(chained, 2) == 1


def test_an_actors_constructor_error_is_read_through_its_traceback(tmp_path: Path) -> None:
    """Ray prints the constructor's whole traceback under "error raised in its creation task"."""
    frames = [f'  File "/app/pkg/mod{k}.py", line {k}, in f{k}\n    g{k}()' for k in range(12)]
    text = (
        "ray.exceptions.ActorDiedError: The actor died because of an error raised in its creation task, "
        "ray::WorkerDict.__init__() (pid=1, ip=10.0.0.2)\n" + "\n".join(frames) + "\n"
        "OSError: libascend_hal.so: cannot open shared object file: No such file or directory\n"
    )
    result = dg.diagnose([_log(tmp_path, text)])
    assert result.findings[0].family == "image-version", result.findings


# Lines every healthy run of verl prints on a host without libnuma or with a model verl's MFU table lacks (seen in the
# simulated cluster's train.log): a library named "cannot open shared object file" in a warning is not the failure.
HEALTHY = "\n".join(
    [
        "(WorkerDict pid=772, ip=172.30.1.12) Warning: Failed to set NUMA affinity: libnuma.so: cannot open shared "
        "object file: No such file or directory",
        "(WorkerDict pid=461, ip=172.30.1.13) Only support config type of dict_keys(['qwen2', 'qwen3_moe']), but got "
        "qwen3_5_moe. MFU will always be zero.",
        '(AgentLoopWorker pid=565, ip=172.30.1.13)   warnings.warn(f"Failed to create processor: {e}. This may affect '
        'multimodal processing", stacklevel=1)',
        "(TaskRunner pid=871) step:3 - val-core/openai/gsm8k/acc/mean@1:0.0642 - critic/score/mean:0.07",
        # as the job ends, its data loader's workers are killed: the run exits 0
        "(TaskRunner pid=1632) RuntimeError: DataLoader worker (pid 1788) is killed by signal: Killed. ",
    ]
)


def test_a_healthy_runs_warnings_stay_quiet(tmp_path: Path) -> None:
    assert not dg.diagnose([_log(tmp_path, HEALTHY)]).findings
    # the same library missing as an error, not a warning, is still found
    error = "ImportError: libnuma.so: cannot open shared object file: No such file or directory"
    (first, *_) = dg.diagnose([_log(tmp_path, error)]).findings
    assert first.family == "image-version"


def test_a_ray_task_error_is_read_through_to_the_dead_worker_on_its_own_host(tmp_path: Path) -> None:
    """Ray's wrapper in the caller (the driver's TaskRunner on the head) names the caller's address; the dead actor's
    own address is in the ActorDiedError printed under the remote traceback: that host failed first."""
    frames = "\n".join(
        f'  File "/opt/venv/lib/python3.11/site-packages/verl/x{k}.py", line {k}, in f' for k in range(14)
    )
    text = (
        "ray.exceptions.RayTaskError(ActorDiedError): ray::TaskRunner.run() (pid=1274, ip=10.0.0.1, actor_id=ab)\n"
        f"{frames}\n"
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
        "\tclass_name: WorkerDict\n\tpid: 679\n\tip: 10.0.0.2\n"
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR"
    )
    run = tmp_path / "run"
    run.mkdir()
    (run / "settings.json").write_text(
        '{"nodes": [{"host": "a3-01", "ip": "10.0.0.1"}, {"host": "a3-02", "ip": "10.0.0.2"}]}'
    )
    (run / "train.log").write_text(text + "\n")
    first = dg.diagnose([run]).first_failure
    assert first is not None and first.host == "a3-02", first
