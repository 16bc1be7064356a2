"""Upstream defects the recipe works around, and whether the pinned versions still need each workaround."""

from __future__ import annotations

from .manifest import load_manifest, version_tuple

# Why mm_processor_cache_gb stays 0 on NPU even once the pinned vLLM has vllm-project/vllm#43001 (the #42995 fix):
# cache-drift bugs of the same receiver/sender cache kept appearing after it (vllm-project/vllm#46747, #47147,
# #47958), vllm-ascend's releases/v0.18.0 carries no backport of any of them, and verl's own rule (verl-project/verl
# #6932, main only) stops at vLLM 0.22. A positive value on NPU still needs FORCE_MM_CACHE=true (checks/policy.py).
MM_CACHE_KEPT_ON = ("npu",)


def mm_cache_rule_active(device: str = "npu") -> bool:
    """The vLLM #42995 workaround: always on NPU; elsewhere while the pinned vLLM predates its fix."""
    if device in MM_CACHE_KEPT_ON:
        return True
    manifest = load_manifest()
    pinned = version_tuple(str(manifest["git_sources"]["vllm"]["version"]))
    fixed = version_tuple(str(manifest["workarounds"]["vllm_mm_processor_cache"]["fixed_in_vllm"]))
    return pinned < fixed
