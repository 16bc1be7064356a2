"""The plan as validate reports it: what does not fit (with the largest terms and a fix), warnings, one summary line."""

from __future__ import annotations

from .coefficients import COEF, GIB
from .terms import Estimate, Term


# ---- report --------------------------------------------------------------------------------------------------
def gib(x: float) -> str:
    return f"{x / GIB:.1f} GiB"


FIXES = {
    "logits": "lower LOG_PROB_MICRO_BATCH_SIZE_PER_GPU / PPO_MICRO_BATCH_SIZE_PER_GPU or raise TP",
    "vLLM": "lower GEN_MEM_UTIL, or raise GEN_TP / GEN_DP",
    "optimizer": "offload the optimizer (optimizer_cpu_offload) or raise EP / PP / TP",
    "gradients": "raise EP / PP / TP, or set grad_offload",
    "parameters": "raise EP / PP / TP, or set param_offload",
    "activation": "lower the micro batch or the token budget, or raise PP",
}


def fix_for(terms: list[Term]) -> str:
    for term in terms:
        for key, fix in FIXES.items():
            if key in term.name:
                return fix
    return "choose a layout that spreads the model wider"


def problems(est: Estimate, recipe: str, nnodes: int) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(problems as (subject, what, fix), warnings) for validate."""
    out: list[tuple[str, str, str]] = []
    warnings: list[str] = []
    plan = f"`verl-recipe plan {recipe} --nodes {nnodes}` lists layouts that fit"
    for p in est.phases:
        if p.total > est.device_bytes:
            big = p.largest()
            out.append(
                (
                    f"memory ({p.phase}, {p.where})",
                    f"needs about {gib(p.total)} per die, more than the {gib(est.device_bytes)} it has; largest: "
                    + ", ".join(f"{t.name} {gib(t.bytes)}" for t in big),
                    f"{fix_for(big)}; {plan}",
                )
            )
    info = est.rollout
    if info.get("sequences_per_rank", 1.0) < 1.0:
        out.append(
            (
                "memory (rollout)",
                f"vLLM's KV + state pool ({gib(info['kv_state_pool'])} = GEN_MEM_UTIL x {gib(est.device_bytes)} - "
                f"weights {gib(info['weights'])} - reserved) cannot hold one sequence of "
                f"{gib(info['sequence_at_max_len'])}; vLLM refuses to start",
                f"raise GEN_MEM_UTIL or GEN_TP / GEN_DP; {plan}",
            )
        )
    if not est.host_fits():
        big = sorted(est.host_terms, key=lambda t: -t.bytes)[:3]
        assert est.host_bytes is not None
        out.append(
            (
                f"host memory (HOST_MEM_GIB={est.host_bytes / GIB:g})",
                f"offload and vLLM sleep need about {gib(est.host_total)} per host; largest: "
                + ", ".join(f"{t.name} {gib(t.bytes)}" for t in big),
                f"spread over more nodes, drop the reference model (use_kl_loss=false) or fix HOST_MEM_GIB; {plan}",
            )
        )
    if not out and est.headroom < COEF.warn_headroom * est.device_bytes:
        warnings.append(
            f"warning: memory: the {est.peak.phase} phase ({est.peak.where}) leaves {gib(est.headroom)} of "
            f"{gib(est.device_bytes)} per die, under the {COEF.warn_headroom:.0%} margin; the estimate is "
            "approximate (docs/memory.md)"
        )
    return out, warnings


def summary(est: Estimate) -> str:
    host = (
        f"host {gib(est.host_total)} per node" + (f" of {gib(est.host_bytes)}" if est.host_bytes is not None else "")
        if est.host_terms
        else "host: nothing offloaded"
    )
    if est.host_bytes is None and est.host_terms:
        host += " (not checked: set HOST_MEM_GIB)"
    phases = ", ".join(f"{p.phase} {p.total / GIB:.1f}" for p in est.phases)
    return (
        f"memory: peak {gib(est.peak.total)} of {gib(est.device_bytes)} per die in {est.peak.phase} "
        f"({est.peak.where}), headroom {gib(est.headroom)} ({est.headroom / est.device_bytes:.0%}); "
        f"per phase GiB: {phases}; {host}"
    )
