"""verl 0.8.0's rollout layout rules with vLLM (R*), and how vLLM splits Qwen3.5's heads over GEN_TP."""

from __future__ import annotations

from .arithmetic import braces, divisors
from .context import Context


def rollout_tensor_parallel_sizes(ctx: Context) -> list[int]:
    """The GEN_TP sizes vLLM can split the model's heads over (and no more ranks than experts)."""
    model = ctx.model
    return [t for t in divisors(model.num_attention_heads) if t <= model.num_experts and model.heads_split_over(t)]


def check(ctx: Context) -> None:
    values, model, world = ctx.values, ctx.model, ctx.world
    gen_tp, gen_dp, gen_ep, per_node = (values[k] for k in ("GEN_TP", "GEN_DP", "GEN_EP", "NDEVICES_PER_NODE"))
    allowed = rollout_tensor_parallel_sizes(ctx)
    if gen_tp not in allowed:
        ctx.add(
            f"GEN_TP={gen_tp}",
            f"vLLM cannot split {model.name}'s heads over {gen_tp} ranks",
            f"use GEN_TP in {braces(allowed)}",
            "vLLM qwen3_next",
        )
    replica = gen_tp * gen_dp
    if gen_ep > 1 and gen_ep != replica:
        ctx.add(
            ctx.show("GEN_EP", "GEN_TP", "GEN_DP"),
            f"verl requires GEN_EP == GEN_TP x GEN_DP = {replica} when GEN_EP > 1",
            f"set GEN_EP={replica} or GEN_EP=1",
            "R4",
        )
    if world % replica:
        ctx.add(
            ctx.show("GEN_TP", "GEN_DP"),
            f"a rollout replica of {replica} devices does not divide the world of {world}",
            f"choose GEN_TP x GEN_DP among the divisors of {world}",
            "R2",
        )
        return
    replica_per_node = min(per_node, replica)
    if replica % replica_per_node:
        ctx.add(
            ctx.show("GEN_TP", "GEN_DP"),
            f"a replica of {replica} devices spanning nodes must fill whole {per_node}-device nodes",
            f"make GEN_TP x GEN_DP a multiple of {per_node} or a divisor of it",
            "R6",
        )
    if gen_dp > 1 and (per_node % gen_tp or replica % per_node):
        ctx.add(
            ctx.show("GEN_TP", "GEN_DP"),
            f"with GEN_DP > 1 vLLM needs GEN_TP to divide the {per_node} devices of a "
            f"node and GEN_TP x GEN_DP to be a multiple of {per_node}",
            "adjust GEN_DP",
            "R7",
        )
