"""The memory plan: per die and per phase, what a launch will hold, before anything starts.

Phases of one verl hybrid-engine step, in order (verl 0.8.0 `workers/engine_workers.py`): rollout with vLLM awake,
log-prob forward (old policy, then the reference), actor update, weight sync (vLLM weights resumed, the trainer's
weights sent bucket by bucket, then the trainer offloaded and vLLM's KV cache resumed). docs/memory.md gives the
formulas, their published sources and hand-worked examples that tests/unit/test_memory.py pins.

By what each module holds, lowest first: coefficients (every number, with its source), params (parameter counts
and vLLM's per-token state), terms (Term, PhaseEstimate, Estimate), knobs (the launch's Hydra values the plan
reads), layout (the parallel layout, communication and working sets, the rollout's terms), megatron and fsdp (each
engine's phases), estimator (estimate: one launch's plan), report (problems and the one-line summary)."""

from __future__ import annotations

from .coefficients import COEF, GIB, MIB, PHASES, VERL_DEFAULTS, Coefficients
from .estimator import estimate
from .knobs import Knobs
from .layout import Layout, comm_bytes, device_capacity, layer_working_bytes
from .params import (
    attention_params,
    embedding_params,
    expert_params_total,
    gdn_conv_dim,
    gdn_params,
    gdn_state_bytes_per_seq,
    kv_bytes_per_token,
    megatron_rank_params,
    mixer_params,
    replicated_layer_params,
    routed_expert_params,
    shared_expert_params,
    stage_layers,
    text_params,
    vision_params,
    vllm_weight_bytes,
)
from .report import FIXES, fix_for, gib, problems, summary
from .terms import Estimate, PhaseEstimate, Term

__all__ = [
    "COEF",
    "Coefficients",
    "Estimate",
    "FIXES",
    "GIB",
    "Knobs",
    "Layout",
    "MIB",
    "PHASES",
    "PhaseEstimate",
    "Term",
    "VERL_DEFAULTS",
    "attention_params",
    "comm_bytes",
    "device_capacity",
    "embedding_params",
    "estimate",
    "expert_params_total",
    "fix_for",
    "gdn_conv_dim",
    "gdn_params",
    "gdn_state_bytes_per_seq",
    "gib",
    "kv_bytes_per_token",
    "layer_working_bytes",
    "megatron_rank_params",
    "mixer_params",
    "problems",
    "replicated_layer_params",
    "routed_expert_params",
    "shared_expert_params",
    "stage_layers",
    "summary",
    "text_params",
    "vision_params",
    "vllm_weight_bytes",
]
