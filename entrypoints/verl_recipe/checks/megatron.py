"""Megatron-core 0.16.0 layout rules (M*): how TP, PP, CP, EP, ETP and VPP split the model and the world."""

from __future__ import annotations

from .arithmetic import braces, divisors
from .context import Context


def tensor_parallel_sizes(ctx: Context) -> list[int]:
    """The TP sizes that split every kind of head of the model (M4-M6)."""
    model = ctx.model
    return [t for t in divisors(model.num_attention_heads) if model.heads_split_over(t)]


def check(ctx: Context) -> int:
    """The data-parallel size of the layout, 0 when the layout does not divide the world."""
    values, model, world = ctx.values, ctx.model, ctx.world
    tp, pp, cp, ep, etp, vpp = (values[k] for k in ("TP", "PP", "CP", "EP", "ETP", "VPP"))
    allowed = tensor_parallel_sizes(ctx)
    if tp not in allowed:
        ctx.add(
            f"TP={tp}",
            f"{model.name} has {model.num_attention_heads} attention heads, {model.num_kv_heads} KV groups and "
            f"{model.linear_num_key_heads}/{model.linear_num_value_heads} Gated DeltaNet heads; TP must split them",
            f"use TP in {braces(allowed)}",
            "megatron-core M4-M6",
        )
    if model.has_gdn and cp != 1:
        ctx.add(
            f"CP={cp}",
            "Gated DeltaNet does not support context parallelism in megatron-core 0.16.0",
            "set CP=1",
            "M7",
        )
    if world % (tp * pp * cp):
        ctx.add(
            ctx.show("TP", "PP", "CP"),
            f"TP x PP x CP = {tp * pp * cp} does not divide the world of {world} devices "
            f"(NNODES={values['NNODES']} x NDEVICES_PER_NODE={values['NDEVICES_PER_NODE']})",
            f"choose TP x PP x CP among the divisors of {world}",
            "M1",
        )
    if world % (etp * ep * pp):
        ctx.add(
            ctx.show("ETP", "EP", "PP"),
            f"ETP x EP x PP = {etp * ep * pp} does not divide the world of {world}",
            f"choose EP so that ETP x EP x PP divides {world}",
            "M2",
        )
    if model.num_experts % ep:
        ctx.add(
            f"EP={ep}",
            f"{model.name} has {model.num_experts} experts, not divisible by EP",
            f"use EP in {braces([d for d in divisors(model.num_experts) if world % (d * etp * pp) == 0][:12])}",
            "M9",
        )
    if model.moe_ffn_hidden_size % etp:
        ctx.add(
            f"ETP={etp}",
            f"expert FFN width {model.moe_ffn_hidden_size} is not divisible by ETP",
            "use a power of two ETP",
            "M17",
        )
    if model.num_layers % pp:
        ctx.add(
            f"PP={pp}",
            f"{model.name} has {model.num_layers} layers, not divisible by PP",
            f"use PP in {braces(divisors(model.num_layers))}",
            "M12",
        )
    elif vpp:
        per_stage = model.num_layers // pp
        if pp == 1:
            ctx.add(f"VPP={vpp}", "virtual pipeline needs PP > 1", "set VPP=0 or PP > 1", "M15")
        elif per_stage % vpp:
            ctx.add(
                f"VPP={vpp}",
                f"{per_stage} layers per pipeline stage (layers {model.num_layers} / PP {pp}) are not divisible by VPP",
                f"use VPP in {braces([d for d in divisors(per_stage) if d > 1])}",
                "M15",
            )
    return world // (tp * pp * cp) if world % (tp * pp * cp) == 0 else 0
