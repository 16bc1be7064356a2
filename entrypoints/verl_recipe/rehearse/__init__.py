"""The rehearsal: verl's placement groups, a probe in every bundle, a real all-reduce, and a report.

It proves the cluster can run the job before 256 dies are committed: the same STRICT_PACK groups verl builds
(one per node, one {"CPU": 3, "NPU": 1} bundle per die), then per bundle the host, visible devices, environment
and shared paths, then new TCP connections between every pair of nodes on ephemeral ports (the ports verl's
MASTER_PORT, Gloo and vLLM's distributed init listen on), then a collective across the cluster (HCCL on NPU, gloo in
the simulation).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..cluster.nodewatch import Guard, NodeLost
from ..topology import CPUS_PER_DIE

# What each worker must have inherited from its raylet (node.env, exported before `ray start`).
NODE_ENV_KEYS = ("HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES")


@dataclass
class NodeReport:
    node: str
    ip: str
    bundles: int = 0
    problems: list[str] = field(default_factory=list)
    allreduce_ms: float | None = None
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    # The all-to-all of the expert-parallel groups this node is in: its slowest pattern's median time, the bus
    # bandwidth that gives, and the peer node of its slowest pair.
    alltoall_ms: float | None = None
    alltoall_busbw_gbps: float | None = None
    alltoall_slowest_peer: str | None = None


def probe(paths: dict[str, list[str]], env_keys: tuple[str, ...]) -> dict[str, Any]:
    """Runs in one bundle: what this worker sees."""
    import ray

    problems = []
    for key in env_keys:
        if not os.environ.get(key):
            problems.append(f"{key} not set in the worker environment")
    for p in paths.get("read", []):
        if not os.path.exists(p):
            problems.append(f"{p} missing")
    for p in paths.get("write", []):
        probe_dir = p
        while not os.path.exists(probe_dir) and probe_dir != os.path.dirname(probe_dir):
            probe_dir = os.path.dirname(probe_dir)
        if not os.access(probe_dir, os.W_OK):
            problems.append(f"{p} not writable")
    ids = ray.get_runtime_context().get_accelerator_ids().get("NPU", [])
    return {
        "host": socket.gethostname(),
        "ip": ray.util.get_node_ip_address(),
        "npu_ids": list(ids),
        "visible": os.environ.get("ASCEND_RT_VISIBLE_DEVICES", ""),
        "problems": problems,
    }


# How long one new TCP connection between two nodes may take: a healthy cluster network answers in milliseconds; a
# firewall that drops (rather than rejects) the SYN leaves the caller waiting, the way Gloo's and c10d's connects do.
MESH_CONNECT_S = 5.0


def _ephemeral_listener() -> socket.socket:
    """A socket on a port the kernel picks, on every address, as verl's `_get_free_port` and Gloo's pairs bind."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", 0))
    s.listen(128)
    return s


def _dial(targets: list[tuple[str, int]], timeout_s: float) -> list[tuple[str, int, str]]:
    """Open one new TCP connection to each target at once; (ip, port, why) for each that failed."""
    from concurrent.futures import ThreadPoolExecutor

    def one(target: tuple[str, int]) -> tuple[str, int, str] | None:
        try:
            with socket.create_connection(target, timeout=timeout_s):
                return None
        except TimeoutError:
            return (*target, f"no answer in {timeout_s:g} s")
        except OSError as exc:
            return (*target, exc.strerror or type(exc).__name__)

    if not targets:
        return []
    with ThreadPoolExecutor(max_workers=min(32, len(targets))) as pool:
        return [r for r in pool.map(one, targets) if r is not None]


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


class AllReduceRank:
    """One rank of the rehearsal collective; the first rank on each node also answers the cross-node TCP mesh."""

    def __init__(self, rank: int, world: int, device: str) -> None:
        self.rank, self.world, self.device = rank, world, device
        self._listener: socket.socket | None = None

    def listen(self) -> tuple[str, int]:
        """Open an ephemeral port and accept (and drop) every connection to it until `unlisten`."""
        import threading

        import ray

        self._listener = _ephemeral_listener()
        listener = self._listener

        def accept() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return  # closed by unlisten
                conn.close()

        threading.Thread(target=accept, daemon=True).start()
        return ray.util.get_node_ip_address(), int(listener.getsockname()[1])

    def dial(self, targets: list[tuple[str, int]], timeout_s: float) -> list[tuple[str, int, str]]:
        return _dial([tuple(t) for t in targets], timeout_s)  # type: ignore[misc]

    def unlisten(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def address(self) -> tuple[str, int]:
        import ray

        # The master port the way verl 0.8.0 picks MASTER_PORT (single_controller/base/worker.py _get_free_port):
        # an ephemeral port from the kernel, so a host firewall that opens a port list instead of trusting the
        # cluster's addresses fails the rehearsal as it would fail training.
        ip = ray.util.get_node_ip_address()
        with socket.socket() as s:
            s.bind(("", 0))
            return ip, int(s.getsockname()[1])

    def run(
        self,
        master: tuple[str, int],
        numel: int,
        iters: int,
        timeout_s: float,
        patterns: list[list[list[int]]] | None = None,
    ) -> dict[str, Any]:
        import datetime

        import ray
        import torch
        import torch.distributed as dist

        host, port = master
        deadline = time.monotonic() + timeout_s
        while True:  # the master port must be reachable from every node before the collective starts
            try:
                with socket.create_connection((host, port), timeout=2):
                    break
            except OSError as exc:
                if self.rank == 0:
                    break
                if time.monotonic() > deadline:
                    return {
                        "rank": self.rank,
                        "ip": ray.util.get_node_ip_address(),
                        "error": f"master {host}:{port} unreachable: {exc}",
                    }
                time.sleep(0.5)
        if self.device == "npu":
            import torch_npu  # noqa: F401 - registers the NPU device and HCCL

            local = int(ray.get_runtime_context().get_accelerator_ids()["NPU"][0])
            torch.npu.set_device(local)  # type: ignore[attr-defined]
            backend, dev = "hccl", f"npu:{local}"
        else:
            backend, dev = "gloo", "cpu"
        dist.init_process_group(
            backend,
            init_method=f"tcp://{host}:{port}",
            rank=self.rank,
            world_size=self.world,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        try:
            x = torch.ones(numel, dtype=torch.float32, device=dev)
            dist.all_reduce(x)  # warm-up, and the correctness check below
            ok = bool(float(x[0].item()) == float(self.world))
            times = []
            for _ in range(iters):
                dist.barrier()
                t = time.perf_counter()
                dist.all_reduce(x)
                if self.device == "npu":
                    torch.npu.synchronize()  # type: ignore[attr-defined]
                times.append(time.perf_counter() - t)
            alltoall = [self._alltoall(groups, numel, iters, dev) for groups in patterns or []]
        finally:
            dist.destroy_process_group()
        return {
            "rank": self.rank,
            "ip": ray.util.get_node_ip_address(),
            "seconds": statistics.median(times),
            "correct": ok,
            "alltoall": alltoall,
        }

    def _alltoall(self, groups: list[list[int]], numel: int, iters: int, dev: str) -> dict[str, Any] | None:
        """One pattern: every rank creates every group (torch.distributed requires it), then in this rank's group
        the timed all_to_all_single of numel floats (numel/n to each member, as the dispatcher sends each expert
        rank its tokens), then each pair alone: a round of the same call with a chunk to the partner only."""
        import torch
        import torch.distributed as dist

        handles = [dist.new_group(g) for g in groups]
        mine = next((i for i, g in enumerate(groups) if self.rank in g), None)
        if mine is None:
            dist.barrier()
            return None
        members, group = groups[mine], handles[mine]
        n, me = len(members), groups[mine].index(self.rank)
        chunk = max(1, numel // n)

        def timed(send: list[int]) -> tuple[float, Any]:
            x = torch.full((sum(send),), float(self.rank), dtype=torch.float32, device=dev)
            y = torch.empty(sum(send), dtype=torch.float32, device=dev)  # symmetric splits: recv sizes = send sizes
            dist.all_to_all_single(y, x, send, send, group=group)  # warm-up
            out = []
            for _ in range(iters):
                dist.barrier(group=group)
                t = time.perf_counter()
                dist.all_to_all_single(y, x, send, send, group=group)
                if self.device == "npu":
                    torch.npu.synchronize()  # type: ignore[attr-defined]
                out.append(time.perf_counter() - t)
            return statistics.median(out), y

        whole, got = timed([chunk] * n)
        # chunk j came from member j: each rank's buffer holds its rank, so the first element of each chunk names it
        correct = [float(v) for v in got.view(n, chunk)[:, 0].cpu().tolist()] == [float(m) for m in members]
        pairs: dict[int, float] = {}
        for pairing in pair_rounds(n):
            partner = next((b if a == me else a for a, b in pairing if me in (a, b)), None)
            send = [0] * n
            if partner is not None:
                send[partner] = chunk
            t, _ = timed(send)  # every member calls it each round; one sitting out sends nothing
            if partner is not None:
                pairs[members[partner]] = t
        dist.barrier()
        return {"group": mine, "n": n, "bytes": chunk * n * 4, "seconds": whole, "pairs": pairs, "correct": correct}


def _wait_ready(ray: Any, pgs: list[Any], timeout_s: float, guard: Guard | None = None) -> list[int]:
    """Indexes of the groups that could not be placed in time."""
    refs = [pg.ready() for pg in pgs]
    end = time.monotonic() + timeout_s
    while True:
        left = max(0.0, end - time.monotonic())
        ready, pending = ray.wait(refs, num_returns=len(refs), timeout=min(left, 2.0) if guard else left)
        if not pending or left <= 0:
            break
        if guard is not None:
            guard()
    done = set(ready)
    return [i for i, ref in enumerate(refs) if ref not in done]


def _get(ray: Any, refs: Any, timeout_s: float, guard: Guard | None = None) -> Any:
    """ray.get, but a lost node ends the wait at once (NodeLost) instead of at the timeout or never."""
    if guard is None:
        return ray.get(refs, timeout=timeout_s)
    many = isinstance(refs, list)
    items = refs if many else [refs]
    end = time.monotonic() + timeout_s
    while True:
        left = max(0.0, end - time.monotonic())
        _, pending = ray.wait(items, num_returns=len(items), timeout=min(left, 2.0))
        if not pending or left <= 0:
            break
        guard()
    try:
        out = ray.get(items, timeout=max(0.0, end - time.monotonic()))
    except NodeLost:
        raise
    except Exception:
        # A rank or task that failed because a peer went away (its node died, or its connection was reset): give
        # the watch its confirm time to name the node, instead of Ray's error; nothing suspect: Ray's error.
        until = time.monotonic() + guard.watch.confirm_s + 2 * guard.every_s
        while True:
            guard(force=True)
            if not guard.watch.suspect or time.monotonic() > until:
                raise
            time.sleep(guard.every_s)
    return out if many else out[0]


@dataclass
class Placed:
    """The placement groups once Ray has placed them: which node holds each, and a report per node."""

    groups: list[Any]
    node_of: list[str]  # node IP of each group, in group order
    reports: dict[str, NodeReport]
    placement: list[dict[str, Any]]  # which bundle landed where, for the readiness page


def rehearse(
    ray: Any,
    *,
    nnodes: int,
    dies: int,
    device: str,
    paths: dict[str, list[str]],
    names: dict[str, str],
    ranks_per_node: int,
    tensor_mb: float,
    iters: int,
    timeout_s: float,
    guard: Guard | None = None,
    layout: dict[str, Any] | None = None,
) -> tuple[list[NodeReport], dict]:
    """Place, probe every bundle, dial every node pair, then the collectives (the all-reduce, and the all-to-all
    of each expert-parallel group of `layout`, the resolved settings); each phase timed in the summary."""
    from ray.util.placement_group import placement_group, remove_placement_group

    t0 = time.perf_counter()
    pgs = [placement_group([{"CPU": CPUS_PER_DIE, "NPU": 1}] * dies, strategy="STRICT_PACK") for _ in range(nnodes)]
    summary: dict[str, Any] = {"nnodes": nnodes, "dies_per_node": dies, "device": device}
    actors: list[Any] = []

    def done(reports: list[NodeReport]) -> tuple[list[NodeReport], dict]:
        summary["total_s"] = round(time.perf_counter() - t0, 3)
        return sorted(reports, key=lambda r: r.node), summary

    try:
        placed = _place(ray, pgs, names, timeout_s, guard, summary)
        if placed is None:
            return [], summary
        summary["placement_s"] = round(time.perf_counter() - t0, 3)
        t1 = time.perf_counter()
        _probe_bundles(ray, placed, dies, device, paths, timeout_s, guard)
        summary["probe_s"] = round(time.perf_counter() - t1, 3)

        t2 = time.perf_counter()
        actor_ip = _start_ranks(ray, placed, ranks_per_node, device, actors)
        # Before the collective (which would hang until its timeout on a dropped port): every node's first rank
        # dials every other node's first rank on a fresh ephemeral port.
        firsts: dict[str, Any] = {}
        for actor, ip in zip(actors, actor_ip, strict=True):
            firsts.setdefault(ip, actor)
        mesh = cross_node_mesh(ray, firsts, names, timeout_s, guard)
        summary["mesh"] = {k: v for k, v in mesh.items() if k != "problems"}
        for ip, problem in mesh["problems"]:
            placed.reports[ip].problems.append(problem)
        if mesh["failed_pairs"]:
            summary["error"] = (
                f"{mesh['failed_pairs']} of {mesh['pairs']} node pairs cannot open a TCP connection on an ephemeral "
                "port: the collective was not started (verl's rendezvous would hang there the same way)"
            )
            return done(list(placed.reports.values()))
        patterns = alltoall_patterns(layout or {}, nnodes * dies)
        for pat in patterns:
            pat["rehearsed"] = project_groups(pat["groups"], dies, ranks_per_node)
        _collective(ray, actors, actor_ip, placed.reports, tensor_mb, iters, timeout_s, guard, summary, patterns)
        summary["collective_s"] = round(time.perf_counter() - t2, 3)
        return done(list(placed.reports.values()))
    except NodeLost as lost:
        summary["error"] = str(lost)
        summary["lost"] = [x.as_dict() for x in lost.losses]
        summary["total_s"] = round(time.perf_counter() - t0, 3)
        return [], summary
    finally:
        for a in actors:  # a rank blocked in a collective with a lost peer ends here, not at its timeout
            ray.kill(a)
        for pg in pgs:
            remove_placement_group(pg)


def _place(
    ray: Any, pgs: list[Any], names: dict[str, str], timeout_s: float, guard: Guard | None, summary: dict[str, Any]
) -> Placed | None:
    """Wait for every group; None (and the error in the summary) when one cannot be placed in time."""
    from ray.util.placement_group import placement_group_table

    not_ready = _wait_ready(ray, pgs, timeout_s, guard)
    if not_ready:
        dies = summary["dies_per_node"]
        summary["error"] = (
            f"{len(not_ready)} of {len(pgs)} placement groups of {dies} x {{CPU: {CPUS_PER_DIE}, NPU: "
            f"1}} could not be placed in {timeout_s:.0f} s: verl would block forever here"
        )
        return None
    by_id = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
    node_of = [by_id.get(placement_group_table(pg)["bundles_to_node_id"][0], "?") for pg in pgs]
    if guard is not None:
        guard.only = set(node_of)  # from here on only the nodes holding a group matter
    placement: list[dict[str, Any]] = [
        {"group": i, "node": names.get(ip, ip), "ip": ip, "bundles": []} for i, ip in enumerate(node_of)
    ]
    summary["placement"] = placement
    reports = {ip: NodeReport(node=names.get(ip, ip), ip=ip) for ip in node_of}
    return Placed(pgs, node_of, reports, placement)


def _probe_bundles(
    ray: Any,
    placed: Placed,
    dies: int,
    device: str,
    paths: dict[str, list[str]],
    timeout_s: float,
    guard: Guard | None,
) -> None:
    """One probe per bundle, a wave of one bundle index at a time so Ray reuses a few worker processes."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    remote_probe = ray.remote(num_cpus=1, resources={"NPU": 1})(probe)
    for b in range(dies):
        refs = [
            remote_probe.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, b)).remote(
                paths, NODE_ENV_KEYS
            )
            for pg in placed.groups
        ]
        for pg_index, result in enumerate(_get(ray, refs, timeout_s, guard)):
            r = placed.reports[placed.node_of[pg_index]]
            r.bundles += 1
            placed.placement[pg_index]["bundles"].append({"bundle": b, "ip": result["ip"], "npu": result["npu_ids"]})
            if result["ip"] != placed.node_of[pg_index]:
                r.problems.append(f"bundle {b} ran on {result['ip']}, not in its STRICT_PACK group's node")
            if device == "npu" and not result["npu_ids"]:
                r.problems.append(f"bundle {b}: no NPU id assigned by Ray")
            r.problems += [f"bundle {b}: {p}" for p in result["problems"] if f"bundle {b}" not in p]
    for r in placed.reports.values():
        r.problems = _dedupe(r.problems)


def _start_ranks(ray: Any, placed: Placed, ranks_per_node: int, device: str, actors: list[Any]) -> list[str]:
    """ranks_per_node ranks in every group, rank 0 in the first; appends them to `actors` (the caller kills them)
    and returns each rank's node IP."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    world = len(placed.groups) * ranks_per_node
    actor_cls = ray.remote(num_cpus=1, resources={"NPU": 1})(AllReduceRank)
    actor_ip: list[str] = []
    for pg_index, pg in enumerate(placed.groups):
        for j in range(ranks_per_node):
            strategy = PlacementGroupSchedulingStrategy(pg, j)
            actors.append(actor_cls.options(scheduling_strategy=strategy).remote(len(actors), world, device))
            actor_ip.append(placed.node_of[pg_index])
    return actor_ip


def _collective(
    ray: Any,
    actors: list[Any],
    actor_ip: list[str],
    reports: dict[str, NodeReport],
    tensor_mb: float,
    iters: int,
    timeout_s: float,
    guard: Guard | None,
    summary: dict[str, Any],
    patterns: list[dict[str, Any]] | None = None,
) -> None:
    """The timed all-reduce over every rank; per node the median time and the bandwidths it gives. Then the
    all-to-all patterns (alltoall_summary)."""
    world = len(actors)
    master = _get(ray, actors[0].address.remote(), timeout_s, guard)
    numel = max(1, int(tensor_mb * 1e6 / 4))
    rehearsed = [p["rehearsed"] for p in patterns or []]
    results = _get(
        ray, [a.run.remote(master, numel, iters, timeout_s, rehearsed) for a in actors], timeout_s * 2, guard
    )
    backend = "hccl" if summary["device"] == "npu" else "gloo"
    summary.update(world=world, tensor_mb=tensor_mb, iters=iters, backend=backend)
    per_node: dict[str, list[float]] = {}
    for res, ip in zip(results, actor_ip, strict=True):
        if "error" in res:
            reports[ip].problems.append(res["error"])
            continue
        if not res["correct"]:
            reports[ip].problems.append(f"rank {res['rank']}: all-reduce gave a wrong sum")
        per_node.setdefault(ip, []).append(res["seconds"])
    nbytes = numel * 4
    for ip, secs in per_node.items():
        t = statistics.median(secs)
        r = reports[ip]
        r.allreduce_ms = round(t * 1e3, 3)
        r.algbw_gbps = round(nbytes / t / 1e9, 4)
        r.busbw_gbps = round(r.algbw_gbps * 2 * (world - 1) / world, 4) if world > 1 else r.algbw_gbps
    if patterns:
        summary["alltoall"] = alltoall_summary(patterns, results, actor_ip, reports)


def alltoall_summary(
    patterns: list[dict[str, Any]], results: list[dict[str, Any]], actor_ip: list[str], reports: dict[str, NodeReport]
) -> list[dict[str, Any]]:
    """Per pattern: the groups (layout ranks and the ranks rehearsed), the slowest group's time, its bus bandwidth
    and the slowest pair; per node (into `reports`) its slowest pattern's figures and the peer of its slowest pair.

    Bus bandwidth as nccl-tests' alltoall computes it (doc/PERFORMANCE.md): algbw = S / t with S the bytes each rank
    sends in all (its own chunk included), busbw = algbw x (n-1)/n, since 1/n of S stays on the rank."""
    names = {ip: r.node for ip, r in reports.items()}
    out = []
    for k, pat in enumerate(patterns):
        per_node: dict[str, list[tuple[float, int, int]]] = {}
        pair_s: dict[tuple[int, int], float] = {}
        for res in results:
            a2a = (res.get("alltoall") or [None] * len(patterns))[k] if "error" not in res else None
            if not a2a:
                continue
            ip = actor_ip[res["rank"]]
            if not a2a["correct"]:
                reports[ip].problems.append(f"rank {res['rank']}: {pat['pattern']} all-to-all delivered wrong chunks")
            per_node.setdefault(ip, []).append((a2a["seconds"], a2a["bytes"], a2a["n"]))
            for peer, t in a2a["pairs"].items():
                key = (min(res["rank"], int(peer)), max(res["rank"], int(peer)))
                pair_s[key] = max(t, pair_s.get(key, 0.0))  # a pair is as slow as its slower side

        def bus(t: float, nbytes: int, n: int) -> float:
            return round(nbytes / t / 1e9 * (n - 1) / n, 4)

        node_rows = []
        for ip, rows in per_node.items():
            t = statistics.median(x[0] for x in rows)
            bw = bus(t, rows[0][1], rows[0][2])
            mine = [(s, pr) for pr, s in pair_s.items() if ip in (actor_ip[pr[0]], actor_ip[pr[1]])]
            peer = None
            if mine:
                _, (a, b) = max(mine)
                peer = names.get(actor_ip[b] if actor_ip[a] == ip else actor_ip[a])
            r = reports[ip]
            if r.alltoall_ms is None or t * 1e3 > r.alltoall_ms:
                r.alltoall_ms, r.alltoall_busbw_gbps, r.alltoall_slowest_peer = round(t * 1e3, 3), bw, peer
            node_rows.append({"node": names.get(ip, ip), "ms": round(t * 1e3, 3), "busbw_gbps": bw, "peer": peer})
        slow_pair = None
        if pair_s:
            (a, b), t = max(pair_s.items(), key=lambda kv: kv[1])
            slow_pair = {
                "ranks": [a, b],
                "nodes": [names.get(actor_ip[a], actor_ip[a]), names.get(actor_ip[b], actor_ip[b])],
                "ms": round(t * 1e3, 3),
            }
        out.append(
            {
                "pattern": pat["pattern"],
                "size": pat["size"],
                "groups": len(pat["groups"]),
                "layout_ranks": pat["groups"],
                "rehearsed_ranks": pat["rehearsed"],
                "nodes": sorted(node_rows, key=lambda x: x["node"]),
                "slowest_pair": slow_pair,
            }
        )
    return out


def cross_node_mesh(
    ray: Any, firsts: dict[str, Any], names: dict[str, str], timeout_s: float, guard: Guard | None = None
) -> dict[str, Any]:
    """Every ordered pair of nodes: a new TCP connection to a port the target's kernel picked. Problems are
    attributed to the target node (its firewall drops the connection) and name the nodes that could not reach it."""
    t = time.perf_counter()
    ips = list(firsts)
    ports = dict(zip(ips, _get(ray, [firsts[ip].listen.remote() for ip in ips], timeout_s, guard), strict=True))
    plans = {src: [ports[dst] for dst in ips if dst != src] for src in ips}
    failures = _get(ray, [firsts[src].dial.remote(plans[src], MESH_CONNECT_S) for src in ips], timeout_s, guard)
    # (on an error the actors are killed, which closes their listeners)
    _get(ray, [firsts[ip].unlisten.remote() for ip in ips], timeout_s, guard)
    unreachable: dict[str, list[tuple[str, str]]] = {}
    for src, failed in zip(ips, failures, strict=True):
        for dst_ip, port, why in failed:
            unreachable.setdefault(dst_ip, []).append((src, f"{port}: {why}"))
    problems = []
    for dst, froms in sorted(unreachable.items()):
        sources = ", ".join(sorted(names.get(src, src) for src, _ in froms))
        problems.append(
            (
                dst,
                f"new TCP to {dst} on an ephemeral port ({froms[0][1]}) fails from {sources}: a host firewall on "
                f"{names.get(dst, dst)} drops the cluster's traffic (verl's MASTER_PORT, Gloo and vLLM listen on "
                "such ports); fix: trust the cluster hosts' addresses on every port (docs/deploy.md, Firewall)",
            )
        )
    return {
        "pairs": len(ips) * (len(ips) - 1),
        "failed_pairs": sum(len(f) for f in unreachable.values()),
        "connect_timeout_s": MESH_CONNECT_S,
        "mesh_s": round(time.perf_counter() - t, 3),
        "problems": problems,
    }


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def format_report(reports: list[NodeReport], summary: dict[str, Any]) -> str:
    lines = [
        f"rehearsal: {summary.get('nnodes')} nodes x {summary.get('dies_per_node')} bundles, "
        f"{summary.get('backend', '?')} all-reduce of {summary.get('tensor_mb', '?')} MB over "
        f"{summary.get('world', '?')} ranks, {summary.get('total_s', '?')} s in all"
    ]
    lines.append(f"{'node':<12} {'ip':<15} {'bundles':>7} {'allreduce_ms':>12} {'busbw_GB/s':>10}  problems")
    for r in reports:
        ms = f"{r.allreduce_ms:.2f}" if r.allreduce_ms is not None else "-"
        bw = f"{r.busbw_gbps:.3f}" if r.busbw_gbps is not None else "-"
        lines.append(f"{r.node:<12} {r.ip:<15} {r.bundles:>7} {ms:>12} {bw:>10}  {'; '.join(r.problems) or 'ok'}")
    for pat in summary.get("alltoall") or []:
        done = pat["rehearsed_ranks"]
        sizes = "/".join(sorted({str(len(g)) for g in done}))
        how = f"rehearsed as {len(done)} groups of {sizes} ranks" if done else "each within one node: not rehearsed"
        lines.append(f"all-to-all {pat['pattern']} {pat['size']}: {pat['groups']} groups, {how}")
        for row in pat["nodes"]:
            lines.append(
                f"  {row['node']:<12} {row['ms']:>10.2f} ms {row['busbw_gbps']:>10.3f} GB/s bus  slowest peer "
                f"{row['peer'] or '-'}"
            )
        sp = pat.get("slowest_pair")
        if sp:
            lines.append(
                f"  slowest pair: {sp['nodes'][0]} <-> {sp['nodes'][1]} (ranks {sp['ranks'][0]}, "
                f"{sp['ranks'][1]}), {sp['ms']:.2f} ms"
            )
    if "error" in summary:
        lines.append(f"error: {summary['error']}")
    return "\n".join(lines)


def write_report(path: Path, reports: list[NodeReport], summary: dict[str, Any]) -> Path:
    """The JSON report, then the readiness page drawn from it next to it (same name, .html); returns the page."""
    from ..pages.readiness import report_meta, write_page

    path.parent.mkdir(parents=True, exist_ok=True)
    meta = report_meta("rehearsal", simulated=os.environ.get("VERL_RECIPE_SIMULATED") == "1")
    doc = {"summary": summary, "nodes": [asdict(r) for r in reports], "meta": meta}
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return write_page([path])
