"""The expert-parallel groups of a layout (Megatron's order), projected onto nodes, and the rounds of node pairs
the all-to-all probe runs."""

from __future__ import annotations

from typing import Any


def expert_parallel_groups(world: int, pp: int, ep: int, etp: int) -> list[list[int]]:
    """The expert-model-parallel groups Megatron-Core 0.16.0 builds (parallel_state.py, initialize_model_parallel:
    the expert RankGenerator over tp=ETP, ep=EP, dp=world/(ETP*EP*PP), pp=PP in the default order "tp-cp-ep-dp-pp",
    cp=1; `get_ranks("ep")`). The alltoall token dispatcher exchanges tokens over exactly these groups.

    A rank is etp + ETP*(ep + EP*(edp + EDP*pp)): one group per (etp, edp, pp), its EP members ETP apart, the groups
    listed with etp varying fastest, then edp, then pp, as Megatron lists them."""
    if min(world, pp, ep, etp) < 1 or world % (etp * ep * pp):
        raise ValueError(f"world {world} is not a multiple of ETP*EP*PP = {etp}*{ep}*{pp}")
    edp = world // (etp * ep * pp)
    return [
        [t + etp * (e + ep * (d + edp * q)) for e in range(ep)]
        for q in range(pp)
        for d in range(edp)
        for t in range(etp)
    ]


def alltoall_patterns(values: dict[str, Any], world: int) -> list[dict[str, Any]]:
    """The all-to-all groups of a layout, over its ranks (rank r on node r // dies, as verl places them): the
    training EP groups (Megatron, EP > 1), then the rollout's (vLLM's EP spans one replica's GEN_TP x GEN_DP ranks,
    replicas on consecutive ranks) when GEN_EP > 1 and they differ from the training groups."""
    out: list[dict[str, Any]] = []
    ep = int(values.get("EP") or 1)
    train: list[list[int]] = []
    if ep > 1:
        pp, tp = int(values.get("PP") or 1), int(values.get("TP") or 1)
        etp = int(values.get("ETP") or tp)  # megatron-core: expert_tensor_parallel_size None means TP
        if world % (etp * ep * pp) == 0:  # otherwise validation has refused the layout already
            train = expert_parallel_groups(world, pp, ep, etp)
            out.append({"pattern": "train EP", "size": ep, "groups": train})
    gen_ep = int(values.get("GEN_EP") or 1)
    if gen_ep > 1 and world % gen_ep == 0:
        rollout = [list(range(i, i + gen_ep)) for i in range(0, world, gen_ep)]
        if rollout != train:
            out.append({"pattern": "rollout EP", "size": gen_ep, "groups": rollout})
    return out


def project_groups(groups: list[list[int]], dies: int, ranks_per_node: int) -> list[list[int]]:
    """A layout's groups over the ranks the rehearsal runs (ranks_per_node on each node, rank j of node i being
    i*ranks_per_node + j). With a rank per die this is the identity. With fewer (the simulation), a group becomes
    the first ranks of each node it spans, as many as it has there up to ranks_per_node: the same node pairs
    exchange, fewer streams per pair. Groups that project to the same ranks are timed once."""
    if ranks_per_node >= dies:
        return [list(g) for g in groups]
    seen: dict[tuple[int, ...], None] = {}
    for g in groups:
        per_node: dict[int, int] = {}
        for r in g:
            per_node[r // dies] = per_node.get(r // dies, 0) + 1
        ranks = tuple(n * ranks_per_node + j for n, c in per_node.items() for j in range(min(c, ranks_per_node)))
        if len(ranks) > 1:
            seen.setdefault(ranks, None)
    return [list(g) for g in seen]


def pair_rounds(n: int) -> list[list[tuple[int, int]]]:
    """Every pair of n members exactly once, in rounds where each member is in at most one pair (the circle method):
    n-1 rounds for even n, n for odd n (one member sits each round out)."""
    m = n + (n % 2)
    rounds = []
    for r in range(m - 1):
        pairs = [(r, m - 1)] + [((r + i) % (m - 1), (r - i) % (m - 1)) for i in range(1, m // 2)]
        rounds.append([(min(a, b), max(a, b)) for a, b in pairs if max(a, b) < n])
    return rounds
