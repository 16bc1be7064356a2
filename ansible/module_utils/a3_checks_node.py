"""The preflight's host checks: platform, memory, cluster NIC, firewall, driver and firmware versions, device
nodes, container runtime, storage, clock and the engine's limits, and the tools' own output."""

from __future__ import annotations

import os
import time
from typing import Any

from ansible.module_utils.a3_host import Host, PreflightRow, check, read
from ansible.module_utils.a3_parse import (
    as_int,
    firewall_blocks,
    first_line,
    os_allowed,
    os_release,
    parse_colon,
    parse_ip_addr,
    parse_iptables,
    parse_limits,
    parse_mountpoints,
)
from ansible.module_utils.a3facts import (
    DRIVER_VERSION_KEYS,
    FIRMWARE_VERSION_KEYS,
    hdk_key,
    hdk_version,
    nearest_existing,
    parse_version_info,
)


def platform_checks(p: dict[str, Any]) -> list[PreflightRow]:
    arch = os.uname().machine
    rel = os_release(read(p["os_release_file"]) or "")
    shown = f"{rel.get('ID', 'unknown')} {rel.get('VERSION_ID', '')} ({rel.get('VERSION', '')})"
    return [
        check(
            "architecture", arch in p["allowed_arch"], arch, " or ".join(p["allowed_arch"]), "use an A3 (aarch64) host"
        ),
        check(
            "os",
            os_allowed(rel, p["allowed_os"]),
            shown,
            " or ".join(p["allowed_os"]),
            "install an OS release on the A3 list (ascend-deployer 26.0.0), or add this one to preflight_allowed_os "
            "once Huawei's compatibility matrix lists it",
        ),
    ]


def host_mem_gib(p: dict[str, Any]) -> float | None:
    """MemTotal in GiB, None when the file holds no number: what deploy.yml writes as HOST_MEM_GIB (node_env)."""
    raw = parse_colon(read(p["meminfo_file"]) or "").get("memtotal")
    words = (raw or "").split()
    kib = as_int(words[0]) if words else None
    return None if kib is None else kib / 2**20


def memory_check(p: dict[str, Any]) -> PreflightRow:
    meminfo = parse_colon(read(p["meminfo_file"]) or "")
    want = p["min_host_ram_gib"]
    raw = meminfo.get("memtotal")
    gib = host_mem_gib(p)
    if gib is None:
        return check(
            "host_memory",
            False,
            f"no MemTotal in {p['meminfo_file']}" if raw is None else f"MemTotal {raw[:40]!r} is not a number of kB",
            f">= {want:g} GiB",
            f"`grep MemTotal {p['meminfo_file']}` on the host must print the memory in kB; check the kernel's /proc",
        )
    return check(
        "host_memory",
        gib >= want,
        f"{gib:.1f} GiB (MemTotal)",
        f">= {want:g} GiB",
        "the recipes offload optimizer state and vLLM weights to host memory: use hosts with more RAM or lower "
        "preflight_min_host_ram_gib only with a recipe that offloads less",
    )


def nic_check(p: dict[str, Any], host: Host) -> PreflightRow:
    ip_tool = host.tool("ip")
    ip, nic = p["cluster_ip"], p["cluster_nic"]
    if not ip_tool:
        return check("cluster_nic", False, "`ip` not found", f"{ip} on {nic}", "install iproute2")
    rc, text = host.run([ip_tool, "-o", "-4", "addr", "show"])
    nics = parse_ip_addr(text) if rc == 0 else {}
    holders = [n for n, addrs in nics.items() if ip in addrs]
    ok = nic in holders
    if ok:
        found = f"{ip} on {nic}"
    elif holders:
        found = f"{ip} is on {', '.join(holders)}, not {nic}"
    elif nic in nics:
        found = f"{nic} carries {', '.join(nics[nic]) or 'no IPv4 address'}; {ip} is on no interface"
    else:
        found = f"no interface {nic}; {ip} is on no interface"
    return check(
        "cluster_nic",
        ok,
        found,
        f"{ip} on {nic}",
        "set a3_cluster_nic to the interface that carries a3_cluster_ip (Gloo, HCCL host sockets and Ray bind it), "
        "or a3_cluster_ip to that NIC's address",
    )


def firewall_check(p: dict[str, Any], host: Host) -> PreflightRow:
    """Gloo, verl's MASTER_PORT and vLLM's distributed init listen on ephemeral ports: the other cluster hosts
    must reach every port. firewalld and ufw are fine (the OS settings play trusts the cluster addresses there);
    other iptables rules that drop them are not something deploy.yml changes."""
    expected = "new TCP from every cluster host accepted on any port"
    fix = (
        "trust the cluster hosts' addresses in the host firewall (all ports), or use firewalld/ufw, which "
        "deploy.yml configures that way"
    )
    for manager, argv, active in (
        ("firewalld", ["firewall-cmd", "--state"], "running"),
        ("ufw", ["ufw", "status"], "Status: active"),
    ):
        tool = host.tool(argv[0])
        if tool:
            rc, out = host.run([tool, *argv[1:]])
            if rc == 0 and active in out:
                return check(
                    "host_firewall", True, f"{manager} active: the OS settings play trusts the cluster", expected, ""
                )
    ipt = host.tool("iptables")
    if not ipt:
        return check("host_firewall", True, "no iptables (nothing to inspect)", expected, "")
    rc, text = host.run([ipt, "-S"])
    if rc != 0:  # e.g. an nftables ruleset iptables cannot show: not inspected (the rehearsal still tests it)
        return check("host_firewall", True, f"not inspected: iptables -S: {first_line(text)}", expected, fix)
    policies, rules = parse_iptables(text)
    blocked = {}
    for peer in p["cluster_peers"]:
        rule = firewall_blocks(policies, rules, peer)
        if rule:
            blocked[peer] = rule
    if not blocked:
        return check("host_firewall", True, "cluster hosts accepted", expected, "")
    first = next(iter(blocked.values()))
    return check(
        "host_firewall",
        False,
        f"new TCP from {', '.join(sorted(blocked))} dropped by `{first}`",
        expected,
        fix,
        peers=sorted(blocked),
    )


def version_checks(p: dict[str, Any]) -> tuple[list[PreflightRow], dict[str, str]]:
    """Installed driver and firmware (version.info) against the minimum; returns the installed versions too."""
    out = []
    want = p["hdk_min"]
    installed: dict[str, str] = {}
    for name, path, keys in (
        ("driver_version", p["driver_version_file"], DRIVER_VERSION_KEYS),
        ("firmware_version", p["firmware_version_file"], FIRMWARE_VERSION_KEYS),
    ):
        text = read(path)
        if text is None:
            out.append(
                check(name, False, f"{path} missing", f">= {want}", f"install the Ascend HDK {want} {name[:-8]}")
            )
            continue
        fields = parse_version_info(text)
        # what npu-smi shows as running: the driver's release, the firmware's own 7.x number
        installed["driver" if name == "driver_version" else "firmware"] = fields.get("Version", "")
        found = hdk_version(fields, keys)
        if not found:
            out.append(check(name, False, f"no {'/'.join(keys)} in {path}", f">= {want}", f"reinstall the HDK {want}"))
            continue
        try:
            ok = hdk_key(found) >= hdk_key(want)
        except ValueError:
            ok = False
        out.append(
            check(
                name,
                ok,
                found,
                f">= {want}",
                f"upgrade the {name[:-8]} to HDK {want} or newer (firmware first, then driver; reboot)",
            )
        )
    return out, installed


def device_node_checks(p: dict[str, Any]) -> list[PreflightRow]:
    wanted = [f"/dev/davinci{i}" for i in range(p["expected_dies"])]
    wanted += ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
    missing = [w for w in wanted if not os.path.exists(w)]
    found = "all present" if not missing else "missing " + ", ".join(m.removeprefix("/dev/") for m in missing)
    dies = [int(m.removeprefix("/dev/davinci")) for m in missing if m.removeprefix("/dev/davinci").isdigit()]
    return [
        check(
            "device_nodes",
            not missing,
            found,
            f"{len(wanted)} nodes (davinci0..{p['expected_dies'] - 1} + manager, svm, hdc)",
            "load the NPU driver (reinstall the HDK driver, then reboot)",
            dies=dies,
        )
    ]


def runtime_checks(p: dict[str, Any], host: Host) -> tuple[list[PreflightRow], dict[str, Any]]:
    out: list[PreflightRow] = []
    info: dict[str, Any] = {"docker": False, "compose": False, "docker_root": "/var/lib/docker"}
    docker = host.tool("docker") or ""
    rc, text = host.run([docker, "version", "--format", "{{.Server.Version}}"]) if docker else (127, "docker not found")
    info["docker"] = rc == 0
    if rc == 0:
        out.append(check("container_runtime", True, f"docker {text}", "docker engine running", ""))
        rc2, root = host.run([docker, "info", "--format", "{{.DockerRootDir}}"])
        if rc2 == 0 and root.startswith("/"):
            info["docker_root"] = root
        rc3, ver = host.run([docker, "compose", "version", "--short"])
        info["compose"] = rc3 == 0
        if rc3 != 0:
            out.append(
                check(
                    "compose_plugin",
                    p["docker_installable"],
                    "docker compose missing",
                    "Compose v2 plugin",
                    "provide the docker-compose-plugin package in container_engine_offline_dir",
                )
            )
        else:
            out.append(check("compose_plugin", True, f"compose {ver}", "Compose v2 plugin", ""))
    else:
        found = first_line(text) + ("; offline packages provided, will install" if p["docker_installable"] else "")
        out.append(
            check(
                "container_runtime",
                p["docker_installable"],
                found,
                "docker engine running",
                "install Docker or set container_engine_offline_dir to the site's offline packages",
            )
        )
    if rc == 0:
        rc4, text4 = host.run([docker, "info", "--format", "{{.DefaultRuntime}}|{{json .Runtimes}}"])
        out.append(default_runtime_check(rc4, text4, host))
    return out, info


def default_runtime_check(rc: int, text: str, host: Host) -> PreflightRow:
    """The recipe hands devices to its containers itself (compose.yaml `devices:`) and sets no
    ASCEND_VISIBLE_DEVICES, so the Ascend Docker Runtime adds nothing (its hook acts only on that variable). What
    can still break is a daemon whose default runtime names a binary that is gone: every container start fails."""
    expected = "the default runtime's binary present (runc; ascend only if installed)"
    if rc != 0:
        return check(
            "docker_default_runtime", False, f"docker info failed: {first_line(text)}", expected, "check dockerd"
        )
    import json

    name, _, runtimes = text.partition("|")
    name = name.strip()
    try:
        table = json.loads(runtimes or "{}")
    except ValueError:
        table = None
    if not name or not isinstance(table, dict):
        return check(
            "docker_default_runtime",
            False,
            f"docker info gave no runtime table: {first_line(text)!r}",
            expected,
            "check dockerd (`docker info --format '{{json .Runtimes}}'` must print a JSON map) and restart it",
        )
    entry = table.get(name)
    path = str((entry.get("path") if isinstance(entry, dict) else None) or name)
    present = os.path.isfile(path) if path.startswith("/") else bool(host.tool(path))
    return check(
        "docker_default_runtime",
        present,
        f"{name} ({path}{'' if present else ' missing'})",
        expected,
        f"install the runtime at {path} or remove `default-runtime: {name}` from /etc/docker/daemon.json and restart "
        "docker (the recipe does not need the Ascend Docker Runtime)",
    )


def storage_checks(p: dict[str, Any], docker_root: str) -> list[PreflightRow]:
    out: list[PreflightRow] = []
    root = p["shared_root"].rstrip("/") or "/"
    mounts = parse_mountpoints(read("/proc/self/mountinfo") or "")
    out.append(
        check(
            "shared_storage_mounted",
            root in mounts,
            "mounted" if root in mounts else "not a mount point",
            f"{root} mounted",
            f"mount the shared file system at {root} on this host (same path on every host)",
        )
    )
    problems = []
    for model in p["model_paths"]:
        if not os.path.isfile(os.path.join(model, "config.json")):
            problems.append(f"{model}/config.json missing")
    for path in p["data_files"]:
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            problems.append(f"{path} missing or empty")
    ckpt = p["ckpt_root"]
    if not os.path.isdir(ckpt) and not os.path.isdir(os.path.dirname(ckpt.rstrip("/"))):
        problems.append(f"{ckpt} and its parent missing")
    out.append(
        check(
            "shared_storage_content",
            not problems,
            "; ".join(problems) or "model, data and checkpoint paths present",
            "model config.json, data files, checkpoint folder",
            "copy the model and data onto the shared storage (deploy.yml never downloads them)",
        )
    )
    want = p["min_free_disk_gib"]
    try:
        probe = nearest_existing(docker_root or "/")
        st = os.statvfs(probe)
    except (OSError, ValueError) as exc:  # a Docker root that is no path (docker info's odd output)
        out.append(
            check(
                "free_disk",
                False,
                f"cannot read free space of {docker_root!r}: {exc}",
                f">= {want:g} GiB",
                "check `docker info --format '{{.DockerRootDir}}'` on the host",
            )
        )
        return out
    free = st.f_bavail * st.f_frsize / 2**30
    out.append(
        check(
            "free_disk",
            free >= want,
            f"{free:.1f} GiB free on {probe}",
            f">= {want:g} GiB",
            f"free space on {probe} (old images: `docker image prune`) or move the Docker data root",
        )
    )
    return out


def time_check(host: Host) -> tuple[PreflightRow | None, float]:
    """NTP status when the host can tell; otherwise None and the caller compares clocks with the control node."""
    stamp = time.time()
    tdc = host.tool("timedatectl")
    if tdc:
        rc, text = host.run([tdc, "show", "-p", "NTPSynchronized", "--value"])
        if rc == 0 and text in ("yes", "no"):
            return check(
                "time_sync",
                text == "yes",
                f"NTPSynchronized={text}",
                "NTPSynchronized=yes",
                "enable NTP/chrony on this host (`timedatectl set-ntp true`)",
            ), stamp
    chronyc = host.tool("chronyc")
    if chronyc:
        rc, text = host.run([chronyc, "tracking"])
        leap = parse_colon(text).get("leap status", "")
        if rc == 0 and leap:
            return check(
                "time_sync",
                leap == "Normal",
                f"chrony leap status {leap}",
                "chrony synchronised",
                "check chrony's sources (`chronyc sources`)",
            ), stamp
    return None, stamp


def engine_limits(pid_file: str = "/var/run/docker.pid") -> tuple[dict[str, int], PreflightRow]:
    """Hard limits of the running dockerd (containers cannot get more), else of this process, and the row that
    says which were read."""
    pid = as_int((read(pid_file) or "").strip())
    text = read(f"/proc/{pid}/limits") if pid is not None else None
    expected = "dockerd's hard nofile and memlock limits readable (/proc/<pid>/limits)"
    if text is None:  # no dockerd running: container_runtime says so; the container settings use this process's
        limits = parse_limits(read("/proc/self/limits") or "")
        return limits, check("engine_limits", True, "no running dockerd: this process's limits", expected, "")
    limits = parse_limits(text)
    if len(limits) == 2:
        shown = ", ".join(f"{k} {'unlimited' if v < 0 else v}" for k, v in sorted(limits.items()))
        return limits, check("engine_limits", True, f"dockerd pid {pid}: {shown}", expected, "")
    lacking = " and ".join(k for k in ("nofile", "memlock") if k not in limits)
    return parse_limits(read("/proc/self/limits") or ""), check(
        "engine_limits",
        False,
        f"/proc/{pid}/limits (dockerd) has no readable {lacking} line: {first_line(text)[:60]!r}",
        expected,
        f"`cat /proc/{pid}/limits` on the host must show Max open files and Max locked memory; restart docker",
    )


def tool_output_check(host: Host) -> PreflightRow:
    """Every command's output is read as UTF-8; a byte that is not (a GBK locale's message, output cut
    mid-character) fails this row, naming the command, and the other rows read it with replacement characters."""
    return check(
        "tool_output",
        not host.not_utf8,
        "; ".join(host.not_utf8[:3]) + (f" (+{len(host.not_utf8) - 3} more)" if len(host.not_utf8) > 3 else "")
        if host.not_utf8
        else "every command printed UTF-8 text",
        "UTF-8 output from every tool (run with LC_ALL=C)",
        "run the named command on the host: output that is not UTF-8 even with LC_ALL=C means a damaged tool or "
        "driver install (reinstall the HDK driver), or output cut mid-character (check the host's load)",
    )
