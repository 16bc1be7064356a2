"""Batch sizes against the layout: verl 0.8.0 validate_config, train_mini_batch, the agent loop (V1-V5), and
Megatron's interleaved schedule (M16)."""

from __future__ import annotations

import math

from .context import Context

AGENT_LOOP_WORKERS = 8  # verl's default rollout.agent.num_workers: train_batch_size x n is chunked over them
AGENT_LOOP_KEY = "actor_rollout_ref.rollout.agent.num_workers"


def check(ctx: Context, dp: int) -> None:
    values = ctx.values
    batch, mini, micro, n = (
        values["TRAIN_BATCH_SIZE"],
        values["PPO_MINI_BATCH_SIZE"],
        values["PPO_MICRO_BATCH_SIZE_PER_GPU"],
        values["ROLLOUT_N"],
    )
    megatron = ctx.engine == "megatron"
    if batch < mini:
        ctx.add(
            ctx.show("TRAIN_BATCH_SIZE", "PPO_MINI_BATCH_SIZE"),
            "the mini batch is larger than the batch",
            "make PPO_MINI_BATCH_SIZE <= TRAIN_BATCH_SIZE",
            "V1",
        )
    minimal = dp * micro if megatron else ctx.world
    unit = "data-parallel size" if megatron else "world size (verl's FSDP minimum)"
    if (batch * n) % minimal:
        ctx.add(
            ctx.show("TRAIN_BATCH_SIZE", "ROLLOUT_N"),
            f"TRAIN_BATCH_SIZE x ROLLOUT_N = {batch * n} is not divisible by the {unit} x micro batch = "
            f"{minimal} (DP={dp} at NNODES={values['NNODES']}); verl 0.8.0 stops after start-up or a rollout",
            f"make TRAIN_BATCH_SIZE a multiple of {minimal // math.gcd(minimal, n)}",
            "V2",
        )
    if (mini * n) % dp:
        ctx.add(
            ctx.show("PPO_MINI_BATCH_SIZE", "ROLLOUT_N"),
            f"PPO_MINI_BATCH_SIZE x ROLLOUT_N = {mini * n} is not divisible by the data-parallel size {dp}; "
            "verl fails at the first actor update, after a full rollout",
            f"make PPO_MINI_BATCH_SIZE a multiple of {dp // math.gcd(dp, n)}",
            "V3",
        )
    elif ((mini * n) // dp) % micro:
        ctx.add(
            ctx.show("PPO_MINI_BATCH_SIZE", "PPO_MICRO_BATCH_SIZE_PER_GPU"),
            f"the per-device mini batch {(mini * n) // dp} is not divisible by the micro batch",
            "use PPO_MICRO_BATCH_SIZE_PER_GPU=1 or a divisor of it",
            "V4",
        )
    elif megatron and values["VPP"] and values["PP"] > 1:
        micro_batches = (mini * n) // dp // micro
        if micro_batches < values["PP"] or micro_batches % values["PP"]:
            ctx.add(
                ctx.show("VPP", "PP"),
                f"the interleaved schedule needs the {micro_batches} micro batches per "
                f"step to be a multiple of PP={values['PP']}",
                "set VPP=0 or raise PPO_MINI_BATCH_SIZE",
                "M16",
            )
    workers = AGENT_LOOP_WORKERS
    if ctx.knobs is not None:
        workers = int(ctx.knobs.num(AGENT_LOOP_KEY, AGENT_LOOP_WORKERS)) or AGENT_LOOP_WORKERS
    if (batch * n) % workers:
        ctx.add(
            ctx.show("TRAIN_BATCH_SIZE", "ROLLOUT_N"),
            f"TRAIN_BATCH_SIZE x ROLLOUT_N = {batch * n} is not "
            f"divisible by verl's {workers} agent-loop workers ({AGENT_LOOP_KEY})",
            f"make the product a multiple of {workers}",
            "V5",
        )
