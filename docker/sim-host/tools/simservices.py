"""The files and services of a simulated A3 host, made to match its fault state by `simhost.py apply` (inside the
host, as root): version.info, the device nodes, sshd, dockerd and the NPU responder, the shared mount, the preload
shim, and the host faults behind the preflight's OS, memory, NIC and firewall rows.
Standard library only: the simulated host's python3 has nothing else.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import a3facts
from simfaults import OS_RELEASES, fault_of
from simhostview import NPU_SMI_PATHS, Host
from simstate import CONTROL_NODES, DIES, TOOL_LOCKS, SimError, state_dir

LIB_DIR = "/usr/lib/verl-sim"
SHIM = f"{LIB_DIR}/libverlsim.so"
SHARED_SOURCE = "/var/lib/verl-sim/shared"  # where the shared volume is mounted; bound onto site_shared_root
DISABLED_DIR = f"{LIB_DIR}/disabled"  # docker binaries are moved here while `no-docker` is on
DOCKER_BINARIES = ("/usr/bin/docker", "/usr/sbin/dockerd")
LOW_DISK_DEFAULT_MIB = 512


def driver_version_info(h: Host) -> str:
    v = h.driver_version()
    return (
        f"Version={v}\nascendhal_version=7.35.23\naicpu_version=1.0\ntdt_version=1.0\nlog_version=1.0\n"
        "prof_version=2.0\ndvppkernels_version=1.1\ntsfw_version=1.0\nInnerversion=V100R001C10SPC001B257\n"
        "compatible_version=[V100R001C19],[V100R001C20],[V100R001C21],[V100R001C22],[V100R001C23],[V100R001C25]\n"
        f"compatible_version_fw=[7.0.0,8.9.9]\npackage_version={v}\n"
    )


def firmware_version_info(h: Host) -> str:
    pv = h.firmware_package_version()
    major = int(pv.split(".")[0])
    return (
        f"Version={h.firmware_version()}\nfirmware_version=1.0\npackage_version={pv}\n"
        f"compatible_version_drv=[{major - 1}.0,{major - 1}.0.],[{major}.0,{major}.0.]\n"
    )


ASCEND_INSTALL_INFO = (
    "UserName=HwHiAiUser\nUserGroup=HwHiAiUser\nDriver_Install_Type=full\nDriver_Install_Path_Param=/usr/local/Ascend\n"
    "Driver_Install_For_All=yes\nDriver_Install_Mode=normal\nFirmware_Install_Type=full\n"
    "Firmware_Install_Path_Param=/usr/local/Ascend\nDriver_Install_Status=complete\n"
)


def write_if_changed(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.chmod(mode)
        tmp.replace(path)


def sync_npu_smi(h: Host) -> None:
    """The image has npu-smi in /usr/local/sbin and links it into /usr/local/bin; a host the cluster description
    gives only /usr/local/sbin (a site profile, as real sites differ: docs/a3-tools.md T13) has no link."""
    link, target = Path(NPU_SMI_PATHS[0]), NPU_SMI_PATHS[1]
    if NPU_SMI_PATHS[0] in h.npu_smi_paths:
        if not link.is_symlink() and not link.exists():
            link.symlink_to(target)
    elif link.is_symlink():
        link.unlink()


def wanted_nodes(h: Host) -> dict[str, tuple[int, int]]:
    missing = {f.arg for f in h.faults if f.kind == "dev-missing"}
    nodes = {f"davinci{d}": (234, d) for d in range(h.dies)}
    nodes.update(CONTROL_NODES)
    return {n: mm for n, mm in nodes.items() if n not in missing and n.removeprefix("davinci") not in missing}


def sync_device_nodes(h: Host) -> None:
    want = wanted_nodes(h)
    dev = Path("/dev")
    all_names = {f"davinci{d}" for d in range(DIES)} | set(CONTROL_NODES)
    for name in sorted(all_names - set(want)):
        with contextlib.suppress(FileNotFoundError):
            (dev / name).unlink()
    for name, (major, minor) in want.items():
        p = dev / name
        if p.exists():
            continue
        try:
            # Character devices like the real ones; the container's device cgroup forbids opening them, and nothing
            # in the simulation opens them (site_simulated: no device is handed to containers).
            os.mknod(p, 0o666 | 0o020000, os.makedev(major, minor))
        except PermissionError:
            p.write_text("")  # without CAP_MKNOD an empty file at least makes presence checks meaningful
        p.chmod(0o666)


def run(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=check, text=True, capture_output=True)


def _running(pid: int) -> bool:
    """True for a live process; a zombie (exited, not yet reaped by its parent) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def pid_alive(pidfile: str) -> int:
    try:
        pid = int(Path(pidfile).read_text().strip())
    except (FileNotFoundError, ValueError):
        return 0
    if not _running(pid):
        return 0
    # A stale pid file may name an unrelated process after a restart of the container.
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except FileNotFoundError:
        return 0
    return pid if comm in ("sshd", "dockerd", "python3") else 0


def stop_process(pidfile: str, wait_s: float = 30.0) -> None:
    pid = pid_alive(pidfile)
    if not pid:
        return
    os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not _running(pid):
            break
        time.sleep(0.1)
    else:
        raise SimError(f"process {pid} ({pidfile}) did not stop within {wait_s:.0f} s")
    with contextlib.suppress(FileNotFoundError):
        Path(pidfile).unlink()


def _spawn(cmd: list[str], log: str, pidfile: str) -> None:
    with open(log, "ab") as out:
        p = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    Path(pidfile).write_text(f"{p.pid}\n")


def docker_ready() -> bool:
    if not Path("/usr/bin/docker").exists():
        return False
    return run(["docker", "info", "--format", "{{.ServerVersion}}"], check=False).returncode == 0


def ensure_services(h: Host) -> None:
    faults = {f.spec for f in h.faults}
    # sshd: stopped by down:ssh (existing sessions live on, new connections are refused).
    if "down:ssh" in faults:
        stop_process("/run/sshd.pid")
    elif not pid_alive("/run/sshd.pid"):
        Path("/run/sshd").mkdir(exist_ok=True)
        run(["/usr/sbin/sshd"])
    # the per-host container engine
    if "no-docker" in faults:
        stop_process("/run/docker.pid", 60)
        Path(DISABLED_DIR).mkdir(parents=True, exist_ok=True)
        for b in DOCKER_BINARIES:
            if Path(b).exists():
                shutil.move(b, f"{DISABLED_DIR}/{Path(b).name}")
    else:
        for b in DOCKER_BINARIES:
            parked = Path(f"{DISABLED_DIR}/{Path(b).name}")
            if parked.exists():
                shutil.move(str(parked), b)
        if not pid_alive("/run/docker.pid"):
            _spawn(
                ["/usr/sbin/dockerd", "--pidfile", "/run/docker.pid"], "/var/log/dockerd.log", "/run/docker.pid.spawn"
            )
            end = time.monotonic() + 120
            while not docker_ready():
                if time.monotonic() > end:
                    raise SimError(f"dockerd on {h.name} did not answer within 120 s; see /var/log/dockerd.log there")
                time.sleep(0.5)
    if not pid_alive("/run/verl-sim-npud.pid"):
        _spawn(
            [sys.executable, f"{LIB_DIR}/simhost.py", "npud"], "/var/log/verl-sim-npud.log", "/run/verl-sim-npud.pid"
        )


def is_mountpoint(path: str) -> bool:
    # Read the mount table itself: `mountpoint` has been seen answering yes for a plain folder at container start.
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def sync_shared(h: Host) -> None:
    target = h.cluster["shared_root"]
    mounted = is_mountpoint(target)
    if any(f.kind == "no-shared" for f in h.faults):
        if mounted:
            run(["umount", "-l", target])
    elif not mounted:
        Path(target).mkdir(parents=True, exist_ok=True)
        run(["mount", "--bind", SHARED_SOURCE, target])


def sync_shim(h: Host) -> None:
    conf: list[str] = []
    skew, arch, low = fault_of(h.faults, "clock-skew"), fault_of(h.faults, "arch"), fault_of(h.faults, "low-disk")
    if skew:
        conf.append(f"SKEW_S={skew.arg}")
    if arch:
        conf.append(f"ARCH={arch.arg}")
    if low:
        conf.append(f"AVAIL_BYTES={int(low.arg or LOW_DISK_DEFAULT_MIB) * 1024 * 1024}")
        conf.append(f"KEEP_PREFIX={h.cluster['shared_root']}")
    preload = Path("/etc/ld.so.preload")
    if conf:
        write_if_changed(state_dir() / "shim.conf", "\n".join(conf) + "\n")
        write_if_changed(preload, SHIM + "\n")
    else:
        with contextlib.suppress(FileNotFoundError):
            preload.unlink()
        with contextlib.suppress(FileNotFoundError):
            (state_dir() / "shim.conf").unlink()


# ---- the host faults behind the preflight's OS, memory, NIC and firewall rows (files and kernel state) ----

OS_RELEASE_LINK = "../usr/lib/os-release"  # Debian's /etc/os-release is this link
MEMINFO_FILE = "meminfo"  # in the state folder, bound over /proc/meminfo while low-ram is on
FIREWALL_CHAIN = "VERL-SIM-FW"
SSH_PORT = 22
FANOUT_PORT = 18080  # the image fan-out's HTTP server (deploy_common_fanout_port)
HCCL_HOST_PORTS = (60000, 60050)  # HCCL's host sockets (HCCL_HOST_SOCKET_PORT_RANGE, os_tuning_hccl_host_ports)


def multiport_list(ranges: list[tuple[int, int]]) -> str:
    """An iptables multiport list ("22,6380:6384"): one entry per (first, last) range, in port order."""
    return ",".join(str(a) if a == b else f"{a}:{b}" for a, b in sorted(ranges))


def port_runs(ports: list[int]) -> list[tuple[int, int]]:
    """Consecutive ports as one (first, last) range: multiport takes at most 15 entries, a range counts once."""
    runs: list[tuple[int, int]] = []
    for p in sorted(ports):
        if runs and p == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], p)
        else:
            runs.append((p, p))
    return runs


_RAY_WORKERS = (a3facts.RAY_NODE_PORTS["min-worker-port"], a3facts.RAY_NODE_PORTS["max-worker-port"])
_RAY_NODE_OWN = [p for k, p in a3facts.RAY_NODE_PORTS.items() if k not in ("min-worker-port", "max-worker-port")]
# The fixed list a port-based firewall would open: SSH, Ray's fixed ports (a3facts: GCS, dashboard, client, each
# node's own and its worker range), HCCL host sockets, the image fan-out. Today 9 of multiport's 15 entries:
# 22,6379,6380:6384,8265,10001,10002:19999,18080,52365,60000:60050.
FIREWALL_OPEN_TCP = multiport_list(
    [(p, p) for p in (SSH_PORT, a3facts.RAY_GCS_PORT, a3facts.RAY_DASHBOARD_PORT, a3facts.RAY_CLIENT_PORT, FANOUT_PORT)]
    + port_runs(_RAY_NODE_OWN)
    + [_RAY_WORKERS, HCCL_HOST_PORTS]
)
DUMMY_NIC = "verlsim0"


def sync_os_release(h: Host) -> None:
    f = fault_of(h.faults, "os")
    path = Path("/etc/os-release")
    if f:
        if path.is_symlink():
            path.unlink()
        write_if_changed(path, OS_RELEASES[f.arg])
    elif not path.is_symlink():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        path.symlink_to(OS_RELEASE_LINK)


def sync_meminfo(h: Host) -> None:
    """The memory the host reports: the low-ram fault's, else the host's own in the cluster description (an A3
    host's RAM, not this machine's), bound over /proc/meminfo as LXCFS does. Containers the host starts mount a
    procfs of their own and see this machine's memory."""
    f = fault_of(h.faults, "low-ram")
    mounted = is_mountpoint("/proc/meminfo")
    if mounted:
        run(["umount", "/proc/meminfo"])
    gib = int(f.arg or 1) if f else h.entry.get("mem_gib")
    if gib:
        kib = int(gib) * 1024 * 1024
        text = (
            f"MemTotal:       {kib} kB\nMemFree:        {kib // 2} kB\nMemAvailable:   {kib // 2} kB\n"
            "Buffers:               0 kB\nCached:                0 kB\nSwapTotal:             0 kB\n"
            "SwapFree:              0 kB\n"
        )
        write_if_changed(state_dir() / MEMINFO_FILE, text)
        run(["mount", "--bind", str(state_dir() / MEMINFO_FILE), "/proc/meminfo"])


def sync_nic(h: Host) -> None:
    """nic-moved: the cluster address leaves the named NIC for a dummy one; the subnet stays routed through the
    NIC, so SSH and the NPU responder keep working (Linux answers for any local address on any interface)."""
    ip, nic, net = h.entry["cluster_ip"], h.entry.get("cluster_nic", "eth0"), h.cluster["subnet"]
    plen = net.split("/")[1]
    on_nic = ip in run(["ip", "-o", "-4", "addr", "show", "dev", nic]).stdout.split(f"/{plen}")[0].split()
    dummy = Path(f"/sys/class/net/{DUMMY_NIC}").exists()
    if fault_of(h.faults, "nic-moved"):
        routes = run(["ip", "-4", "route", "show", "default"]).stdout.split()
        if not dummy:
            run(["ip", "link", "add", DUMMY_NIC, "type", "bridge"])  # an interface with no ports: no dummy module here
            run(["ip", "link", "set", DUMMY_NIC, "up"])
            run(["ip", "addr", "add", f"{ip}/32", "dev", DUMMY_NIC])
        if on_nic:
            run(["ip", "addr", "del", f"{ip}/{plen}", "dev", nic])
            run(["ip", "route", "replace", net, "dev", nic, "src", ip])
            if "via" in routes:
                run(["ip", "route", "replace", "default", "via", routes[routes.index("via") + 1], "dev", nic])
    else:
        if not on_nic:
            routes = run(["ip", "-4", "route", "show", "default"]).stdout.split()
            run(["ip", "route", "del", net, "dev", nic], check=False)
            run(["ip", "addr", "add", f"{ip}/{plen}", "dev", nic])
            if "via" in routes:
                run(["ip", "route", "replace", "default", "via", routes[routes.index("via") + 1], "dev", nic])
        if dummy:
            run(["ip", "link", "del", DUMMY_NIC])


def sync_firewall(h: Host) -> None:
    """firewall: new TCP connections from the cluster subnet are dropped except on a fixed port list, the way a
    port-based firewalld or ufw setup treats ephemeral ports (Gloo, verl's MASTER_PORT, vLLM's init)."""
    have = f"-j {FIREWALL_CHAIN}" in run(["iptables", "-S", "INPUT"], check=False).stdout
    if fault_of(h.faults, "firewall"):
        if have:
            return
        net = h.cluster["subnet"]
        if run(["iptables", "-N", FIREWALL_CHAIN], check=False).returncode != 0:
            run(["iptables", "-F", FIREWALL_CHAIN])  # left over from an earlier start of this container
        for rule in (
            ["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"],
            ["-p", "tcp", "-m", "multiport", "--dports", FIREWALL_OPEN_TCP, "-j", "RETURN"],
            ["-s", net, "-p", "tcp", "--syn", "-j", "DROP"],
        ):
            run(["iptables", "-A", FIREWALL_CHAIN, *rule])
        run(["iptables", "-I", "INPUT", "-j", FIREWALL_CHAIN])
    elif have:
        run(["iptables", "-D", "INPUT", "-j", FIREWALL_CHAIN], check=False)
        run(["iptables", "-F", FIREWALL_CHAIN], check=False)
        run(["iptables", "-X", FIREWALL_CHAIN], check=False)


def sync_accounts(h: Host) -> None:
    """The deploy account's docker group, as the profile says: a real site's deploy account has none (docs/deploy.md,
    section 5), the default profile keeps it for the tests that type docker commands as that account."""
    if (h.cluster.get("profile") or {}).get("deploy_docker", "yes") != "no":
        return
    groups = run(["id", "-nG", "deploy"]).stdout.split()
    if "docker" in groups:
        run(["gpasswd", "-d", "deploy", "docker"])


def sync_host_faults(h: Host) -> None:
    for name in TOOL_LOCKS:  # readable by every user: the tools lock them read-only
        lock = state_dir() / f".busy-{name}"
        if not lock.exists():
            lock.touch(0o644)
    sync_os_release(h)
    sync_meminfo(h)
    sync_nic(h)
    sync_firewall(h)
