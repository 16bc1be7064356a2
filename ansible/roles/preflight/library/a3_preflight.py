#!/usr/bin/python
"""Read-only health check of one A3 host; returns every check, passed or failed, in one result."""

# ruff: noqa: E402  # Ansible modules put DOCUMENTATION before the imports
from __future__ import annotations

DOCUMENTATION = r"""
module: a3_preflight
short_description: Read-only preflight checks of an Ascend A3 training host
description:
  - Runs every check (OS, memory, cluster NIC, firewall, driver and firmware versions installed and running, device
    nodes, die map, die health and occupancy, NPU network and hccn.conf, container runtime, shared storage, free
    disk, time sync) and returns them all; it never changes the host.
  - npu-smi and hccn_tool run one call at a time (Huawei documents npu-smi as not supporting concurrent use).
  - The module itself does not fail on a failed check; the caller collects the results of all hosts.
options:
  expected_dies: {type: int, required: true, description: NPU dies on the host.}
  hdk_min: {type: str, required: true, description: Minimum driver and firmware version.}
  npu_ips: {type: list, elements: str, required: true, description: Expected NPU address per die.}
  ping_plan:
    type: list
    elements: dict
    default: []
    description: Pings to send, each {die, address, peer, peer_die} (the action plugin plans them).
  inter_server_link:
    type: str
    default: roce
    choices: [roce, hccs]
    description: Which path HCCL uses between servers (site_inter_server_link).
  vnic_ips:
    type: list
    elements: str
    default: []
    description: hccs mode, the inventory's vNIC address per die (a3_vnic_ips), compared with what -vnic -g reports.
  cluster_ip: {type: str, required: true, description: This host's cluster address (inventory a3_cluster_ip).}
  cluster_nic: {type: str, required: true, description: The NIC that must carry it (inventory a3_cluster_nic).}
  cluster_peers: {type: list, elements: str, default: [], description: Cluster addresses of the other hosts.}
  compose_project: {type: str, default: verl-recipe, description: Compose project whose containers may hold dies.}
  min_host_ram_gib: {type: float, default: 0, description: Host memory needed (MemTotal), GiB.}
  simulated: {type: bool, default: false, description: Simulated host.}
  allowed_arch: {type: list, elements: str, required: true, description: Accepted machine architectures.}
  allowed_os:
    type: list
    elements: str
    required: true
    description: Accepted releases, "ID VERSION_ID [text in VERSION]" from /etc/os-release.
  shared_root: {type: str, required: true, description: Shared storage mount point.}
  model_paths: {type: list, elements: str, required: true, description: Checkpoint folders (each holds config.json).}
  data_files: {type: list, elements: str, required: true, description: Data files that must exist.}
  ckpt_root: {type: str, required: true, description: Checkpoint folder (exists or can be created).}
  min_free_disk_gib: {type: float, required: true, description: Free space needed on the Docker data root.}
  docker_installable: {type: bool, default: false, description: Offline Docker packages are provided.}
  driver_version_file: {type: str, default: /usr/local/Ascend/driver/version.info, description: Driver version.info.}
  firmware_version_file:
    {type: str, default: /usr/local/Ascend/firmware/version.info, description: Firmware version.info.}
  hccn_conf_file: {type: str, default: /etc/hccn.conf, description: The NPU network configuration file.}
  meminfo_file: {type: str, default: /proc/meminfo, description: Where MemTotal is read.}
  os_release_file: {type: str, default: /etc/os-release, description: The OS release file.}
  tool_dirs: {type: list, elements: str, default: [], description: Extra folders searched for npu-smi and hccn_tool.}
  command_timeout: {type: int, default: 60, description: Seconds one device query may take.}
author: verl-recipe
"""

EXAMPLES = r"""
# The preflight role calls it through its action plugin, which adds ping_plan and cluster_peers.
- name: Check one A3 host (read-only)
  a3_preflight:
    expected_dies: 16
    hdk_min: 25.5.0
    npu_ips: "{{ a3_npu_ips }}"
    cluster_ip: 10.20.0.11
    cluster_nic: bond0
    allowed_arch: [aarch64]
    allowed_os: ["openEuler 22.03 (LTS-SP4)"]
    shared_root: /mnt/shared
    model_paths: [/mnt/shared/models/Qwen3.5-397B-A17B]
    data_files: [/mnt/shared/data/gsm8k/train.parquet]
    ckpt_root: /mnt/shared/ckpt
    min_free_disk_gib: 200
  register: preflight_result
"""

RETURN = r"""
checks:
  description: One row per check, passed or failed.
  returned: always
  type: list
  elements: dict
  contains:
    check: {description: Row name (docs/deploy.md lists them)., type: str}
    ok: {description: Whether the check passed., type: bool}
    status: {description: ok or failed., type: str}
    dies: {description: The die indices the row is about., type: list}
    peers: {description: The other hosts the row is about., type: list}
    entries:
      description: >-
        What was found on each die the row names, as {die, text} (and the address a ping row's die pinged);
        the report's contract, entrypoints/verl_recipe/contracts/preflight.py.
      type: list
    found: {description: What the host shows., type: str}
    expected: {description: What the check wants., type: str}
    fix: {description: What to do; empty on passed rows., type: str}
net:
  description: Per die, the NPU network as hccn_tool reports it.
  returned: always
  type: dict
device_queries:
  description: How many npu-smi/hccn_tool calls ran, one at a time, and their seconds in all.
  returned: always
  type: dict
clock:
  description: The host clock when it was read (epoch seconds).
  returned: always
  type: float
clock_source:
  description: ntp when a time-sync check ran, else none.
  returned: always
  type: str
docker_present: {description: A Docker engine is installed., returned: always, type: bool}
compose_present: {description: docker compose v2 is installed., returned: always, type: bool}
service_mgr: {description: systemd or service., returned: always, type: str}
engine_limits: {description: Hard limits of the running dockerd (nofile, memlock)., returned: always, type: dict}
mem_gib: {description: MemTotal in GiB (null when unreadable)., returned: always, type: float}
"""


import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible.module_utils.a3_checks_node import (
    device_node_checks,
    engine_limits,
    firewall_check,
    host_mem_gib,
    memory_check,
    nic_check,
    platform_checks,
    runtime_checks,
    storage_checks,
    time_check,
    tool_output_check,
    version_checks,
)
from ansible.module_utils.a3_checks_npu import npu_checks
from ansible.module_utils.a3_host import Host, guarded

# The checks live in ansible/module_utils (ansible.cfg `module_utils`), which Ansible ships to the host with this
# module: a3_parse (the tools' output), a3_host (the row, the host), a3_checks_node and a3_checks_npu. The tests
# put the same folder on ansible.module_utils' path (tests/conftest.py).


def run_all(p: dict[str, Any]) -> dict[str, Any]:
    host = Host(p)
    tcheck, stamp = time_check(host)
    checks = platform_checks(p) + [
        memory_check(p),
        guarded("cluster_nic", nic_check, p, host),
        guarded("host_firewall", firewall_check, p, host),
    ]
    versions, installed = version_checks(p)
    checks += versions + device_node_checks(p)
    npu = guarded("npu_checks", npu_checks, p, host, installed)
    net: dict[str, Any] = {}
    if isinstance(npu, tuple):
        npu, net = npu
    else:
        npu = [npu]
    checks += npu
    rt, info = runtime_checks(p, host)
    checks += rt + storage_checks(p, info["docker_root"])
    limits, limits_row = engine_limits()
    checks.append(limits_row)
    if tcheck:
        checks.append(tcheck)
    checks.append(tool_output_check(host))
    return {
        "checks": checks,
        "net": net,
        "device_queries": {"count": host.queries, "seconds": round(host.query_s, 2)},
        "clock": stamp,
        "clock_source": "ntp" if tcheck else "none",
        "docker_present": info["docker"],
        "compose_present": info["compose"],
        "service_mgr": "systemd" if os.path.isdir("/run/systemd/system") else "service",
        "engine_limits": limits,
        "mem_gib": host_mem_gib(p),
    }


# Must agree with DOCUMENTATION (tests/ansible/test_module_docs.py).
ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "expected_dies": {"type": "int", "required": True},
    "hdk_min": {"type": "str", "required": True},
    "npu_ips": {"type": "list", "elements": "str", "required": True},
    "ping_plan": {"type": "list", "elements": "dict", "default": []},
    "inter_server_link": {"type": "str", "default": "roce", "choices": ["roce", "hccs"]},
    "vnic_ips": {"type": "list", "elements": "str", "default": []},
    "cluster_ip": {"type": "str", "required": True},
    "cluster_nic": {"type": "str", "required": True},
    "cluster_peers": {"type": "list", "elements": "str", "default": []},
    "compose_project": {"type": "str", "default": "verl-recipe"},
    "min_host_ram_gib": {"type": "float", "default": 0},
    "simulated": {"type": "bool", "default": False},
    "allowed_arch": {"type": "list", "elements": "str", "required": True},
    "allowed_os": {"type": "list", "elements": "str", "required": True},
    "shared_root": {"type": "str", "required": True},
    "model_paths": {"type": "list", "elements": "str", "required": True},
    "data_files": {"type": "list", "elements": "str", "required": True},
    "ckpt_root": {"type": "str", "required": True},
    "min_free_disk_gib": {"type": "float", "required": True},
    "docker_installable": {"type": "bool", "default": False},
    "driver_version_file": {"type": "str", "default": "/usr/local/Ascend/driver/version.info"},
    "firmware_version_file": {"type": "str", "default": "/usr/local/Ascend/firmware/version.info"},
    "hccn_conf_file": {"type": "str", "default": "/etc/hccn.conf"},
    "meminfo_file": {"type": "str", "default": "/proc/meminfo"},
    "os_release_file": {"type": "str", "default": "/etc/os-release"},
    "tool_dirs": {"type": "list", "elements": "str", "default": []},
    "command_timeout": {"type": "int", "default": 60},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result = run_all(module.params)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
