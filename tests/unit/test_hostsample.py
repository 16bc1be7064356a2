"""Each host's own sampler (cluster/hostsample.py): host memory and the state and CPU time of its processes, on
shared storage under LOG_DIR/nodes/<host>/, bounded in size; the readers the health rules use. A real process
stopped with SIGSTOP here is read back in state T, as the stall rule's suspect choice expects."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from verl_recipe.cluster import hostsample
from verl_recipe.cluster.hostsample import (
    HOSTMEM_FILE,
    PROCS_FILE,
    HostSampler,
    latest_host_memory,
    parse_meminfo,
    parse_stat,
    proc_samples,
    sample_procs,
    start_sampler,
    write_sample,
)

MEMINFO = "MemTotal:       67108864 kB\nMemFree:         1048576 kB\nMemAvailable:   16777216 kB\n"


def test_meminfo_gives_total_and_used_as_ray_counts_them() -> None:
    assert parse_meminfo(MEMINFO) == (64.0, 48.0)  # used = MemTotal - MemAvailable
    assert parse_meminfo("MemTotal: 10 kB\n") is None, "no MemAvailable: no figure rather than a wrong one"
    assert parse_meminfo("") is None and parse_meminfo("MemTotal: x kB\nMemAvailable: 1 kB") is None


def test_a_stat_line_whose_name_holds_spaces_and_parentheses() -> None:
    line = "4242 (ray::WorkerDict) (x) T 1 4242 4242 0 -1 4194560 100 0 0 0 1500 230 0 0 20 0 9 0 77 1 1"
    assert parse_stat(line) == ("T", 1730)
    assert parse_stat("4242 (cut") is None and parse_stat("1 (a) S 1 2") is None


def test_a_process_stopped_with_sigstop_is_sampled_in_state_t() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        os.kill(child.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while sample_procs().get(str(child.pid), ["?"])[0] != "T" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sample_procs()[str(child.pid)][0] == "T"
        assert sample_procs()[str(os.getpid())][0] in ("R", "S")
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()


def test_samples_keep_the_last_two_and_the_memory_file_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hostsample, "HOSTMEM_MAX_BYTES", 2000)
    folder = tmp_path / "nodes" / "a3-02"
    for k in range(60):
        write_sample(folder, "a3-02", 1000.0 + 5 * k, MEMINFO, {"201": ["S", 100 + k]})
    procs = json.loads((folder / PROCS_FILE).read_text())
    assert procs["prev"]["procs"]["201"] == ["S", 158] and procs["cur"]["procs"]["201"] == ["S", 159]
    assert procs["cur"]["t"] - procs["prev"]["t"] == 5.0
    sizes = [p.stat().st_size for p in folder.iterdir() if p.name.startswith(HOSTMEM_FILE)]
    assert len(sizes) == 2 and all(s < 2200 for s in sizes), "one rotation kept, each under the bound"
    last = json.loads((folder / HOSTMEM_FILE).read_text().splitlines()[-1])
    assert last == {"host": "a3-02", "t": 1295.0, "total_gb": 64.0, "used_gb": 48.0}
    assert not list(folder.glob(".*")), "no temporary file left behind"


def test_the_health_rules_read_each_hosts_latest_recent_sample(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes"
    write_sample(nodes / "a3-01", "a3-01", 1000.0, MEMINFO, {})
    write_sample(nodes / "a3-01", "a3-01", 1005.0, MEMINFO.replace("16777216", "33554432"), {})
    write_sample(nodes / "a3-02", "a3-02", 900.0, MEMINFO, {})  # its node service stopped long ago
    (nodes / "a3-03").mkdir()
    (nodes / "a3-03" / HOSTMEM_FILE).write_text('{"host": "a3-03", "t": 1004')  # cut short
    (nodes / ".requests").mkdir()
    (nodes / "a3-01.log").write_text("the node log\n")
    got = latest_host_memory(nodes, now=1010.0)
    assert [(s.host, s.used_gb, s.share) for s in got] == [("a3-01", 32.0, 0.5)]
    assert latest_host_memory(tmp_path / "absent", now=0) == []
    assert set(proc_samples(nodes, ["a3-01", "a3-02", "a3-09"])) == {"a3-01", "a3-02"}


def test_the_sampler_thread_writes_under_log_dir_and_stops(tmp_path: Path) -> None:
    assert start_sampler("a3-01", {}) is None, "no LOG_DIR: nothing sampled"
    sampler = HostSampler(tmp_path, "a3-01", every_s=0.05).start()
    try:
        deadline = time.monotonic() + 5
        while not (tmp_path / "nodes" / "a3-01" / PROCS_FILE).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        sampler.stop()
    procs = json.loads((tmp_path / "nodes" / "a3-01" / PROCS_FILE).read_text())
    assert str(os.getpid()) in procs["cur"]["procs"]
    assert (tmp_path / "nodes" / "a3-01" / HOSTMEM_FILE).read_text().count("\n") >= 1
