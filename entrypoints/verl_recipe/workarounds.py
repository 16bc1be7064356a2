"""Upstream defects the recipe works around, and whether the pinned versions still need each workaround."""

from __future__ import annotations

from .manifest import load_manifest, version_tuple


def mm_cache_rule_active() -> bool:
    """The vLLM #42995 workaround is needed while the pinned vLLM predates its fix."""
    manifest = load_manifest()
    pinned = version_tuple(str(manifest["git_sources"]["vllm"]["version"]))
    fixed = version_tuple(str(manifest["workarounds"]["vllm_mm_processor_cache"]["fixed_in_vllm"]))
    return pinned < fixed
