"""STAND-IN shims: verl 0.8.0 on a CPU-only torch, loaded by verl itself (VERL_USE_EXTERNAL_MODULES).

verl/__init__.py imports this module in the driver and in every Ray worker before any of verl's workers run, so
each shim is in place wherever verl looks. Each one names the verl 0.8.0 line it answers (PyPI wheel = tag v0.8.0,
7aed6b23). Off CPU (a CUDA or NPU torch) the module only registers the rollout and changes nothing else.
"""

from __future__ import annotations

import functools
import logging
import os
import resource
import time
from pathlib import Path
from typing import Any

import torch

from . import LOG_PREFIX, ROLLOUT_NAME

log = logging.getLogger("verl_sim_standin")


def _on_cpu() -> bool:
    from verl.utils.device import get_device_name

    return get_device_name() == "cpu"


def _gloo_process_group() -> None:
    """utils/distributed.py:86 builds "cpu:gloo,cpu:nccl" on CPU, which torch refuses: gloo alone (FSDP2 runs on
    it). engine_workers.py and checkpoint_engine/base.py import the function by name, so they are patched too."""
    import verl.checkpoint_engine.base as ckpt_base
    import verl.utils.distributed as dist
    import verl.workers.engine_workers as engine_workers

    original = dist.initialize_global_process_group_ray

    @functools.wraps(original)
    def on_gloo(timeout_second: Any = None, backend: Any = None) -> Any:
        return original(timeout_second=timeout_second, backend=backend or "gloo")

    for module in (dist, engine_workers, ckpt_base):
        if getattr(module, "initialize_global_process_group_ray", None) is original:
            module.initialize_global_process_group_ray = on_gloo


def _fsdp_engine_on_cpu() -> None:
    """The FSDP engines are registered for cuda and npu only (workers/engine/fsdp/transformer_impl.py:921) and the
    lookup asserts on the device (workers/engine/base.py:318): the same classes serve cpu."""
    import verl.workers.engine.fsdp  # noqa: F401 - registers the engines
    from verl.workers.engine.base import EngineRegistry

    for backends in EngineRegistry._engines.values():  # noqa: SLF001 - the registry has no public listing
        for devices in backends.values():
            if "cuda" in devices:
                devices.setdefault("cpu", devices["cuda"])


def _no_pinned_memory() -> None:
    """A forward-only model (the reference) always gets CPUOffloadPolicy(pin_memory=True)
    (workers/engine/fsdp/transformer_impl.py:417); pinning needs an accelerator."""
    import verl.workers.engine.fsdp.transformer_impl as impl

    policy = impl.CPUOffloadPolicy
    if policy is None:
        return

    def unpinned(*args: Any, **kwargs: Any) -> Any:
        kwargs["pin_memory"] = False
        return policy(*args, **kwargs)

    impl.CPUOffloadPolicy = unpinned


def _torch_padding() -> None:
    """Off NPU, utils/attention_utils.py:30 imports flash_attn's padding helpers; verl's own pure-torch ones
    (utils/npu_flash_attn_utils.py) do the same on CPU."""
    import verl.utils.attention_utils as attn
    from verl.utils import npu_flash_attn_utils as torch_utils

    funcs = (torch_utils.index_first_axis, torch_utils.pad_input, torch_utils.rearrange, torch_utils.unpad_input)
    attn._index_first_axis, attn._pad_input, attn._rearrange, attn._unpad_input = funcs  # noqa: SLF001
    attn._get_attention_functions = lambda: funcs  # noqa: SLF001


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _cpu_memory_api() -> None:
    """verl calls the CUDA memory API on its device module (utils/memory_utils.py:46-61, engine_workers.py:210):
    torch.cpu has none of it. The peak figures report this process's peak resident memory, so verl's
    perf/max_memory_* metrics carry host RAM on the simulated cluster (the run watch labels them so)."""
    cpu = torch.cpu
    stand_ins = {
        "memory_allocated": lambda *a, **k: 0,
        "memory_reserved": lambda *a, **k: 0,
        "max_memory_allocated": lambda *a, **k: _peak_rss_bytes(),
        "max_memory_reserved": lambda *a, **k: _peak_rss_bytes(),
        "empty_cache": lambda *a, **k: None,
        "reset_peak_memory_stats": lambda *a, **k: None,
        "mem_get_info": lambda *a, **k: (0, 0),
    }
    for name, fn in stand_ins.items():
        if not hasattr(cpu, name):
            setattr(cpu, name, fn)


def _register_rollout() -> None:
    """verl 0.8.0 has only vllm, sglang and trtllm in its rollout registries (workers/rollout/base.py:83,
    workers/rollout/replica.py:378); the stand-in joins them under its own name."""
    from verl.workers.rollout import base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = "verl_sim_standin.rollout.StandinServerAdapter"  # noqa: SLF001

    def load() -> Any:
        from .rollout import StandinReplica

        return StandinReplica

    RolloutReplicaRegistry.register(ROLLOUT_NAME, load)


def _process_log() -> None:
    """CANN's runtime opens a plog per process under ASCEND_PROCESS_LOG_PATH (run/plog/plog-<pid>_<stamp>.log) when
    the process first uses ACL; there is no CANN here, so the stand-in opens one in the same place and says so, and
    the node's plog folder on shared storage holds a file per process as on A3 (bundles and diagnose read them)."""
    root = os.environ.get("ASCEND_PROCESS_LOG_PATH")
    if not root:
        return
    now = time.time()
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(now)) + f"{int(now * 1000) % 1000:03d}"
    folder = Path(root) / "run" / "plog"
    folder.mkdir(parents=True, exist_ok=True)
    when = time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}.000"
    with (folder / f"plog-{os.getpid()}_{stamp}.log").open("a") as fh:
        fh.write(f"[INFO] STAND-IN({os.getpid()},python):{when} {LOG_PREFIX} no CANN runtime: a process log opened\n")


def install() -> list[str]:
    _register_rollout()
    done = ["rollout"]
    if _on_cpu():
        shims = (_gloo_process_group, _fsdp_engine_on_cpu, _no_pinned_memory, _torch_padding, _cpu_memory_api)
        for shim in (*shims, _process_log):
            shim()
            done.append(shim.__name__.lstrip("_"))
    return done


INSTALLED = install()
log.info("%s verl CPU shims installed: %s", LOG_PREFIX, ", ".join(INSTALLED))
