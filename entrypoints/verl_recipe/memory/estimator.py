"""One launch's memory plan: every phase of its engine, the rollout, and the host."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models import ModelArch
from ..settingtypes import ARR
from .coefficients import GIB, MIB
from .fsdp import _fsdp
from .knobs import Knobs
from .layout import Layout, _rollout, _tokens, device_capacity
from .megatron import _megatron, _vllm_outside_share
from .terms import Estimate, Term


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
