"""Shared helpers for the role and inventory tests: import a role's plugin by path, build inventories.
Running ansible-playbook and reading its output is simkit.playbook's (shared with the bench)."""

from __future__ import annotations

import copy
import importlib
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import yaml

from simkit.paths import ANSIBLE_DIR, load_by_path

SAMPLE = ANSIBLE_DIR / "inventory" / "sample"


def load_plugin(relpath: str) -> ModuleType:
    """Import a module or action plugin file of the roles by path (they are not on sys.path), once per process under
    a name of its own (the preflight module and its action plugin share a file name)."""
    return load_by_path("verl_recipe_role_" + relpath.removesuffix(".py").replace("/", "_"), ANSIBLE_DIR / relpath)


# The preflight module's parts in ansible/module_utils, lowest first.
PREFLIGHT_PARTS = ("a3facts", "a3_parse", "a3_host", "a3_checks_node", "a3_checks_npu")


def preflight_module() -> SimpleNamespace:
    """The preflight module and its module_utils parts as one namespace (what the module's code sees), for tests
    that call its parsers and checks in process. A test that patches a name patches it in the part that uses it
    (`importlib.import_module("ansible.module_utils.a3_checks_node")`)."""
    names: dict[str, object] = {}
    for part in PREFLIGHT_PARTS:
        names.update(vars(importlib.import_module(f"ansible.module_utils.{part}")))
    names.update(vars(load_plugin("roles/preflight/library/a3_preflight.py")))
    return SimpleNamespace(**{k: v for k, v in names.items() if not k.startswith("__")})


def sample_inventory() -> tuple[dict[str, Any], dict[str, Any]]:
    hosts = yaml.safe_load((SAMPLE / "hosts.yml").read_text())
    site = yaml.safe_load((SAMPLE / "group_vars" / "all" / "site.yml").read_text())
    return hosts, site


def write_inventory(dest: Path, hosts: dict[str, Any], site: dict[str, Any]) -> Path:
    (dest / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
    (dest / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    (dest / "group_vars" / "all" / "site.yml").write_text(yaml.safe_dump(site, sort_keys=False))
    return dest


def node_hosts(inv: dict[str, Any]) -> dict[str, Any]:
    hosts: dict[str, Any] = inv["all"]["children"]["a3_nodes"]["hosts"]
    return hosts


def clone(value: Any) -> Any:
    return copy.deepcopy(value)


def valid_site(**changes: Any) -> dict[str, Any]:
    """The site_* variables of an inventory that passes the validator (a real, not simulated, site), with changes."""
    base = {
        "site_simulated": False,
        "site_expected_dies": 16,
        "site_hdk_min": "26.0.RC1",
        "site_shared_root": "/mnt/shared",
        "site_models": {"qwen3.5-397b": "/mnt/shared/models/m"},
        "site_data_path": "/mnt/shared/data",
        "site_ckpt_root": "/mnt/shared/ckpt",
        "site_image_ref": "verl-recipe:npu",
        "site_image_source": "registry",
        "site_image_tarball": "",
        "site_ray_port": 6379,
        "site_dashboard_port": 8265,
        "site_install_dir": "/opt/verl-recipe",
    }
    return {**base, **changes}


def valid_hosts(n: int, dies: int) -> dict[str, dict[str, Any]]:
    """n hosts h0.. that pass the validator, each with `dies` NPU addresses."""
    return {
        f"h{i}": {
            "ansible_host": f"10.0.0.{i + 1}",
            "ansible_port": 22,
            "a3_node_rank": i,
            "a3_cluster_ip": f"10.0.0.{i + 1}",
            "a3_cluster_nic": "eth0",
            "a3_npu_ips": [f"192.168.{d}.{i + 1}" for d in range(dies)],
        }
        for i in range(n)
    }
