"""What every host's node service samples about itself while its Ray node runs, onto shared storage beside its node
log, for the launcher's health rules to read (docs/watch.md):

- LOG_DIR/nodes/<host>/hostmem.jsonl: host memory, one line per sample (MemTotal and MemAvailable of /proc/meminfo,
  what Ray's own memory monitor reads); kept under HOSTMEM_MAX_BYTES by rotating once into hostmem.jsonl.1.
- LOG_DIR/nodes/<host>/procs.json: the state and CPU time of each process on the host (the node's container: Ray's
  workers are the raylet's children there), the last two samples, replaced whole each time; the stall rule finds the
  rank that stopped in it (watch/stall.py).

A sample that cannot be taken or written is skipped: the sampler never stops or slows the node.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SAMPLE_EVERY_S = 5.0
HOSTMEM_FILE = "hostmem.jsonl"
PROCS_FILE = "procs.json"
HOSTMEM_MAX_BYTES = 256 * 1024  # about 2,000 samples (3 h at 5 s) before a rotation; two files at most
MAX_PROCS = 4096  # a node's container holds some dozens; a host's whole process table is cut here
_GIB = 1024**3


@dataclass(frozen=True)
class HostMem:
    host: str
    t: float
    total_gb: float
    used_gb: float  # MemTotal less MemAvailable

    @property
    def share(self) -> float:
        return self.used_gb / self.total_gb if self.total_gb > 0 else 0.0


def parse_meminfo(text: str) -> tuple[float, float] | None:
    """(total, used) in GiB from /proc/meminfo's text, or None without MemTotal and MemAvailable."""
    kb: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        fields = rest.split()
        if name in ("MemTotal", "MemAvailable") and fields and fields[0].isdigit():
            kb[name] = int(fields[0])
    if "MemTotal" not in kb or "MemAvailable" not in kb or kb["MemTotal"] <= 0:
        return None
    total = kb["MemTotal"] * 1024 / _GIB
    return total, max(0.0, total - kb["MemAvailable"] * 1024 / _GIB)


def parse_stat(text: str) -> tuple[str, int] | None:
    """(state, utime + stime in clock ticks) from a /proc/<pid>/stat line; the name in parentheses may hold
    spaces and parentheses itself, so the fields are counted after its last ')'."""
    _, paren, rest = text.rpartition(")")
    fields = rest.split()
    if not paren or len(fields) < 13 or not fields[11].isdigit() or not fields[12].isdigit():
        return None
    return fields[0], int(fields[11]) + int(fields[12])


def sample_procs(proc: Path = Path("/proc"), limit: int = MAX_PROCS) -> dict[str, list[Any]]:
    """pid -> [state, CPU ticks] of the processes visible here (at most `limit`)."""
    out: dict[str, list[Any]] = {}
    try:
        entries = [e for e in os.scandir(proc) if e.name.isdigit()]
    except OSError:
        return out
    for entry in sorted(entries, key=lambda e: int(e.name))[:limit]:
        try:
            parsed = parse_stat(Path(entry.path, "stat").read_text(errors="replace"))
        except OSError:
            continue  # ended between the listing and the read
        if parsed:
            out[entry.name] = [parsed[0], parsed[1]]
    return out


def host_dir(log_dir: str | Path, host: str) -> Path:
    return Path(log_dir) / "nodes" / host


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_sample(folder: Path, host: str, now: float, meminfo: str, procs: dict[str, list[Any]]) -> None:
    """One sample into the host's folder: a memory line appended (rotated at the bound), procs.json replaced."""
    folder.mkdir(parents=True, exist_ok=True)
    mem = parse_meminfo(meminfo)
    if mem is not None:
        path = folder / HOSTMEM_FILE
        with contextlib.suppress(OSError):
            if path.stat().st_size > HOSTMEM_MAX_BYTES:
                path.replace(folder / f"{HOSTMEM_FILE}.1")
        line = {"host": host, "t": round(now, 3), "total_gb": round(mem[0], 3), "used_gb": round(mem[1], 3)}
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")
    prev: dict[str, Any] | None = None
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        prev = json.loads((folder / PROCS_FILE).read_text())["cur"]
    _replace(folder / PROCS_FILE, json.dumps({"host": host, "prev": prev, "cur": {"t": round(now, 3), "procs": procs}}))


class HostSampler:
    """The node service's sampler thread (cluster/raynode.py starts it beside `ray start`)."""

    def __init__(self, log_dir: str | Path, host: str, every_s: float = SAMPLE_EVERY_S) -> None:
        self.folder, self.host, self.every_s = host_dir(log_dir, host), host, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="host-sampler", daemon=True)

    def start(self) -> HostSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.every_s + 1)

    def sample_once(self) -> None:
        try:
            meminfo = Path("/proc/meminfo").read_text()
        except OSError:
            meminfo = ""
        write_sample(self.folder, self.host, time.time(), meminfo, sample_procs())

    def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError, ValueError):
                self.sample_once()
            self._stop.wait(self.every_s)


def start_sampler(host: str, environ: dict[str, str] | None = None) -> HostSampler | None:
    """The sampler of this host when LOG_DIR (shared storage) is set, else None."""
    root = (environ if environ is not None else os.environ).get("LOG_DIR")
    return HostSampler(root, host).start() if root else None


# -- the readers (the launcher's health rules)

STALE_AFTER_S = 60.0  # a sample older than this is not this host's present (its node service stopped)


def _last_line(path: Path, tail_bytes: int = 4096) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - tail_bytes))
        lines = f.read().decode(errors="replace").splitlines()
    return lines[-1] if lines else ""


def latest_host_memory(nodes_dir: Path, now: float, max_hosts: int = 1024) -> list[HostMem]:
    """Each host's latest memory sample, when recent (STALE_AFTER_S); a host whose file is unreadable is left out."""
    out: list[HostMem] = []
    try:
        folders = sorted(p for p in nodes_dir.iterdir() if not p.name.startswith(".") and p.is_dir())[:max_hosts]
    except OSError:
        return out
    for folder in folders:
        try:
            rec = json.loads(_last_line(folder / HOSTMEM_FILE))
            sample = HostMem(str(rec["host"]), float(rec["t"]), float(rec["total_gb"]), float(rec["used_gb"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if now - sample.t <= STALE_AFTER_S and sample.total_gb > 0:
            out.append(sample)
    return out


def memory_reader(nodes_dir: Path) -> Callable[[], list[HostMem]]:
    """The health rules' view of every host's memory: the latest recent sample of each."""
    return lambda: latest_host_memory(nodes_dir, time.time())


def proc_samples(nodes_dir: Path, hosts: list[str]) -> dict[str, dict[str, Any]]:
    """host -> its procs.json ({"prev", "cur"}), for the hosts named; an unreadable one is left out."""
    out: dict[str, dict[str, Any]] = {}
    for host in hosts:
        try:
            data = json.loads((nodes_dir / host / PROCS_FILE).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            out[host] = data
    return out
