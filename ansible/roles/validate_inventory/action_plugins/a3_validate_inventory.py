"""Check the inventory and the control node before any host is contacted.

Runs on the controller only. Every problem becomes one line in the launch validator's shape
(verl_recipe.checks.problem.Problem.message), `SUBJECT: WHAT; fix: FIX`, where SUBJECT is `inventory`,
`inventory: HOST` or `control node`; all of them are returned together so a site fixes its inventory in one pass.
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
PORT_DEFAULTS = {"site_ray_port": RAY_GCS_PORT, "site_dashboard_port": RAY_DASHBOARD_PORT}
DIES_PER_NODE: int = _a3facts.DIES_PER_NODE

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
INVENTORY = "inventory"
CONTROL = "control node"


def problem(subject: str, what: str, fix: str) -> str:
    """One problem line, shaped like the launch validator's (`SUBJECT: WHAT; fix: FIX`): SUBJECT is `inventory`,
    `inventory: HOST` or `control node`, FIX names what to change."""
    return f"{subject}: {what}; fix: {fix}"


def _host(name: str) -> str:
    return f"{INVENTORY}: {name}"


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


def _hccn_fix(dies: Any) -> str:
    """The fix of a wrong a3_npu_ips: the host's /etc/hccn.conf holds one address_N per die (a bad
    site_expected_dies is reported on its own, so the count is left out then)."""
    if _is_int(dies) and dies > 0:
        return f"list the {dies} address_N values of that host's /etc/hccn.conf, address_0..address_{dies - 1} in order"
    return "list the address_N values of that host's /etc/hccn.conf, one per die, address_0 first"


def check_site(site: dict[str, Any], control: dict[str, Any]) -> list[str]:
    errors: list[str] = []

    def need(key: str) -> Any:
        value = site.get(key, MISSING)
        if value is MISSING or value is None or value == "":
            if key == "site_image_tarball" and site.get("site_image_source") != "tarball":
                return None
            errors.append(problem(INVENTORY, f"{key} is not set", "set it in group_vars/all, see inventory/sample"))
            return None
        return value

    values = {k: need(k) for k in SITE_KEYS}
    if values["site_simulated"] is not None and not isinstance(values["site_simulated"], bool):
        errors.append(
            problem(
                INVENTORY,
                f"site_simulated={values['site_simulated']!r} is not a boolean",
                "write true or false, unquoted",
            )
        )
    dies = values["site_expected_dies"]
    if dies is not None and (not _is_int(dies) or dies < 1):
        errors.append(
            problem(
                INVENTORY,
                f"site_expected_dies={dies!r} is not a positive integer",
                f"{DIES_PER_NODE} on A3 (8 modules x 2 dies)",
            )
        )
    hdk = values["site_hdk_min"]
    if hdk is not None and not (isinstance(hdk, str) and HDK_RE.match(hdk)):
        errors.append(
            problem(
                INVENTORY,
                f"site_hdk_min={hdk!r} is not an HDK version like 26.0.RC1",
                "host.hdk_min of docker/versions.yaml, as inventory/sample reads it",
            )
        )
    root = values["site_shared_root"]
    for key in ("site_shared_root", "site_model_path", "site_data_path", "site_ckpt_root", "site_install_dir"):
        path = values[key]
        if path is None:
            continue
        if not isinstance(path, str) or not os.path.isabs(path):
            errors.append(problem(INVENTORY, f"{key}={path!r} is not an absolute path", "start it with /"))
        elif (
            key in ("site_model_path", "site_data_path", "site_ckpt_root")
            and isinstance(root, str)
            and os.path.commonpath([os.path.normpath(path), os.path.normpath(root)]) != os.path.normpath(root)
        ):
            errors.append(
                problem(
                    INVENTORY,
                    f"{key}={path} is not under site_shared_root={root}",
                    f"keep it on shared storage: a path under {root}",
                )
            )
    ref = values["site_image_ref"]
    if ref is not None and not (isinstance(ref, str) and IMAGE_RE.match(ref)):
        errors.append(
            problem(INVENTORY, f"site_image_ref={ref!r} is not an image reference", "name:tag or name@sha256:...")
        )
    source = values["site_image_source"]
    if source is not None and source not in ("registry", "tarball"):
        errors.append(
            problem(
                INVENTORY,
                f"site_image_source={source!r} must be registry or tarball",
                "registry (every host pulls site_image_ref) or tarball (site_image_tarball, a `docker save` file "
                "on the control node)",
            )
        )
    if source == "tarball" and values["site_image_tarball"] is not None:
        tarball = values["site_image_tarball"]
        if not os.path.isfile(str(tarball)):
            errors.append(
                problem(
                    CONTROL,
                    f"site_image_tarball={tarball} does not exist",
                    f"`docker save {ref or 'IMAGE'} -o {tarball}`",
                )
            )
    ports = []
    for key in ("site_ray_port", "site_dashboard_port"):
        port = values[key]
        if port is None:
            continue
        if not _is_int(port) or not 1 <= port <= 65535:
            errors.append(
                problem(
                    INVENTORY,
                    f"{key}={port!r} is not a TCP port number",
                    f"a port number 1-65535, default {PORT_DEFAULTS[key]}",
                )
            )
        else:
            ports.append(port)
    if len(ports) == 2 and ports[0] == ports[1]:
        errors.append(
            problem(
                INVENTORY,
                f"site_ray_port and site_dashboard_port are both {ports[0]}",
                f"give them different ports, by default {RAY_GCS_PORT} and {RAY_DASHBOARD_PORT}",
            )
        )

    link = site.get("site_inter_server_link", "roce")
    if link not in LINK_MODES:
        errors.append(
            problem(
                INVENTORY,
                f"site_inter_server_link={link!r} must be roce or hccs",
                "roce unless the hosts are one A3 SuperPoD whose HCCS carries the traffic between servers",
            )
        )

    lo, hi = control["ansible_min"], control["ansible_max"]
    have = version_tuple(control["ansible_version"])
    if not version_tuple(lo) <= have < version_tuple(hi):
        errors.append(
            problem(
                CONTROL,
                f"ansible-core {control['ansible_version']} is outside [{lo}, {hi})",
                "`make venv` installs the pinned toolchain",
            )
        )
    for path in control.get("required_files", []):
        if not os.path.isfile(path):
            errors.append(problem(CONTROL, f"{path} is missing", "check out the whole repository"))
    return errors


def check_vnic(nodes: list[str], hosts: dict[str, dict[str, Any]], dies: Any) -> list[str]:
    """site_inter_server_link: hccs: HCCL reaches the other servers over HCCS at the dies' virtual NIC addresses
    (`hccn_tool -i <die> -vnic -g`), so the preflight pings those and needs them per host."""
    errors: list[str] = []
    for name in nodes:
        ips = hosts[name].get("a3_vnic_ips", MISSING)
        if not isinstance(ips, list) or (_is_int(dies) and len(ips) != dies):
            errors.append(
                problem(
                    _host(name),
                    f"a3_vnic_ips={_show(ips)} must list {dies} vNIC addresses when site_inter_server_link is hccs",
                    "`hccn_tool -i <die> -vnic -g` on that host",
                )
            )
            continue
        for die, raw in enumerate(ips):
            if _ipv4(raw) is None:
                errors.append(
                    problem(
                        _host(name),
                        f"a3_vnic_ips[{die}]={raw!r} is not an IPv4 address",
                        f"the address `hccn_tool -i {die} -vnic -g` prints on that host",
                    )
                )
    return errors


def check_hosts(nodes: list[str], heads: list[str], hosts: dict[str, dict[str, Any]], dies: Any) -> list[str]:
    errors: list[str] = []
    if not nodes:
        return [
            problem(
                INVENTORY, "group a3_nodes is empty", "list every training host under a3_nodes, see inventory/sample"
            )
        ]
    if len(heads) != 1:
        found = ", ".join(heads) if heads else "none"
        errors.append(
            problem(
                INVENTORY,
                f"group ray_head must hold exactly one host, found {len(heads)} ({found})",
                "list only the a3_nodes host with a3_node_rank 0 under ray_head",
            )
        )
    for head in heads:
        if head not in nodes:
            errors.append(problem(_host(head), "the ray_head host is not in a3_nodes", "list it under a3_nodes too"))

    last = len(nodes) - 1
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
            errors.append(
                problem(
                    _host(name),
                    f"duplicate address {target}, already used by {seen_ssh[target]}",
                    "give each host its own ansible_host (and ansible_port): the address SSH reaches that host at",
                )
            )
        seen_ssh.setdefault(target, name)

        rank = hv.get("a3_node_rank", MISSING)
        if not _is_int(rank):
            errors.append(
                problem(
                    _host(name),
                    f"a3_node_rank={_show(rank)} is not an integer",
                    f"an integer 0..{last}, a different one for each host",
                )
            )
        elif not 0 <= rank < len(nodes):
            errors.append(
                problem(
                    _host(name),
                    f"a3_node_rank={rank} is outside 0..{last}",
                    f"number the {len(nodes)} hosts of a3_nodes 0..{last}, each rank once",
                )
            )
        elif rank in ranks:
            errors.append(
                problem(
                    _host(name),
                    f"duplicate a3_node_rank {rank}, already used by {ranks[rank]}",
                    f"give each host its own a3_node_rank in 0..{last}",
                )
            )
        else:
            ranks[rank] = name
        if name in heads and _is_int(rank) and rank != 0:
            errors.append(problem(_host(name), f"the ray_head host has a3_node_rank={rank}", "give it rank 0"))

        cip = _ipv4(hv.get("a3_cluster_ip"))
        if cip is None:
            errors.append(
                problem(
                    _host(name),
                    f"a3_cluster_ip={_show(hv.get('a3_cluster_ip', MISSING))} is not an IPv4 address",
                    "the host's IPv4 address on the cluster network (the address of its a3_cluster_nic)",
                )
            )
        elif cip in seen_cluster:
            errors.append(
                problem(
                    _host(name),
                    f"duplicate address a3_cluster_ip={cip}, already used by {seen_cluster[cip]}",
                    "give each host its own address on the cluster network",
                )
            )
        else:
            seen_cluster[cip] = name

        nic = hv.get("a3_cluster_nic", MISSING)
        if not (isinstance(nic, str) and NIC_RE.match(nic)):
            errors.append(
                problem(
                    _host(name),
                    f"a3_cluster_nic={_show(nic)} is not an interface name",
                    "the interface that holds a3_cluster_ip, as `ip -br addr` lists it, e.g. enp189s0f0",
                )
            )

        ips = hv.get("a3_npu_ips", MISSING)
        if not isinstance(ips, list):
            errors.append(
                problem(_host(name), f"a3_npu_ips={_show(ips)} is not a list of {dies} NPU addresses", _hccn_fix(dies))
            )
            continue
        if _is_int(dies) and len(ips) != dies:
            errors.append(
                problem(
                    _host(name),
                    f"a3_npu_ips has {len(ips)} addresses, expected {dies} (one per die)",
                    _hccn_fix(dies),
                )
            )
        for die, raw in enumerate(ips):
            ip = _ipv4(raw)
            if ip is None:
                errors.append(
                    problem(
                        _host(name),
                        f"a3_npu_ips[{die}]={raw!r} is not an IPv4 address",
                        f"address_{die} of that host's /etc/hccn.conf",
                    )
                )
            elif ip in seen_npu:
                errors.append(
                    problem(
                        _host(name),
                        f"duplicate address a3_npu_ips[{die}]={ip}, already used by {seen_npu[ip]}",
                        f"address_{die} of that host's /etc/hccn.conf: every die of every host has its own address",
                    )
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
