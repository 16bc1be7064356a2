"""The site's hosts.yml from the facts, with a comment per host saying where each fact came from."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from ..a3facts import hdk_key
from ..inventory import check_hosts
from .common import die_list, utc_now
from .facts import HostFacts
from .request import REPO, Request
from .script import NPU_SMI_PATHS

# --------------------------------------------------------------------------------------------------------------
# hosts.yml


def host_vars(f: HostFacts, rank: int, port: int) -> dict[str, object]:
    hv: dict[str, object] = {"ansible_host": f.address}
    if port != 22:
        hv["ansible_port"] = port
    hv.update(a3_node_rank=rank, a3_cluster_ip=f.cluster_ip, a3_cluster_nic=f.cluster_nic, a3_npu_ips=list(f.npu_ips))
    if f.vnic_ips:
        hv["a3_vnic_ips"] = list(f.vnic_ips)
    return hv


def validate(facts: list[HostFacts], port: int) -> list[str]:
    """The project's own inventory check (deploy.yml's first step) on what would be written."""
    hosts = {f.name: host_vars(f, rank, port) for rank, f in enumerate(facts)}
    return check_hosts(list(hosts), [facts[0].name], hosts, len(facts[0].dies))


def _scalar(value: object) -> str:
    text = str(value)
    return text if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", text) else json.dumps(text)


def npu_smi_note(paths: list[str]) -> str:
    if len(paths) > 1:
        return " and ".join(paths)
    only = paths[0] if paths else "none"
    if only == NPU_SMI_PATHS[1]:
        return f"{only} only (compose.yaml binds NPU_SMI_PATH, /usr/local/bin/npu-smi unless node.env says this one)"
    return f"{only} only"


def host_comment(f: HostFacts, pad: str) -> list[str]:
    mem = f"{f.mem_kib / 2**20:.0f} GiB (MemTotal)" if f.mem_kib else "not read"
    firmware = f.firmware or "not read"
    if f.firmware_package:
        firmware += f" (package {f.firmware_package})"
    lines = [
        f"{f.name}: HOSTS {f.address}, read {f.read_at} as {f.user or '?'}",
        f"  a3_cluster_ip, a3_cluster_nic: {f.cluster_source}",
        f"  a3_npu_ips: {f.npu_source}; a3_vnic_ips: {f.vnic_note}",
        f"  dies: {len(f.dies)} (/dev/davinci{die_list(f.dies)}); npu-smi: {npu_smi_note(f.npu_smi)}",
        f"  HDK driver {f.driver or 'not read'}, firmware {firmware} (/usr/local/Ascend/*/version.info); memory {mem}",
    ]
    return [f"{pad}# {line}" for line in lines]


def comment_lines(intro: str, command: str, width: int = 110) -> list[str]:
    """`intro` and a shell command as YAML comment lines of at most `width` characters, broken between words."""
    lines = [f"# {intro}"]
    line = "#  "
    for word in shlex.split(command):
        quoted = shlex.quote(word)
        if len(line) + 1 + len(quoted) > width and line != "#  ":
            lines.append(line + " \\")
            line = "#   "
        line += " " + quoted
    return [*lines, line]


def render(req: Request, facts: list[HostFacts], command: str) -> str:
    lines = [
        "---",
        f"# Site {req.site}: written by `make inventory` (scripts/site_inventory.py) at {utc_now()} from what each",
        "# host reported over SSH (host keys checked), not typed by hand; docs/inventory.md says what is read where.",
        *comment_lines("Written anew (after a change of hosts or addresses) by:", command),
        "# Host order is HOSTS order; the first host is the Ray head (rank 0). Each host's comment names the",
        "# source of every fact and lists the facts that have no inventory field.",
        "all:",
        "  children:",
        "    a3_nodes:",
        "      vars:",
        f"        ansible_user: {_scalar(req.user)}",
    ]
    if req.key:
        lines.append(f"        ansible_ssh_private_key_file: {json.dumps(str(Path(req.key).expanduser().resolve()))}")
    if req.known_hosts:
        args = f"-o UserKnownHostsFile={req.known_hosts_path.resolve()}"
        lines.append(f"        ansible_ssh_common_args: {json.dumps(args)}")
    lines.append("      hosts:")
    for rank, f in enumerate(facts):
        lines += host_comment(f, "        ")
        lines.append(f"        {_scalar(f.name)}:")
        for key, value in host_vars(f, rank, req.port).items():
            if isinstance(value, list):
                lines.append(f"          {key}:")
                lines += [f"            - {ip}" for ip in value]
            else:
                lines.append(f"          {key}: {_scalar(value)}")
    lines += ["    ray_head:", "      hosts:", f"        {_scalar(facts[0].name)}:"]
    return "\n".join(lines) + "\n"


def notes(facts: list[HostFacts]) -> list[str]:
    """What is worth knowing but no reason to refuse (the preflight judges these on the hosts)."""
    out: list[str] = []
    floor = ""
    try:
        import yaml

        floor = str(yaml.safe_load((REPO / "docker" / "versions.yaml").read_text())["host"]["hdk_min"])
    except (ImportError, OSError, KeyError, TypeError):
        pass
    for f in facts:
        if f.npu_smi == [NPU_SMI_PATHS[1]]:
            out.append(f"{f.name}: npu-smi only in /usr/local/sbin (node.env's NPU_SMI_PATH must name it)")
        if not f.vnic_ips:
            out.append(
                f"{f.name}: no a3_vnic_ips written, vNIC {f.vnic_note} (needed only for site_inter_server_link: hccs)"
            )
        if floor and f.driver:
            try:
                if hdk_key(f.driver) < hdk_key(floor):
                    out.append(
                        f"{f.name}: HDK driver {f.driver} is below host.hdk_min {floor} (the preflight refuses it)"
                    )
            except ValueError:
                out.append(f"{f.name}: HDK driver version {f.driver!r} is not a version the preflight can compare")
        elif not f.driver:
            out.append(f"{f.name}: no /usr/local/Ascend/driver/version.info Version= (the preflight refuses it)")
    versions = sorted({f.driver for f in facts if f.driver})
    if len(versions) > 1:
        out.append(f"HDK driver versions differ between hosts: {', '.join(versions)}")
    return out
