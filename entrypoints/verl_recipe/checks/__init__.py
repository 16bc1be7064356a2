"""Every check that can be made before a device is touched, one module per concern.

domains (each numeric setting's range), megatron (M*) or fsdp (V6) for the trainer layout, batch (V1-V5, M16),
rollout (R*), lengths, policy (project rules without an id), paths (the filesystem), memory_rules (the memory
plan), hccl (HCCL's timeouts), weightsync (the weight-sync bucket without IPC) and secrets (no secret in an extra
override). docs/rules.md lists each rule id with the upstream file and lines that enforce it.
"""

from __future__ import annotations

from . import batch, domains, fsdp, lengths, megatron, rollout
from .context import Context


def trainer_layout(ctx: Context) -> int:
    """The trainer's rules of the recipe's engine; the data-parallel size, 0 when the layout does not divide."""
    return megatron.check(ctx) if ctx.engine == "megatron" else fsdp.check(ctx)


def layout(ctx: Context) -> bool:
    """Domains, then the trainer, batch, rollout and length rules; True when nothing was found."""
    if not domains.check(ctx):
        return False
    dp = trainer_layout(ctx)
    if dp:
        batch.check(ctx, dp)
    rollout.check(ctx)
    lengths.check(ctx)
    return not ctx.problems
