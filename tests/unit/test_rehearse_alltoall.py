"""The rehearsal's all-to-all: the expert-parallel groups of a layout as Megatron-Core 0.16.0 builds them (expert
RankGenerator, order "tp-cp-ep-dp-pp"), the rollout's, their projection onto the simulation's ranks, the pair rounds,
and the per-node figures and slowest pair the report gives."""

from __future__ import annotations

import itertools

from verl_recipe.rehearse import (
    NodeReport,
    alltoall_patterns,
    alltoall_summary,
    expert_parallel_groups,
    pair_rounds,
    project_groups,
)

L397 = {"TP": 2, "PP": 4, "CP": 1, "EP": 64, "ETP": 1, "GEN_TP": 16, "GEN_DP": 16, "GEN_EP": 256}


def test_397b_ep64_on_256_dies_is_four_blocks_of_64_one_per_pipeline_stage() -> None:
    groups = expert_parallel_groups(256, pp=4, ep=64, etp=1)
    assert groups == [list(range(64 * q, 64 * q + 64)) for q in range(4)]
    # each group spans 4 whole nodes of 16 dies: the dispatcher's traffic crosses 3 node boundaries per group
    assert [sorted({r // 16 for r in g}) for g in groups] == [list(range(4 * q, 4 * q + 4)) for q in range(4)]


def test_small_layout_with_etp_and_edp() -> None:
    # world 16, ETP 2, EP 2, PP 2: EDP 2; members ETP apart, etp fastest, then edp, then pp
    assert expert_parallel_groups(16, pp=2, ep=2, etp=2) == [
        [0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11], [12, 14], [13, 15]
    ]  # fmt: skip
    assert expert_parallel_groups(16, pp=1, ep=4, etp=1) == [list(range(i, i + 4)) for i in (0, 4, 8, 12)]


def test_groups_partition_the_world() -> None:
    for world, pp, ep, etp in [(256, 4, 64, 1), (32, 2, 4, 2), (48, 3, 2, 2)]:
        flat = sorted(r for g in expert_parallel_groups(world, pp, ep, etp) for r in g)
        assert flat == list(range(world))


def test_patterns_of_the_397b_layout_and_of_layouts_without_experts() -> None:
    pats = alltoall_patterns(L397, 256)
    assert [(p["pattern"], p["size"], len(p["groups"])) for p in pats] == [("train EP", 64, 4), ("rollout EP", 256, 1)]
    assert pats[1]["groups"] == [list(range(256))]
    assert alltoall_patterns({"GEN_EP": 1}, 16) == []  # FSDP recipe: no EP anywhere
    same = alltoall_patterns({"TP": 1, "PP": 1, "EP": 16, "ETP": 1, "GEN_EP": 16}, 16)
    assert [p["pattern"] for p in same] == ["train EP"]  # the rollout's groups are the same ranks: timed once


def test_etp_unset_means_tp() -> None:
    pats = alltoall_patterns({"TP": 2, "PP": 1, "EP": 2, "ETP": None}, 8)
    assert pats[0]["groups"] == [[0, 2], [1, 3], [4, 6], [5, 7]]


def test_projection_onto_one_rank_per_node() -> None:
    train, rollout = (p["groups"] for p in alltoall_patterns(L397, 256))
    assert project_groups(train, 16, 1) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert project_groups(rollout, 16, 1) == [list(range(16))]
    assert project_groups(train, 16, 16) == train  # a rank per die: the layout's own groups
    # two ranks per node: a group spanning nodes 0-3 keeps two ranks on each
    assert project_groups(train, 16, 2)[0] == list(range(8))


def test_pair_rounds_cover_every_pair_once_with_no_member_twice_in_a_round() -> None:
    for n in range(2, 10):
        rounds = pair_rounds(n)
        pairs = [p for r in rounds for p in r]
        assert sorted(pairs) == list(itertools.combinations(range(n), 2)), n
        for r in rounds:
            members = [m for p in r for m in p]
            assert len(members) == len(set(members)), (n, r)
        assert len(rounds) == (n - 1 if n % 2 == 0 else n)


def test_summary_names_the_slowest_pair_and_computes_bus_bandwidth() -> None:
    ips = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]
    reports = {ip: NodeReport(node=f"a3-0{i + 1}", ip=ip) for i, ip in enumerate(ips)}
    pat = {"pattern": "train EP", "size": 4, "groups": [[0, 1, 2, 3]], "rehearsed": [[0, 1, 2, 3]]}
    slow = {(1, 3): 0.050}  # the a3-02 <-> a3-04 pair is slow

    def res(rank: int) -> dict:
        pairs = {p: slow.get((min(rank, p), max(rank, p)), 0.010) for p in range(4) if p != rank}
        a2a = {"group": 0, "n": 4, "bytes": 8_000_000, "seconds": 0.02, "pairs": pairs, "correct": rank != 2}
        return {"rank": rank, "alltoall": [a2a]}

    out = alltoall_summary([pat], [res(r) for r in range(4)], ips, reports)
    assert out[0]["slowest_pair"] == {"ranks": [1, 3], "nodes": ["a3-02", "a3-04"], "ms": 50.0}
    # nccl-tests: busbw = S / t x (n-1)/n = 8e6 / 0.02 / 1e9 x 3/4 = 0.3 GB/s
    assert reports[ips[0]].alltoall_busbw_gbps == 0.3 and reports[ips[0]].alltoall_ms == 20.0
    assert reports[ips[1]].alltoall_slowest_peer == "a3-04" and reports[ips[3]].alltoall_slowest_peer == "a3-02"
    assert reports[ips[2]].problems == ["rank 2: train EP all-to-all delivered wrong chunks"]


def _gloo_rank(rank: int, port: int, q: object) -> None:
    import datetime

    import torch.distributed as dist
    from verl_recipe.rehearse import AllReduceRank

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=3, timeout=datetime.timedelta(seconds=60)
    )
    try:
        me = AllReduceRank(rank, 3, "cpu")
        out = [me._alltoall(groups, 3000, 2, "cpu") for groups in ([[0, 1, 2]], [[0, 2], [1]])]
    finally:
        dist.destroy_process_group()
    q.put((rank, out))  # type: ignore[attr-defined]


def test_the_rank_code_on_gloo_delivers_every_chunk_and_times_every_pair() -> None:
    import multiprocessing as mp
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_gloo_rank, args=(r, port, q)) for r in range(3)]
    for p in procs:
        p.start()
    got = dict(q.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    for rank in range(3):
        whole = got[rank][0]
        assert whole["correct"] and whole["n"] == 3 and whole["bytes"] == 3000 * 4
        assert sorted(whole["pairs"]) == [r for r in range(3) if r != rank] and whole["seconds"] > 0
    assert got[0][1]["pairs"].keys() == {2} and got[2][1]["pairs"].keys() == {0}
    assert got[1][1]["n"] == 1 and got[1][1]["pairs"] == {}  # a group of one: nothing to exchange


def test_report_lines_name_the_pattern_and_the_slowest_pair() -> None:
    from verl_recipe.rehearse import format_report

    ips = ["10.0.0.1", "10.0.0.2"]
    reports = {ip: NodeReport(node=f"a3-0{i + 1}", ip=ip) for i, ip in enumerate(ips)}
    pats = [
        {"pattern": "train EP", "size": 4, "groups": [[0, 1, 2, 3]] * 8, "rehearsed": []},  # within a node each
        {"pattern": "rollout EP", "size": 32, "groups": [list(range(32))], "rehearsed": [[0, 1]]},
    ]
    a2a = {"group": 0, "n": 2, "bytes": 8_000_000, "seconds": 0.01, "pairs": {}, "correct": True}
    results = [{"rank": r, "alltoall": [None, dict(a2a, pairs={1 - r: 0.02})]} for r in range(2)]
    summary = {"alltoall": alltoall_summary(pats, results, ips, reports)}
    text = format_report(list(reports.values()), summary)
    assert "all-to-all train EP 4: 8 groups, each within one node: not rehearsed" in text
    assert "all-to-all rollout EP 32: 1 groups, rehearsed as 1 groups of 2 ranks" in text
    assert "slowest pair: a3-01 <-> a3-02 (ranks 0, 1), 20.00 ms" in text
