"""The simulated site's inventory (hosts.yml, group_vars, SSH key and known_hosts), the vNIC addresses the hosts
report, the simulated training layout and the planted secret the leak search looks for, and SSH to a host."""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Any

from a3facts import DIES_PER_NODE as DIES  # noqa: E402 - the A3 facts' one home (a copy of verl_recipe/a3facts.py)
from a3facts import RAY_DASHBOARD_PORT, RAY_GCS_PORT  # noqa: E402

from .common import (
    LINK_MODES,
    MARKER,
    OPERATOR_KEY,
    OPERATOR_USER,
    REPO,
    SHARED_ROOT,
    SSH_USER,
    SimError,
    container,
    docker,
)

# --------------------------------------------------------------------------------------------------------------
# inventory


def yaml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid double-quoted YAML scalar


def vnic_query(dies: int = DIES) -> str:
    """The shell loop an operator runs on a host to fill in a3_vnic_ips: `hccn_tool -i <die> -vnic -g` per die."""
    return f'for d in $(seq 0 {dies - 1}); do echo "== die $d"; hccn_tool -i "$d" -vnic -g || echo "exit $?"; done'


def parse_vnic(host: str, text: str, dies: int = DIES) -> list[str]:
    """The vNIC addresses in the output of vnic_query(), die by die; a die whose vNIC is not UP, has no address
    or did not answer is an error: the inventory lists only what the host really reports."""
    found: dict[int, dict[str, str]] = {}
    die = -1
    for line in text.splitlines():
        m = re.fullmatch(r"== die (\d+)", line.strip())
        if m:
            die = int(m.group(1))
            found[die] = {}
        elif die >= 0 and ":" in line:
            k, _, v = line.partition(":")
            found[die][k.strip()] = v.strip()
        elif die >= 0 and line.startswith("exit "):
            found[die]["exit"] = line.split()[1]
    ips, bad = [], []
    for d in range(dies):
        kv = found.get(d, {})
        if kv.get("vnic link status") != "UP" or not kv.get("vnic ipaddr") or "exit" in kv:
            bad.append(f"die {d}: {kv.get('vnic link status') or 'no answer'}")
        ips.append(kv.get("vnic ipaddr", ""))
    if bad:
        raise SimError(f"{host}: `hccn_tool -vnic -g` shows no usable vNIC ({'; '.join(bad)}): clear its faults first")
    return ips


def read_vnic_ips(name: str, cluster: dict[str, Any]) -> dict[str, list[str]]:
    """Each host's vNIC addresses, read from the host's own tool (not computed here)."""

    def one(host: str) -> list[str]:
        p = docker("exec", container(name, host), "sh", "-c", vnic_query(), check=False)
        return parse_vnic(host, p.stdout)

    hosts = [str(h["name"]) for h in cluster["hosts"]]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(hosts)) as pool:
        return dict(zip(hosts, pool.map(one, hosts), strict=True))


# The simulated site's launch layout (inventory site_launch, deploy.yml's site.yaml on every host): the FSDP
# recipe trains for real on the CPU stand-ins of verl-recipe:sim (DEVICE=cpu), with a tiny model and batch, one rank
# on each of two hosts (a gloo collective across hosts); every other recipe keeps its real layout and stops where
# the simulation ends. `make sim-seed` writes the model and data these paths name (simctl.py site-launch).
TRAIN_RECIPE = "qwen3.5-35b-fsdp"
STANDIN_MODEL = f"{SHARED_ROOT}/models/Qwen3.5-tiny-standin"
STANDIN_DATA = f"{SHARED_ROOT}/data/gsm8k-standin"
# The other recipes' checkpoints sit where no recipe default points (a real site puts them where its storage has
# room): a MODEL_PATH that does not come from the inventory's site_models names nothing on the simulated storage.
SITE_MODELS_DIR = f"{SHARED_ROOT}/site-models"


def sim_site_models() -> dict[str, str]:
    """The simulated site's site_models: recipe -> checkpoint folder."""
    from verl_recipe.recipes import load_recipe, recipe_names

    models = {}
    for name in recipe_names():
        folder = str(load_recipe(name).settings.get("MODEL_PATH", name)).rstrip("/").rsplit("/", 1)[-1]
        models[name] = STANDIN_MODEL if name == TRAIN_RECIPE else f"{SITE_MODELS_DIR}/{folder}"
    return models


def sim_site_file(nodes: int) -> dict[str, Any]:
    """site.yaml as deploy.yml writes it from the simulated inventory (for make sim-seed, before any deploy): the
    launch settings, with each recipe's MODEL_PATH from site_models."""
    site = sim_site_launch(nodes)
    recipes = site.setdefault("recipes", {})
    for name, path in sim_site_models().items():
        recipes.setdefault(name, {}).setdefault("MODEL_PATH", path)
    return site


# The simulated site's one secret file (site_secret_files): random per cluster, root-only beside the inventory as the
# Ray token is. Every run on the simulated cluster carries it to verl's workers (the stand-in rollout names it), and
# tests/e2e/test_train_fsdp.py greps the run's records, logs and containers for its content.
PLANTED_SECRET = "VERL_RECIPE_SIM_PLANTED_KEY"


def planted_secret_file(inv: Path) -> Path:
    path = inv / ".secrets" / "sim_planted_key"
    if not path.is_file():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(f"sim-planted-{secrets.token_hex(20)}\n")
    return path


def yaml_block(key: str, value: Any, indent: int = 0) -> list[str]:
    """A mapping as block YAML, one key a line (yamllint's line length); leaves as JSON, which YAML reads."""
    pad = " " * indent
    if not isinstance(value, dict) or not value:
        return [f"{pad}{key}: {json.dumps(value)}"]
    return [f"{pad}{key}:", *(line for k in sorted(value) for line in yaml_block(k, value[k], indent + 2))]


def sim_site_launch(nodes: int) -> dict[str, Any]:
    tiny = {
        "DEVICE": "cpu",
        "NNODES": min(2, nodes),
        "NDEVICES_PER_NODE": 1,
        "TRAIN_FILES": [f"{STANDIN_DATA}/train.parquet"],
        "VAL_FILES": [f"{STANDIN_DATA}/test.parquet"],
        "GEN_TP": 1,
        "FSDP_SIZE": -1,
        "TRAIN_BATCH_SIZE": 2,
        "PPO_MINI_BATCH_SIZE": 2,
        "PPO_MICRO_BATCH_SIZE_PER_GPU": 2,
        "LOG_PROB_MICRO_BATCH_SIZE_PER_GPU": 2,
        "ROLLOUT_N": 2,
        "MAX_PROMPT_LENGTH": 32,
        "MAX_RESPONSE_LENGTH": 16,
        "LR": "1e-3",
        "TOTAL_EPOCHS": 1,
        "TOTAL_TRAINING_STEPS": 3,
        "SAVE_FREQ": 1,
        "VAL_BEFORE_TRAIN": False,
        "LOGGER": ["console", "file"],
    }
    return {"recipes": {TRAIN_RECIPE: tiny}}


# hosts.yml from the cluster description (write), or not at all (none): `make inventory` then reads the hosts
# themselves into the same folder (cluster.json's inventory_hosts_file says which; docs/simulated-cluster.md).
HOSTS_FILE_MODES = ("write", "none")


def write_inventory(
    inv: Path, cluster: dict[str, Any], arch: str, link: str = "roce", vnic_ips: dict[str, list[str]] | None = None
) -> None:
    """hosts.yml (unless the cluster's inventory_hosts_file is none), group_vars/all/sim.yml, ssh_config and
    cluster.json; link hccs needs every host's vnic_ips."""
    if link not in LINK_MODES:
        raise SimError(f"SIM_LINK '{link}' is not valid: use roce (default) or hccs")
    if link == "hccs" and any(not (vnic_ips or {}).get(h["name"]) for h in cluster["hosts"]):
        raise SimError("SIM_LINK=hccs needs the vNIC addresses of every host")
    key, kh = inv / "id_ed25519", inv / "known_hosts"
    lines = [
        "---",
        f"# Generated by `make sim-up` for the simulated cluster '{cluster['name']}' (docker/sim-host/simctl.py);",
        "# rewritten by every sim-up. Same groups and variables as ../sample (docs/contracts.md section 1).",
        "all:",
        "  children:",
        "    a3_nodes:",
        "      vars:",
        f"        ansible_user: {SSH_USER}",
        "        ansible_port: 22",
        f"        ansible_ssh_private_key_file: {yaml_str(str(key))}",
        f"        ansible_ssh_common_args: {yaml_str('-o UserKnownHostsFile=' + str(kh))}",
        "      hosts:",
    ]
    for h in cluster["hosts"]:
        lines += [
            f"        {h['name']}:",
            f"          ansible_host: {h['cluster_ip']}",
            f"          a3_node_rank: {h['rank']}",
            f"          a3_cluster_ip: {h['cluster_ip']}",
            f"          a3_cluster_nic: {h['cluster_nic']}",
            "          a3_npu_ips:",
        ]
        lines += [f"            - {ip}" for ip in h["npu_ips"]]
        if link == "hccs" and vnic_ips:
            lines.append("          a3_vnic_ips:")
            lines += [f"            - {ip}" for ip in vnic_ips[h["name"]]]
    lines += ["    ray_head:", "      hosts:", f"        {cluster['hosts'][0]['name']}:"]
    if cluster.get("inventory_hosts_file", "write") == "write":
        (inv / "hosts.yml").write_text("\n".join(lines) + "\n")

    gv = inv / "group_vars" / "all"
    gv.mkdir(parents=True, exist_ok=True)
    site = [
        "---",
        "# Generated by `make sim-up` (docker/sim-host/simctl.py): site settings of the simulated cluster",
        f"# '{cluster['name']}' (docs/contracts.md section 1; docs/simulated-cluster.md).",
        "site_simulated: true",
        f"site_expected_dies: {DIES}",
        "# The simulated hosts report this machine's architecture; real A3 hosts are aarch64.",
        f"site_expected_arch: {arch}",
        "# docker/versions.yaml host.hdk_min when the cluster was brought up",
        f"site_hdk_min: {yaml_str(cluster['hdk_min'])}",
        "# How HCCL crosses servers (SIM_LINK): roce, or hccs with each host's a3_vnic_ips from its hccn_tool -vnic -g",
        f"site_inter_server_link: {link}",
        f"site_shared_root: {SHARED_ROOT}",
        "# Each recipe's checkpoint (MODEL_PATH), away from the recipes' defaults (simctl_parts/inventory.py)",
        *yaml_block("site_models", sim_site_models()),
        f"site_data_path: {SHARED_ROOT}/data/geo3k",
        f"site_ckpt_root: {SHARED_ROOT}/checkpoints",
        "site_image_ref: verl-recipe:sim",
        "site_image_source: tarball",
        f"site_image_tarball: {yaml_str(str(REPO / 'build' / 'images' / 'verl-recipe-sim.tar'))}",
        f"site_ray_port: {RAY_GCS_PORT}",
        f"site_dashboard_port: {RAY_DASHBOARD_PORT}",
        "site_install_dir: /opt/verl-recipe",
        "# The head account that starts training through verl-train (ansible/roles/operator), not the deploy account",
        f"site_operators: [{OPERATOR_USER}]",
        "# The operator's own public key on this control node; deploy.yml authorizes it on the head",
        f"site_operator_keys: {{{OPERATOR_USER}: {yaml_str(str(inv / (OPERATOR_KEY + '.pub')))}}}",
        "# A planted secret file (simctl.py PLANTED_SECRET): it reaches verl's workers, and no record holds it",
        f"site_secret_files: {{{PLANTED_SECRET}: {yaml_str(str(planted_secret_file(inv)))}}}",
        "# Launch settings for the simulated cluster (simctl.py sim_site_launch)",
        *yaml_block("site_launch", sim_site_launch(len(cluster["hosts"]))),
    ]
    (gv / "sim.yml").write_text("\n".join(site) + "\n")

    cfg = []
    for h in cluster["hosts"]:
        cfg += [
            f"Host {h['name']}",
            f"  HostName {h['cluster_ip']}",
            f"  User {SSH_USER}",
            f"  IdentityFile {key}",
            "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {kh}",
            "  StrictHostKeyChecking yes",
            "  BatchMode yes",
            "",
        ]
    (inv / "ssh_config").write_text("\n".join(cfg))
    (inv / "cluster.json").write_text(json.dumps(cluster, indent=1) + "\n")


def prepare_inventory_dir(inv: Path) -> None:
    if inv.exists() and any(inv.iterdir()) and not (inv / MARKER).exists():
        raise SimError(f"{inv} exists and was not written by simctl.py: move it away or set SIM_INVENTORY")
    if inv.exists():
        shutil.rmtree(inv)
    inv.mkdir(parents=True)
    (inv / MARKER).write_text("written by docker/sim-host/simctl.py; removed by `make sim-down`\n")
    # Keys and generated files never reach git, whatever the repository's .gitignore says.
    (inv / ".gitignore").write_text("*\n")


def ssh_cmd(inv: Path, ip: str, known_hosts: Path | None = None) -> list[str]:
    return [
        "ssh",
        "-i",
        str(inv / "id_ed25519"),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        f"UserKnownHostsFile={known_hosts or inv / 'known_hosts'}",
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=10",
        f"{SSH_USER}@{ip}",
    ]
