"""Sequence lengths: prompt + response fit the model's positions; a dynamic token budget holds one sequence."""

from __future__ import annotations

import math

from ..settingtypes import ARR
from .context import Context

ACTOR_BUDGET = f"{ARR}.actor.ppo_max_token_len_per_gpu"
# (dynamic batching flag, its token budget, the phase it packs)
DYNAMIC_BUDGETS = (
    (f"{ARR}.actor.use_dynamic_bsz", ACTOR_BUDGET, "the actor update"),
    (f"{ARR}.rollout.log_prob_use_dynamic_bsz", f"{ARR}.rollout.log_prob_max_token_len_per_gpu", "log-prob"),
    (f"{ARR}.ref.log_prob_use_dynamic_bsz", f"{ARR}.ref.log_prob_max_token_len_per_gpu", "reference log-prob"),
)


def check(ctx: Context) -> None:
    values, model = ctx.values, ctx.model
    seq = int(values["MAX_PROMPT_LENGTH"]) + int(values["MAX_RESPONSE_LENGTH"])
    if seq > model.max_position_embeddings:
        ctx.add(
            ctx.show("MAX_PROMPT_LENGTH", "MAX_RESPONSE_LENGTH"),
            f"prompt + response = {seq} tokens exceed the checkpoint's max_position_embeddings "
            f"{model.max_position_embeddings}",
            f"keep MAX_PROMPT_LENGTH + MAX_RESPONSE_LENGTH <= {model.max_position_embeddings}",
        )
    knobs = ctx.knobs
    if knobs is None:
        return
    megatron = ctx.engine == "megatron"
    shards = int(values["CP"] or 1) if megatron else int(values["SP_SIZE"] or 1)
    for flag, key, phase in DYNAMIC_BUDGETS:
        if not knobs.flag(flag):
            continue
        budget = knobs.token_budget(key)
        if budget * shards < seq:
            name = "PPO_MAX_TOKEN_LEN_PER_GPU" if megatron else key
            ctx.add(
                f"{name}={budget:g}",
                f"with dynamic batching, {phase} packs at most {budget:g} tokens per device"
                + (f" (x {shards} sequence shards)" if shards > 1 else "")
                + f", less than one full sequence of {seq} (prompt + response); verl asserts on it",
                f"raise it to at least {math.ceil(seq / shards)}",
            )
