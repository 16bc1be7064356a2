"""Check the inventory and the control node before any host is contacted.

Runs on the controller only. Every problem becomes one line naming the host or variable and the fix; all of
them are returned together so a site fixes its inventory in one pass.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import re
from typing import Any

from ansible.plugins.action import ActionBase
from ansible.release import __version__ as ANSIBLE_CORE_VERSION


def _load_a3facts() -> Any:
    """ansible/module_utils/a3facts.py (the A3 facts: a copy of verl_recipe.a3facts), loaded by its path: Ansible puts
    module_utils on the import path of the modules it ships to hosts, not of the plugins that run on the controller
    (`from ansible.module_utils.a3facts import ...` fails here)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "module_utils", "a3facts.py")
    spec = importlib.util.spec_from_file_location("a3facts", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_a3facts = _load_a3facts()
# The defaults of site_ray_port and site_dashboard_port (Ray's GCS and dashboard ports).
RAY_GCS_PORT: int = _a3facts.RAY_GCS_PORT
RAY_DASHBOARD_PORT: int = _a3facts.RAY_DASHBOARD_PORT

HOST_KEYS = (
    "ansible_host",
    "ansible_port",
    "a3_node_rank",
    "a3_cluster_ip",
    "a3_cluster_nic",
    "a3_npu_ips",
    "a3_vnic_ips",
)
# Optional site settings and their defaults.
LINK_MODES = ("roce", "hccs")
SITE_KEYS = (
    "site_simulated",
    "site_expected_dies",
    "site_hdk_min",
    "site_shared_root",
    "site_model_path",
    "site_data_path",
    "site_ckpt_root",
    "site_image_ref",
    "site_image_source",
    "site_image_tarball",
    "site_ray_port",
    "site_dashboard_port",
    "site_install_dir",
)
OPTIONAL_SITE_KEYS = ("site_inter_server_link",)
MISSING = object()
NIC_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
HDK_RE = re.compile(r"^\d+\.\d+\.(rc\d+|\d+)(\.\d+)*$", re.IGNORECASE)
IMAGE_RE = re.compile(r"^[a-z0-9][a-z0-9._/:@-]*$")


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _ipv4(value: Any) -> str | None:
    """The address as text when `value` is a plain IPv4 address, else None."""
    if not isinstance(value, str):
        return None
    try:
        return str(ipaddress.IPv4Address(value))
    except ValueError:
        return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_site(site: dict[str, Any], control: dict[str, Any]) -> list[str]:
    errors: list[str] = []

    def need(key: str) -> Any:
        value = site.get(key, MISSING)
        if value is MISSING or value is None or value == "":
            if key == "site_image_tarball" and site.get("site_image_source") != "tarball":
                return None
            errors.append(f"inventory: {key} is not set (fix: set it in group_vars/all, see inventory/sample)")
            return None
        return value

    values = {k: need(k) for k in SITE_KEYS}
    if values["site_simulated"] is not None and not isinstance(values["site_simulated"], bool):
        errors.append(
            f"inventory: site_simulated={values['site_simulated']!r} is not a boolean "
            "(fix: write true or false, unquoted)"
        )
    dies = values["site_expected_dies"]
    if dies is not None and (not _is_int(dies) or dies < 1):
        errors.append(f"inventory: site_expected_dies={dies!r} is not a positive integer (fix: 16 on A3)")
    hdk = values["site_hdk_min"]
    if hdk is not None and not (isinstance(hdk, str) and HDK_RE.match(hdk)):
        errors.append(
            f"inventory: site_hdk_min={hdk!r} is not an HDK version like 26.0.RC1 (fix: docker/versions.yaml)"
        )
    root = values["site_shared_root"]
    for key in ("site_shared_root", "site_model_path", "site_data_path", "site_ckpt_root", "site_install_dir"):
        path = values[key]
        if path is None:
            continue
        if not isinstance(path, str) or not os.path.isabs(path):
            errors.append(f"inventory: {key}={path!r} is not an absolute path (fix: start it with /)")
        elif (
            key in ("site_model_path", "site_data_path", "site_ckpt_root")
            and isinstance(root, str)
            and os.path.commonpath([os.path.normpath(path), os.path.normpath(root)]) != os.path.normpath(root)
        ):
            errors.append(
                f"inventory: {key}={path} is not under site_shared_root={root} (fix: keep it on shared storage)"
            )
    ref = values["site_image_ref"]
    if ref is not None and not (isinstance(ref, str) and IMAGE_RE.match(ref)):
        errors.append(f"inventory: site_image_ref={ref!r} is not an image reference (fix: name:tag or name@sha256:...)")
    source = values["site_image_source"]
    if source is not None and source not in ("registry", "tarball"):
        errors.append(f"inventory: site_image_source={source!r} must be registry or tarball")
    if source == "tarball" and values["site_image_tarball"] is not None:
        tarball = values["site_image_tarball"]
        if not os.path.isfile(str(tarball)):
            errors.append(
                f"control node: site_image_tarball={tarball} does not exist (fix: `docker save {ref} -o {tarball}`)"
            )
    ports = []
    for key in ("site_ray_port", "site_dashboard_port"):
        port = values[key]
        if port is None:
            continue
        if not _is_int(port) or not 1 <= port <= 65535:
            errors.append(f"inventory: {key}={port!r} is not a TCP port number")
        else:
            ports.append(port)
    if len(ports) == 2 and ports[0] == ports[1]:
        errors.append(
            f"inventory: site_ray_port and site_dashboard_port are both {ports[0]} "
            f"(fix: {RAY_GCS_PORT} and {RAY_DASHBOARD_PORT})"
        )

    link = site.get("site_inter_server_link", "roce")
    if link not in LINK_MODES:
        errors.append(
            f"inventory: site_inter_server_link={link!r} must be roce or hccs (fix: roce unless the hosts are one "
            "A3 SuperPoD whose HCCS carries the traffic between servers)"
        )

    lo, hi = control["ansible_min"], control["ansible_max"]
    have = version_tuple(control["ansible_version"])
    if not version_tuple(lo) <= have < version_tuple(hi):
        errors.append(
            f"control node: ansible-core {control['ansible_version']} is outside [{lo}, {hi}) "
            "(fix: `make venv` installs the pinned toolchain)"
        )
    for path in control.get("required_files", []):
        if not os.path.isfile(path):
            errors.append(f"control node: {path} is missing (fix: check out the whole repository)")
    return errors


def check_vnic(nodes: list[str], hosts: dict[str, dict[str, Any]], dies: Any) -> list[str]:
    """site_inter_server_link: hccs: HCCL reaches the other servers over HCCS at the dies' virtual NIC addresses
    (`hccn_tool -i <die> -vnic -g`), so the preflight pings those and needs them per host."""
    errors: list[str] = []
    for name in nodes:
        ips = hosts[name].get("a3_vnic_ips", MISSING)
        if not isinstance(ips, list) or (_is_int(dies) and len(ips) != dies):
            errors.append(
                f"inventory: {name}: a3_vnic_ips={_show(ips)} must list {dies} vNIC addresses when "
                "site_inter_server_link is hccs (fix: `hccn_tool -i <die> -vnic -g` on that host)"
            )
            continue
        for die, raw in enumerate(ips):
            if _ipv4(raw) is None:
                errors.append(f"inventory: {name}: a3_vnic_ips[{die}]={raw!r} is not an IPv4 address")
    return errors


def check_hosts(nodes: list[str], heads: list[str], hosts: dict[str, dict[str, Any]], dies: Any) -> list[str]:
    errors: list[str] = []
    if not nodes:
        return [
            "inventory: group a3_nodes is empty (fix: list every training host under a3_nodes, see inventory/sample)"
        ]
    if len(heads) != 1:
        found = ", ".join(heads) if heads else "none"
        errors.append(f"inventory: group ray_head must hold exactly one host, found {len(heads)} ({found})")
    for head in heads:
        if head not in nodes:
            errors.append(f"inventory: {head}: the ray_head host is not in a3_nodes (fix: list it under a3_nodes too)")

    seen_ssh: dict[str, str] = {}
    seen_cluster: dict[str, str] = {}
    seen_npu: dict[str, str] = {}
    ranks: dict[int, str] = {}
    for name in nodes:
        hv = hosts[name]
        ssh = hv.get("ansible_host", MISSING)
        if ssh is MISSING or not ssh:
            ssh = name
        target = f"{ssh}:{hv.get('ansible_port') or 22}"
        if target in seen_ssh:
            errors.append(f"inventory: {name}: duplicate address {target}, already used by {seen_ssh[target]}")
        seen_ssh.setdefault(target, name)

        rank = hv.get("a3_node_rank", MISSING)
        if not _is_int(rank):
            errors.append(f"inventory: {name}: a3_node_rank={_show(rank)} is not an integer (fix: 0..{len(nodes) - 1})")
        elif not 0 <= rank < len(nodes):
            errors.append(f"inventory: {name}: a3_node_rank={rank} is outside 0..{len(nodes) - 1}")
        elif rank in ranks:
            errors.append(f"inventory: {name}: duplicate a3_node_rank {rank}, already used by {ranks[rank]}")
        else:
            ranks[rank] = name
        if name in heads and _is_int(rank) and rank != 0:
            errors.append(f"inventory: {name}: the ray_head host has a3_node_rank={rank} (fix: give it rank 0)")

        cip = _ipv4(hv.get("a3_cluster_ip"))
        if cip is None:
            errors.append(
                f"inventory: {name}: a3_cluster_ip={_show(hv.get('a3_cluster_ip', MISSING))} is not an IPv4 address"
            )
        elif cip in seen_cluster:
            errors.append(
                f"inventory: {name}: duplicate address a3_cluster_ip={cip}, already used by {seen_cluster[cip]}"
            )
        else:
            seen_cluster[cip] = name

        nic = hv.get("a3_cluster_nic", MISSING)
        if not (isinstance(nic, str) and NIC_RE.match(nic)):
            errors.append(
                f"inventory: {name}: a3_cluster_nic={_show(nic)} is not an interface name (fix: e.g. enp189s0f0)"
            )

        ips = hv.get("a3_npu_ips", MISSING)
        if not isinstance(ips, list):
            errors.append(f"inventory: {name}: a3_npu_ips={_show(ips)} is not a list of {dies} NPU addresses")
            continue
        if _is_int(dies) and len(ips) != dies:
            errors.append(
                f"inventory: {name}: a3_npu_ips has {len(ips)} addresses, expected {dies} "
                f"(one per die, /etc/hccn.conf address_0..{dies - 1})"
            )
        for die, raw in enumerate(ips):
            ip = _ipv4(raw)
            if ip is None:
                errors.append(f"inventory: {name}: a3_npu_ips[{die}]={raw!r} is not an IPv4 address")
            elif ip in seen_npu:
                errors.append(
                    f"inventory: {name}: duplicate address a3_npu_ips[{die}]={ip}, already used by {seen_npu[ip]}"
                )
            else:
                seen_npu[ip] = f"{name} die {die}"
    return errors


def _show(value: Any) -> str:
    return "<unset>" if value is MISSING else repr(value)


class ActionModule(ActionBase):
    """`a3_validate_inventory`: fail with one line per inventory or control-node problem."""

    _requires_connection = False
    TRANSFERS_FILES = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        result["_ansible_verbose_always"] = True  # show the summary line on success too
        args = self._task.args
        groups = task_vars.get("groups", {})
        nodes = list(groups.get("a3_nodes", []))
        heads = list(groups.get("ray_head", []))
        hostvars = task_vars["hostvars"]
        hosts: dict[str, dict[str, Any]] = {}
        for name in nodes:
            hv = hostvars[name]
            hosts[name] = {k: hv[k] for k in HOST_KEYS if k in hv}
        # Site variables live in group `all`; read them as the hosts see them (first node, else this play).
        source = hostvars[nodes[0]] if nodes else task_vars
        site = {k: source[k] for k in SITE_KEYS + OPTIONAL_SITE_KEYS if k in source}
        control = {
            "ansible_version": ANSIBLE_CORE_VERSION,
            "ansible_min": str(args.get("ansible_min", "2.19")),
            "ansible_max": str(args.get("ansible_max", "2.20")),
            "required_files": list(args.get("required_files", [])),
        }
        errors = check_site(site, control) + check_hosts(nodes, heads, hosts, site.get("site_expected_dies"))
        if site.get("site_inter_server_link") == "hccs":
            errors += check_vnic(nodes, hosts, site.get("site_expected_dies"))
        result["hosts"] = len(nodes)
        result["changed"] = False
        if errors:
            result["failed"] = True
            result["msg"] = f"inventory check failed ({len(errors)} problem(s)), no host was contacted:\n" + "\n".join(
                errors
            )
        else:
            result["msg"] = (
                f"inventory OK: {len(nodes)} hosts, head {heads[0]}, {site.get('site_expected_dies')} dies per host"
            )
        return result
