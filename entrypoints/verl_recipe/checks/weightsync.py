"""The weight-sync bucket against the model's largest tensor, where verl's rollout cannot use IPC.

verl 0.8.0 sends the trainer's weights to vLLM bucket by bucket. Over IPC a tensor larger than the bucket goes on
its own; over shared memory, which verl uses when the driver or CANN is below its IPC floor (doctor/ipc.py), it is
an AssertionError that stops the run at its first weight sync (verl/workers/rollout/vllm_rollout/
bucketed_weight_transfer.py:137, release/v0.8.0 3e4edb6e; verl's NPU FAQ, docs/ascend_tutorial/faq/faq.rst).
Whether a site's hosts can use IPC is the site setting WEIGHT_SYNC_IPC: true by default, because every host that
passes the preflight has at least the manifest's HDK and runs the image's CANN, and both are above verl's floor
(tests/unit/test_weightsync.py holds the pins to it); a site whose doctor reports a host below it sets false.
"""

from __future__ import annotations

from ..settingtypes import ARR
from .context import Context

BUCKET_KEY = f"{ARR}.rollout.checkpoint_engine.update_weights_bucket_megabytes"
BUCKET_DEFAULT_MB = 2048  # verl 0.8.0's default (verl/workers/config/rollout.py)
MIB = 1 << 20  # verl reads the "megabytes" as MiB (bucket_size_mb << 20)


def check(ctx: Context) -> None:
    values = ctx.values
    if values.get("DEVICE") != "npu" or values.get("WEIGHT_SYNC_IPC", True) is not False or ctx.knobs is None:
        return  # IPC (CUDA always; NPU when the site says so): any tensor fits, whatever the bucket
    bucket_mb = ctx.knobs.num(BUCKET_KEY, BUCKET_DEFAULT_MB)
    name, size = ctx.model.largest_tensor()
    if bucket_mb * MIB >= size:
        return
    need = -(-size // MIB)
    shown = int(bucket_mb) if bucket_mb == int(bucket_mb) else bucket_mb
    ctx.add(
        f"{BUCKET_KEY}={shown} WEIGHT_SYNC_IPC=false",
        f"{ctx.model.name}'s {name} is {need} MiB, larger than the bucket: without IPC verl 0.8.0 syncs weights "
        "through shared memory and stops at the first weight sync on a tensor larger than the bucket "
        "(bucketed_weight_transfer.py:137)",
        f"add `-- {BUCKET_KEY}={need}` or more (the memory plan counts the bucket on every die), or bring every "
        "host to HDK >= 25.3.RC1 with CANN >= 8.3.RC1 (`doctor` row weight-sync-ipc) and set WEIGHT_SYNC_IPC=true",
    )
