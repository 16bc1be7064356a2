"""The collective ranks: a real all-reduce across the cluster (HCCL on NPU, gloo in the simulation) and the
expert-parallel all-to-all, with their summary."""

from __future__ import annotations

import socket
import statistics
import time
from typing import Any

from .groups import pair_rounds
from .mesh import _dial, _ephemeral_listener
from .report import NodeReport


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
