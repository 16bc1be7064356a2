"""Which host and rank stopped making progress, for the stall alert (watch/health.py, docs/watch.md).

Ray's state API gives this job's actors (its job found by verl's driver process, so actors of earlier jobs are left
out), each with its pid and node; Ray's node ids are mapped to the inventory's host names by address (the members
the launch waited for, else the name each node joined with, `ray start --node-name`). Each host's node service
samples the state and CPU time of its processes (cluster/hostsample.py): a rank whose process is stopped (state T,
as SIGSTOP leaves it), has exited, or made no CPU progress between the last two samples while others did, is the
suspect. The pure parts (mapping, filtering, the choice of the suspect) take plain data; `StallProbe.describe` reads
Ray and the samples, bounded in time.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cluster.hostsample import STALE_AFTER_S, proc_samples

PROBE_TIMEOUT_S = 30.0  # the whole look (state API and samples); the alert goes out without it after this
STATE_API_TIMEOUT_S = 10  # each call of Ray's state API
MAX_ACTORS = 10_000  # a 256-die run has some hundreds of actors
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# verl 0.8.0 names each worker actor f"{name_prefix}{class}_{pg_idx}:{local_rank}" and numbers the ranks over the
# placement groups in order (verl/single_controller/ray/base.py RayWorkerGroup._create_worker @3e4edb6e).
_WORKER_NAME = re.compile(r"^(?P<group>.*)_(?P<pg>\d+):(?P<local>\d+)$")
STOPPED_STATES = ("T", "t")  # stopped by a signal (SIGSTOP, SIGTSTP) or traced
GONE_STATES = ("Z", "X")


@dataclass(frozen=True)
class Actor:
    name: str
    class_name: str
    state: str
    job_id: str
    node_id: str
    pid: int | None


@dataclass(frozen=True)
class Suspect:
    host: str
    actor: str  # "rank 1 (WorkerDict_0:1)" or the actor's class and name
    pid: int
    why: str
    order: int  # stopped, exited, gone, no progress


def as_dict(obj: Any) -> dict[str, Any]:
    """A state API row (a dataclass, a pydantic model or a mapping) as a plain dict."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if hasattr(obj, "dict"):
        return dict(obj.dict())
    return dict(obj) if isinstance(obj, dict) else {}


def _pid(value: Any) -> int | None:
    try:
        pid = int(value)
    except (TypeError, ValueError):
        return None
    return pid if pid > 0 else None


def current_job(jobs: Iterable[dict[str, Any]], driver_pid: int | None, since_s: float) -> str | None:
    """This run's Ray job: the newest one since the run began whose driver is verl's process; else the newest
    running job started since then (a driver started by hand at the same time could be taken for it: the alert says
    which job). A pid alone is not enough: each `docker compose run` container numbers its processes from 1, so an
    earlier run's driver often had the same pid."""
    rows = [j for j in jobs if j.get("job_id")]
    recent = sorted(
        (j for j in rows if (j.get("start_time") or 0) >= since_s * 1000), key=lambda j: j.get("start_time") or 0
    )
    if driver_pid is not None:
        for j in reversed(recent):
            info = j.get("driver_info") or {}
            if _pid(info.get("pid") if isinstance(info, dict) else None) == driver_pid:
                return str(j["job_id"])
    running = [
        j
        for j in rows
        if str(j.get("status", "")).upper().endswith("RUNNING") and (j.get("start_time") or 0) >= since_s * 1000
    ]
    running.sort(key=lambda j: j.get("start_time") or 0)
    return str(running[-1]["job_id"]) if running else None


def node_hosts(nodes: Iterable[dict[str, Any]], members: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Ray node id -> the inventory's host name (by the node's address), else the name it joined with, else its
    address."""
    by_ip = {ip: name for name, ip in members}
    out: dict[str, str] = {}
    for n in nodes:
        node_id, ip = str(n.get("node_id") or ""), str(n.get("node_ip") or "")
        if node_id:
            out[node_id] = by_ip.get(ip) or str(n.get("node_name") or "") or ip or node_id[:8]
    return out


def job_actors(rows: Iterable[dict[str, Any]], job_id: str | None) -> list[Actor]:
    """The actors of this job (all, when the job is unknown), as Actor."""
    out = []
    for r in rows:
        if job_id is not None and str(r.get("job_id") or "") != job_id:
            continue
        out.append(
            Actor(
                name=str(r.get("name") or ""),
                class_name=str(r.get("class_name") or "?"),
                state=str(r.get("state") or "?"),
                job_id=str(r.get("job_id") or ""),
                node_id=str(r.get("node_id") or ""),
                pid=_pid(r.get("pid")),
            )
        )
    return out


def ranks(actors: Iterable[Actor]) -> dict[str, int]:
    """verl worker actor name -> its rank in its worker group (verl numbers them by placement group, then bundle)."""
    groups: dict[str, list[tuple[int, int, str]]] = {}
    for a in actors:
        m = _WORKER_NAME.match(a.name)
        if m:
            groups.setdefault(m["group"], []).append((int(m["pg"]), int(m["local"]), a.name))
    out: dict[str, int] = {}
    for members in groups.values():
        for rank, (_, _, name) in enumerate(sorted(members)):
            out[name] = rank
    return out


def label(actor: Actor, rank_of: dict[str, int]) -> str:
    if actor.name in rank_of:
        return f"rank {rank_of[actor.name]} ({actor.name})"
    return f"{actor.class_name} {actor.name}".strip()


def _proc(sample: dict[str, Any] | None, pid: int) -> tuple[str, int] | None:
    try:
        state, ticks = (sample or {})["procs"][str(pid)]
        return str(state), int(ticks)
    except (KeyError, TypeError, ValueError):
        return None


def choose_suspects(
    actors: list[Actor], hosts: dict[str, str], samples: dict[str, dict[str, Any]], now: float
) -> tuple[list[Suspect], list[str]]:
    """The ranks that stopped making progress, worst first, and the hosts whose samples are missing or stale.
    A process stopped (state T) or exited is a suspect by itself; one with no CPU progress between the last two
    samples only while another actor of the job progressed (all idle: a collective waiting, nothing to single out)."""
    rank_of = ranks(actors)
    stale = sorted(
        {
            hosts.get(a.node_id, a.node_id[:8])
            for a in actors
            if a.state == "ALIVE"
            and now - float(((samples.get(hosts.get(a.node_id, "")) or {}).get("cur") or {}).get("t") or 0)
            > STALE_AFTER_S
        }
    )
    found: list[Suspect] = []
    idle: list[Suspect] = []
    progressed = 0
    for a in actors:
        host = hosts.get(a.node_id, a.node_id[:8])
        if a.state != "ALIVE" or a.pid is None or host in stale:
            continue
        data = samples.get(host) or {}
        cur, prev = _proc(data.get("cur"), a.pid), _proc(data.get("prev"), a.pid)
        who = label(a, rank_of)
        if cur is None:
            found.append(Suspect(host, who, a.pid, "its process is gone from the host", 2))
        elif cur[0] in STOPPED_STATES:
            found.append(Suspect(host, who, a.pid, f"process stopped (state {cur[0]}: SIGSTOP or a debugger)", 0))
        elif cur[0] in GONE_STATES:
            found.append(Suspect(host, who, a.pid, f"process exited (state {cur[0]})", 1))
        elif prev is not None:
            if cur[1] > prev[1]:
                progressed += 1
            else:
                secs = float(data["cur"].get("t", 0)) - float((data.get("prev") or {}).get("t", 0))
                idle.append(Suspect(host, who, a.pid, f"no CPU time in the last {secs:.0f} s while others ran", 3))
    if progressed:
        found += idle
    return sorted(found, key=lambda s: (s.order, s.host, s.actor)), stale


def summary(
    actors: list[Actor], hosts: dict[str, str], job_id: str | None, suspects: list[Suspect], stale: list[str]
) -> str:
    """The stall alert's account: the suspects first (host, rank, pid, why), then this job's actors per host."""
    parts: list[str] = []
    if suspects:
        parts.append(
            "stopped making progress: "
            + "; ".join(f"{s.host} {s.actor} pid {s.pid}: {s.why}" for s in suspects[:8])
            + (f" and {len(suspects) - 8} more" if len(suspects) > 8 else "")
        )
    else:
        parts.append("no rank stands out (every rank alive, none stopped or alone without progress)")
    if stale:
        parts.append(f"no recent sample from {', '.join(stale[:8])} (its node service)")
    counts: dict[str, int] = {}
    for a in actors:
        key = f"{a.class_name} {a.state} on {hosts.get(a.node_id, a.node_id[:8])}"
        counts[key] = counts.get(key, 0) + 1
    job = f"job {job_id}" if job_id else "all jobs (this run's job not found)"
    listed = "; ".join(f"{n}x {k}" for k, n in sorted(counts.items())[:20]) or "none"
    parts.append(f"Ray actors of {job}: {listed}")
    return "; ".join(parts)


@dataclass
class StallProbe:
    """The stall alert's look at the cluster. `members`: (host, ip) of the run's nodes; `driver_pid`: verl's
    process, once started; `since`: when the run began (epoch seconds)."""

    nodes_dir: Path | None
    members: list[tuple[str, str]]
    since: float
    driver_pid: Callable[[], int | None] = lambda: None
    timeout_s: float = PROBE_TIMEOUT_S
    clock: Callable[[], float] = time.time

    @classmethod
    def for_run(cls, nodes_dir: Path, members: Iterable[Any], driver_pid: Callable[[], int | None]) -> StallProbe:
        """From the run folder's link to the node folders and the joined nodes (clusterwait.NodeView)."""
        pairs = [(str(m.name), str(m.ip)) for m in members]
        return cls(nodes_dir, pairs, since=time.time(), driver_pid=driver_pid)

    def describe(self) -> str:
        """Bounded: after `timeout_s` the alert says the look did not end (a thread left behind ends by itself)."""
        result: list[str] = []

        def look() -> None:
            try:
                result.append(self._look())
            except Exception as exc:  # noqa: BLE001 - the alert goes out without the look, saying why
                result.append(f"the look at the cluster failed ({type(exc).__name__})")

        worker = threading.Thread(target=look, name="stall-probe", daemon=True)
        worker.start()
        worker.join(self.timeout_s)
        return result[0] if result else f"Ray's state API gave no answer within {self.timeout_s:g} s"

    def _look(self) -> str:
        try:
            from ray.util.state import list_actors, list_jobs, list_nodes
        except ImportError:
            return "no Ray state API here"
        try:
            jobs = [as_dict(j) for j in list_jobs(address="auto", timeout=STATE_API_TIMEOUT_S)]
        except Exception:  # noqa: BLE001 - without the jobs every job's actors are listed, and the alert says so
            jobs = []
        job_id = current_job(jobs, self.driver_pid(), self.since)
        filters: list[tuple[str, str, str | bool | int | float]] | None = [("job_id", "=", job_id)] if job_id else None
        try:
            rows = list_actors(
                address="auto",
                filters=filters,
                limit=MAX_ACTORS,
                timeout=STATE_API_TIMEOUT_S,
                raise_on_missing_output=False,
            )
            nodes = list_nodes(address="auto", limit=MAX_ACTORS, timeout=STATE_API_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any failure of the state API only leaves the alert without it
            return f"Ray state API not reachable ({type(exc).__name__}: {str(exc)[:120]})"
        return self.account([as_dict(r) for r in rows], [as_dict(n) for n in nodes], job_id)

    def account(self, rows: list[dict[str, Any]], nodes: list[dict[str, Any]], job_id: str | None) -> str:
        """The summary from the state API's rows and the hosts' samples (the part tests drive with plain data)."""
        actors = job_actors(rows, job_id)
        hosts = node_hosts(nodes, self.members)
        wanted = sorted({h for h in hosts.values() if _HOST.match(h)})
        samples = proc_samples(self.nodes_dir, wanted) if self.nodes_dir is not None else {}
        suspects, stale = choose_suspects(actors, hosts, samples, self.clock())
        return summary(actors, hosts, job_id, suspects, stale)
