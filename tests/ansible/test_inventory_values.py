"""Inventory values the validator used to crash on or accept (issue 27): each refused with one line naming the
value and its fix, in the launch validator's shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from verl_recipe import inventory as val
from verl_recipe.inventory import fields

from simkit.playbook import playbook
from tests.ansible.helpers import node_hosts, sample_inventory, valid_hosts, valid_site, write_inventory

CONTROL = {"ansible_version": "2.19.0", "ansible_min": "2.19", "ansible_max": "2.20", "required_files": []}


def site(**changes: Any) -> dict[str, Any]:
    return valid_site(**changes)


def hosts(n: int = 3) -> dict[str, dict[str, Any]]:
    return valid_hosts(n, dies=2)


SITE_CASES = [
    (
        {"site_shared_root": "mnt/shared"},
        ["inventory: site_shared_root='mnt/shared' is not an absolute path; fix: start it with /"],
    ),
    (
        {"site_install_dir": "/"},
        [
            "inventory: site_install_dir=/ is a system folder; fix: a folder of its own that deploy.yml may own, e.g. "
            "/opt/verl-recipe"
        ],
    ),
    ({"site_install_dir": "/etc"}, ["inventory: site_install_dir=/etc is a system folder; fix: "]),
    ({"site_install_dir": "/opt/"}, ["inventory: site_install_dir=/opt/ is a system folder; fix: "]),
    ({"site_install_dir": "/tmp/verl"}, ["inventory: site_install_dir=/tmp/verl is under /tmp; fix: "]),
    (
        {
            "site_shared_root": "/",
            "site_models": {"qwen3.5-397b": "/m"},
            "site_data_path": "/d",
            "site_ckpt_root": "/c",
        },
        ["inventory: site_shared_root=/ is a system folder; fix: the mount point of the shared file system"],
    ),
    (
        {"site_hdk_min": "26.0.RC1\n"},
        ["inventory: site_hdk_min='26.0.RC1\\n' holds a control character; fix: write it on one line, plain"],
    ),
    ({"site_image_ref": "verl-recipe:npu\n"}, ["inventory: site_image_ref='verl-recipe:npu\\n' holds a control "]),
    (
        {"site_image_sorce": "tarball"},
        [
            "inventory: site_image_sorce is not a site setting (did you mean site_image_source?); fix: rename it to "
            "site_image_source"
        ],
    ),
    ({"site_colour": "blue"}, ["inventory: site_colour is not a site setting; fix: remove it; the site settings "]),
]


@pytest.mark.parametrize(("changes", "want"), SITE_CASES, ids=[str(c[0])[:40] for c in SITE_CASES])
def test_site_values(changes: dict[str, Any], want: list[str]) -> None:
    errors = val.check_site(site(**changes), CONTROL)
    assert len(errors) == len(want), errors
    for line, start in zip(errors, want, strict=True):
        assert line.startswith(start) and line.count("; fix: ") == 1 and "\n" not in line, line


def test_known_optional_site_names_pass() -> None:
    ok = site(site_expected_arch="x86_64", site_launch={}, site_inter_server_link="roce")
    assert val.check_site(ok, CONTROL) == []


def test_secret_files_must_be_root_only_files_under_variable_names(tmp_path: Path) -> None:
    key = tmp_path / "wandb"
    key.write_text("k" * 40 + "\n")
    key.chmod(0o600)
    assert val.check_site(site(site_secret_files={"WANDB_API_KEY": str(key)}), CONTROL) == []
    loose = tmp_path / "loose"
    loose.write_text("x\n")
    loose.chmod(0o644)
    cases = {
        "site_secret_files={...": ["a", "b"],
        "site_secret_files: 'wandb key' is not a variable name": {"wandb key": str(key)},
        "site_secret_files.K='rel/path' is not an absolute path": {"K": "rel/path"},
        f"site_secret_files.K={tmp_path}/none does not exist on the control node": {"K": f"{tmp_path}/none"},
        f"site_secret_files.K={loose} is readable by group or others": {"K": str(loose)},
    }
    for start, value in cases.items():
        errors = val.check_site(site(site_secret_files=value), CONTROL)
        if start.endswith("{..."):
            start = "site_secret_files=['a', 'b'] is not a map"
        assert len(errors) == 1 and errors[0].startswith(f"inventory: {start}"), (start, errors)
        assert errors[0].count("; fix: ") == 1, errors


def _one(errors: list[str], start: str) -> str:
    hit = [e for e in errors if e.startswith(start)]
    assert len(hit) == 1, (start, errors)
    assert hit[0].count("; fix: ") == 1 and "\n" not in hit[0]
    return hit[0]


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "a loopback address"),
        ("255.255.255.255", "the broadcast address"),
        ("224.0.0.5", "a multicast address"),
        ("0.0.0.0", "the unspecified address"),
        ("240.0.0.1", "a reserved address (240.0.0.0/4)"),
    ],
)
def test_unusable_addresses(address: str, kind: str) -> None:
    h = hosts()
    h["h1"]["a3_cluster_ip"] = address
    h["h2"]["a3_npu_ips"][1] = address
    errors = val.check_hosts(list(h), ["h0"], h, 2)
    _one(errors, f"inventory: h1: a3_cluster_ip='{address}' is {kind}; fix: the host's IPv4 address")
    _one(errors, f"inventory: h2: a3_npu_ips[1]='{address}' is {kind}; fix: address_1 of that host's /etc/hccn.conf")
    h = hosts()
    h["h0"]["a3_vnic_ips"] = ["192.169.0.1", address]
    h["h1"]["a3_vnic_ips"] = ["192.169.0.2", "192.169.1.2"]
    h["h2"]["a3_vnic_ips"] = ["192.169.0.3", "192.169.1.3"]
    _one(val.check_vnic(list(h), h, 2), f"inventory: h0: a3_vnic_ips[1]='{address}' is {kind}; fix: ")


def test_npu_address_equal_to_a_cluster_address() -> None:
    h = hosts()
    h["h0"]["a3_npu_ips"][1] = h["h2"]["a3_cluster_ip"]
    line = _one(val.check_hosts(list(h), ["h0"], h, 2), "inventory: h0: a3_npu_ips[1]=10.0.0.3 is the a3_cluster_ip")
    assert "of h2; fix: address_1 of that host's /etc/hccn.conf" in line


@pytest.mark.parametrize("port", ["ssh", 0, 70000, -1, True, "22\n", "²²"])
def test_ansible_port_that_is_not_a_port(port: Any) -> None:
    h = hosts()
    h["h1"]["ansible_port"] = port
    _one(val.check_hosts(list(h), ["h0"], h, 2), f"inventory: h1: ansible_port={port!r} is not a TCP port number")


def test_ansible_port_as_text_digits_is_a_port() -> None:
    h = hosts()
    h["h1"]["ansible_port"] = "2222"
    assert val.check_hosts(list(h), ["h0"], h, 2) == []


@pytest.mark.parametrize("target", ["a3 01", "$(reboot)", "-oProxyCommand=x", "a3-01;id", "a3-01\n", "`id`"])
def test_ansible_host_that_is_not_an_address(target: str) -> None:
    h = hosts()
    h["h1"]["ansible_host"] = target
    line = _one(val.check_hosts(list(h), ["h0"], h, 2), f"inventory: h1: ansible_host={target!r} is not a host name")
    assert "not starting with -" in line


@pytest.mark.parametrize("name", ["a3 01", "a3;01", "../a3", "-a3", "a3-0é", "a" * 300, "a3\n01"])
def test_host_names_that_are_not_plain(name: str) -> None:
    h = hosts()
    h[name] = h.pop("h2")
    errors = val.check_hosts(list(h), ["h0"], h, 2)
    line = _one(errors, "inventory: host name ")
    assert fields._show(name) in line and len(line) < 400, line
    assert "fix: name it with letters, digits" in line
    assert all("\n" not in e for e in errors)


def test_read_only_preflight_needs_no_tarball_but_distribution_does(tmp_path: Path) -> None:
    """`--tags preflight` validates with the image tarball not built yet; a run that distributes it refuses."""
    missing = {**site(site_image_source="tarball"), "site_image_tarball": str(tmp_path / "later.tar")}
    assert val.check_site(missing, {**CONTROL, "image_stage": False}) == []
    _one(val.check_site(missing, {**CONTROL, "image_stage": True}), "control node: site_image_tarball=")
    assert val.image_stage(["all"], []) and val.image_stage(["image"], []) and val.image_stage(["os", "image"], [])
    assert not val.image_stage(["preflight"], []) and not val.image_stage(["all"], ["image"])


def test_preflight_tag_runs_past_validation_without_the_tarball(tmp_path: Path) -> None:
    """Through ansible-playbook: validation passes with the tarball missing, and the preflight play starts (it
    then finds the sample's hosts unreachable, which is a row, not a refusal)."""
    h, s = sample_inventory()
    node_hosts(h)["a3-01"].update(ansible_host="127.0.0.1", ansible_port=1)
    h["all"]["children"]["a3_nodes"]["hosts"] = {"a3-01": node_hosts(h)["a3-01"]}
    compose = tmp_path / "compose.yaml"
    compose.write_text("services: {}\n")
    known = tmp_path / "known_hosts"
    known.write_text("")
    s.update(
        site_image_tarball=str(tmp_path / "not-built-yet.tar"),
        deploy_common_compose_files=[str(compose)],
        ansible_ssh_common_args=f"-o UserKnownHostsFile={known}",
    )
    inv = write_inventory(tmp_path / "inv", h, s)
    out = playbook(inv, "--tags", "preflight")
    text = out.stdout + out.stderr
    assert "does not exist" not in text and "inventory OK: 1 hosts" in text, text[-3000:]
    assert "PLAY [Preflight every host at once" in text
    full = playbook(inv, playbook_file="playbooks/validate.yml")
    assert full.returncode != 0 and "control node: site_image_tarball=" in full.stdout + full.stderr


def test_unknown_host_variables_are_refused_with_the_closest_name() -> None:
    h = hosts()
    h["h1"]["a3_npu_ip"] = h["h1"].pop("a3_npu_ips")
    h["h2"]["a3_colour"] = "blue"
    errors = val.check_hosts(list(h), ["h0"], h, 2)
    assert (
        _one(errors, "inventory: h1: a3_npu_ip ")
        == "inventory: h1: a3_npu_ip is not a host variable (did you mean a3_npu_ips?); fix: rename it to a3_npu_ips"
    )
    _one(errors, "inventory: h1: a3_npu_ips=<unset> is not a list")
    assert _one(errors, "inventory: h2: a3_colour ").endswith(
        "is not a host variable; fix: remove it; the host variables are listed in docs/contracts.md"
    )


def test_every_field_of_the_table_has_a_check_and_a_documented_meaning() -> None:
    from verl_recipe.contracts import inventory as table
    from verl_recipe.inventory.site import KINDS

    for field in table.FIELDS:
        assert field.name.startswith(table.PREFIXES[field.scope]) or field.name.startswith(("ansible_", "os_")), field
        assert field.meaning and field.when, field
        if field.scope == table.SITE:
            assert field.kind.split(":")[0] in KINDS, field
    assert table.names(table.SITE) == val.SITE_KEYS
    assert table.names(table.HOST) == val.HOST_KEYS
    doc = (Path(__file__).resolve().parents[2] / "docs" / "contracts.md").read_text()
    for field in table.FIELDS:
        assert f"`{field.name}`" in doc, field.name


def test_the_plugin_reads_every_site_field_and_refuses_unknown_host_names(tmp_path: Path) -> None:
    """Through ansible-playbook: site_secret_files (a field the plugin once never read) is checked, and a
    misspelt a3_* host variable is refused by name, both in the one pass before any host is contacted."""
    h, s = sample_inventory()
    first = node_hosts(h)["a3-01"]
    first["a3_cluster_nick"] = first["a3_cluster_nic"]
    compose = tmp_path / "compose.yaml"
    compose.write_text("services: {}\n")
    s.update(
        site_image_source="registry",
        site_secret_files={"WANDB_API_KEY": str(tmp_path / "no-such-key")},
        deploy_common_compose_files=[str(compose)],
    )
    inv = write_inventory(tmp_path / "inv", h, s)
    out = playbook(inv, playbook_file="playbooks/validate.yml")
    text = out.stdout + out.stderr
    assert out.returncode != 0, text[-3000:]
    assert "inventory: a3-01: a3_cluster_nick is not a host variable (did you mean a3_cluster_nic?)" in text
    assert f"inventory: site_secret_files.WANDB_API_KEY={tmp_path}/no-such-key does not exist on the control" in text
