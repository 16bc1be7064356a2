#!/usr/bin/python
"""Read-only health check of one A3 host; returns every check, passed or failed, in one result."""

# ruff: noqa: E402  # Ansible modules put DOCUMENTATION before the imports
from __future__ import annotations

DOCUMENTATION = r"""
module: a3_preflight
short_description: Read-only preflight checks of an Ascend A3 training host
description:
  - Runs every check (OS, driver and firmware versions, device nodes, die health, NPU network, container
    runtime, shared storage, free disk, time sync) and returns them all; it never changes the host.
  - The module itself does not fail on a failed check; the caller collects the results of all hosts.
options:
  expected_dies: {type: int, required: true, description: NPU dies on the host.}
  chips_per_npu: {type: int, default: 2, description: dies per npu-smi NPU id (2 on A3).}
  hdk_min: {type: str, required: true, description: Minimum driver and firmware version.}
  npu_ips: {type: list, elements: str, required: true, description: Expected NPU address per die.}
  ping_targets: {type: list, elements: str, default: [], description: Peer NPU address each die pings.}
  simulated: {type: bool, default: false, description: Simulated host (no Ascend Docker Runtime needed).}
  allowed_arch: {type: list, elements: str, required: true, description: Accepted machine architectures.}
  allowed_os: {type: list, elements: str, required: true, description: Accepted "ID VERSION_ID" prefixes.}
  shared_root: {type: str, required: true, description: Shared storage mount point.}
  model_path: {type: str, required: true, description: Model folder (must hold config.json).}
  data_files: {type: list, elements: str, required: true, description: Data files that must exist.}
  ckpt_root: {type: str, required: true, description: Checkpoint folder (exists or can be created).}
  min_free_disk_gib: {type: float, required: true, description: Free space needed on the Docker data root.}
  docker_installable: {type: bool, default: false, description: Offline Docker packages are provided.}
  ascend_runtime_path: {type: str, required: true, description: Path of the ascend-docker-runtime binary.}
  ascend_runtime_installable: {type: bool, default: false, description: The runtime installer is provided.}
  driver_version_file: {type: str, default: /usr/local/Ascend/driver/version.info, description: Driver version.info.}
  firmware_version_file:
    {type: str, default: /usr/local/Ascend/firmware/version.info, description: Firmware version.info.}
  tool_dirs: {type: list, elements: str, default: [], description: Extra folders searched for npu-smi and hccn_tool.}
  parallel: {type: int, default: 16, description: Device queries run at once.}
  command_timeout: {type: int, default: 60, description: Seconds one device query may take.}
author: verl-recipe
"""

import os
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ansible.module_utils.basic import AnsibleModule

Check = dict[str, Any]


def check(name: str, ok: bool, found: Any, expected: Any, fix: str) -> Check:
    return {"check": name, "ok": bool(ok), "found": str(found), "expected": str(expected), "fix": "" if ok else fix}


def hdk_key(version: str) -> tuple[int, ...]:
    """Order HDK versions: 26.0.RC1 < 26.0.RC2 < 26.0.0 < 26.0.1 (case-insensitive, extra fields compared last)."""
    parts = version.strip().lower().split(".")
    nums: list[int] = []
    for i, part in enumerate(parts):
        m = re.fullmatch(r"rc(\d+)", part)
        if i == 2:
            # third field: a release candidate sorts before every final release of the same major.minor
            nums += [0, int(m.group(1))] if m else [1, int(re.sub(r"\D", "", part) or 0)]
        else:
            nums.append(int(m.group(1)) if m else int(re.sub(r"\D", "", part) or 0))
    return tuple(nums)


def parse_kv(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        if "=" in line:
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), value.strip())
    return out


def parse_colon(text: str) -> dict[str, str]:
    """`Key : value` and `key:value` lines (npu-smi -t, hccn_tool -g) into a dict, keys lower-cased."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if ":" in line:
            key, _, value = line.partition(":")
            out.setdefault(key.strip().lower(), value.strip())
    return out


def parse_ping_loss(text: str) -> float | None:
    m = re.search(r"([\d.]+)%\s*packet loss", text)
    return float(m.group(1)) if m else None


def parse_mountpoints(text: str) -> set[str]:
    points = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 4:
            points.add(fields[4].replace("\\040", " "))
    return points


def os_release(text: str) -> str:
    kv = {k: v.strip('"') for k, v in parse_kv(text).items()}
    return f"{kv.get('ID', 'unknown')} {kv.get('VERSION_ID', '')}".strip()


class Host:
    def __init__(self, params: dict[str, Any]) -> None:
        self.p = params
        self.timeout = params["command_timeout"]
        path = os.environ.get("PATH", "/usr/bin:/bin")
        extra = [
            *params["tool_dirs"],
            "/usr/local/bin",
            "/usr/local/sbin",
            "/usr/local/Ascend/driver/tools",
            "/usr/sbin",
        ]
        self.path = os.pathsep.join([path, *extra])

    def tool(self, name: str) -> str | None:
        return shutil.which(name, path=self.path)

    def run(self, argv: list[str]) -> tuple[int, str]:
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return 127, str(exc)
        return proc.returncode, (proc.stdout + proc.stderr).strip()


def read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def platform_checks(p: dict[str, Any]) -> list[Check]:
    arch = os.uname().machine
    rel = os_release(read("/etc/os-release") or "")
    os_ok = any(rel.lower().startswith(a.lower()) for a in p["allowed_os"])
    return [
        check(
            "architecture", arch in p["allowed_arch"], arch, " or ".join(p["allowed_arch"]), "use an A3 (aarch64) host"
        ),
        check("os", os_ok, rel, " or ".join(p["allowed_os"]), "install a supported OS release on this host"),
    ]


def version_checks(p: dict[str, Any]) -> list[Check]:
    out = []
    want = p["hdk_min"]
    for name, path, keys in (
        ("driver_version", p["driver_version_file"], ("Version", "package_version")),
        ("firmware_version", p["firmware_version_file"], ("package_version",)),
    ):
        text = read(path)
        if text is None:
            out.append(
                check(name, False, f"{path} missing", f">= {want}", f"install the Ascend HDK {want} {name[:-8]}")
            )
            continue
        kv = parse_kv(text)
        found = next((kv[k] for k in keys if kv.get(k)), "")
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
    return out


def device_node_checks(p: dict[str, Any]) -> list[Check]:
    wanted = [f"/dev/davinci{i}" for i in range(p["expected_dies"])]
    wanted += ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
    missing = [w for w in wanted if not os.path.exists(w)]
    found = "all present" if not missing else "missing " + ", ".join(m.removeprefix("/dev/") for m in missing)
    return [
        check(
            "device_nodes",
            not missing,
            found,
            f"{len(wanted)} nodes (davinci0..{p['expected_dies'] - 1} + manager, svm, hdc)",
            "load the NPU driver (reinstall the HDK driver, then reboot)",
        )
    ]


def npu_checks(p: dict[str, Any], host: Host) -> list[Check]:
    dies = p["expected_dies"]
    per = max(1, p["chips_per_npu"])
    npu_smi, hccn = host.tool("npu-smi"), host.tool("hccn_tool")
    out: list[Check] = []
    if not npu_smi:
        out.append(
            check(
                "chip_health",
                False,
                "npu-smi not found",
                f"{dies} dies OK",
                "install the Ascend HDK driver (it brings npu-smi)",
            )
        )
    if not hccn:
        for name in ("npu_link", "npu_ip", "npu_net_health", "npu_ping"):
            out.append(
                check(
                    name,
                    False,
                    "hccn_tool not found",
                    f"{dies} dies",
                    "install the Ascend HDK driver (it brings hccn_tool)",
                )
            )
    jobs: dict[tuple[str, int], list[str]] = {}
    for die in range(dies):
        if npu_smi:
            jobs[("health", die)] = [npu_smi, "info", "-t", "health", "-i", str(die // per), "-c", str(die % per)]
        if hccn:
            jobs[("link", die)] = [hccn, "-i", str(die), "-link", "-g"]
            jobs[("ip", die)] = [hccn, "-i", str(die), "-ip", "-g"]
            jobs[("net_health", die)] = [hccn, "-i", str(die), "-net_health", "-g"]
            targets = p["ping_targets"]
            if die < len(targets) and targets[die]:
                jobs[("ping", die)] = [hccn, "-i", str(die), "-ping", "-g", "address", targets[die]]
    with ThreadPoolExecutor(max_workers=max(1, p["parallel"])) as pool:
        outs = list(pool.map(host.run, jobs.values()))
    results = {key: outs[i] for i, key in enumerate(jobs)}  # zip(strict=) needs 3.10; hosts may have 3.9

    def bad_dies(kind: str, judge: Any) -> list[str]:
        bad = []
        for die in range(dies):
            if (kind, die) not in results:
                continue
            rc, text = results[(kind, die)]
            verdict = judge(die, rc, text)
            if verdict:
                bad.append(f"die {die}: {verdict}")
        return bad

    def health(die: int, rc: int, text: str) -> str:
        status = parse_colon(text).get("health status", "")
        if rc != 0 or not status:
            return f"query failed ({first_line(text)})"
        return "" if status == "OK" else status

    def link(die: int, rc: int, text: str) -> str:
        status = parse_colon(text).get("link status", "")
        return "" if rc == 0 and status == "UP" else (status or f"query failed ({first_line(text)})")

    def ip(die: int, rc: int, text: str) -> str:
        addr = parse_colon(text).get("ipaddr", "")
        want = p["npu_ips"][die] if die < len(p["npu_ips"]) else ""
        if rc != 0 or not addr:
            return f"no address ({first_line(text)})"
        return "" if addr == want else f"{addr} (inventory {want})"

    def net_health(die: int, rc: int, text: str) -> str:
        status = parse_colon(text).get("net health status", "")
        return "" if rc == 0 and status == "Success" else (status or f"query failed ({first_line(text)})")

    def ping(die: int, rc: int, text: str) -> str:
        loss = parse_ping_loss(text)
        target = p["ping_targets"][die]
        if loss is None:
            return f"ping {target} failed ({first_line(text)})"
        return "" if loss == 0.0 else f"{loss:.2f}% loss to {target}"

    specs = [
        (
            "chip_health",
            "health",
            health,
            "Health Status OK on every die",
            "check `npu-smi info -t health -i <npu> -c <chip>`; replace or reset the faulty module",
        ),
        (
            "npu_link",
            "link",
            link,
            "link status UP on every die",
            "check the RoCE cable/port of the listed dies (`hccn_tool -i <die> -link -g`)",
        ),
        (
            "npu_ip",
            "ip",
            ip,
            "hccn address = inventory a3_npu_ips",
            "configure /etc/hccn.conf address_<die> and run `hccn_tool -a -cfg recovery`, or fix a3_npu_ips",
        ),
        (
            "npu_net_health",
            "net_health",
            net_health,
            "net health Success on every die",
            "set netdetect_<die> in /etc/hccn.conf and check the NPU network gateway",
        ),
    ]
    if p["ping_targets"]:
        specs.append(
            (
                "npu_ping",
                "ping",
                ping,
                "0% loss to the next host's same die",
                "check the NPU network route between these hosts (switch, VLAN, hccn.conf)",
            )
        )
    for name, kind, judge, expected, fix in specs:
        if (kind == "health" and not npu_smi) or (kind != "health" and not hccn):
            continue
        bad = bad_dies(kind, judge)
        out.append(check(name, not bad, "; ".join(bad) if bad else f"{dies} dies OK", expected, fix))
    return out


def first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "no output"
    return line[:120]


def runtime_checks(p: dict[str, Any], host: Host) -> tuple[list[Check], dict[str, Any]]:
    out: list[Check] = []
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
    if not p["simulated"]:
        present = os.path.isfile(p["ascend_runtime_path"])
        found = (
            "present" if present else ("missing, installer provided" if p["ascend_runtime_installable"] else "missing")
        )
        out.append(
            check(
                "ascend_docker_runtime",
                present or p["ascend_runtime_installable"],
                found,
                p["ascend_runtime_path"],
                "provide Ascend-docker-runtime_<version>_linux-<arch>.run in container_engine_offline_dir",
            )
        )
    return out, info


def storage_checks(p: dict[str, Any], docker_root: str) -> list[Check]:
    out: list[Check] = []
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
    if not os.path.isfile(os.path.join(p["model_path"], "config.json")):
        problems.append(f"{p['model_path']}/config.json missing")
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
    probe = docker_root
    while not os.path.exists(probe) and probe not in ("/", ""):
        probe = os.path.dirname(probe)
    st = os.statvfs(probe or "/")
    free = st.f_bavail * st.f_frsize / 2**30
    want = p["min_free_disk_gib"]
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


def time_check(host: Host) -> tuple[Check | None, float]:
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


def parse_limits(text: str) -> dict[str, int]:
    """Hard `Max open files` and `Max locked memory` of a /proc/<pid>/limits file; -1 = unlimited."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        for key, label in (("nofile", "Max open files"), ("memlock", "Max locked memory")):
            if line.startswith(label):
                hard = line[len(label) :].split()[1]
                out[key] = -1 if hard == "unlimited" else int(hard)
    return out


def engine_limits() -> dict[str, int]:
    """Hard limits of the running dockerd (containers cannot get more), else of this process."""
    pidtext = read("/var/run/docker.pid") or ""
    limits = parse_limits(read(f"/proc/{pidtext.strip()}/limits") or "") if pidtext.strip().isdigit() else {}
    if len(limits) < 2:
        limits = parse_limits(read("/proc/self/limits") or "")
    return limits


def run_all(p: dict[str, Any]) -> dict[str, Any]:
    host = Host(p)
    tcheck, stamp = time_check(host)
    checks = platform_checks(p) + version_checks(p) + device_node_checks(p) + npu_checks(p, host)
    rt, info = runtime_checks(p, host)
    checks += rt + storage_checks(p, info["docker_root"])
    if tcheck:
        checks.append(tcheck)
    return {
        "checks": checks,
        "clock": stamp,
        "clock_source": "ntp" if tcheck else "none",
        "docker_present": info["docker"],
        "compose_present": info["compose"],
        "service_mgr": "systemd" if os.path.isdir("/run/systemd/system") else "service",
        "engine_limits": engine_limits(),
    }


def main() -> None:
    spec = {
        "expected_dies": {"type": "int", "required": True},
        "chips_per_npu": {"type": "int", "default": 2},
        "hdk_min": {"type": "str", "required": True},
        "npu_ips": {"type": "list", "elements": "str", "required": True},
        "ping_targets": {"type": "list", "elements": "str", "default": []},
        "simulated": {"type": "bool", "default": False},
        "allowed_arch": {"type": "list", "elements": "str", "required": True},
        "allowed_os": {"type": "list", "elements": "str", "required": True},
        "shared_root": {"type": "str", "required": True},
        "model_path": {"type": "str", "required": True},
        "data_files": {"type": "list", "elements": "str", "required": True},
        "ckpt_root": {"type": "str", "required": True},
        "min_free_disk_gib": {"type": "float", "required": True},
        "docker_installable": {"type": "bool", "default": False},
        "ascend_runtime_path": {"type": "str", "required": True},
        "ascend_runtime_installable": {"type": "bool", "default": False},
        "driver_version_file": {"type": "str", "default": "/usr/local/Ascend/driver/version.info"},
        "firmware_version_file": {"type": "str", "default": "/usr/local/Ascend/firmware/version.info"},
        "tool_dirs": {"type": "list", "elements": "str", "default": []},
        "parallel": {"type": "int", "default": 16},
        "command_timeout": {"type": "int", "default": 60},
    }
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    result = run_all(module.params)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
