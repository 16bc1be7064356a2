#!/usr/bin/python3 -IS
"""The Ascend A3 host surface of one simulated host: stand-ins for `npu-smi` and `hccn_tool`, the fault state, and
the files and services a real host has (hccn.conf, version.info, device nodes, sshd, dockerd, shared storage).

This file is the entry point (`simhost.py fault|apply|ready|boot|npud|hccn-conf`, and behind the npu-smi and
hccn_tool wrappers); the work is done by the modules next to it, each importing only those before it:
  simstate.py     the state folder (VERL_SIM_DIR), cluster.json, this host, the fault specs, SimError, tool locks
  simfaults.py    the fault grammar (parse_fault, Fault) and the HDK version helpers
  simhostview.py  Host: the simulated host as the tools see it (dies, versions, health, links, addresses)
  simnpusmi.py    the npu-smi stand-in
  simhccn.py      the hccn_tool stand-in, hccn.conf, and the NPU-network responder (npud)
  simservices.py  the host's files and services, and the host faults (OS, memory, NIC, firewall)
Output formats follow docs/a3-tools.md; values that no source gives are marked SYNTHETIC there and in the docs.
Standard library only: the simulated host's python3 has nothing else.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

# The modules it imports lie next to this file (tools/ in the repository, /usr/lib/verl-sim in the image), with
# a3facts.py, a copy of entrypoints/verl_recipe/a3facts.py (the A3 facts the checks use too; the stand-ins share
# them, not the checks). python3 -I does not put the script's folder on sys.path.
_HERE = os.path.dirname(os.path.realpath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
from simfaults import FAULT_HELP, SINGLE_FAULTS, parse_fault  # noqa: E402
from simhccn import hccn_conf, hccn_tool, npud  # noqa: E402
from simhostview import Host  # noqa: E402
from simnpusmi import npu_smi  # noqa: E402
from simservices import (  # noqa: E402
    ASCEND_INSTALL_INFO,
    docker_ready,
    driver_version_info,
    ensure_services,
    firmware_version_info,
    pid_alive,
    run,
    stop_process,
    sync_accounts,
    sync_device_nodes,
    sync_host_faults,
    sync_npu_smi,
    sync_shared,
    sync_shim,
    write_if_changed,
)
from simstate import SimError, load_cluster, read_fault_specs, state_dir, this_host  # noqa: E402


def apply() -> None:
    """Make the host's files and services match its fault state."""
    h = Host.load()
    write_if_changed(Path("/etc/hccn.conf"), hccn_conf(h))
    write_if_changed(Path("/usr/local/Ascend/driver/version.info"), driver_version_info(h))
    write_if_changed(Path("/usr/local/Ascend/firmware/version.info"), firmware_version_info(h))
    write_if_changed(Path("/etc/ascend_install.info"), ASCEND_INSTALL_INFO)
    # sshd listens on the cluster interface only.
    write_if_changed(Path("/etc/ssh/sshd_config.d/20-listen.conf"), f"ListenAddress {h.entry['cluster_ip']}\n")
    sync_device_nodes(h)
    sync_accounts(h)
    sync_npu_smi(h)
    sync_shim(h)
    sync_shared(h)
    sync_host_faults(h)
    ensure_services(h)


@contextlib.contextmanager
def locked() -> Any:
    with open(state_dir() / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def set_faults(specs: list[str]) -> None:
    p = state_dir() / "faults.json"
    tmp = p.with_name("faults.json.tmp")
    tmp.write_text(json.dumps({"faults": specs}, indent=1) + "\n")
    tmp.chmod(0o644)
    tmp.replace(p)


def fault_cmd(argv: list[str], do_apply: bool = True) -> int:
    """`fault add SPEC...` | `fault clear` | `fault list`."""
    if not argv or argv[0] not in ("add", "clear", "list"):
        print(f"usage: simhost.py fault add <fault>... | clear | list; faults: {FAULT_HELP}", file=sys.stderr)
        return 2
    if argv[0] == "list":
        print("\n".join(read_fault_specs()))
        return 0
    cluster, name = load_cluster(), this_host()
    with locked():
        if argv[0] == "clear":
            set_faults([])
        else:
            new = [parse_fault(s, cluster, name) for s in argv[1:]]
            if not new:
                raise SimError("fault add needs at least one fault")
            if any(f.kind == "down" and not f.arg for f in new):
                raise SimError("fault 'down' cuts the power from outside: use `make sim-fault ... FAULT=down`")
            faults = [parse_fault(s) for s in read_fault_specs()]
            for f in new:
                if f.kind in SINGLE_FAULTS:
                    faults = [g for g in faults if g.kind != f.kind]
                if f not in faults:
                    faults.append(f)
            set_faults([f.spec for f in faults])
        # VERL_SIM_NO_APPLY=1: record the state only (unit tests, outside a simulated host).
        if do_apply and not os.environ.get("VERL_SIM_NO_APPLY"):
            apply()
    return 0


def ready() -> int:
    """Exit 0 once sshd, the NPU responder and (unless no-docker) dockerd are up."""
    h = Host.load()
    faults = {f.spec for f in h.faults}
    problems = []
    if "down:ssh" not in faults and not pid_alive("/run/sshd.pid"):
        problems.append("sshd")
    if "no-docker" not in faults and not docker_ready():
        problems.append("dockerd")
    if not pid_alive("/run/verl-sim-npud.pid"):
        problems.append("npud")
    if problems:
        print(f"{h.name}: not ready: {', '.join(problems)}", file=sys.stderr)
        return 1
    return 0


def boot() -> int:
    """Container main process: host key, files, services; then wait for SIGTERM and stop dockerd cleanly."""
    # /run is a fresh tmpfs at every start of hosts made by simctl.py; on a container without it, pid files of a
    # previous start would name unrelated processes.
    for stale in ("sshd.pid", "docker.pid", "docker.pid.spawn", "verl-sim-npud.pid"):
        with contextlib.suppress(FileNotFoundError):
            (Path("/run") / stale).unlink()
    key = Path("/etc/ssh/ssh_host_ed25519_key")
    if not key.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{this_host()} host key", "-f", str(key)])
    stop = False

    def on_term(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    def reap(_sig: int, _frame: object) -> None:
        # Services started here are our children; reap them when they exit so none lingers as a zombie.
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    signal.signal(signal.SIGCHLD, reap)
    apply()
    print(f"{this_host()}: up", flush=True)
    while not stop:
        signal.pause()
    stop_process("/run/docker.pid", 20)
    return 0


def main(argv: list[str]) -> int:
    prog = Path(argv[0]).name
    try:
        if prog == "npu-smi":
            return npu_smi(argv[1:])
        if prog == "hccn_tool":
            return hccn_tool(argv[1:])
        cmd, rest = (argv[1], argv[2:]) if len(argv) > 1 else ("", [])
        if cmd == "npu-smi":
            return npu_smi(rest)
        if cmd == "hccn_tool":
            return hccn_tool(rest)
        if cmd == "fault":
            return fault_cmd(rest)
        if cmd == "apply":
            with locked():
                apply()
            return 0
        if cmd == "ready":
            return ready()
        if cmd == "boot":
            return boot()
        if cmd == "npud":
            return npud()
        if cmd == "hccn-conf":
            print(hccn_conf(Host.load()), end="")
            return 0
        print("usage: simhost.py npu-smi|hccn_tool|fault|apply|ready|boot|npud|hccn-conf ...", file=sys.stderr)
        return 2
    except SimError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
