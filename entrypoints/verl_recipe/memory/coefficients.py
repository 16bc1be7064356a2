"""Every number the memory plan uses, with where it comes from; sizes in bytes (GiB = 2**30 bytes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..settingtypes import ARR

GIB = float(2**30)
MIB = float(2**20)


@dataclass(frozen=True)
class Coefficients:
    """Every number the estimate uses. Change one here and docs/memory.md's worked examples with it."""

    # Model state, bytes per parameter (Megatron distributed optimizer: 6 + 12/d, bf16 params and fp32 grads;
    # Megatron-LM docs/api-guide/dist_optimizer.md; ZeRO, Rajbhandari et al. 2020, section 3.1).
    param_bf16: float = 2.0
    grad_fp32: float = 4.0
    optimizer_sharded: float = 12.0  # fp32 master copy + Adam exp_avg + exp_avg_sq, divided by d
    # mcore's HybridDeviceOptimizer (optimizer_cpu_offload) on the host: fp32 master + pinned fp32 grad copy +
    # exp_avg + exp_avg_sq, divided by d (megatron-core 0.16.0 optimizer/cpu_offloading/hybrid_optimizer.py).
    optimizer_cpu_offload_host: float = 16.0
    # FSDP2 in verl keeps fp32 sharded parameters (engine/fsdp.yaml model_dtype: fp32) with bf16 compute:
    # 4 (param) + 4 (grad) + 8 (Adam moments) = ZeRO's 16 bytes per parameter, divided by the shard group.
    fsdp_param: float = 4.0
    fsdp_grad: float = 4.0
    fsdp_optimizer: float = 8.0
    # Activations (Korthikanti et al. 2022, arXiv:2205.05198, with sequence parallelism: divided by TP).
    act_layer_input: float = 2.0  # full recompute keeps only each chunk's bf16 input: 2 s b h
    act_layer_working: float = 34.0  # one layer recomputed in full, flash attention (no 5as/h term): 34 s b h
    act_moe_per_routed_token: float = 2.0  # x (2h + 3f) per routed token copy: dispatch, fc1 (GLU), activation
    gdn_chunk_tokens: int = 64  # chunked delta rule: one fp32 (vh x kd x vd) state per 64-token chunk
    # Bytes per logit where verl materialises them (its Megatron and FSDP actors without use_fused_kernels, which no
    # recipe sets; verl docs/perf/perf_tuning.rst: entropy at [bsz*seq, V] x (4 + 2 + 1) on top of bf16 logits).
    logits_train: float = 14.0  # bytes per logit in the update: bf16 logits, clone, softmax, fp32 CE, backward
    logits_forward: float = 10.0  # bytes per logit in a forward-only log-prob: the same without the backward
    # vLLM (engine args; verl docs/examples/config.rst: the share of *total* device memory).
    kv_bytes: float = 2.0  # bf16 KV cache
    gdn_state_bytes: float = 4.0  # fp32 recurrent state (config.json mamba_ssm_dtype float32)
    gdn_conv_bytes: float = 2.0
    vllm_reserved: float = 3.0 * GIB  # profiled activation peak at max_num_batched_tokens + graphs, assumed
    # vllm-ascend holds more than gpu_memory_utilization while awake: 0.85 of a 64 GB die in use with 0.7 set
    # (vllm-project/vllm-ascend#3368, Qwen3-Next, the same GDN hybrid), and 0.85 ran out of memory on an A3 die where
    # 0.75 ran (#5020). Counted on top of the share in the rollout phase on NPU.
    vllm_beyond_share_npu: float = 0.15
    # Captured graphs are not offloaded when vLLM sleeps: "the memory stay[s] in gpu when update actor is running"
    # (verl docs/perf/perf_tuning.rst, cudagraph_capture_sizes). Counted in every phase but the rollout while
    # enforce_eager is false (verl's default). The size is assumed: no published measurement was found.
    vllm_graph_pool_asleep: float = 2.0 * GIB
    # Collective buffers: each HCCL communicator takes 2 x HCCL_BUFFSIZE MB (CANN docs, HCCL_BUFFSIZE;
    # default 200); NCCL's are far smaller, 64 MiB per communicator assumed.
    hccl_buffers_per_comm: float = 2.0
    hccl_default_buffsize_mb: float = 200.0
    nccl_bytes_per_comm: float = 64 * MIB
    # Allocator fragmentation on what the trainer allocates (5-15 % observed; the middle is used).
    fragmentation: float = 0.10
    # validate warns when the peak leaves less than this share of the die free.
    warn_headroom: float = 0.10
    # Device memory when DEVICE_MEM_GIB is not set: an A3 die has 64 GiB of HBM (npu-smi: 65536 MB).
    device_gib: tuple[tuple[str, float], ...] = (("npu", 64.0), ("gpu", 80.0))
    # Vision tower of Qwen3.5 (transformers Qwen3_5MoeVisionConfig defaults): depth, hidden, MLP, patch,
    # temporal patch, spatial merge, position embeddings, input channels.
    vision: tuple[int, ...] = (27, 1152, 4304, 16, 2, 2, 2304, 3)


COEF = Coefficients()

# verl 0.8.0 defaults for the keys the estimate reads when a launch does not set them
# (verl/trainer/config/engine/megatron.yaml, engine/fsdp.yaml, actor/actor.yaml, rollout/rollout.yaml).
VERL_DEFAULTS: dict[str, Any] = {
    f"{ARR}.actor.megatron.param_offload": False,
    f"{ARR}.actor.megatron.grad_offload": False,
    f"{ARR}.actor.megatron.optimizer_offload": False,
    f"{ARR}.ref.megatron.param_offload": False,
    f"{ARR}.actor.optim.override_optimizer_config.optimizer_cpu_offload": False,
    f"{ARR}.actor.fsdp_config.param_offload": False,
    f"{ARR}.actor.fsdp_config.optimizer_offload": False,
    f"{ARR}.actor.fsdp_config.offload_policy": False,
    f"{ARR}.ref.fsdp_config.param_offload": False,
    f"{ARR}.ref.fsdp_config.offload_policy": False,
    f"{ARR}.actor.use_kl_loss": False,
    "algorithm.use_kl_in_reward": False,
    f"{ARR}.actor.use_dynamic_bsz": False,
    f"{ARR}.rollout.log_prob_use_dynamic_bsz": False,
    f"{ARR}.ref.log_prob_use_dynamic_bsz": False,
    f"{ARR}.actor.ppo_max_token_len_per_gpu": 16384,
    f"{ARR}.rollout.log_prob_max_token_len_per_gpu": None,  # falls back to the actor's
    f"{ARR}.ref.log_prob_max_token_len_per_gpu": None,
    f"{ARR}.rollout.checkpoint_engine.update_weights_bucket_megabytes": 2048,
    f"{ARR}.rollout.engine_kwargs.vllm.max_model_len": None,
    f"{ARR}.rollout.max_model_len": None,
    f"{ARR}.actor.megatron.override_transformer_config.recompute_granularity": None,
    f"{ARR}.actor.megatron.override_transformer_config.recompute_num_layers": None,
    f"{ARR}.model.enable_gradient_checkpointing": True,
    f"{ARR}.rollout.enforce_eager": False,
}
PHASES = ("rollout", "log-prob", "update", "weight-sync")
