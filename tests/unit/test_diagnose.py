"""`verl-recipe diagnose`: every signature finds a verbatim excerpt of the public thread it was taken from.

Each excerpt below is copied unchanged from the issue or pull request named beside it (a few lines, or the thread's
title where the title is the log line). Tests that need a line no thread has say so and use a made-up line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from verl_recipe.diagnosis import diagnose as dg
from verl_recipe.diagnosis import logs as dglogs
from verl_recipe.diagnosis.families import BY_FAMILY
from verl_recipe.diagnosis.signatures import BY_ID, SIGNATURES

from .helpers import run

# (signature id, source, verbatim excerpt)
EXCERPTS: list[tuple[str, str, str]] = [
    (
        "image-libascend-hal",
        "https://github.com/opendatalab/MinerU/issues/3252",
        "使用cpu加速转换pdf文件，报错libascend_hal.so: cannot open shared object file: no such file or directory",
    ),
    (
        "image-undefined-symbol",
        "https://github.com/vllm-project/vllm-ascend/issues/117",
        """    from torch_npu import _C
ImportError: /usr/local/python3.10.14/lib/python3.10/site-packages/torch_npu/lib/libtorch_npu.so: undefined symbol: _ZN3atb15CreateOperationINS_5infer14GroupTopkParamEEEiRKT_PPNS_9OperationE""",  # noqa: E501
    ),
    (
        "image-undefined-symbol",
        "https://github.com/Ascend/pytorch/issues/99",
        """     ctypes.CDLL(path)
   File "/usr/local/python3/lib/python3.11/ctypes/__init__.py", line 376, in __init__
     self._handle = _dlopen(self._name, mode)
                    ^^^^^^^^^^^^^^^^^^^^^^^^^
 OSError: /home/mtp/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib/libtbe_adapter.so: undefined symbol: _ZN3Mki2DlC1ERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEb""",  # noqa: E501
    ),
    (
        "image-no-decorator",
        "https://github.com/hiyouga/LlamaFactory/issues/10333",
        "qwen3.5-27B微调报错;no modules named 'decorator'",
    ),
    (
        "image-no-decorator",
        "https://github.com/Azure/azure-cli/issues/32595",
        """python3/dist-packages/fabric/connection.py, ln 10, in <module>
    from decorator import decorator
ModuleNotFoundError: No module named 'decorator'""",
    ),
    (
        "device-held",
        "https://github.com/vllm-project/vllm-ascend/issues/2698",
        """DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)
dcmi module initialize failed. ret is -8005""",
    ),
    (
        "device-held",
        "https://github.com/Ascend/cann-container-image/issues/46",
        """root@aa6890a14c34:/# npu-smi info
DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)
dcmi model initialized failed, because the device is used. ret is -8020""",
    ),
    (
        "ray-too-few-devices",
        "https://github.com/verl-project/verl/issues/2515",
        "ValueError: Total available GPUs 8.0 is less than total desired GPUs 16",
    ),
    (
        "vllm-mm-cache",
        "https://github.com/vllm-project/vllm/issues/46354",
        "[Bug]: AssertionError: Expected a cached item for mm_hash",
    ),
    (
        "triton-compile",
        "https://github.com/vllm-project/vllm-ascend/issues/7421",
        """(EngineCore_DP0 pid=276) ERROR 03-18 08:08:14 [core.py:1100]     raise MLIRCompilationError(stage_name, error_detail)
(EngineCore_DP0 pid=276) ERROR 03-18 08:08:14 [core.py:1100] triton.compiler.errors.MLIRCompilationError: 
(EngineCore_DP0 pid=276) ERROR 03-18 08:08:14 [core.py:1100] ///------------------[ERROR][Triton][BEG]------------------
(EngineCore_DP0 pid=276) ERROR 03-18 08:08:14 [core.py:1100] [ConvertLinalgRToBinary] encounters error:
(EngineCore_DP0 pid=276) ERROR 03-18 08:08:14 [core.py:1100] bishengir-compile: for the --target option: Cannot find option named 'Ascend310P1'!""",  # noqa: E501, W291
    ),
    (
        "triton-compile",
        "https://github.com/sgl-project/sglang/pull/20918",
        """(SGLangEngine pid=3061557)   File "/root/anaconda3/envs/_slime_/lib/python3.11/site-packages/triton/backends/ascend/compiler.py", line 778, in <lambda>
(SGLangEngine pid=3061557)     lambda src, metadata: linalg_to_bin_enable_npu_compile_A2_A3(""",  # noqa: E501
    ),
    (
        "npu-oom",
        "https://github.com/vllm-project/vllm-ascend/issues/1127",
        """(NPURayWorkerWrapper pid=45198) ERROR 06-09 06:57:48 worker_base.py:581] RuntimeError: NPU out of memory. Tried to allocate 30.00 MiB (NPU 5; 60.96 GiB total capacity; 60.34 GiB already allocated; 60.34 GiB current active; 15.87 MiB free; 60.60 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.
ERROR 06-09 06:57:49 worker_base.py:581] Error executing method 'load_model'. This might cause deadlock in distributed execution.""",  # noqa: E501
    ),
    (
        "ray-oom-killer",
        "https://github.com/jchengai/planTF/issues/28",
        "(raylet) [2024-08-25 19:21:02,241 E 1111013 1111013] (raylet) node_manager.cc:3064: 12 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: b8aad7ac53c083fcae4851424e0362cec4a21916876b69bb1722ed29, IP: 172.31.105.218) over the last time period.",  # noqa: E501
    ),
    (
        "ray-oom-killer",
        "https://github.com/verl-project/verl/issues/2950",
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
    ),
    (
        "disk-full",
        "https://github.com/databrickslabs/dolly/issues/139",
        """2023-04-29 06:01:12.977 [177/train/578 (pid 28936)] [09c561ee-a44c-4795-967c-7183a83b3160]     zip_file.write_record(name, storage.data_ptr(), num_bytes)
2023-04-29 06:01:12.977 [177/train/578 (pid 28936)] [09c561ee-a44c-4795-967c-7183a83b3160] OSError: [Errno 28] No space left on device""",  # noqa: E501
    ),
    (
        "disk-full",
        "https://github.com/hiyouga/LlamaFactory/issues/5155",
        'safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })',  # noqa: E501
    ),
    (
        "ckpt-permission",
        "https://github.com/thtrieu/darkflow/issues/1196",
        "PermissionError: [Errno 13] Permission denied: './ckpt/checkpoint'",
    ),
    (
        "ckpt-save-failed",
        "https://github.com/verl-project/verl/issues/2932",
        """(TaskRunner pid=844447)   File "/home/work/dev/data/train/grpo/verl/verl/utils/checkpoint/megatron_checkpoint_manager.py", line 394, in save_checkpoint
(TaskRunner pid=844447)     async_save_request = save_dist_checkpointing(
(TaskRunner pid=844447)   File "/home/work/dev/data/train/grpo/verl/verl/utils/megatron/dist_checkpointing.py", line 35, in save_dist_checkpointing""",  # noqa: E501
    ),
    (
        "ckpt-save-failed",
        "https://github.com/meta-pytorch/torchforge/issues/568",
        "forge failed at 747 step, write_end_of_file RuntimeError: [enforce fail at inline_container.cc:664] . unexpected pos 704 vs 598",  # noqa: E501
    ),
    (
        "hccl-connect-timeout",
        "https://github.com/vllm-project/vllm-ascend/issues/486",
        """[rank1]: RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: HcclAllreduce, error code is 6
[rank1]: [ERROR] 2025-04-08-18:07:20 (PID:1292363, Device:1, RankID:1) ERR01100 OPS call acl api failed.
[rank1]: EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times out. Reason: Remote Rank did not send the data in time. Please check the reason for the rank being stuck""",  # noqa: E501
    ),
    (
        "hccl-connect-timeout",
        "https://github.com/vllm-project/afd-plugin/issues/229",
        "Communication_Error_Get_Socket(EI0006)",
    ),
    (
        "hccl-connect-timeout",
        "https://github.com/vllm-project/vllm-ascend/issues/9447",
        "[ERROR] HCCL(106335,):2026-05-21-21:39:58.707.629 [hccl_socket_manager.cc:796] [128660][Wait][LinkEstablish]wait socket establish timeout, role[0] rank[0] timeout[120 s]",  # noqa: E501
    ),
    (
        "hccl-exec-timeout",
        "https://github.com/InternLM/lmdeploy/issues/3354",
        "EI0002: [PID: 198748] 2025-03-26-13:49:01.670.614 The wait execution of the Notify register times out. Reason: The Notify register has not received the Notify record from remote rank: [unknown].",  # noqa: E501
    ),
    (
        "hccl-exec-timeout",
        "https://github.com/vllm-project/vllm-ascend/issues/382",
        "[rank1]:[E324 13:00:25.428029551 compiler_depend.ts:574] [Rank 1] Watchdog caught collective operation timeout: WorkHCCL(SeqNum=196, OpType=ALLREDUCE, Timeout(ms)=3600000) ran for 3600185 milliseconds before timing out.",  # noqa: E501
    ),
    (
        "hccl-exec-timeout",
        "https://github.com/vllm-project/vllm-ascend/issues/16652",
        """The error from device(chipId:0..7, dieId:0), serial number is …,
hccl fftsplus task timeout occurred during task execution,""",
    ),
    # Issue 36: the failure families of the after-launch survey, each with its public source.
    (
        "image-atb-env",
        "https://github.com/vllm-project/vllm-ascend/issues/152",
        "[Bug]: ImportError: libatb.so: cannot open shared object file: No such file or directory",
    ),
    (
        "image-mindspeed-too-old",
        "https://github.com/verl-project/verl/blob/main/docs/ascend_tutorial/en/faq/faq.rst",
        '### Q2： "KeyError: decoder.layers.0.self_attention.q_layernorm.weight"',
    ),
    (
        "image-mbridge-for-qwen35",
        "https://github.com/verl-project/verl/issues/6627",
        "`ValueError: Unregistered model type: **qwen3_5_moe**, now only support dict_keys(['deepseek_v3', 'llama', 'qwen2', 'mimo', 'mixtral', 'qwen2_5_vl', 'qwen2_moe', 'qwen3', 'qwen3_moe', 'glm4_moe', 'glm4v', 'glm4v_moe', 'gemma3', 'internvl_chat', 'qwen3_vl', 'qwen3_vl_moe', 'qwen3_omni_moe'])`",  # noqa: E501
    ),
    (
        "image-mbridge-for-qwen35",
        "https://github.com/verl-project/verl-ascend-recipe/blob/main/sapo/README.md",
        '**Symptom**: Training fails with error "mbridge does not support Qwen3.5".',
    ),
    (
        "image-tokenizer-backend",
        "https://github.com/verl-project/verl-ascend-recipe/blob/main/sapo/README.md",
        "ValueError: Tokenizer class TokenizersBackend does not exist or is not currently imported.",
    ),
    (
        "device-busy-el0005",
        "https://github.com/hw-native-sys/PTOAS/pull/765",
        """[ERROR] aclInit(nullptr) failed: 500000 (/home/zhongxuan/ptoas-board-monitor/runtime/runs/20260624_154801_manual_pr765/npu_validation/PyPTOIRParser/paged_attention_example_kernel_online_update/main.cpp:115)
[ERROR] RecentErrMsg: [PID: 3574787] 2026-06-24-16:01:51.072.635 Resource_Busy(EL0005): The resources are busy.""",  # noqa: E501
    ),
    (
        "device-busy-el0005",
        "https://github.com/vllm-project/vllm-ascend/issues/13399",
        """RuntimeError: NPU function error: aclInit, error code is 507899
Resource_Busy(EL0005): The resources are busy.""",
    ),
    (
        "weight-bucket-too-small",
        "https://github.com/verl-project/verl/blob/main/docs/ascend_tutorial/en/faq/faq.rst",
        """   AssertionError: Weight model.embed_tokens.weight(torch.Size([151936, 4096]), torch.float32) is too large to fit in the bucket.
   Please increase rollout.update_weights_bucket_megabytes(2048 MB).""",  # noqa: E501
    ),
    (
        "hccl-buffsize-small",
        "https://github.com/vllm-project/vllm-ascend/pull/5287",
        """(EngineCore_DP0 pid=17833) EZ9999: Inner Error!
(EngineCore_DP0 pid=17833) EZ9999[PID: 17833] 2025-12-23-07:36:19.237.396 (EZ9999):  HCCL_BUFFSIZE is too SMALL, maxBs = 512, h = 2048, epWorldSize = 2, localMoeExpertNum = 64, sharedExpertNum = 0, tokenNeedSizeDispatch = 4608, tokenNeedSizeCombine = 4096, k = 8, NEEDED_HCCL_BUFFSIZE(((maxBs * tokenNeedSizeDispatch * ep_worldsize * localMoeExpertNum) + (maxBs * tokenNeedSizeCombine * (k + sharedExpertNum))) * 2) = 609MB, HCCL_BUFFSIZE=200MB.[FUNC:MoeDistributeDispatchA3TilingFuncImpl][FILE:moe_distribute_dispatch_v2_tiling.cc][LINE:941]""",  # noqa: E501
    ),
    (
        "acl-graph-capture",
        "https://github.com/vllm-project/vllm-ascend/blob/main/docs/source/faqs.md",
        """ERROR 09-26 10:48:07 [model_runner_v1.py:3029] ACLgraph sizes capture fail: RuntimeError:
ERROR 09-26 10:48:07 [model_runner_v1.py:3029] ACLgraph has insufficient available streams to capture the configured number of sizes.Please verify both the availability of adequate streams and the appropriateness of the configured size count.""",  # noqa: E501
    ),
    (
        "acl-graph-capture",
        "https://github.com/vllm-project/vllm-ascend/issues/6002",
        "在plog中均存在`MemCopySync:Memory copy sync failed`、`rtMemcpy:ErrCode=107030, desc=[the current capture mode does not support this operation]`。",  # noqa: E501
    ),
    (
        "vision-placeholder-token",
        "https://github.com/verl-project/verl/issues/3469",
        "(WorkerDict pid=1910872) Original error message: Image features and image tokens do not match: tokens: 79752, features 80436",  # noqa: E501
    ),
    (
        "gdn-kernel",
        "https://github.com/vllm-project/vllm-ascend/issues/14456",
        "RuntimeError: npu_chunk_gated_delta_rule:../third_party/op-plugin/op_plugin/ops/opapi/ChunkGatedDeltaRuleKernelNpuOpApi.cpp:57 NPU function error: call aclnnChunkGatedDeltaRule failed",  # noqa: E501
    ),
    (
        "gdn-kernel",
        "https://github.com/vllm-project/vllm-ascend/issues/14826",
        "(EngineCore pid=229) ERROR 08-24 03:28:15 [core.py:1195]         Cannot find bin of op ChunkGatedDeltaRuleFwdH, integral key 0/1/|bf16/ND/bf16/ND/bf16/ND/float/ND/bf16/ND/bf16/ND/float16/ND/.",  # noqa: E501
    ),
    (
        "npu-oom",
        "https://github.com/vllm-project/vllm-ascend/issues/6611",
        """(Worker_TP0 pid=911501) ERROR 02-07 18:18:59 [v1/executor/multiproc_executor.py:824]     kv_cache_raw_tensors = self._allocate_kv_cache_tensors(kv_cache_config)
(Worker_TP0 pid=911501) ERROR 02-07 18:18:59 [v1/executor/multiproc_executor.py:824] RuntimeError: NPU out of memory. Tried to allocate 2.57 GiB (NPU 0; 60.96 GiB total capacity; 57.49 GiB already allocated; 57.49 GiB current active; 1.96 GiB free; 57.62 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.""",  # noqa: E501
    ),
    (
        "ray-oom-killer",
        "https://github.com/verl-project/verl-omni/issues/402",
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::TaskRunner.run() (pid=98005, ip=7.242.108.37, actor_id=bd00e26f7735efb6a0f1093c01000000, repr=<main_diffusion.TaskRunner object at 0xffff7d84f8f0>)",  # noqa: E501
    ),
    (
        "ckpt-metadata-missing",
        "https://github.com/verl-project/verl/blob/main/docs/ascend_tutorial/en/faq/faq.rst",
        """   FileNotFoundError: common.pt
   FileNotFoundError: .metadata""",
    ),
    (
        "ckpt-shape-mismatch",
        "https://github.com/verl-project/verl-ascend-recipe/blob/main/sapo/README.md",
        """megatron.core.dist_checkpointing.core.CheckpointingException: Global shape mismatch for
loaded (torch.Size([1119331272])) and expected ((3362257868,)) tensor for key""",
    ),
    (
        "hccl-heartbeat",
        "https://www.hiascend.com/document",  # CANN 9.0.0 HCCL guide, hcclug_000055: the cluster heartbeat's example
        "[INFO] HCCL(686,python):2025-10-23-07:52:59.191.363 [heartbeat.cc:951] [8970][TaskExecStage][HeartbeatAbnormal]local rank [127.10.0.1/1]: crimer rank [127.10.0.2/2] status[LOST] by informer rank [127.10.0.3/3]",  # noqa: E501
    ),
    (
        "hccl-unique-id",
        "https://github.com/vllm-project/vllm-ascend/issues/5135",
        "(VllmWorkerProcess pid=53843) ERROR 12-17 09:32:03 [multiproc_worker_utils.py:239] RuntimeError: [1] is setting up HCCL communicator and retrieving hcclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: failed to recv, got 0 bytes",  # noqa: E501
    ),
]

# verl-project/verl#6768 (an update_actor failure on Ascend) followed by the OOM line of vllm-project/vllm-ascend#19:
# two verbatim excerpts put together, as a train.log holds the trainer's traceback and the worker's error.
UPDATE_FRAMES = """    actor_output = self.actor_rollout_wg.update_actor(batch)
                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
ray.exceptions.RayTaskError(RuntimeError): ray::WorkerDict.actor_rollout_update_actor() (pid=4926, ip=172.36.2.24, actor_id=e536066fcce7cd73767503ac02000000, repr=<verl.single_controller.ray.base.WorkerDict object at 0xe885868f4950>)"""  # noqa: E501
OOM_LINE = "RuntimeError: NPU out of memory. Tried to allocate 22.00 MiB (NPU 0; 60.97 GiB total capacity; 10.24 GiB already allocated; 10.24 GiB current active; 19.52 MiB free; 10.65 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation."  # noqa: E501


def _log(tmp_path: Path, text: str | bytes, name: str = "train.log") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(("sig_id", "source", "excerpt"), EXCERPTS, ids=[f"{e[0]}:{e[1]}" for e in EXCERPTS])
def test_each_signature_finds_its_public_excerpt(tmp_path: Path, sig_id: str, source: str, excerpt: str) -> None:
    path = _log(tmp_path, "INFO step 1 done\n" + excerpt)
    result = dg.diagnose([path])
    found = {f.id: f for f in result.findings}
    assert sig_id in found, f"{source}: found {sorted(found)}"
    finding = found[sig_id]
    lines = path.read_text(encoding="utf-8").splitlines()
    shown = finding.excerpt.removesuffix("...") if len(finding.excerpt) == dg.EXCERPT_CHARS else finding.excerpt
    assert lines[finding.line - 1].strip().startswith(shown) and len(finding.excerpt) <= dg.EXCERPT_CHARS
    assert (finding.family, finding.confidence) == (BY_ID[sig_id].family, "high")
    assert finding.file == str(path)
    assert source in BY_ID[sig_id].sources, "the table names the thread its pattern was tested on"
    assert result.unknown is None


@pytest.mark.parametrize(("sig_id", "source", "excerpt"), EXCERPTS, ids=[f"{e[0]}:{e[1]}" for e in EXCERPTS])
def test_needles_cover_every_line_the_patterns_match(sig_id: str, source: str, excerpt: str) -> None:
    sig = BY_ID[sig_id]
    assert all(n == n.lower() for n in sig.needles)
    matched = [line for line in excerpt.splitlines() if sig.regex.search(line)]
    assert matched, source
    for line in matched:
        assert any(n in line.lower() for n in sig.needles), f"{sig_id}: no needle in {line!r}"


def test_a_needle_on_an_earlier_line_that_does_not_match_is_passed_over(tmp_path: Path) -> None:
    # verl's tracebacks name verl/single_controller/base/decorator.py (verl-project/verl#2932) long before the
    # import error the decorator row is about.
    frame = '(TaskRunner pid=844447)   File "/home/work/dev/data/train/grpo/verl/verl/single_controller/base/decorator.py", line 430, in inner'  # noqa: E501
    excerpt = next(e[2] for e in EXCERPTS if e[1].endswith("azure-cli/issues/32595"))
    (finding,) = dg.diagnose([_log(tmp_path, frame + "\n" + excerpt)]).findings
    assert (finding.id, finding.line) == ("image-no-decorator", 4)


def test_every_signature_is_tested_on_an_excerpt() -> None:
    assert {e[0] for e in EXCERPTS} == {s.id for s in SIGNATURES}


def test_the_docs_page_lists_every_signature_and_source() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "diagnose.md").read_text(encoding="utf-8")
    for sig in SIGNATURES:
        assert f"| `{sig.id}` | {sig.title} |" in page, sig.id
        for url in sig.sources:
            assert f"({url})" in page, (sig.id, url)


def test_signature_rows_are_complete() -> None:
    for sig in SIGNATURES:
        assert sig.title and sig.cause and sig.fix and sig.prevent, sig.id
        assert sig.family in BY_FAMILY, sig.id
        # GitHub threads and files; CANN's own guides live on hiascend.com
        assert sig.sources and all(
            u.startswith(("https://github.com/", "https://www.hiascend.com/")) for u in sig.sources
        )
    assert len(BY_ID) == len(SIGNATURES), "ids are unique"


@pytest.mark.parametrize(
    "line",
    [
        "ModuleNotFoundError: No module named 'decorator_libs'",  # ydf0509/funboost#89: another package
        "PermissionError: [Errno 13] Permission denied: '/etc/shadow'",  # made-up: not a checkpoint path
        "INFO 06-09 06:57:48 npu blocks: 3915, # CPU blocks: 910",  # made-up: an ordinary vLLM line
    ],
)
def test_lines_that_are_not_the_failure_are_not_named(tmp_path: Path, line: str) -> None:
    # No signature names them; a general rule may still put one in a family, at low confidence.
    assert all(f.confidence == "low" for f in dg.diagnose([_log(tmp_path, line)]).findings)


def test_npu_oom_in_vllm_is_the_rollout(tmp_path: Path) -> None:
    excerpt = next(e[2] for e in EXCERPTS if e[1].endswith("vllm-ascend/issues/1127"))
    (finding,) = dg.diagnose([_log(tmp_path, excerpt)]).findings
    assert finding.cause.endswith("in the rollout (vLLM)")
    assert "GEN_MEM_UTIL" in finding.fix


def test_npu_oom_in_the_actor_update_names_that_phase(tmp_path: Path) -> None:
    (finding,) = dg.diagnose([_log(tmp_path, UPDATE_FRAMES + "\n" + OOM_LINE)]).findings
    assert finding.id == "npu-oom"
    assert finding.cause.endswith("in the actor update")
    assert "PPO_MAX_TOKEN_LEN_PER_GPU" in finding.fix
    assert finding.line == 4


def test_no_npu_at_all_says_so(tmp_path: Path) -> None:
    # Made-up line: verl's message with 0 available, as ray-project/ray#55137 describes the situation.
    (finding,) = dg.diagnose(
        [_log(tmp_path, "ValueError: Total available GPUs 0 is less than total desired GPUs 16")]
    ).findings
    assert finding.cause.startswith("Ray offered no NPU at all (16 wanted)")


def test_a_gdn_kernel_is_named(tmp_path: Path) -> None:
    # Made-up frame (a Gated DeltaNet kernel) above the verbatim vllm-ascend#7421 compile error.
    frame = '  File "/usr/local/lib/python3.11/site-packages/vllm_ascend/ops/triton/fla/chunk.py", line 10, in chunk_gated_delta_rule'  # noqa: E501
    excerpt = next(e[2] for e in EXCERPTS if e[1].endswith("vllm-ascend/issues/7421"))
    (finding,) = dg.diagnose([_log(tmp_path, frame + "\n" + excerpt)]).findings
    assert "Gated DeltaNet" in finding.cause


def test_causes_come_before_symptoms(tmp_path: Path) -> None:
    hccl = next(e[2] for e in EXCERPTS if e[1].endswith("vllm-ascend/issues/486"))
    path = _log(tmp_path, hccl + "\n" + UPDATE_FRAMES + "\n" + OOM_LINE)
    ids = [f.id for f in dg.diagnose([path]).findings]
    assert ids == ["npu-oom", "hccl-connect-timeout"]


def test_an_unknown_failure_shows_its_last_traceback(tmp_path: Path) -> None:
    text = """INFO starting
Traceback (most recent call last):
  File "a.py", line 1, in <module>
ValueError: first failure
INFO retrying
Traceback (most recent call last):
  File "main_ppo.py", line 42, in main
    run()
KeyError: 'reward_model'
INFO cleanup"""
    result = dg.diagnose([_log(tmp_path, text)])
    # No signature: the exception type of the first failure (the earlier ValueError: the run's own code or values)
    # puts it in its family, at low confidence, and says which rule did.
    (general,) = result.findings
    assert (general.id, general.family, general.confidence) == ("exception-type", "code-config", "low")
    assert general.basis == "the exception type" and general.line == 4
    assert result.unknown is not None
    assert result.unknown.line == 6
    assert result.unknown.block is not None
    assert result.unknown.block.splitlines()[0] == "Traceback (most recent call last):"
    assert "KeyError: 'reward_model'" in result.unknown.block
    assert "first failure" not in result.unknown.block
    doc = result.to_json()
    assert [f["id"] for f in doc["findings"]] == ["exception-type"]
    assert doc["unknown"] == {"last_error_block": result.unknown.block, "logs": [str(tmp_path / "train.log")]}


def test_an_unknown_failure_without_traceback_shows_the_last_error_line(tmp_path: Path) -> None:
    text = "\n".join(["INFO ok"] * 10 + ["ERROR raylet died", "INFO a", "INFO b", "INFO c", "INFO d", "INFO e"])
    result = dg.diagnose([_log(tmp_path, text)])
    assert result.unknown is not None and result.unknown.block is not None
    assert "ERROR raylet died" in result.unknown.block
    assert "INFO e" not in result.unknown.block


def _run_folder(tmp_path: Path) -> Path:
    """A run record: train.log, nodes -> LOG_DIR/nodes with one host's log, and a CANN plog folder below it."""
    run_dir = tmp_path / "logs" / "proj" / "exp" / "runs" / "20261202T000000Z"
    run_dir.mkdir(parents=True)
    _log(run_dir, "INFO step 1\nTraceback (most recent call last):\nRuntimeError: worker died")
    (run_dir / "outcome.json").write_text('{"exit_code": 1}', encoding="utf-8")
    nodes = tmp_path / "logs" / "nodes"
    nodes.mkdir()
    device_held = next(e[2] for e in EXCERPTS if e[1].endswith("cann-container-image/issues/46"))
    _log(nodes, device_held, "a3-02.log")
    (run_dir / "nodes").symlink_to(nodes)
    ei0002 = next(e[2] for e in EXCERPTS if e[1].endswith("lmdeploy/issues/3354"))
    _log(run_dir, ei0002, "bundle/a3-01/ascend/log/plog/plog-1234_20261202.log")
    return run_dir


def test_write_diagnosis_reads_the_whole_run_folder(tmp_path: Path) -> None:
    run_dir = _run_folder(tmp_path)
    first = dg.write_diagnosis(run_dir)
    assert first is not None and first.id == "device-held"
    assert (first.file, first.line) == ("nodes/a3-02.log", 3)
    doc = json.loads((run_dir / "diagnosis.json").read_text(encoding="utf-8"))
    assert [f["id"] for f in doc["findings"]] == ["device-held", "hccl-exec-timeout"]
    assert doc["findings"][1]["file"] == "bundle/a3-01/ascend/log/plog/plog-1234_20261202.log"
    # The contract of issue 25 with issue 36's fields added, none renamed.
    assert set(doc["findings"][0]) == {"id", "title", "cause", "fix", "prevent", "file", "line", "excerpt"} | {
        "family", "confidence", "basis", "host", "rank", "evidence"
    }  # fmt: skip
    assert (doc["findings"][0]["family"], doc["findings"][0]["host"]) == ("device-busy", "a3-02")
    assert doc["unknown"] is None
    assert first.one_line().startswith(
        "diagnosis: an NPU is held by another process or container on a3-02 (nodes/a3-02.log:3)"
    )


def test_write_diagnosis_of_an_unknown_failure(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    _log(run_dir, "INFO step 1\nTraceback (most recent call last):\nRuntimeError: worker died")
    assert dg.write_diagnosis(run_dir) is None
    doc = json.loads((run_dir / "diagnosis.json").read_text(encoding="utf-8"))
    assert doc == {
        "findings": [],
        "unknown": {
            "last_error_block": "Traceback (most recent call last):\nRuntimeError: worker died",
            "logs": ["train.log"],
        },
        "first_failure": None,
        "consequences": [],
    }


def test_the_tail_keeps_real_line_numbers_and_survives_bad_bytes(tmp_path: Path) -> None:
    filler = b"".join(b"INFO line %d \xff\xfe\n" % i for i in range(1, 1001))
    path = _log(tmp_path, filler + b"dcmi module initialize failed. ret is -8005\n")
    lines, first = dglogs.read_tail(path, cap=200)
    assert first is not None and lines[-1] == "dcmi module initialize failed. ret is -8005"
    assert first + len(lines) - 1 == 1001, "the last line keeps its number in the whole file"
    assert "\ufffd" in lines[0] and lines[0].startswith("INFO line "), "a cut first line is dropped, bad bytes replaced"
    small = dglogs.read_tail(path, cap=os.path.getsize(path))
    assert small[1] == 1 and len(small[0]) == 1001


def test_the_tail_of_a_window_keeps_real_line_numbers(tmp_path: Path) -> None:
    path = _log(tmp_path, b"".join(b"line %d\n" % i for i in range(1, 101)))
    start = len(b"".join(b"line %d\n" % i for i in range(1, 11)))
    end = len(b"".join(b"line %d\n" % i for i in range(1, 21)))
    lines, first = dglogs.read_tail(path, since=start, until=end)
    assert (lines, first) == (tuple(f"line {i}" for i in range(11, 21)), 11)
    lines, first = dglogs.read_tail(path, cap=len(b"line 20\n"), since=start, until=end)
    assert (lines, first) == (("line 20",), 20), "the cap counts back from the window's end"
    assert dglogs.read_tail(path, since=end, until=end) == ((), 21), "an empty window"
    assert len(dglogs.read_tail(path, since=start, until=10**9)[0]) == 100, "an end beyond the file: read whole"


def test_cli_text_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _run_folder(tmp_path)
    res = run(capsys, "diagnose", str(run_dir))
    assert res.rc == 0
    assert "cause: another process or container still holds the dies" in res.out
    assert "prevents it next time: preflight row npu_occupancy" in res.out
    assert res.out.rstrip().splitlines()[-1].startswith("2 finding(s); first: diagnosis: an NPU is held")
    res = run(capsys, "diagnose", "--json", str(run_dir / "train.log"))
    assert res.rc == 0
    assert res.doc["findings"] == []
    assert res.doc["unknown"]["logs"] == [str(run_dir / "train.log")]


def test_cli_refuses_a_missing_path_and_an_empty_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    res = run(capsys, "diagnose", str(missing))
    assert res.rc == 2
    assert res.err.strip().splitlines() == [
        f"error: diagnose: {missing} does not exist; fix: give a run folder "
        "(LOG_DIR/<project>/<experiment>/runs/<stamp>) or log files"
    ]
    res = run(capsys, "diagnose", "")
    assert res.rc == 2 and "error: diagnose: '' does not exist" in res.err
    (tmp_path / "empty").mkdir()
    res = run(capsys, "diagnose", str(tmp_path / "empty"))
    assert res.rc == 2
    assert "no readable log under" in res.err


def test_ray_colour_codes_do_not_hide_a_signature(tmp_path: Path) -> None:
    # Ray colours the actor prefix of each forwarded line; the excerpt is afd-plugin#229's, the colours made up.
    path = _log(tmp_path, "\x1b[36m(WorkerDict pid=1)\x1b[0m Communication_Error_Get_Socket(EI0006)")
    (finding,) = dg.diagnose([path]).findings
    assert finding.excerpt == "(WorkerDict pid=1) Communication_Error_Get_Socket(EI0006)"


def test_the_number_of_files_read_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dglogs, "MAX_FILES", 3)
    for i in range(5):
        _log(tmp_path, f"INFO {i}", f"ray/session_1/logs/worker-{i}.out")
    _log(tmp_path, "INFO head")
    files = dglogs.log_files([tmp_path], base=tmp_path)
    assert [name for _, name in files] == [
        "train.log",
        "ray/session_1/logs/worker-0.out",
        "ray/session_1/logs/worker-1.out",
    ]
