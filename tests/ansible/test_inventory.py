"""deploy.yml against bad inventories: one clear line per problem, non-zero exit, and no host contacted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from simkit.playbook import playbook
from tests.ansible.helpers import clone, node_hosts, sample_inventory, write_inventory

PREFLIGHT_PLAY = "PLAY [Preflight every host at once"


@pytest.fixture
def site(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    hosts, site = sample_inventory()
    tarball = tmp_path / "image.tar"
    tarball.write_bytes(b"")
    compose = tmp_path / "compose.yaml"
    compose.write_text("services: {}\n")
    site["site_image_tarball"] = str(tarball)
    # the lead's compose.yaml may not exist yet in a checkout; the inventory points at a stand-in
    site["deploy_common_compose_files"] = [str(compose)]
    return hosts, site


def test_sample_inventory_passes_validation(tmp_path: Path, site: tuple[dict[str, Any], dict[str, Any]]) -> None:
    inv = write_inventory(tmp_path / "inv", *site)
    res = playbook(inv, playbook_file="playbooks/validate.yml")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "inventory OK: 16 hosts, head a3-01, 16 dies per host" in res.stdout


def _dup_address(h: dict[str, Any], s: dict[str, Any]) -> None:
    node_hosts(h)["a3-05"]["ansible_host"] = node_hosts(h)["a3-04"]["ansible_host"]


def _two_heads(h: dict[str, Any], s: dict[str, Any]) -> None:
    h["all"]["children"]["ray_head"]["hosts"]["a3-02"] = None


def _fifteen_npu_ips(h: dict[str, Any], s: dict[str, Any]) -> None:
    node_hosts(h)["a3-07"]["a3_npu_ips"].pop()


def _dup_npu_ip(h: dict[str, Any], s: dict[str, Any]) -> None:
    node_hosts(h)["a3-09"]["a3_npu_ips"][3] = node_hosts(h)["a3-08"]["a3_npu_ips"][3]


def _string_bool(h: dict[str, Any], s: dict[str, Any]) -> None:
    s["site_simulated"] = "false"


def _missing_var(h: dict[str, Any], s: dict[str, Any]) -> None:
    del s["site_shared_root"]


def _head_not_rank0(h: dict[str, Any], s: dict[str, Any]) -> None:
    node_hosts(h)["a3-01"]["a3_node_rank"], node_hosts(h)["a3-02"]["a3_node_rank"] = 1, 0


def _no_tarball(h: dict[str, Any], s: dict[str, Any]) -> None:
    s["site_image_tarball"] = "/nonexistent/verl-recipe.tar"


def _model_outside_shared(h: dict[str, Any], s: dict[str, Any]) -> None:
    s["site_models"] = {"qwen3.5-397b": "/data/models/Qwen3.5"}


CASES: list[tuple[str, Callable[[dict[str, Any], dict[str, Any]], None], str]] = [
    ("duplicate-address", _dup_address, "inventory: a3-05: duplicate address 10.10.0.14:22, already used by a3-04"),
    ("two-heads", _two_heads, "inventory: group ray_head must hold exactly one host, found 2 (a3-01, a3-02)"),
    ("15-npu-ips", _fifteen_npu_ips, "inventory: a3-07: a3_npu_ips has 15 addresses, expected 16"),
    (
        "duplicate-npu-ip",
        _dup_npu_ip,
        "inventory: a3-09: duplicate address a3_npu_ips[3]=192.168.3.18, already used by a3-08 die 3",
    ),
    ("string-bool", _string_bool, "inventory: site_simulated='false' is not a boolean"),
    ("missing-var", _missing_var, "inventory: site_shared_root is not set"),
    ("head-rank", _head_not_rank0, "inventory: a3-01: the ray_head host has a3_node_rank=1; fix: give it rank 0"),
    ("no-tarball", _no_tarball, "control node: site_image_tarball=/nonexistent/verl-recipe.tar does not exist"),
    (
        "model-outside",
        _model_outside_shared,
        "inventory: site_models.qwen3.5-397b=/data/models/Qwen3.5 is not under site_shared_root",
    ),
]


@pytest.mark.parametrize(("mutate", "line"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_inventory_one_line_and_no_host_contacted(
    tmp_path: Path,
    site: tuple[dict[str, Any], dict[str, Any]],
    mutate: Callable[[dict[str, Any], dict[str, Any]], None],
    line: str,
) -> None:
    hosts, sitevars = clone(site[0]), clone(site[1])
    mutate(hosts, sitevars)
    inv = write_inventory(tmp_path / "inv", hosts, sitevars)
    res = playbook(inv)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    matching = [x for x in out.splitlines() if x.startswith(line)]
    assert matching, f"no line starting with {line!r} in:\n{out}"
    assert "; fix: " in matching[0] and "(fix:" not in matching[0], matching[0]  # the launch validator's shape
    assert PREFLIGHT_PLAY not in out  # validation stops the run before any host is contacted


def test_unreachable_host_is_a_table_row(tmp_path: Path, site: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """One host on a loopback port where nothing listens: preflight names it and nothing else runs."""
    hosts, sitevars = clone(site[0]), clone(site[1])
    only = node_hosts(hosts)["a3-01"]
    only.update(ansible_host="127.0.0.1", ansible_port=1)
    hosts["all"]["children"]["a3_nodes"]["hosts"] = {"a3-01": only}
    known = tmp_path / "known_hosts"
    known.write_text("")
    sitevars["ansible_ssh_common_args"] = f"-o UserKnownHostsFile={known}"
    inv = write_inventory(tmp_path / "inv", hosts, sitevars)
    res = playbook(inv, "--tags", "preflight")
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "PREFLIGHT FAILED: 1 problem(s) on 1 of 1 hosts (a3-01); nothing was changed." in out
    rows = [x for x in out.splitlines() if x.startswith("a3-01") and "| ssh" in x]
    assert rows and "unreachable" in rows[0], out
    assert "PLAY [OS settings" not in out


def test_a_control_node_without_the_package_is_refused_in_one_line(
    tmp_path: Path, site: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    """The plugins import the project's package; a Python that cannot is refused by the first task, before the
    inventory is read and before any host is contacted."""
    shadow = tmp_path / "shadow" / "verl_recipe"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("verl_recipe is not installed in this Python")\n')
    inv = write_inventory(tmp_path / "inv", *site)
    res = playbook(inv, playbook_file="playbooks/validate.yml", extra_env={"PYTHONPATH": str(shadow.parent)})
    assert res.returncode != 0
    lines = [line for line in res.stdout.splitlines() if "cannot import the verl_recipe package" in line]
    assert lines and "fix: run ansible-playbook from the project's virtual environment" in lines[0], res.stdout
    assert "inventory OK" not in res.stdout and "inventory check failed" not in res.stdout
