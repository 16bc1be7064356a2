"""The Megatron engine's phases per pipeline stage, and what vLLM keeps outside its share."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..models import ModelArch
from ..settingtypes import ARR
from .coefficients import COEF, PHASES
from .knobs import Knobs
from .layout import Layout, _rollout_phase, _with_margin, comm_bytes, layer_working_bytes
from .params import megatron_rank_params, stage_layers
from .terms import PhaseEstimate, Term


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
