"""Check the inventory and the control node before any host is contacted.

Runs on the controller only. Every problem becomes one line in the launch validator's shape
(verl_recipe.checks.problem.Problem.message), `SUBJECT: WHAT; fix: FIX`, where SUBJECT is `inventory`,
`inventory: HOST` or `control node`; all of them are returned together so a site fixes its inventory in one pass.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
from typing import Any

from ansible.plugins.action import ActionBase
from ansible.release import __version__ as ANSIBLE_CORE_VERSION

# The control node runs Ansible from the project's virtual environment, where the package is installed; the role's
# first task refuses, in one line, a Python without it before this plugin is loaded.
from verl_recipe.a3facts import DIES_PER_NODE, RAY_DASHBOARD_PORT, RAY_GCS_PORT

# The defaults of site_ray_port and site_dashboard_port (Ray's GCS and dashboard ports) and the dies of a node.
PORT_DEFAULTS = {"site_ray_port": RAY_GCS_PORT, "site_dashboard_port": RAY_DASHBOARD_PORT}

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
# site_* names other plays read with a default (preflight: site_expected_arch; node_env: site_launch,
# site_secret_files). Any other site_* name is a typo whose default would be used silently (site_image_sorce), so it
# is refused.
OTHER_SITE_KEYS = ("site_expected_arch", "site_launch", "site_secret_files")
# site_secret_files: NAME -> a file on the control node; NAME becomes that variable in every Ray worker.
SECRET_NAME_RE = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
KNOWN_SITE_KEYS = frozenset(SITE_KEYS + OPTIONAL_SITE_KEYS + OTHER_SITE_KEYS)
MISSING = object()
# Every pattern is matched with fullmatch: `$` would also accept a trailing newline ("26.0.RC1\n").
NIC_RE = re.compile(r"[A-Za-z0-9_.:@-]{1,15}")
HDK_RE = re.compile(r"\d+\.\d+\.(rc\d+|\d+)(\.\d+)*", re.IGNORECASE)
IMAGE_RE = re.compile(r"[a-z0-9][a-z0-9._/:@-]{0,254}")
# An inventory host name reaches node.env (NODE_NAME), Ray's node name and a log file name: a DNS label's
# characters and length.
HOST_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
# ansible_host is what ssh is given as its destination: a DNS name or an IP address, never an option (`-...`) or
# words for a shell.
SSH_HOST_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:%-]{0,252}")
# The CPU frequency governor os_tuning writes to sysfs (the kernel's names: performance, schedutil, ...).
GOVERNOR_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")
# Folders deploy.yml must never take as site_install_dir (it makes that folder root-owned, mode 0755, and writes
# compose.yaml, node.env and .env into it) or as site_shared_root (`/` is always "mounted").
OS_DIRS = frozenset(
    (
        "/",
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/lib",
        "/lib32",
        "/lib64",
        "/proc",
        "/root",
        "/run",
        "/sbin",
        "/sys",
        "/tmp",
        "/usr",
        "/usr/bin",
        "/usr/lib",
        "/usr/lib64",
        "/usr/local",
        "/usr/local/bin",
        "/usr/local/lib",
        "/usr/local/sbin",
        "/usr/sbin",
        "/usr/share",
        "/var",
        "/var/lib",
        "/var/log",
        "/var/run",
        "/var/tmp",
    )
)
# Parents of many folders: a shared mount may sit there, an install folder needs one of its own below them.
PARENT_DIRS = frozenset(("/home", "/media", "/mnt", "/opt", "/srv"))
# Kernel, volatile or world-writable trees: nothing of the deploy belongs anywhere below them.
VOLATILE_TREES = ("/dev", "/proc", "/run", "/sys", "/tmp", "/var/tmp")
INVENTORY = "inventory"
CONTROL = "control node"


def problem(subject: str, what: str, fix: str) -> str:
    """One problem line, shaped like the launch validator's (`SUBJECT: WHAT; fix: FIX`): SUBJECT is `inventory`,
    `inventory: HOST` or `control node`, FIX names what to change."""
    return f"{subject}: {what}; fix: {fix}"


def _host(name: Any) -> str:
    """The subject of a host's problems; a name that is not a plain host name is shown quoted and cut short so the
    problem stays one line (the name's own problem says what is wrong with it)."""
    return f"{INVENTORY}: {name if _plain_host_name(name) else _show(name)}"


def _plain_host_name(name: Any) -> bool:
    return isinstance(name, str) and HOST_NAME_RE.fullmatch(name) is not None


def _text(value: Any) -> str:
    """A value as the problem line shows it unquoted: printable text of reasonable length as it is, else quoted."""
    if isinstance(value, str) and value.isprintable() and len(value) <= 120:
        return value
    return _show(value)


def _show(value: Any) -> str:
    """repr of a value, cut to a length that keeps the problem line readable (a name of hundreds of characters,
    a nested list); repr never holds a newline."""
    if value is MISSING:
        return "<unset>"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}...({len(text)} characters)"


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


def _unusable(ip: str) -> str:
    """Why a host cannot own this IPv4 address ("" when it can): another host could never reach it there."""
    addr = ipaddress.IPv4Address(ip)
    for kind, hit in (
        ("the unspecified address", addr.is_unspecified),
        ("a loopback address", addr.is_loopback),
        ("the broadcast address", addr == ipaddress.IPv4Address("255.255.255.255")),
        ("a multicast address", addr.is_multicast),
        ("a reserved address (240.0.0.0/4)", addr.is_reserved),
    ):
        if hit:
            return kind
    return ""


def _port(value: Any) -> int | None:
    """A TCP port (1-65535) given as an integer or as ASCII digits (an INI inventory's text), else None."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 5:
        value = int(value)
    if _is_int(value) and 1 <= value <= 65535:
        return int(value)
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _per_die(dies: Any, what: str) -> str:
    """'16 NPU addresses', or 'NPU addresses, one per die' when site_expected_dies is not a count (it is
    reported on its own, and its raw text, a newline included, must not reach another host's line)."""
    return f"{dies} {what}" if _is_int(dies) and dies > 0 else f"{what}, one per die"


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
    for key, value in values.items():
        # one line per problem and one line per node.env entry: a newline or other control character in a
        # value would break both (it passes a `$`-anchored pattern, and `26.0.RC1\n` reads as a version)
        if isinstance(value, str) and not value.isprintable():
            errors.append(
                problem(INVENTORY, f"{key}={_show(value)} holds a control character", "write it on one line, plain")
            )
            values[key] = None
    if values["site_simulated"] is not None and not isinstance(values["site_simulated"], bool):
        errors.append(
            problem(
                INVENTORY,
                f"site_simulated={_show(values['site_simulated'])} is not a boolean",
                "write true or false, unquoted",
            )
        )
    dies = values["site_expected_dies"]
    if dies is not None and (not _is_int(dies) or dies < 1):
        errors.append(
            problem(
                INVENTORY,
                f"site_expected_dies={_show(dies)} is not a positive integer",
                f"{DIES_PER_NODE} on A3 (8 modules x 2 dies)",
            )
        )
    hdk = values["site_hdk_min"]
    if hdk is not None and not (isinstance(hdk, str) and HDK_RE.fullmatch(hdk)):
        errors.append(
            problem(
                INVENTORY,
                f"site_hdk_min={_show(hdk)} is not an HDK version like 26.0.RC1",
                "host.hdk_min of docker/versions.yaml, as inventory/sample reads it",
            )
        )
    root = values["site_shared_root"]
    for key in ("site_shared_root", "site_model_path", "site_data_path", "site_ckpt_root", "site_install_dir"):
        path = values[key]
        if path is None:
            continue
        if not isinstance(path, str) or not os.path.isabs(path):
            errors.append(problem(INVENTORY, f"{key}={_show(path)} is not an absolute path", "start it with /"))
            if key == "site_shared_root":
                root = None  # the paths under it cannot be compared with a relative root
            continue
        norm = os.path.normpath(path)
        system = _system_dir(key, norm)
        if system:
            errors.append(problem(INVENTORY, f"{key}={_text(path)} is {system}", _dir_fix(key)))
        elif (
            key in ("site_model_path", "site_data_path", "site_ckpt_root")
            and isinstance(root, str)
            and os.path.commonpath([norm, os.path.normpath(root)]) != os.path.normpath(root)
        ):
            errors.append(
                problem(
                    INVENTORY,
                    f"{key}={_text(path)} is not under site_shared_root={_text(root)}",
                    f"keep it on shared storage: a path under {_text(root)}",
                )
            )
    ref = values["site_image_ref"]
    if ref is not None and not (isinstance(ref, str) and IMAGE_RE.fullmatch(ref)):
        errors.append(
            problem(INVENTORY, f"site_image_ref={_show(ref)} is not an image reference", "name:tag or name@sha256:...")
        )
    source = values["site_image_source"]
    if source is not None and source not in ("registry", "tarball"):
        errors.append(
            problem(
                INVENTORY,
                f"site_image_source={_show(source)} must be registry or tarball",
                "registry (every host pulls site_image_ref) or tarball (site_image_tarball, a `docker save` file "
                "on the control node)",
            )
        )
    tarball = values["site_image_tarball"]
    # Only where this run distributes the image: `--tags preflight` checks the hosts before the image exists.
    if (
        source == "tarball"
        and tarball is not None
        and control.get("image_stage", True)
        and not (isinstance(tarball, str) and os.path.isfile(tarball))
    ):
        errors.append(
            problem(
                CONTROL,
                f"site_image_tarball={_text(tarball)} does not exist",
                f"`docker save {ref if isinstance(ref, str) else 'IMAGE'} -o {_text(tarball)}` (a check that "
                "contacts no host: deploy.yml --tags preflight)",
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
                    f"{key}={_show(port)} is not a TCP port number",
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
    if not (isinstance(link, str) and link in LINK_MODES):
        errors.append(
            problem(
                INVENTORY,
                f"site_inter_server_link={_show(link)} must be roce or hccs",
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
            errors.append(problem(CONTROL, f"{_text(path)} is missing", "check out the whole repository"))
    errors += check_names(site)
    errors += check_secret_files(site.get("site_secret_files"))
    return errors


def check_secret_files(files: Any) -> list[str]:
    """site_secret_files: a map of variable names to absolute paths of files on the control node (root-only)."""
    if files is None or files == {}:
        return []
    fix = "write site_secret_files: {WANDB_API_KEY: /path/on/the/control/node} (docs/cluster.md, secrets)"
    if not isinstance(files, dict):
        return [problem(INVENTORY, f"site_secret_files={_show(files)} is not a map of NAME: file", fix)]
    errors = []
    for name, path in files.items():
        if not (isinstance(name, str) and SECRET_NAME_RE.fullmatch(name)):
            errors.append(
                problem(INVENTORY, f"site_secret_files: {_show(name)} is not a variable name", "use A-Z, 0-9 and _")
            )
        elif not (isinstance(path, str) and path.isprintable() and os.path.isabs(path)):
            errors.append(problem(INVENTORY, f"site_secret_files.{name}={_show(path)} is not an absolute path", fix))
        elif not os.path.isfile(path):
            errors.append(
                problem(
                    INVENTORY,
                    f"site_secret_files.{name}={_text(path)} does not exist on the control node",
                    "put the secret there (one line, chmod 600) or drop the entry",
                )
            )
        elif os.stat(path).st_mode & 0o077:
            errors.append(
                problem(
                    INVENTORY,
                    f"site_secret_files.{name}={_text(path)} is readable by group or others",
                    f"chmod 600 {_text(path)}",
                )
            )
    return errors


def _system_dir(key: str, norm: str) -> str:
    """Why `norm` cannot be this setting's folder ("" when it can)."""
    if key not in ("site_install_dir", "site_shared_root"):
        return ""
    if norm in OS_DIRS or (key == "site_install_dir" and norm in PARENT_DIRS):
        return "a system folder"
    for tree in VOLATILE_TREES:
        if norm.startswith(tree + "/"):
            return f"under {tree}"
    return ""


def _dir_fix(key: str) -> str:
    if key == "site_install_dir":
        return "a folder of its own that deploy.yml may own, e.g. /opt/verl-recipe"
    return "the mount point of the shared file system, e.g. /mnt/shared"


def check_names(site: dict[str, Any]) -> list[str]:
    """site_* names nothing reads (a misspelling leaves the default in use), and other settings' values that
    reach a root shell."""
    errors: list[str] = []
    for key in sorted(k for k in site if isinstance(k, str) and k.startswith("site_") and k not in KNOWN_SITE_KEYS):
        # compared without the common `site_` prefix, which would make every name look close
        tails = difflib.get_close_matches(key[5:], sorted(k[5:] for k in KNOWN_SITE_KEYS), n=1, cutoff=0.6)
        hint = ["site_" + t for t in tails]
        errors.append(
            problem(
                INVENTORY,
                f"{_text(key)} is not a site setting" + (f" (did you mean {hint[0]}?)" if hint else ""),
                f"rename it to {hint[0]}" if hint else "remove it; the site settings are listed in docs/contracts.md",
            )
        )
    governor = site.get("os_tuning_cpu_governor", MISSING)
    if governor is not MISSING and not (isinstance(governor, str) and GOVERNOR_RE.fullmatch(governor)):
        errors.append(
            problem(
                INVENTORY,
                f"os_tuning_cpu_governor={_show(governor)} is not a CPU frequency governor name",
                "one of the names in /sys/devices/system/cpu/cpu0/cpufreq/scaling_available_governors, e.g. "
                "performance",
            )
        )
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
                    f"a3_vnic_ips={_show(ips)} must list {_per_die(dies, 'vNIC addresses')} "
                    "when site_inter_server_link is hccs",
                    "`hccn_tool -i <die> -vnic -g` on that host",
                )
            )
            continue
        for die, raw in enumerate(ips):
            ip = _ipv4(raw)
            if ip is None or _unusable(ip):
                errors.append(
                    problem(
                        _host(name),
                        f"a3_vnic_ips[{die}]={_show(raw)} is " + (_unusable(ip) if ip else "not an IPv4 address"),
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
    npu_owner: dict[str, tuple[str, int]] = {}
    ranks: dict[int, str] = {}
    for name in nodes:
        hv = hosts[name]
        if not _plain_host_name(name):
            errors.append(
                problem(
                    INVENTORY,
                    f"host name {_show(name)} is not a plain host name",
                    "name it with letters, digits, '.', '_' or '-' only, starting with a letter or digit, at most 63 "
                    "characters (it becomes NODE_NAME, Ray's node name and a log file name), e.g. a3-01",
                )
            )
        ssh = hv.get("ansible_host", MISSING)
        if ssh is MISSING or not ssh:
            ssh = name
        elif not (isinstance(ssh, str) and SSH_HOST_RE.fullmatch(ssh)):
            errors.append(
                problem(
                    _host(name),
                    f"ansible_host={_show(ssh)} is not a host name or IP address",
                    "the address SSH reaches that host at: a DNS name or an IP address, nothing else (no spaces, "
                    "no shell characters, not starting with -)",
                )
            )
        port = hv.get("ansible_port", MISSING)
        if port is not MISSING and port is not None and _port(port) is None:
            errors.append(
                problem(
                    _host(name),
                    f"ansible_port={_show(port)} is not a TCP port number",
                    "the port that host's sshd listens on, 1-65535 (22 unless the site changed it)",
                )
            )
        target = f"{_text(ssh)}:{_port(port) or 22}"
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
        if cip is None or _unusable(cip):
            errors.append(
                problem(
                    _host(name),
                    f"a3_cluster_ip={_show(hv.get('a3_cluster_ip', MISSING))} is "
                    + (_unusable(cip) if cip else "not an IPv4 address"),
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
        if not (isinstance(nic, str) and NIC_RE.fullmatch(nic)):
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
                problem(
                    _host(name),
                    f"a3_npu_ips={_show(ips)} is not a list of {_per_die(dies, 'NPU addresses')}",
                    _hccn_fix(dies),
                )
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
            if ip is None or _unusable(ip):
                errors.append(
                    problem(
                        _host(name),
                        f"a3_npu_ips[{die}]={_show(raw)} is " + (_unusable(ip) if ip else "not an IPv4 address"),
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
                npu_owner[ip] = (name, die)
    # The NPU network is not the cluster network: a die at a host's cluster address would take that host's traffic
    # (or HCCL's would go to the host).
    for ip, (owner, index) in npu_owner.items():
        if ip in seen_cluster:
            errors.append(
                problem(
                    _host(owner),
                    f"a3_npu_ips[{index}]={ip} is the a3_cluster_ip of {_text(seen_cluster[ip])}",
                    f"address_{index} of that host's /etc/hccn.conf: an NPU-network address, never a cluster "
                    "network one",
                )
            )
    return errors


def image_stage(run_tags: list[str], skip_tags: list[str]) -> bool:
    """Whether this run reaches the image play (tag `image`), which reads site_image_tarball: `--tags preflight`
    (the read-only check) does not, and must work before the image is built."""
    runs = "all" in run_tags or "image" in run_tags or "tagged" in run_tags
    return runs and "image" not in skip_tags and "tagged" not in skip_tags


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
        if "os_tuning_cpu_governor" in source:
            site["os_tuning_cpu_governor"] = source["os_tuning_cpu_governor"]
        # Every site_* name any host sees (group_vars, host_vars, extra vars), to refuse the unknown ones. Only the
        # names are read: the values of unknown keys are never templated.
        for vars_of in [hostvars[n] for n in nodes] or [task_vars]:
            for key in list(vars_of.keys()):
                if isinstance(key, str) and key.startswith("site_") and key not in KNOWN_SITE_KEYS:
                    site.setdefault(key, None)
        control = {
            "ansible_version": ANSIBLE_CORE_VERSION,
            "ansible_min": str(args.get("ansible_min", "2.19")),
            "ansible_max": str(args.get("ansible_max", "2.20")),
            "required_files": list(args.get("required_files", [])),
            "image_stage": image_stage(
                task_vars.get("ansible_run_tags", ["all"]), task_vars.get("ansible_skip_tags", [])
            ),
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
