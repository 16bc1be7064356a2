"""verl 0.8.0's FSDP layout rule (V6): Ulysses SP and the FSDP shard group against the heads and the world."""

from __future__ import annotations

from .arithmetic import braces, divisors
from .context import Context


def check(ctx: Context) -> int:
    """The data-parallel size of the layout, 0 when SP does not split the heads and the world."""
    values, model, world = ctx.values, ctx.model, ctx.world
    sp, fsdp_size = values["SP_SIZE"], values["FSDP_SIZE"]
    if model.num_attention_heads % sp or world % sp:
        ctx.add(
            f"SP_SIZE={sp}",
            f"Ulysses SP must divide the {model.num_attention_heads} attention heads and the world of {world}",
            f"use SP_SIZE in {braces([d for d in divisors(model.num_attention_heads) if world % d == 0])}",
            "V6",
        )
        return 0
    # verl shards over the whole world when fsdp_size is -1 or >= the world (create_device_mesh).
    if 0 < fsdp_size < world and world % fsdp_size:
        ctx.add(
            f"FSDP_SIZE={fsdp_size}",
            f"does not divide the world of {world} devices",
            f"use -1 (or any size >= {world}) or one of {braces(divisors(world))}",
            "V6",
        )
    return world // sp
