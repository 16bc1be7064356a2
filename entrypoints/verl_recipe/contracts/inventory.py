"""The inventory's fields, as data: each variable deploy.yml reads from a site's inventory, where it lives (a host or
the site, group `all`), the kind of value it takes, when it is required, its default and what it means.
verl_recipe.inventory checks every field by its kind (one line per problem, with the fix); the validate_inventory
plugin reads exactly these names and refuses unknown `site_*` and `a3_*` names with "did you mean";
docs/contracts.md's tables are generated from this one (scripts/gen_docs.py). A new inventory variable is added
here, with its use in the role that reads it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..a3facts import DIES_PER_NODE, RAY_DASHBOARD_PORT, RAY_GCS_PORT

HOST = "host"
SITE = "site"
# The prefixes of the project's own variables: a name with one of them that is not a field is a typo whose default
# (or absence) would be used silently, so it is refused.
PREFIXES = {HOST: "a3_", SITE: "site_"}

# When a field is required, in the words the docs show; the checks read these exact values.
ALWAYS = "always"
OPTIONAL = "optional"
WHEN_TARBALL = "when site_image_source is tarball"
WHEN_HCCS = "when site_inter_server_link is hccs"
# A secret's name (site_secret_files, and site.yaml's secret_files that deploy.yml writes from it): the variable
# every Ray worker gets it as.
SECRET_NAME_RE = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")


@dataclass(frozen=True)
class InventoryField:
    name: str
    scope: str  # HOST (host_vars or the host's entry) or SITE (group_vars/all)
    kind: str  # the check the value gets (verl_recipe.inventory.fields.KINDS)
    when: str  # ALWAYS, OPTIONAL or a condition (WHEN_*)
    meaning: str  # Markdown, as docs/contracts.md shows it
    fix: str = ""  # what to write when the value is wrong, where the kind's own fix does not say it
    default: object = None  # the value used when an OPTIONAL field is absent (for a port: the one the fix names)


FIELDS: tuple[InventoryField, ...] = (
    InventoryField(
        "ansible_host",
        HOST,
        "ssh_host",
        OPTIONAL,
        "SSH address (key login; the host key must already be in `known_hosts`); default: the inventory name",
    ),
    InventoryField("ansible_port", HOST, "port", OPTIONAL, "the port that host's sshd listens on", default=22),
    InventoryField("a3_node_rank", HOST, "rank", ALWAYS, "0..N-1, 0 on the head"),
    InventoryField(
        "a3_cluster_ip",
        HOST,
        "ipv4",
        ALWAYS,
        "the host address Ray, Gloo and the HCCL host sockets use (the cluster interface)",
    ),
    InventoryField(
        "a3_cluster_nic",
        HOST,
        "nic",
        ALWAYS,
        "that interface's name (`HCCL_SOCKET_IFNAME`, `GLOO_SOCKET_IFNAME`, `TP_SOCKET_IFNAME`)",
    ),
    InventoryField(
        "a3_npu_ips",
        HOST,
        "die_addresses",
        ALWAYS,
        "list of the NPU-network (RoCE) addresses, one per die, index = die id (`/etc/hccn.conf` `address_<i>`)",
    ),
    InventoryField(
        "a3_vnic_ips",
        HOST,
        "die_addresses",
        WHEN_HCCS,
        "the vNIC (HCCS) addresses, one per die, index = die id (`hccn_tool -i <i> -vnic -g`)",
    ),
    InventoryField(
        "site_simulated",
        SITE,
        "boolean",
        ALWAYS,
        "`true` only on the simulated cluster: no device nodes are handed to containers",
    ),
    InventoryField("site_expected_dies", SITE, "die_count", ALWAYS, f"dies per host ({DIES_PER_NODE} on A3)"),
    InventoryField(
        "site_hdk_min",
        SITE,
        "hdk_version",
        ALWAYS,
        "minimum driver+firmware version (from docker/versions.yaml `host.hdk_min`)",
        fix="host.hdk_min of docker/versions.yaml, as inventory/sample reads it",
    ),
    InventoryField(
        "site_shared_root",
        SITE,
        "mount_folder",
        ALWAYS,
        "shared storage mount point, the same on every host (e.g. `/mnt/shared`)",
        fix="the mount point of the shared file system, e.g. /mnt/shared",
    ),
    InventoryField(
        "site_models",
        SITE,
        "model_map",
        ALWAYS,
        "recipe name -> the folder of its checkpoint (Hugging Face layout, `config.json` in it), under "
        "`site_shared_root`: that recipe's `MODEL_PATH` in `site.yaml`, checked on every host by the preflight",
    ),
    InventoryField("site_data_path", SITE, "shared_path", ALWAYS, "the training data, under `site_shared_root`"),
    InventoryField(
        "site_ckpt_root", SITE, "shared_path", ALWAYS, "where runs save checkpoints, under `site_shared_root`"
    ),
    InventoryField(
        "site_install_dir",
        SITE,
        "own_folder",
        ALWAYS,
        "where compose.yaml and the node env file live on each host (`/opt/verl-recipe`)",
        fix="a folder of its own that deploy.yml may own, e.g. /opt/verl-recipe",
    ),
    InventoryField(
        "site_image_ref",
        SITE,
        "image_ref",
        ALWAYS,
        "the training image (`verl-recipe:npu-<version>` or `verl-recipe:sim`)",
    ),
    InventoryField(
        "site_image_source",
        SITE,
        "choice:registry,tarball",
        ALWAYS,
        "`registry` or `tarball`",
        fix="registry (every host pulls site_image_ref) or tarball (site_image_tarball, a `docker save` file on the "
        "control node)",
    ),
    InventoryField(
        "site_image_tarball",
        SITE,
        "control_file",
        WHEN_TARBALL,
        "control-node path of the image tarball (`docker save` output)",
    ),
    InventoryField("site_ray_port", SITE, "port", ALWAYS, "Ray GCS port on the head", default=RAY_GCS_PORT),
    InventoryField(
        "site_dashboard_port", SITE, "port", ALWAYS, "Ray dashboard port on the head", default=RAY_DASHBOARD_PORT
    ),
    InventoryField(
        "site_inter_server_link",
        SITE,
        "choice:roce,hccs",
        OPTIONAL,
        "the path HCCL takes between servers (RoCE NICs, or HCCS inside one A3 SuperPoD); node.env's "
        "`HCCL_INTER_HCCS_DISABLE` and the preflight's pings follow it",
        fix="roce unless the hosts are one A3 SuperPoD whose HCCS carries the traffic between servers",
        default="roce",
    ),
    InventoryField(
        "site_expected_arch",
        SITE,
        "text",
        OPTIONAL,
        "CPU architecture every host must report (`aarch64` on A3; the simulated cluster writes this machine's)",
        default="aarch64",
    ),
    InventoryField(
        "site_operators",
        SITE,
        "accounts",
        OPTIONAL,
        "existing accounts of the head that may start training: deploy.yml adds them to group `verl-train`, whose "
        'one root command is `/usr/local/sbin/verl-train SERVICE [ARGS...]` (docs/deploy.md, "Who starts '
        'training"); `make train` logs in as the first of them unless `OPERATOR` is given, and refuses an '
        "inventory without operators",
        default=[],
    ),
    InventoryField(
        "site_operator_keys",
        SITE,
        "operator_keys",
        OPTIONAL,
        "`account: /path/on/the/control/node/key.pub` for operators who log in with a key the head does not know "
        "yet: deploy.yml adds it to the account's `~/.ssh/authorized_keys` on the head; `make train` offers the "
        "private key beside it (the path without `.pub`) when the control node has it, else `OPERATOR_KEY` or "
        "ssh's own keys, never the deploy account's",
        default={},
    ),
    InventoryField(
        "site_secret_files",
        SITE,
        "secret_files",
        OPTIONAL,
        "`NAME: /path/on/the/control/node` (mode 0600) for each secret verl's workers need as `$NAME` (tracker "
        "keys); deploy.yml installs them root-only in `/etc/verl-recipe/secrets/` on every host and names them in "
        "`site.yaml`'s `secret_files` (docs/cluster.md, \"Secrets for verl's workers\")",
        default={},
    ),
    InventoryField(
        "site_launch",
        SITE,
        "mapping",
        OPTIONAL,
        "the site's launch settings, by the settings table's names (docs/settings.md), with a `recipes: {NAME: "
        "{...}}` map for one recipe's own; deploy.yml writes them to `<site_install_dir>/site.yaml`, which every "
        "compose service reads as its site file (`VERL_RECIPE_SITE`, mounted read-only at "
        "`/etc/verl-recipe/site.yaml`)",
        default={},
    ),
    InventoryField(
        "os_tuning_cpu_governor",
        SITE,
        "governor",
        OPTIONAL,
        "the CPU frequency governor os_tuning sets on every host (real hosts only; default in "
        "`ansible/roles/os_tuning/defaults/main.yml`)",
    ),
)

BY_NAME = {f.name: f for f in FIELDS}


def fields(scope: str) -> tuple[InventoryField, ...]:
    return tuple(f for f in FIELDS if f.scope == scope)


def names(scope: str) -> tuple[str, ...]:
    return tuple(f.name for f in FIELDS if f.scope == scope)


def markdown_table(scope: str) -> str:
    """docs/contracts.md's table of one scope's fields (scripts/gen_docs.py)."""
    rows = ["| variable | required | meaning |", "|---|---|---|"]
    for f in fields(scope):
        when = f"optional (default `{f.default!r}`)" if f.when == OPTIONAL and f.default is not None else f.when
        rows.append(f"| `{f.name}` | {when} | {f.meaning} |")
    return "\n".join(rows)
