"""The parallel layout of a launch, the die's capacity, collective buffers and working sets, and the rollout's terms."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..models import ModelArch
from ..settingtypes import ARR
from .coefficients import COEF, GIB
from .knobs import Knobs
from .params import gdn_state_bytes_per_seq, kv_bytes_per_token, vllm_weight_bytes
from .terms import Term


@dataclass(frozen=True)
class Layout:
    engine: str
    device: str
    nnodes: int
    ndev: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 1
    vpp: int = 0
    fsdp: int = -1
    sp: int = 1
    gen_tp: int = 1
    gen_dp: int = 1
    gen_ep: int = 1

    @property
    def world(self) -> int:
        return self.nnodes * self.ndev

    @classmethod
    def of(cls, engine: str, v: Mapping[str, Any]) -> Layout:
        def i(name: str, default: int) -> int:
            value = v.get(name)
            return int(value) if isinstance(value, int) else default

        return cls(
            engine=engine,
            device=str(v.get("DEVICE") or "npu"),
            nnodes=i("NNODES", 1),
            ndev=i("NDEVICES_PER_NODE", 16),
            tp=i("TP", 1),
            pp=i("PP", 1),
            cp=i("CP", 1),
            ep=i("EP", 1),
            etp=i("ETP", 1),
            vpp=i("VPP", 0),
            fsdp=i("FSDP_SIZE", -1),
            sp=i("SP_SIZE", 1),
            gen_tp=i("GEN_TP", 1),
            gen_dp=i("GEN_DP", 1),
            gen_ep=i("GEN_EP", 1),
        )


def device_capacity(v: Mapping[str, Any], device: str) -> float:
    raw = v.get("DEVICE_MEM_GIB")
    if raw is not None:
        return float(raw) * GIB
    return dict(COEF.device_gib).get(device, 64.0) * GIB


def comm_bytes(layout: Layout, groups: list[int], knobs: Knobs) -> tuple[float, int]:
    """(bytes, communicators): one communicator per process group of more than one rank."""
    n = sum(1 for g in groups if g > 1)
    if layout.device == "npu":
        try:
            buff = float(knobs.env.get("HCCL_BUFFSIZE", COEF.hccl_default_buffsize_mb))
        except ValueError:
            buff = COEF.hccl_default_buffsize_mb
        return n * COEF.hccl_buffers_per_comm * buff * 1e6, n
    return n * COEF.nccl_bytes_per_comm, n


def layer_working_bytes(m: ModelArch, tokens: float, tp: int) -> float:
    """One layer computed in full (forward, or recomputed for the backward) on `tokens` tokens per die."""
    t = tokens / tp
    h = m.hidden_size
    dense = COEF.act_layer_working * t * h
    moe = t * m.experts_per_token * COEF.act_moe_per_routed_token * (2 * h + 3 * m.moe_ffn_hidden_size)
    gdn = 0.0
    if m.has_gdn:
        chunks = math.ceil(tokens / COEF.gdn_chunk_tokens)
        gdn = (m.linear_num_value_heads / tp) * m.linear_key_head_dim * m.linear_value_head_dim * 4 * chunks
    return dense + moe + gdn


def _with_margin(terms: list[Term], comm: float, ncomm: int, exempt: tuple[str, ...] = ()) -> list[Term]:
    allocated = sum(t.bytes for t in terms if t.name not in exempt)
    out = [t for t in terms if t.bytes > 0]
    out.append(
        Term(f"fragmentation margin ({COEF.fragmentation:.0%} of the trainer's)", COEF.fragmentation * allocated)
    )
    out.append(Term(f"collective buffers ({ncomm} communicators)", comm))
    return out


def _rollout_phase(rollout_terms: list[Term], resident: list[Term], train_comm: float) -> list[Term]:
    """vLLM's share of the die, plus whatever the trainer keeps on it while vLLM is awake."""
    kept = [t for t in resident if t.bytes > 0]
    out = [*rollout_terms, *kept]
    if kept:
        margin = COEF.fragmentation * sum(t.bytes for t in kept)
        out.append(Term(f"fragmentation margin ({COEF.fragmentation:.0%} of the trainer's)", margin))
    out.append(Term("trainer collective buffers", train_comm))
    return out


def _seq_len(v: Mapping[str, Any]) -> int:
    return int(v.get("MAX_PROMPT_LENGTH") or 0) + int(v.get("MAX_RESPONSE_LENGTH") or 0)


def _tokens(v: Mapping[str, Any], knobs: Knobs, dyn_key: str, budget_key: str, micro: int) -> float:
    s = _seq_len(v)
    if knobs.flag(dyn_key):
        return max(knobs.token_budget(budget_key), float(s))
    return float(micro * s)


def _rollout(m: ModelArch, lay: Layout, v: Mapping[str, Any], knobs: Knobs, cap: float) -> tuple[list[Term], dict]:
    util = float(v.get("GEN_MEM_UTIL") or 0.0)
    budget = util * cap
    weights = vllm_weight_bytes(m, lay.gen_tp, lay.gen_dp)
    groups = [lay.gen_tp, lay.gen_dp, lay.gen_ep, lay.gen_tp * lay.gen_dp]
    vcomm, _ = comm_bytes(lay, groups, knobs)
    pool = budget - weights - COEF.vllm_reserved - vcomm
    vllm_len = f"{ARR}.rollout.engine_kwargs.vllm.max_model_len"
    max_len = knobs.num(vllm_len, 0) or knobs.num(f"{ARR}.rollout.max_model_len", 0)
    length = int(max_len) if max_len > 0 else _seq_len(v)
    per_seq = length * kv_bytes_per_token(m, lay.gen_tp) + gdn_state_bytes_per_seq(m, lay.gen_tp)
    info = {
        "budget": budget,
        "weights": weights,
        "kv_state_pool": pool,
        "kv_per_token": kv_bytes_per_token(m, lay.gen_tp),
        "state_per_sequence": gdn_state_bytes_per_seq(m, lay.gen_tp),
        "sequence_at_max_len": per_seq,
        "max_model_len": float(length),
        "sequences_per_rank": max(pool, 0.0) / per_seq if per_seq else 0.0,
    }
    terms = [
        Term("vLLM weights", weights),
        Term("vLLM KV + Gated DeltaNet state pool", max(pool, 0.0)),
        Term("vLLM activations and graphs (reserved)", COEF.vllm_reserved),
        Term("vLLM collective buffers", vcomm),
    ]
    return terms, info
