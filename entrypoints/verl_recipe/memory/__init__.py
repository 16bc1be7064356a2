"""The memory plan: per die and per phase, what a launch will hold, before anything starts.

Every coefficient lives in `COEF` below, with where it comes from; docs/memory.md gives the formulas, their
published sources and hand-worked examples that tests/unit/test_memory.py pins. All sizes are bytes; the report
shows GiB (2**30 bytes).

Phases of one verl hybrid-engine step, in order (verl 0.8.0 `workers/engine_workers.py`): rollout with vLLM awake,
log-prob forward (old policy, then the reference), actor update, weight sync (vLLM weights resumed, the trainer's
weights sent bucket by bucket, then the trainer offloaded and vLLM's KV cache resumed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..hydra_syntax import parse_value
from ..models import ModelArch
from ..settings import ARR

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


# ---- parameter counts --------------------------------------------------------------------------------------
def attention_params(m: ModelArch) -> int:
    """Gated attention: q (with its output gate, so 2x wide), k, v, o, q/k norms."""
    h, nq, nkv, hd = m.hidden_size, m.num_attention_heads, m.num_kv_heads, m.head_dim
    return h * nq * hd * 2 + 2 * h * nkv * hd + nq * hd * h + 2 * hd


def gdn_conv_dim(m: ModelArch) -> int:
    return 2 * m.linear_num_key_heads * m.linear_key_head_dim + m.linear_num_value_heads * m.linear_value_head_dim


def gdn_params(m: ModelArch) -> int:
    """Gated DeltaNet: in_proj_qkv, in_proj_z, in_proj_a/b, causal conv, out_proj, A_log, dt_bias, norm."""
    h, vh, vd = m.hidden_size, m.linear_num_value_heads, m.linear_value_head_dim
    conv = gdn_conv_dim(m)
    return h * conv + h * vh * vd + 2 * h * vh + conv * m.linear_conv_kernel_dim + vh * vd * h + 2 * vh + vd


def mixer_params(m: ModelArch, layer: int) -> int:
    return attention_params(m) if m.is_full_attention(layer) else gdn_params(m)


def routed_expert_params(m: ModelArch) -> int:
    """All routed experts of one layer (gate, up, down)."""
    return m.num_experts * 3 * m.hidden_size * m.moe_ffn_hidden_size


def shared_expert_params(m: ModelArch) -> int:
    return 3 * m.hidden_size * m.shared_ffn


def replicated_layer_params(m: ModelArch) -> int:
    """Router, shared-expert gate and the two norms: not split by tensor parallelism."""
    return m.hidden_size * m.num_experts + m.hidden_size + 2 * m.hidden_size


def vision_params(m: ModelArch) -> int:
    if not m.has_vision:
        return 0
    depth, hid, mlp, patch, tpatch, merge, pos, chans = COEF.vision
    block = (hid * 3 * hid + 3 * hid) + (hid * hid + hid) + (hid * mlp + mlp) + (mlp * hid + hid) + 4 * hid
    merged = hid * merge * merge
    merger = 2 * hid + (merged * merged + merged) + (merged * m.hidden_size + m.hidden_size)
    return depth * block + chans * tpatch * patch * patch * hid + hid + pos * hid + merger


def embedding_params(m: ModelArch) -> int:
    return m.vocab_size * m.hidden_size


def text_params(m: ModelArch) -> int:
    layers = sum(
        mixer_params(m, i) + routed_expert_params(m) + shared_expert_params(m) + replicated_layer_params(m)
        for i in range(m.num_layers)
    )
    heads = 1 if m.tie_word_embeddings else 2
    return layers + heads * embedding_params(m) + m.hidden_size


def expert_params_total(m: ModelArch) -> int:
    return m.num_layers * routed_expert_params(m)


def stage_layers(m: ModelArch, pp: int, stage: int) -> range:
    per = m.num_layers // max(pp, 1)
    return range(stage * per, (stage + 1) * per)


def megatron_rank_params(m: ModelArch, tp: int, pp: int, ep: int, etp: int, stage: int) -> tuple[float, float]:
    """(dense, expert) parameters held by one rank of pipeline stage `stage` (0-based)."""
    layers = stage_layers(m, pp, stage)
    dense = sum((mixer_params(m, i) + shared_expert_params(m)) / tp + replicated_layer_params(m) for i in layers)
    if stage == 0:
        dense += embedding_params(m) / tp + vision_params(m)  # the vision tower is replicated over TP
    if stage == pp - 1:
        dense += m.hidden_size + (0 if m.tie_word_embeddings and pp == 1 else embedding_params(m) / tp)
    expert = len(layers) * routed_expert_params(m) / (ep * etp)
    return float(dense), float(expert)


# ---- vLLM ----------------------------------------------------------------------------------------------------
def vllm_weight_bytes(m: ModelArch, gen_tp: int, gen_dp: int) -> float:
    """Per die: everything but the routed experts split over GEN_TP; routed experts over the whole replica
    (expert parallel, or tensor parallel across DP x TP when GEN_EP is 1, as vLLM does for MoE layers)."""
    non_expert = text_params(m) - expert_params_total(m) + vision_params(m)
    return COEF.param_bf16 * (non_expert / gen_tp + expert_params_total(m) / (gen_tp * gen_dp))


def kv_bytes_per_token(m: ModelArch, gen_tp: int) -> float:
    """Full-attention layers only; a KV head is replicated when GEN_TP exceeds the KV heads."""
    heads = max(1.0, m.num_kv_heads / gen_tp)
    return m.num_full_attention_layers * 2 * heads * m.head_dim * COEF.kv_bytes


def gdn_state_bytes_per_seq(m: ModelArch, gen_tp: int) -> float:
    """Gated DeltaNet layers keep a fixed-size state per sequence: the recurrent state and the conv window."""
    n_lin = m.num_layers - m.num_full_attention_layers
    ssm = (m.linear_num_value_heads / gen_tp) * m.linear_key_head_dim * m.linear_value_head_dim
    conv = (gdn_conv_dim(m) / gen_tp) * (m.linear_conv_kernel_dim - 1)
    return n_lin * (ssm * COEF.gdn_state_bytes + conv * COEF.gdn_conv_bytes)


# ---- the estimate --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Term:
    name: str
    bytes: float


@dataclass
class PhaseEstimate:
    phase: str
    where: str  # which pipeline stage (or "every die")
    terms: list[Term]

    @property
    def total(self) -> float:
        return sum(t.bytes for t in self.terms)

    def largest(self, n: int = 3) -> list[Term]:
        return sorted((t for t in self.terms if t.bytes > 0), key=lambda t: -t.bytes)[:n]


@dataclass
class Estimate:
    recipe: str
    device_bytes: float
    phases: list[PhaseEstimate]  # the worst stage of each phase
    host_terms: list[Term]
    host_bytes: float | None  # None: HOST_MEM_GIB not set, not checked
    rollout: dict[str, float] = field(default_factory=dict)

    @property
    def peak(self) -> PhaseEstimate:
        return max(self.phases, key=lambda p: p.total)

    @property
    def headroom(self) -> float:
        return self.device_bytes - self.peak.total

    @property
    def host_total(self) -> float:
        return sum(t.bytes for t in self.host_terms)

    def fits(self) -> bool:
        return self.headroom >= 0 and self.rollout.get("sequences_per_rank", 1.0) >= 1.0 and self.host_fits()

    def host_fits(self) -> bool:
        return self.host_bytes is None or self.host_total <= self.host_bytes

    def to_dict(self) -> dict[str, Any]:
        def gib(x: float) -> float:
            return round(x / GIB, 2)

        return {
            "unit": "GiB",
            "device": gib(self.device_bytes),
            "peak_phase": self.peak.phase,
            "peak": gib(self.peak.total),
            "headroom": gib(self.headroom),
            "headroom_share": round(self.headroom / self.device_bytes, 3),
            "phases": {
                p.phase: {"where": p.where, "total": gib(p.total), "terms": {t.name: gib(t.bytes) for t in p.terms}}
                for p in self.phases
            },
            "rollout": {
                "budget": gib(self.rollout["budget"]),
                "weights": gib(self.rollout["weights"]),
                "kv_state_pool": gib(self.rollout["kv_state_pool"]),
                "kv_per_token_kib": round(self.rollout["kv_per_token"] / 1024, 2),
                "state_per_sequence_mib": round(self.rollout["state_per_sequence"] / MIB, 2),
                "sequence_at_max_len_mib": round(self.rollout["sequence_at_max_len"] / MIB, 1),
                "max_model_len": int(self.rollout["max_model_len"]),
                "sequences_per_rank": math.floor(self.rollout["sequences_per_rank"]),
            },
            "host_per_node": {
                "total": gib(self.host_total),
                "ram": gib(self.host_bytes) if self.host_bytes is not None else None,
                "terms": {t.name: gib(t.bytes) for t in self.host_terms},
            },
        }


class Knobs:
    """The launch's Hydra values the estimate reads (rendered overrides, then extra overrides), else verl's."""

    def __init__(self, hydra: Mapping[str, Any], env: Mapping[str, str]) -> None:
        self.hydra = {str(k).lstrip("+"): v for k, v in hydra.items()}
        self.env = dict(env)

    @classmethod
    def from_launch(cls, overrides: Mapping[str, Any], extra: list[str], env: Mapping[str, str]) -> Knobs:
        hydra = dict(overrides)
        for arg in extra:
            key, sep, raw = arg.partition("=")
            if sep:
                hydra[key.lstrip("~")] = raw
        return cls(hydra, env)

    def get(self, key: str) -> Any:
        return parse_value(self.hydra.get(key, VERL_DEFAULTS.get(key)))

    def flag(self, key: str) -> bool:
        return bool(self.get(key))

    def num(self, key: str, default: float) -> float:
        value = self.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default

    def token_budget(self, key: str) -> float:
        """A dynamic-batching token budget per device; the log-prob ones fall back to the actor's (verl's rule)."""
        return self.num(key, self.num(f"{ARR}.actor.ppo_max_token_len_per_gpu", 16384))


@dataclass(frozen=True)
class Layout:
    engine: str
    device: str
    nnodes: int
    ndev: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 1
    vpp: int = 0
    fsdp: int = -1
    sp: int = 1
    gen_tp: int = 1
    gen_dp: int = 1
    gen_ep: int = 1

    @property
    def world(self) -> int:
        return self.nnodes * self.ndev

    @classmethod
    def of(cls, engine: str, v: Mapping[str, Any]) -> Layout:
        def i(name: str, default: int) -> int:
            value = v.get(name)
            return int(value) if isinstance(value, int) else default

        return cls(
            engine=engine,
            device=str(v.get("DEVICE") or "npu"),
            nnodes=i("NNODES", 1),
            ndev=i("NDEVICES_PER_NODE", 16),
            tp=i("TP", 1),
            pp=i("PP", 1),
            cp=i("CP", 1),
            ep=i("EP", 1),
            etp=i("ETP", 1),
            vpp=i("VPP", 0),
            fsdp=i("FSDP_SIZE", -1),
            sp=i("SP_SIZE", 1),
            gen_tp=i("GEN_TP", 1),
            gen_dp=i("GEN_DP", 1),
            gen_ep=i("GEN_EP", 1),
        )


def device_capacity(v: Mapping[str, Any], device: str) -> float:
    raw = v.get("DEVICE_MEM_GIB")
    if raw is not None:
        return float(raw) * GIB
    return dict(COEF.device_gib).get(device, 64.0) * GIB


def comm_bytes(layout: Layout, groups: list[int], knobs: Knobs) -> tuple[float, int]:
    """(bytes, communicators): one communicator per process group of more than one rank."""
    n = sum(1 for g in groups if g > 1)
    if layout.device == "npu":
        try:
            buff = float(knobs.env.get("HCCL_BUFFSIZE", COEF.hccl_default_buffsize_mb))
        except ValueError:
            buff = COEF.hccl_default_buffsize_mb
        return n * COEF.hccl_buffers_per_comm * buff * 1e6, n
    return n * COEF.nccl_bytes_per_comm, n


def layer_working_bytes(m: ModelArch, tokens: float, tp: int) -> float:
    """One layer computed in full (forward, or recomputed for the backward) on `tokens` tokens per die."""
    t = tokens / tp
    h = m.hidden_size
    dense = COEF.act_layer_working * t * h
    moe = t * m.experts_per_token * COEF.act_moe_per_routed_token * (2 * h + 3 * m.moe_ffn_hidden_size)
    gdn = 0.0
    if m.has_gdn:
        chunks = math.ceil(tokens / COEF.gdn_chunk_tokens)
        gdn = (m.linear_num_value_heads / tp) * m.linear_key_head_dim * m.linear_value_head_dim * 4 * chunks
    return dense + moe + gdn


def _with_margin(terms: list[Term], comm: float, ncomm: int, exempt: tuple[str, ...] = ()) -> list[Term]:
    allocated = sum(t.bytes for t in terms if t.name not in exempt)
    out = [t for t in terms if t.bytes > 0]
    out.append(
        Term(f"fragmentation margin ({COEF.fragmentation:.0%} of the trainer's)", COEF.fragmentation * allocated)
    )
    out.append(Term(f"collective buffers ({ncomm} communicators)", comm))
    return out


def _rollout_phase(rollout_terms: list[Term], resident: list[Term], train_comm: float) -> list[Term]:
    """vLLM's share of the die, plus whatever the trainer keeps on it while vLLM is awake."""
    kept = [t for t in resident if t.bytes > 0]
    out = [*rollout_terms, *kept]
    if kept:
        margin = COEF.fragmentation * sum(t.bytes for t in kept)
        out.append(Term(f"fragmentation margin ({COEF.fragmentation:.0%} of the trainer's)", margin))
    out.append(Term("trainer collective buffers", train_comm))
    return out


def _seq_len(v: Mapping[str, Any]) -> int:
    return int(v.get("MAX_PROMPT_LENGTH") or 0) + int(v.get("MAX_RESPONSE_LENGTH") or 0)


def _tokens(v: Mapping[str, Any], knobs: Knobs, dyn_key: str, budget_key: str, micro: int) -> float:
    s = _seq_len(v)
    if knobs.flag(dyn_key):
        return max(knobs.token_budget(budget_key), float(s))
    return float(micro * s)


def _rollout(m: ModelArch, lay: Layout, v: Mapping[str, Any], knobs: Knobs, cap: float) -> tuple[list[Term], dict]:
    util = float(v.get("GEN_MEM_UTIL") or 0.0)
    budget = util * cap
    weights = vllm_weight_bytes(m, lay.gen_tp, lay.gen_dp)
    groups = [lay.gen_tp, lay.gen_dp, lay.gen_ep, lay.gen_tp * lay.gen_dp]
    vcomm, _ = comm_bytes(lay, groups, knobs)
    pool = budget - weights - COEF.vllm_reserved - vcomm
    max_len = knobs.get(f"{ARR}.rollout.engine_kwargs.vllm.max_model_len") or knobs.get(f"{ARR}.rollout.max_model_len")
    length = int(max_len) if isinstance(max_len, int | float) else _seq_len(v)
    per_seq = length * kv_bytes_per_token(m, lay.gen_tp) + gdn_state_bytes_per_seq(m, lay.gen_tp)
    info = {
        "budget": budget,
        "weights": weights,
        "kv_state_pool": pool,
        "kv_per_token": kv_bytes_per_token(m, lay.gen_tp),
        "state_per_sequence": gdn_state_bytes_per_seq(m, lay.gen_tp),
        "sequence_at_max_len": per_seq,
        "max_model_len": float(length),
        "sequences_per_rank": max(pool, 0.0) / per_seq if per_seq else 0.0,
    }
    terms = [
        Term("vLLM weights", weights),
        Term("vLLM KV + Gated DeltaNet state pool", max(pool, 0.0)),
        Term("vLLM activations and graphs (reserved)", COEF.vllm_reserved),
        Term("vLLM collective buffers", vcomm),
    ]
    return terms, info


def estimate(recipe_name: str, engine: str, m: ModelArch, v: Mapping[str, Any], knobs: Knobs) -> Estimate:
    lay = Layout.of(engine, v)
    cap = device_capacity(v, lay.device)
    rollout_terms, info = _rollout(m, lay, v, knobs, cap)
    vllm_w = info["weights"]
    has_ref = knobs.flag(f"{ARR}.actor.use_kl_loss") or knobs.flag("algorithm.use_kl_in_reward")
    bucket = knobs.num(f"{ARR}.rollout.checkpoint_engine.update_weights_bucket_megabytes", 2048) * MIB
    t_update = _tokens(
        v,
        knobs,
        f"{ARR}.actor.use_dynamic_bsz",
        f"{ARR}.actor.ppo_max_token_len_per_gpu",
        int(v.get("PPO_MICRO_BATCH_SIZE_PER_GPU") or 1),
    )
    t_logprob = _tokens(
        v,
        knobs,
        f"{ARR}.rollout.log_prob_use_dynamic_bsz",
        f"{ARR}.rollout.log_prob_max_token_len_per_gpu",
        int(v.get("LOG_PROB_MICRO_BATCH_SIZE_PER_GPU") or 1),
    )
    if engine == "megatron":
        phases, host = _megatron(m, lay, v, knobs, rollout_terms, vllm_w, has_ref, bucket, t_update, t_logprob)
    else:
        phases, host = _fsdp(m, lay, v, knobs, rollout_terms, vllm_w, has_ref, bucket, t_update, t_logprob)
    _vllm_outside_share(phases, lay, knobs, cap)
    # vLLM's sleep level 1 (verl's hybrid engine) copies the weights to host memory and frees the KV cache, on GPUs
    # as on NPUs (vLLM docs, sleep mode; CuMemAllocator backs up the "weights" pool to pinned CPU memory).
    host.append(Term("vLLM weights asleep (sleep level 1)", vllm_w))
    host_node = [Term(t.name, t.bytes * lay.ndev) for t in host]
    ram = v.get("HOST_MEM_GIB")
    host_bytes = float(ram) * GIB if ram not in (None, "", 0, "0") and float(ram) > 0 else None
    return Estimate(recipe_name, cap, phases, host_node, host_bytes, info)


def _vllm_outside_share(phases: list[PhaseEstimate], lay: Layout, knobs: Knobs, cap: float) -> None:
    """What vLLM keeps on the die outside GEN_MEM_UTIL x die: beyond its share while awake (vllm-ascend), and its
    captured graphs while asleep. Not part of the trainer's fragmentation margin."""
    graphs = not knobs.flag(f"{ARR}.rollout.enforce_eager")
    for pe in phases:
        if pe.phase == "rollout":
            if lay.device == "npu":
                share = COEF.vllm_beyond_share_npu
                pe.terms.append(Term(f"vLLM beyond GEN_MEM_UTIL on vllm-ascend ({share:.0%} of the die)", share * cap))
        elif graphs:
            pe.terms.append(Term("vLLM graph pool (kept while vLLM sleeps)", COEF.vllm_graph_pool_asleep))


def _megatron(
    m: ModelArch,
    lay: Layout,
    v: Mapping[str, Any],
    knobs: Knobs,
    rollout_terms: list[Term],
    vllm_w: float,
    has_ref: bool,
    bucket: float,
    t_update: float,
    t_logprob: float,
) -> tuple[list[PhaseEstimate], list[Term]]:
    mg = f"{ARR}.actor.megatron"
    p_off = knobs.flag(f"{mg}.param_offload")
    g_off = knobs.flag(f"{mg}.grad_offload")
    o_off = knobs.flag(f"{mg}.optimizer_offload")
    o_cpu = knobs.flag(f"{ARR}.actor.optim.override_optimizer_config.optimizer_cpu_offload")
    ref_off = knobs.flag(f"{ARR}.ref.megatron.param_offload")
    w = lay.world
    dp = max(1, w // (lay.tp * lay.pp * lay.cp))
    d_dense = dp * lay.cp
    d_expert = max(1, w // (lay.etp * lay.ep * lay.pp))
    groups = [lay.tp, lay.pp, lay.cp, dp, lay.ep, lay.etp, d_expert, 2 if lay.pp > 1 else 1, w]
    groups += [lay.gen_tp, lay.gen_dp, lay.gen_ep, lay.gen_tp * lay.gen_dp]
    comm, ncomm = comm_bytes(lay, groups, knobs)
    train_comm, _ = comm_bytes(lay, groups[:9], knobs)
    # activations
    otc = f"{mg}.override_transformer_config"
    granularity = knobs.get(f"{otc}.recompute_granularity")
    chunk = int(knobs.num(f"{otc}.recompute_num_layers", 1)) or 1
    micro = int(v.get("PPO_MICRO_BATCH_SIZE_PER_GPU") or 1)
    mini, n = int(v.get("PPO_MINI_BATCH_SIZE") or 1), int(v.get("ROLLOUT_N") or 1)
    micro_batches = max(1, (mini * n) // dp // micro) if not knobs.flag(f"{ARR}.actor.use_dynamic_bsz") else lay.pp
    vpp_factor = 1 + (lay.pp - 1) / (lay.pp * lay.vpp) if lay.vpp else 1.0
    h = m.hidden_size
    phases: dict[str, PhaseEstimate] = {}
    host_worst: list[Term] = []
    for stage in sorted({0, lay.pp - 1}):
        where = f"pipeline stage {stage + 1}/{lay.pp}"
        dense, expert = megatron_rank_params(m, lay.tp, lay.pp, lay.ep, lay.etp, stage)
        params = dense + expert
        p_bytes = COEF.param_bf16 * params
        g_bytes = COEF.grad_fp32 * params
        o_bytes = 0.0 if o_cpu else COEF.optimizer_sharded * (dense / d_dense + expert / d_expert)
        ref_bytes = p_bytes if has_ref else 0.0
        layers = len(stage_layers(m, lay.pp, stage))
        tu = t_update / lay.cp
        in_flight = min(lay.pp - stage, micro_batches) * vpp_factor
        working = layer_working_bytes(m, tu, lay.tp)
        if granularity == "full":
            stored = COEF.act_layer_input * tu * h / lay.tp * math.ceil(layers / chunk)
            working *= min(chunk, layers)
        else:  # selective or none: with flash attention both keep every layer's activations (34 s b h / t)
            stored = layers * layer_working_bytes(m, tu, lay.tp)
        last = stage == lay.pp - 1
        vocab = m.vocab_size / lay.tp
        logits_u = tu * vocab * COEF.logits_train if last else 0.0
        tl = t_logprob / lay.cp
        logits_f = tl * vocab * COEF.logits_forward if last else 0.0
        # what stays on the die between phases
        resident = [
            Term("actor bf16 parameters", 0.0 if p_off else p_bytes),
            Term("actor fp32 gradients", 0.0 if g_off else g_bytes),
            Term("optimizer state", 0.0 if o_off else o_bytes),
            Term("reference bf16 parameters", 0.0 if ref_off else ref_bytes),
        ]

        def res(name: str, r: list[Term] = resident) -> float:
            return next(t.bytes for t in r if t.name == name)

        candidates = {
            "rollout": _rollout_phase(rollout_terms, resident, train_comm),
            "log-prob": _with_margin(
                [
                    Term("actor bf16 parameters", p_bytes),
                    Term("actor fp32 gradients", res("actor fp32 gradients")),
                    Term("optimizer state", res("optimizer state")),
                    Term(
                        "reference bf16 parameters",
                        ref_bytes if (has_ref and (not ref_off or not p_off)) else 0.0,
                    ),
                    Term("one layer's forward working set", layer_working_bytes(m, tl, lay.tp)),
                    Term("logits (forward)", logits_f),
                ],
                comm,
                ncomm,
            ),
            "update": _with_margin(
                [
                    Term("actor bf16 parameters", p_bytes),
                    Term("actor fp32 gradients", g_bytes),
                    Term("optimizer state", o_bytes),
                    Term("reference bf16 parameters", res("reference bf16 parameters")),
                    Term(f"activation checkpoints ({in_flight:g} micro batches in flight)", stored * in_flight),
                    Term("recompute working set", working),
                    Term("logits (update)", logits_u),
                ],
                comm,
                ncomm,
            ),
            "weight-sync": _with_margin(
                [
                    Term("vLLM weights", vllm_w),
                    Term("actor bf16 parameters", p_bytes),
                    Term("weight-sync bucket", bucket),
                    Term("actor fp32 gradients", res("actor fp32 gradients")),
                    Term("optimizer state", res("optimizer state")),
                    Term("reference bf16 parameters", res("reference bf16 parameters")),
                ],
                comm,
                ncomm,
                exempt=("vLLM weights",),
            ),
        }
        for name, terms in candidates.items():
            pe = PhaseEstimate(name, where, terms)
            if name not in phases or pe.total > phases[name].total:
                phases[name] = pe
        host = []
        if p_off:
            host.append(Term("actor parameters offloaded", p_bytes))
        if o_cpu:
            host.append(
                Term(
                    "optimizer on the CPU (fp32 master, grad copy, Adam)",
                    COEF.optimizer_cpu_offload_host * (dense / d_dense + expert / d_expert),
                )
            )
        elif o_off:
            host.append(Term("optimizer state offloaded", o_bytes))
        if has_ref and ref_off:
            host.append(Term("reference parameters offloaded", ref_bytes))
        if sum(t.bytes for t in host) >= sum(t.bytes for t in host_worst):
            host_worst = host
    return [phases[p] for p in PHASES], host_worst


def _fsdp(
    m: ModelArch,
    lay: Layout,
    v: Mapping[str, Any],
    knobs: Knobs,
    rollout_terms: list[Term],
    vllm_w: float,
    has_ref: bool,
    bucket: float,
    t_update: float,
    t_logprob: float,
) -> tuple[list[PhaseEstimate], list[Term]]:
    fc = f"{ARR}.actor.fsdp_config"
    policy = knobs.flag(f"{fc}.offload_policy")
    p_off = knobs.flag(f"{fc}.param_offload") or policy
    o_off = knobs.flag(f"{fc}.optimizer_offload") or policy
    ref_off = knobs.flag(f"{ARR}.ref.fsdp_config.param_offload") or knobs.flag(f"{ARR}.ref.fsdp_config.offload_policy")
    w = lay.world
    d = w if lay.fsdp <= 0 or lay.fsdp >= w else lay.fsdp
    groups = [d, w // d, lay.sp, w, lay.gen_tp, lay.gen_dp, lay.gen_ep, lay.gen_tp * lay.gen_dp]
    comm, ncomm = comm_bytes(lay, groups, knobs)
    train_comm, _ = comm_bytes(lay, groups[:4], knobs)
    total = text_params(m) + vision_params(m)
    p_bytes = COEF.fsdp_param * total / d
    g_bytes = COEF.fsdp_grad * total / d
    o_bytes = COEF.fsdp_optimizer * total / d
    ref_bytes = COEF.fsdp_param * total / d if has_ref else 0.0
    # The largest unit FSDP gathers at once: one decoder layer (or the embedding), bf16, plus the next prefetched.
    unit = max(
        max(mixer_params(m, i) for i in range(m.num_layers))
        + routed_expert_params(m)
        + shared_expert_params(m)
        + replicated_layer_params(m),
        embedding_params(m),
    )
    gathered = 2 * COEF.param_bf16 * unit
    grad_unit = COEF.fsdp_grad * unit
    h = m.hidden_size
    ckpt = knobs.flag(f"{ARR}.model.enable_gradient_checkpointing")
    tu, tl = t_update / lay.sp, t_logprob / lay.sp
    stored = COEF.act_layer_input * tu * h * m.num_layers if ckpt else m.num_layers * layer_working_bytes(m, tu, 1)
    resident = [
        Term("actor fp32 parameters (sharded)", 0.0 if p_off else p_bytes),
        Term("optimizer state (sharded)", 0.0 if o_off else o_bytes),
        Term("reference parameters (sharded)", 0.0 if ref_off else ref_bytes),
    ]
    phases = [
        PhaseEstimate("rollout", "every die", _rollout_phase(rollout_terms, resident, train_comm)),
        PhaseEstimate(
            "log-prob",
            "every die",
            _with_margin(
                [
                    *resident,
                    Term("gathered layers (bf16, with prefetch)", gathered),
                    Term("one layer's forward working set", layer_working_bytes(m, tl, 1)),
                    Term("logits (forward)", tl * m.vocab_size * COEF.logits_forward),
                ],
                comm,
                ncomm,
            ),
        ),
        PhaseEstimate(
            "update",
            "every die",
            _with_margin(
                [
                    *resident,
                    Term("actor fp32 gradients (sharded)", 0.0 if policy else g_bytes),
                    Term("optimizer state in the step", 0.0 if policy or not o_off else o_bytes),
                    Term("gathered layers (bf16, with prefetch)", gathered),
                    Term("one layer's unsharded fp32 gradients", grad_unit),
                    Term("activation checkpoints" if ckpt else "activations", stored),
                    Term("recompute working set", layer_working_bytes(m, tu, 1)),
                    Term("logits (update)", tu * m.vocab_size * COEF.logits_train),
                ],
                comm,
                ncomm,
            ),
        ),
        PhaseEstimate(
            "weight-sync",
            "every die",
            _with_margin(
                [
                    Term("vLLM weights", vllm_w),
                    *resident,
                    Term("gathered layers (bf16, with prefetch)", gathered),
                    Term("weight-sync bucket", bucket),
                ],
                comm,
                ncomm,
                exempt=("vLLM weights",),
            ),
        ),
    ]
    host: list[Term] = []
    if p_off:
        host.append(Term("actor parameters offloaded", p_bytes + (g_bytes if policy else 0.0)))
    if o_off:
        host.append(Term("optimizer state offloaded", o_bytes))
    if has_ref and ref_off:
        host.append(Term("reference parameters offloaded", ref_bytes))
    return phases, host


# ---- report --------------------------------------------------------------------------------------------------
def gib(x: float) -> str:
    return f"{x / GIB:.1f} GiB"


FIXES = {
    "logits": "lower LOG_PROB_MICRO_BATCH_SIZE_PER_GPU / PPO_MICRO_BATCH_SIZE_PER_GPU or raise TP",
    "vLLM": "lower GEN_MEM_UTIL, or raise GEN_TP / GEN_DP",
    "optimizer": "offload the optimizer (optimizer_cpu_offload) or raise EP / PP / TP",
    "gradients": "raise EP / PP / TP, or set grad_offload",
    "parameters": "raise EP / PP / TP, or set param_offload",
    "activation": "lower the micro batch or the token budget, or raise PP",
}


def fix_for(terms: list[Term]) -> str:
    for term in terms:
        for key, fix in FIXES.items():
            if key in term.name:
                return fix
    return "choose a layout that spreads the model wider"


def problems(est: Estimate, recipe: str, nnodes: int) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(problems as (subject, what, fix), warnings) for validate."""
    out: list[tuple[str, str, str]] = []
    warnings: list[str] = []
    plan = f"`verl-recipe plan {recipe} --nodes {nnodes}` lists layouts that fit"
    for p in est.phases:
        if p.total > est.device_bytes:
            big = p.largest()
            out.append(
                (
                    f"memory ({p.phase}, {p.where})",
                    f"needs about {gib(p.total)} per die, more than the {gib(est.device_bytes)} it has; largest: "
                    + ", ".join(f"{t.name} {gib(t.bytes)}" for t in big),
                    f"{fix_for(big)}; {plan}",
                )
            )
    info = est.rollout
    if info.get("sequences_per_rank", 1.0) < 1.0:
        out.append(
            (
                "memory (rollout)",
                f"vLLM's KV + state pool ({gib(info['kv_state_pool'])} = GEN_MEM_UTIL x {gib(est.device_bytes)} - "
                f"weights {gib(info['weights'])} - reserved) cannot hold one sequence of "
                f"{gib(info['sequence_at_max_len'])}; vLLM refuses to start",
                f"raise GEN_MEM_UTIL or GEN_TP / GEN_DP; {plan}",
            )
        )
    if not est.host_fits():
        big = sorted(est.host_terms, key=lambda t: -t.bytes)[:3]
        assert est.host_bytes is not None
        out.append(
            (
                f"host memory (HOST_MEM_GIB={est.host_bytes / GIB:g})",
                f"offload and vLLM sleep need about {gib(est.host_total)} per host; largest: "
                + ", ".join(f"{t.name} {gib(t.bytes)}" for t in big),
                f"spread over more nodes, drop the reference model (use_kl_loss=false) or fix HOST_MEM_GIB; {plan}",
            )
        )
    if not out and est.headroom < COEF.warn_headroom * est.device_bytes:
        warnings.append(
            f"warning: memory: the {est.peak.phase} phase ({est.peak.where}) leaves {gib(est.headroom)} of "
            f"{gib(est.device_bytes)} per die, under the {COEF.warn_headroom:.0%} margin; the estimate is "
            "approximate (docs/memory.md)"
        )
    return out, warnings


def summary(est: Estimate) -> str:
    host = (
        f"host {gib(est.host_total)} per node" + (f" of {gib(est.host_bytes)}" if est.host_bytes is not None else "")
        if est.host_terms
        else "host: nothing offloaded"
    )
    if est.host_bytes is None and est.host_terms:
        host += " (not checked: set HOST_MEM_GIB)"
    phases = ", ".join(f"{p.phase} {p.total / GIB:.1f}" for p in est.phases)
    return (
        f"memory: peak {gib(est.peak.total)} of {gib(est.device_bytes)} per die in {est.peak.phase} "
        f"({est.peak.where}), headroom {gib(est.headroom)} ({est.headroom / est.device_bytes:.0%}); "
        f"per phase GiB: {phases}; {host}"
    )
