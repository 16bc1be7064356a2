"""Known failure signatures of verl GRPO runs on Ascend A3, as data: what `verl-recipe diagnose` looks for.

One row per failure: the regular expressions that find it in a log line (case-insensitive), lower-case literal
`needles` of which every matching line holds at least one (a fast substring search finds the candidate lines, so
the regular expressions run on a few lines, not on megabytes of log), and what to tell the operator: the cause,
the fix, and what prevents it next time (a preflight row of ansible/roles/preflight/library/a3_preflight.py, a
setting of settings.py, or a command of this repository).
`sources` names the public issue threads the patterns were taken from; tests/unit/test_diagnose.py holds a short
verbatim excerpt of each and checks that its row finds it.

The order is the order findings are reported in: causes before symptoms. An HCCL timeout on one rank usually follows
another rank's crash (an out-of-memory, a kernel that failed to compile), so the HCCL rows come last, and rows marked
`symptom` are put after any cause when the first failure across hosts is chosen (firstfailure.py). Each row names its
family (families.py); a signature's confidence is high, a general rule's (families.RULES) medium or low.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Signature:
    id: str
    title: str
    patterns: tuple[str, ...]
    needles: tuple[str, ...]
    cause: str
    fix: str
    prevent: str
    sources: tuple[str, ...]
    family: str  # families.py: where the failure belongs (a table's column on docs/diagnose.md)
    # A failure that the same launch may not meet again (a link that flapped, a host that rebooted): the restart
    # policy (run/restart.py) starts such a run again by itself when it is the first finding; any other is not.
    transient: bool = False
    # A timeout that waits on another rank: it follows the real failure, so the cross-host ordering puts it after
    # any cause (firstfailure.py).
    symptom: bool = False
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        joined = "|".join(f"(?:{p})" for p in self.patterns)
        object.__setattr__(self, "regex", re.compile(joined, re.IGNORECASE))


SIGNATURES: tuple[Signature, ...] = (
    Signature(
        id="image-libascend-hal",
        family="image-version",
        title="the driver library libascend_hal.so is not found",
        patterns=(r"libascend_hal\.so: cannot open shared object file",),
        needles=("libascend_hal.so",),
        cause="the container does not see the host's Ascend driver: /usr/local/Ascend/driver is not mounted "
        "(or only a part of it), or the host has no driver installed",
        fix="mount the whole /usr/local/Ascend/driver read-only into the container, as compose.yaml does; on the host "
        "`ls /usr/local/Ascend/driver/lib64/driver/libascend_hal.so`",
        prevent="preflight rows driver_version and device_nodes; `verl-recipe doctor` in the container",
        sources=(
            "https://github.com/opendatalab/MinerU/issues/3252",
            "https://github.com/huggingface/accelerate/issues/3754",
        ),
    ),
    Signature(
        id="image-undefined-symbol",
        family="image-version",
        title="undefined symbol in torch_npu or the ATB libraries",
        patterns=(r"(?:torch_npu|libtorch_npu|atb|libtbe_adapter|nnal)\S*\.so: undefined symbol",),
        needles=("undefined symbol",),
        cause="torch_npu, the ATB (nnal) libraries and CANN in the image come from different releases: a library "
        "was built against another version of the one it links to",
        fix="run the pinned image (docker/versions.yaml); rebuild it rather than pip-installing torch_npu or "
        "sourcing another CANN/nnal set_env.sh on top",
        prevent="`verl-recipe doctor` (the versions manifest) and the image's import smoke "
        "(docker/npu/import_smoke.py)",
        sources=(
            "https://github.com/vllm-project/vllm-ascend/issues/117",
            "https://github.com/Ascend/pytorch/issues/99",
        ),
    ),
    Signature(
        id="image-no-decorator",
        family="image-version",
        title="CANN's Python dependency 'decorator' is missing",
        patterns=(r"No modules? named '?decorator'?(?![\w.])",),
        needles=("decorator",),
        cause="the image's Python lacks a package CANN's op compiler imports (decorator; often with op error 50001)",
        fix="install CANN's Python dependencies into the image's Python (decorator, attrs, psutil, ...) through the "
        "image lock (docker/lock/), then rebuild",
        prevent="`verl-recipe doctor` (installed packages against the pins) and the image's import smoke",
        sources=(
            "https://github.com/hiyouga/LlamaFactory/issues/10333",
            "https://github.com/flagos-ai/FlagGems/pull/5707",
            "https://github.com/Azure/azure-cli/issues/32595",
        ),
    ),
    Signature(
        id="image-atb-env",
        family="image-version",
        title="the ATB (NNAL) or CANN environment is not loaded",
        patterns=(r"libatb\.so: cannot open shared object file", r"Failed to infer device type"),
        needles=("libatb.so", "failed to infer device type"),
        cause="the process started without CANN's and NNAL's set_env.sh (or with the A2 packages on an A3 host): "
        "torch_npu and vllm-ascend cannot find the ATB library or the device",
        fix="start the training through the image's entrypoint, which sources "
        "/usr/local/Ascend/ascend-toolkit/set_env.sh and /usr/local/Ascend/nnal/atb/set_env.sh; do not override "
        "LD_LIBRARY_PATH",
        prevent="`verl-recipe doctor` and the image's import smoke (docker/npu/import_smoke.py)",
        sources=(
            "https://github.com/vllm-project/vllm-ascend/blob/main/docs/source/faqs.md",
            "https://github.com/vllm-project/vllm-ascend/issues/152",
        ),
    ),
    Signature(
        id="image-mindspeed-too-old",
        family="image-version",
        title="MindSpeed too old for the model's layer names",
        patterns=(r"KeyError: '?decoder\.layers\.\d+\.self_attention\.\S*layernorm",),
        needles=("keyerror",),
        cause="the MindSpeed in the image does not know this model's Megatron layer names (q_layernorm and the like): "
        "it is older than the one the pins name",
        fix="run the pinned image, whose MindSpeed matches Megatron-LM (docker/versions.yaml); do not pip-install "
        "another MindSpeed on top",
        prevent="`verl-recipe doctor` (installed packages against the pins)",
        sources=("https://github.com/verl-project/verl/blob/main/docs/ascend_tutorial/en/faq/faq.rst",),
    ),
    Signature(
        id="image-mbridge-for-qwen35",
        family="image-version",
        title="the deprecated mbridge was picked for Qwen3.5",
        patterns=(r"Unregistered model type: \W*qwen3_5", r"mbridge does not support Qwen3\.5"),
        needles=("unregistered model type", "mbridge does not support"),
        cause="verl fell back to the deprecated mbridge (ISEEKYAN/mbridge), which has no Qwen3.5 model: the official "
        "Megatron-Bridge (same import name, megatron_bridge) is missing or shadowed",
        fix="run the pinned image, which installs Megatron-Bridge at its pinned commit and no mbridge; keep "
        "actor.megatron.vanilla_mbridge=False (the recipes' default)",
        prevent="`verl-recipe doctor` (Megatron-Bridge pin) and the image's import smoke",
        sources=(
            "https://github.com/verl-project/verl/issues/6627",
            "https://github.com/verl-project/verl-ascend-recipe/blob/main/sapo/README.md",
        ),
    ),
    Signature(
        id="image-tokenizer-backend",
        family="image-version",
        title="a tokenizer saved by a newer transformers",
        patterns=(r"Tokenizer class TokenizersBackend does not exist",),
        needles=("tokenizersbackend",),
        cause="the tokenizer files were written by transformers 5.x (tokenizer_class TokenizersBackend) and are read "
        "by a transformers 4.x, which has no such class",
        fix="read the checkpoint with the training image's transformers (5.x), or copy the original model's "
        "tokenizer files over the saved ones",
        prevent="the same image (and transformers major version) for training and for loading its checkpoints",
        sources=("https://github.com/verl-project/verl-ascend-recipe/blob/main/sapo/README.md",),
    ),
    Signature(
        id="device-held",
        family="device-busy",
        title="an NPU is held by another process or container",
        patterns=(
            r"dcmi module initialize failed",
            r"dcmi model initialized failed",
            r"ret is -80(?:05|20)\b",
            r"\bEJ0001\b",
        ),
        needles=("dcmi mod", "-8005", "-8020", "ej0001"),
        cause='another process or container still holds the dies (-8005 / -8020 "device is used"; device sharing '
        "between containers is off by default)",
        fix="find the holder (`npu-smi info` process table, `docker ps`), stop it or wait for it to end, then start "
        "the run again",
        prevent="preflight row npu_occupancy (processes on the dies and containers holding /dev/davinci*)",
        sources=(
            "https://github.com/vllm-project/vllm-ascend/issues/2698",
            "https://github.com/Ascend/cann-container-image/issues/46",
        ),
    ),
    Signature(
        id="device-busy-el0005",
        family="device-busy",
        title="CANN found the device busy at start (EL0005)",
        patterns=(r"Resource_Busy\(EL0005\)", r"\bEL0005\b"),
        needles=("el0005",),
        cause="aclInit found the device's resources occupied: another process still holds it, the device is being "
        "reset, or its software is not ready (a driver restarted under a running container)",
        fix="`npu-smi info` on that host: stop what holds the dies or wait for the reset to end; restart the node "
        "service (its container) after a driver upgrade",
        prevent="preflight rows npu_occupancy and driver_version",
        sources=(
            "https://github.com/hw-native-sys/PTOAS/pull/765",
            "https://github.com/vllm-project/vllm-ascend/issues/13399",
        ),
    ),
    Signature(
        id="ray-too-few-devices",
        family="ray-lost",
        title="Ray offers fewer NPUs than the layout needs",
        patterns=(r"Total available GPUs [\d.]+ is less than total desired GPUs \d+",),
        needles=("total available gpus",),
        cause="verl's resource pool asked Ray for NNODES x NDEVICES_PER_NODE devices and Ray had fewer free: a node "
        "had not joined, a node's Ray started without its NPU resource, or an earlier job still holds actors",
        fix="`ray status` on the head: every node with its NPU count; stop leftover jobs (`ray list actors`); start "
        "the Ray nodes with `verl-recipe node` (it registers the dies as Ray's NPU resource)",
        prevent="settings NNODES and NDEVICES_PER_NODE; `verl-recipe train` waits for every node's dies before it "
        "launches",
        sources=(
            "https://github.com/verl-project/verl/issues/2515",
            "https://github.com/ray-project/ray/issues/55137",
        ),
    ),
    Signature(
        id="vllm-mm-cache",
        family="rollout",
        title="vLLM multimodal processor cache out of sync (vllm#42995)",
        patterns=(
            r"Expected a cached item for mm_hash",
            r"assert mm_item is not None",
            r"MultiModalCacheMissError",
            r"Multi-modal cache miss",
        ),
        needles=("expected a cached item", "mm_item is not none", "multimodalcachemisserror", "multi-modal cache miss"),
        cause="with mm_processor_cache_gb > 0, vLLM's sleep/wake between rollouts clears the engine's multimodal "
        "cache but not the front end's, and the next reused image trips the assertion",
        fix="run with MM_PROCESSOR_CACHE_GB=0 (the recipes' default) and drop FORCE_MM_CACHE",
        prevent="setting MM_PROCESSOR_CACHE_GB (validate refuses a value above 0 on NPU unless FORCE_MM_CACHE=true)",
        sources=(
            "https://github.com/vllm-project/vllm/issues/42995",
            "https://github.com/vllm-project/vllm/issues/46354",
        ),
    ),
    Signature(
        id="weight-bucket-too-small",
        family="rollout",
        title="a weight is larger than the weight-sync bucket",
        patterns=(r"is too large to fit in the bucket",),
        needles=("too large to fit in the bucket",),
        cause="verl's weight sync to the rollout sends weights in buckets, and one tensor (the embedding, most "
        "often) is larger than the bucket: on NPU this path is taken when IPC is not supported (an HDK or CANN "
        "older than verl 0.8.0's check wants)",
        fix="raise the recipe's actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes above "
        "the largest tensor (1.2-1.5x, rounded up to a power of 2), or bring HDK and CANN to the pinned versions",
        prevent="`verl-recipe doctor` (HDK and CANN versions against docker/versions.yaml)",
        sources=("https://github.com/verl-project/verl/blob/main/docs/ascend_tutorial/en/faq/faq.rst",),
    ),
    Signature(
        id="hccl-buffsize-small",
        family="communication",
        title="HCCL_BUFFSIZE too small for the MoE dispatch (MC2)",
        patterns=(r"HCCL_BUFFSIZE is too SMALL",),
        needles=("hccl_buffsize is too small",),
        cause="the MC2 MoE dispatch/combine operators of vllm-ascend on A3 need an HCCL buffer larger than "
        "HCCL_BUFFSIZE; the message prints the size needed (NEEDED_HCCL_BUFFSIZE)",
        fix="set env.HCCL_BUFFSIZE to at least the NEEDED_HCCL_BUFFSIZE the line prints (MB), or lower the rollout's "
        "max batch (actor_rollout_ref.rollout.max_num_seqs) so the dispatch needs less",
        prevent="setting env.HCCL_BUFFSIZE",
        sources=(
            "https://github.com/vllm-project/vllm-ascend/pull/5287",
            "https://github.com/vllm-project/vllm-ascend/pull/6130",
        ),
    ),
    Signature(
        id="acl-graph-capture",
        family="rollout",
        title="vllm-ascend could not capture its ACL graphs",
        patterns=(
            r"ACLgraph has insufficient available streams",
            r"ACLgraph sizes capture fail",
            r"the current capture mode does not support this operation",
        ),
        needles=("aclgraph", "capture mode does not support"),
        cause="the rollout's graph capture failed: too many capture sizes for the streams the device offers, or an "
        "operation that graph capture does not allow",
        fix="give vLLM fewer cudagraph_capture_sizes (compilation_config), use the FULL graph mode, or run the rollout "
        "eager (actor_rollout_ref.rollout.enforce_eager=True) to confirm",
        prevent="a short `verl-recipe train` run after changing GEN_TP or the batch sizes",
        sources=(
            "https://github.com/vllm-project/vllm-ascend/blob/main/docs/source/faqs.md",
            "https://github.com/vllm-project/vllm-ascend/issues/6002",
        ),
    ),
    Signature(
        id="vision-placeholder-token",
        family="rollout",
        title="image tokens and image features do not match (a sampled placeholder token)",
        patterns=(
            r"Image features and image tokens do not match",
            r"get_rope_index.*StopIteration|StopIteration.*get_rope_index",
            r"TypeError: 'NoneType' object is not an iterator",
        ),
        needles=("image features and image tokens", "get_rope_index", "'nonetype' object is not an iterator"),
        cause="the policy sampled a vision placeholder token (<|image_pad|>/<|video_pad|>) in its response, so the "
        "next forward pass counts more image tokens than features: it happens at random, hours in (verl#5817; the "
        "guard, verl#7038, is on verl's main, not in release/v0.8.0)",
        fix="resume from the last checkpoint (RESUME_MODE=auto): the failure is random and the same step usually "
        "passes; if it repeats, add the placeholder ids to the rollout's bad words",
        prevent="none in verl 0.8.0 itself; SAVE_FREQ keeps the loss small (docs/faq.md)",
        sources=(
            "https://github.com/verl-project/verl/issues/3469",
            "https://github.com/verl-project/verl/issues/5817",
        ),
    ),
    Signature(
        id="triton-compile",
        family="kernel",
        title="a triton-ascend kernel failed to compile",
        patterns=(
            r"MLIRCompilationError",
            r"\[ConvertLinalgRToBinary\] encounters error",
            r"linalg_to_bin_enable_npu_compile",
            r"bishengir-compile: ",
        ),
        needles=(
            "mlircompilationerror",
            "convertlinalgrtobinary",
            "linalg_to_bin_enable_npu_compile",
            "bishengir-compile",
        ),
        cause="triton-ascend's JIT could not lower a kernel (Qwen3.5's Gated DeltaNet layers run as triton kernels): "
        "triton-ascend and CANN's bishengir compiler do not match, or the pinned triton-ascend cannot lower that "
        "kernel",
        fix="check triton-ascend and CANN against docker/versions.yaml (`verl-recipe doctor`); clear the kernel cache "
        "(~/.triton/cache) after an upgrade; the compiler's message between [ERROR][Triton][BEG] and [END] names the "
        "stage",
        prevent="`verl-recipe doctor` (triton-ascend pin) and the image's import smoke",
        sources=(
            "https://github.com/vllm-project/vllm-ascend/issues/7421",
            "https://github.com/sgl-project/sglang/pull/20918",
        ),
    ),
    Signature(
        id="gdn-kernel",
        family="kernel",
        title="the Gated DeltaNet operator failed (aclnnChunkGatedDeltaRule)",
        patterns=(
            r"call aclnnChunkGatedDeltaRule\w* failed",
            r"Cannot find bin(?:ary)? (?:of|for) op ChunkGatedDeltaRule",
        ),
        needles=("aclnnchunkgateddeltarule", "chunkgateddeltarule"),
        cause="CANN's fused Gated DeltaNet operator (Qwen3.5's linear attention) failed or has no binary for these "
        "dtypes: the CANN or torch_npu op-plugin does not match the vllm-ascend that calls it, or a float16 run of "
        "a kernel built for bfloat16",
        fix="run the pinned image (CANN, torch_npu and vllm-ascend together); keep the model and cache dtypes bfloat16",
        prevent="`verl-recipe doctor` and the image's import smoke",
        sources=(
            "https://github.com/vllm-project/vllm-ascend/issues/14456",
            "https://github.com/vllm-project/vllm-ascend/issues/14826",
        ),
    ),
    Signature(
        id="npu-oom",
        family="device-memory",
        title="NPU out of memory",
        patterns=(r"NPU out of memory",),
        needles=("npu out of memory",),
        cause="a die ran out of device memory",
        fix="in the rollout: lower GEN_MEM_UTIL or raise GEN_TP; in the actor update or log-prob: lower "
        "PPO_MAX_TOKEN_LEN_PER_GPU or PPO_MICRO_BATCH_SIZE_PER_GPU, or spread the model wider (TP, PP, EP); memory "
        "that grows step by step is the sleep/wake leak (vllm-ascend#9563): restart from the last checkpoint",
        prevent="the memory plan in `verl-recipe validate` (DEVICE_MEM_GIB, MEMORY_CHECK=refuse) and `verl-recipe "
        "plan` for a layout that fits",
        sources=(
            "https://github.com/vllm-project/vllm-ascend/issues/1127",
            "https://github.com/vllm-project/vllm-ascend/issues/19",
            "https://github.com/verl-project/verl/issues/6768",
            "https://github.com/vllm-project/vllm-ascend/issues/6611",
        ),
    ),
    Signature(
        id="ray-oom-killer",
        family="host-memory",
        title="Ray's memory monitor killed workers (host RAM)",
        patterns=(
            r"killed due to memory pressure \(OOM\)",
            r"ray\.exceptions\.OutOfMemoryError",
            r"Task was killed due to the node running low on memory",
            r"RayTaskError\(OutOfMemoryError\)",
        ),
        needles=("memory pressure (oom)", "outofmemoryerror", "running low on memory"),
        cause="host RAM on a node crossed Ray's memory threshold (0.95 by default) and Ray killed the newest worker: "
        "offloaded parameters and optimizer state, weight loading or a checkpoint save filled the host",
        fix="`ray logs raylet.out -ip <node>` names the biggest processes; reduce what is offloaded to the host or "
        "use more nodes; keep HF_DEACTIVATE_ASYNC_LOAD=1 (the recipes' default)",
        prevent="setting HOST_MEM_GIB (the host-RAM estimate is checked against it) and preflight row host_memory",
        sources=(
            "https://github.com/jchengai/planTF/issues/28",
            "https://github.com/verl-project/verl/issues/2950",
            "https://github.com/verl-project/verl/issues/3453",
            "https://github.com/verl-project/verl-omni/issues/402",
        ),
    ),
    Signature(
        id="disk-full",
        family="checkpoint",
        title="no space left on device",
        patterns=(r"No space left on device", r"\[Errno 28\]", r"Disk quota exceeded"),
        needles=("no space left on device", "errno 28", "disk quota exceeded"),
        cause="a file system filled up, most often the one under CKPT_DIR during a checkpoint save (each save of a "
        "large model writes hundreds of GB), or /tmp where Ray spills objects",
        fix="`df -h` on the shared storage and /tmp of each host; free space or point CKPT_DIR at a larger volume; "
        "keep fewer checkpoints (trainer.max_actor_ckpt_to_keep)",
        prevent="`verl-recipe doctor` check ckpt-space (free space under CKPT_DIR); preflight rows free_disk and "
        "shared_storage_content; setting SAVE_FREQ (fewer saves)",
        sources=(
            "https://github.com/databrickslabs/dolly/issues/139",
            "https://github.com/hiyouga/LlamaFactory/issues/5155",
        ),
    ),
    Signature(
        id="ckpt-permission",
        family="checkpoint",
        title="permission denied on the checkpoint folder",
        patterns=(r"Permission denied: \S*(?:ckpt|checkpoint|global_step)",),
        needles=("permission denied",),
        cause="the training containers cannot write CKPT_DIR: the folder belongs to another user or is mounted "
        "read-only",
        fix="make CKPT_DIR writable for the container's user on every host (same path, shared storage)",
        prevent="`verl-recipe doctor` check ckpt-space (CKPT_DIR writable); preflight row shared_storage_content; "
        "setting CKPT_DIR",
        sources=("https://github.com/thtrieu/darkflow/issues/1196",),
    ),
    Signature(
        id="ckpt-save-failed",
        family="checkpoint",
        title="checkpoint save failed",
        patterns=(
            r"in save_dist_checkpointing",
            r"checkpoint_manager\.py\", line \d+, in save_checkpoint",
            r"unexpected pos \d+ vs \d+",
            r"PytorchStreamWriter failed writing",
            r"CheckpointException",
        ),
        needles=(
            "save_dist_checkpointing",
            "in save_checkpoint",
            "unexpected pos",
            "pytorchstreamwriter",
            "checkpointexception",
        ),
        cause="verl's checkpoint save raised (torch.distributed.checkpoint / Megatron dist-checkpointing): a write "
        "cut short (space, storage), or a save path that fails on NPU (verl#2932, Megatron with MindSpeed)",
        fix="read the exception under the save frames; check space and write speed of CKPT_DIR; resume from the "
        "last complete global_step folder (RESUME_MODE=auto)",
        prevent="setting SAVE_FREQ (a save early in the run shows it works) and preflight row shared_storage_content",
        sources=(
            "https://github.com/verl-project/verl/issues/2932",
            "https://github.com/meta-pytorch/torchforge/issues/568",
        ),
    ),
    Signature(
        id="ckpt-metadata-missing",
        family="checkpoint",
        title="checkpoint metadata missing on a node (storage not shared)",
        patterns=(r"FileNotFoundError:.*(?:common\.pt|\.metadata|metadata\.json)",),
        needles=("filenotfounderror",),
        cause="the checkpoint was saved on storage that is not shared: each node wrote its own shards, and the "
        "metadata files (common.pt, .metadata, metadata.json) exist only on the node that saved them",
        fix="put CKPT_DIR on the shared storage (the same path on every host), then resume from a checkpoint "
        "written there",
        prevent="setting CKPT_DIR; preflight row shared_storage_content; `verl-recipe doctor` check ckpt-space",
        sources=("https://github.com/verl-project/verl/blob/main/docs/ascend_tutorial/en/faq/faq.rst",),
    ),
    Signature(
        id="ckpt-shape-mismatch",
        family="checkpoint",
        title="resumed a checkpoint of another model or layout",
        patterns=(r"Global shape mismatch for\s+loaded", r"Global shape mismatch for$"),
        needles=("global shape mismatch",),
        cause="auto-resume found a checkpoint written with another model size or parallel layout under the same "
        "experiment folder, and its optimizer state does not fit (strict=False does not help)",
        fix="train under another EXPERIMENT_NAME (or move the old checkpoint away), or RESUME_MODE=disable",
        prevent="the resume check of `verl-recipe validate` (verl_recipe_checkpoint.json: model, engine, layout)",
        sources=("https://github.com/verl-project/verl-ascend-recipe/blob/main/sapo/README.md",),
    ),
    Signature(
        id="hccl-heartbeat",
        family="communication",
        title="HCCL's heartbeat names the rank that failed first",
        patterns=(r"\[HeartbeatAbnormal\]\s*local rank", r"Cluster Exception Location\[IP/ID\]"),
        needles=("heartbeatabnormal", "cluster exception location"),
        cause="HCCL's cluster heartbeat saw a rank fail and told every rank: LOST (its process exited or its host "
        "went away), STUCK (its process hangs) or ERROR CQE (packets lost on its NPU link); the crimer rank is the "
        "one that failed, the others only waited for it",
        fix="read the crimer rank's host and die (the first failure below): its own error, its kernel log, its NPU "
        "link (`hccn_tool -i <die> -link -g`)",
        prevent="preflight rows npu_link, npu_net_health; CANN's logs kept per node (ASCEND_PROCESS_LOG_PATH)",
        # CANN's HCCL guide (hiascend.com, CANN 9.0.0, hcclug_000054 en / hcclug_000055 zh: "cluster heartbeat")
        # gives the line's format and an example; the pattern was tested on that example.
        sources=("https://www.hiascend.com/document",),
    ),
    Signature(
        id="hccl-unique-id",
        family="communication",
        title="a rank could not fetch HCCL's unique id from rank 0's store",
        patterns=(r"retrieving hcclUniqueId from \[\d+\] via c10d key-value store",),
        needles=("hccluniqueid",),
        cause="a rank setting up an HCCL communicator could not read the unique id from rank 0 through torch's store: "
        "rank 0 died or never got there, or the store's port is not reachable across the cluster network",
        fix="look for rank 0's own error first (the first failure below); then the cluster network between the "
        "hosts (firewall, the cluster NIC)",
        prevent="preflight row host_firewall; `verl-recipe train ... --rehearse`",
        sources=("https://github.com/vllm-project/vllm-ascend/issues/5135",),
        symptom=True,
    ),
    Signature(
        id="hccl-connect-timeout",
        family="communication",
        title="HCCL connect timeout between ranks (EI0006)",
        patterns=(
            r"\bEI0006\b",
            r"Remote Rank did not send",
            r"wait socket establish timeout",
        ),
        needles=("ei0006", "remote rank did not send", "wait socket establish timeout"),
        cause="ranks could not open their HCCL links in time: a rank crashed or started late (look for an earlier "
        "error on another rank), or the NPU network between hosts is broken (link down, IPs, TLS switch differing "
        "across hosts, firewall)",
        fix="look for the first error on other ranks (`verl-recipe diagnose` over every host's logs); then "
        "`deploy.yml --tags preflight` and `verl-recipe train ... --rehearse`; raise env.HCCL_CONNECT_TIMEOUT only "
        "when ranks are slow to start",
        prevent="preflight rows npu_link, npu_ip, npu_tls, npu_ping and host_firewall; `--rehearse` (a real "
        "all-reduce across the cluster); setting env.HCCL_CONNECT_TIMEOUT",
        sources=(
            "https://github.com/vllm-project/vllm-ascend/issues/486",
            "https://github.com/vllm-project/afd-plugin/issues/229",
            "https://github.com/vllm-project/vllm-ascend/issues/9447",
        ),
        transient=True,
        symptom=True,
    ),
    Signature(
        id="hccl-exec-timeout",
        family="timeout-hang",
        title="HCCL collective timed out (EI0002)",
        patterns=(
            r"\bEI0002\b",
            r"The wait execution of the Notify register times out",
            r"Watchdog caught collective operation timeout: WorkHCCL",
            r"hccl fftsplus task timeout",
        ),
        needles=("ei0002", "notify register times out", "workhccl", "fftsplus task timeout"),
        cause="a collective waited past HCCL_EXEC_TIMEOUT: some rank stopped reaching it (crashed, hung, or much "
        "slower), or packets were lost on the NPU network",
        fix="find the rank that did not arrive: its own error comes earlier in its log (diagnose every host's logs); "
        "a rank with no error hung; check the NPU links; raise env.HCCL_EXEC_TIMEOUT only for a step that is slow "
        "by design",
        prevent="setting env.HCCL_EXEC_TIMEOUT; preflight rows npu_link, npu_net_health and npu_ping",
        sources=(
            "https://github.com/InternLM/lmdeploy/issues/3354",
            "https://github.com/vllm-project/vllm-ascend/issues/382",
            "https://github.com/vllm-project/vllm-ascend/issues/16652",
            "https://github.com/vllm-project/vllm-ascend/issues/3413",
        ),
        transient=True,
        symptom=True,
    ),
)

BY_ID = {s.id: s for s in SIGNATURES}
