"""What an estimate is made of: named terms, one phase's terms on one die, and the whole plan."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .coefficients import GIB, MIB


# ---- the estimate --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Term:
    name: str
    bytes: float


@dataclass
class PhaseEstimate:
    phase: str
    where: str  # which pipeline stage (or "every die")
    terms: list[Term]

    @property
    def total(self) -> float:
        return sum(t.bytes for t in self.terms)

    def largest(self, n: int = 3) -> list[Term]:
        return sorted((t for t in self.terms if t.bytes > 0), key=lambda t: -t.bytes)[:n]


@dataclass
class Estimate:
    recipe: str
    device_bytes: float
    phases: list[PhaseEstimate]  # the worst stage of each phase
    host_terms: list[Term]
    host_bytes: float | None  # None: HOST_MEM_GIB not set, not checked
    rollout: dict[str, float] = field(default_factory=dict)

    @property
    def peak(self) -> PhaseEstimate:
        return max(self.phases, key=lambda p: p.total)

    @property
    def headroom(self) -> float:
        return self.device_bytes - self.peak.total

    @property
    def host_total(self) -> float:
        return sum(t.bytes for t in self.host_terms)

    def fits(self) -> bool:
        return self.headroom >= 0 and self.rollout.get("sequences_per_rank", 1.0) >= 1.0 and self.host_fits()

    def host_fits(self) -> bool:
        return self.host_bytes is None or self.host_total <= self.host_bytes

    def to_dict(self) -> dict[str, Any]:
        def gib(x: float) -> float:
            return round(x / GIB, 2)

        return {
            "unit": "GiB",
            "device": gib(self.device_bytes),
            "peak_phase": self.peak.phase,
            "peak": gib(self.peak.total),
            "headroom": gib(self.headroom),
            "headroom_share": round(self.headroom / self.device_bytes, 3),
            "phases": {
                p.phase: {"where": p.where, "total": gib(p.total), "terms": {t.name: gib(t.bytes) for t in p.terms}}
                for p in self.phases
            },
            "rollout": {
                "budget": gib(self.rollout["budget"]),
                "weights": gib(self.rollout["weights"]),
                "kv_state_pool": gib(self.rollout["kv_state_pool"]),
                "kv_per_token_kib": round(self.rollout["kv_per_token"] / 1024, 2),
                "state_per_sequence_mib": round(self.rollout["state_per_sequence"] / MIB, 2),
                "sequence_at_max_len_mib": round(self.rollout["sequence_at_max_len"] / MIB, 1),
                "max_model_len": int(self.rollout["max_model_len"]),
                "sequences_per_rank": math.floor(self.rollout["sequences_per_rank"]),
            },
            "host_per_node": {
                "total": gib(self.host_total),
                "ram": gib(self.host_bytes) if self.host_bytes is not None else None,
                "terms": {t.name: gib(t.bytes) for t in self.host_terms},
            },
        }
