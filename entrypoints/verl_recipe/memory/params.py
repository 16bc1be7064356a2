"""Parameter counts of a Qwen3.5 architecture per rank, and vLLM's weights, KV cache and GDN state per die."""

from __future__ import annotations

from ..models import ModelArch
from .coefficients import COEF


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
