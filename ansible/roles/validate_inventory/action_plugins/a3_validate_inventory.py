"""Check the inventory and the control node before any host is contacted.

Runs on the controller only. Every problem becomes one line in the launch validator's shape
(verl_recipe.checks.problem.Problem.message), `SUBJECT: WHAT; fix: FIX`, where SUBJECT is `inventory`,
`inventory: HOST` or `control node`; all of them are returned together so a site fixes its inventory in one pass.

The checks are the package's (verl_recipe.inventory); this plugin reads the inventory as the hosts see it and the
control node's facts, and reports.
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase
from ansible.release import __version__ as ANSIBLE_CORE_VERSION

# The control node runs Ansible from the project's virtual environment, where the package is installed; the role's
# first task refuses, in one line, a Python without it before this plugin is loaded.
from verl_recipe.contracts.inventory import HOST, PREFIXES, SITE
from verl_recipe.inventory import (
    HOST_KEYS,
    SITE_KEYS,
    check_hosts,
    check_site,
    check_vnic,
    image_stage,
)


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
            # Only the names of unknown a3_* variables are read (their values are never templated).
            for key in list(hv.keys()):
                if isinstance(key, str) and key.startswith(PREFIXES[HOST]) and key not in HOST_KEYS:
                    hosts[name][key] = None
        # Site variables live in group `all`; read them as the hosts see them (first node, else this play).
        source = hostvars[nodes[0]] if nodes else task_vars
        site = {k: source[k] for k in SITE_KEYS if k in source}
        # Every site_* name any host sees (group_vars, host_vars, extra vars), to refuse the unknown ones. Only the
        # names are read: the values of unknown keys are never templated.
        for vars_of in [hostvars[n] for n in nodes] or [task_vars]:
            for key in list(vars_of.keys()):
                if isinstance(key, str) and key.startswith(PREFIXES[SITE]) and key not in SITE_KEYS:
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
