"""The FSDP2 engine's phases."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models import ModelArch
from ..settingtypes import ARR
from .coefficients import COEF
from .knobs import Knobs
from .layout import Layout, _rollout_phase, _with_margin, comm_bytes, layer_working_bytes
from .params import (
    embedding_params,
    mixer_params,
    replicated_layer_params,
    routed_expert_params,
    shared_expert_params,
    text_params,
    vision_params,
)
from .terms import PhaseEstimate, Term


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
