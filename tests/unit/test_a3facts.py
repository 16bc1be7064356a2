"""The A3 facts (entrypoints/verl_recipe/a3facts.py): one copy, which Ansible's module_utils and the simulated host
reach through links, and what it says of HDK versions, version.info and paths."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from verl_recipe import a3facts, topology

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "entrypoints" / "verl_recipe" / "a3facts.py"
LINKS = [REPO / "ansible" / "module_utils" / "a3facts.py", REPO / "docker" / "sim-host" / "tools" / "a3facts.py"]


@pytest.mark.parametrize("link", LINKS, ids=lambda p: str(p.relative_to(REPO)))
def test_each_place_that_runs_the_facts_links_to_the_one_copy(link: Path) -> None:
    assert link.is_symlink(), f"{link.relative_to(REPO)} must be a link to {SOURCE.relative_to(REPO)}, not a copy"
    assert link.resolve() == SOURCE
    target = os.readlink(link)
    assert not os.path.isabs(target), "a relative link, so that it holds in every clone"


def test_no_other_file_named_a3facts_is_tracked() -> None:
    tracked = subprocess.run(["git", "ls-files", "*a3facts.py"], cwd=REPO, capture_output=True, text=True, check=True)
    files = {REPO / f for f in tracked.stdout.split() if f.endswith("/a3facts.py")}
    assert files == {SOURCE, *LINKS}
    assert all(f == SOURCE or f.is_symlink() for f in files)


def test_the_simulated_host_build_copies_the_file_itself(tmp_path: Path) -> None:
    """docker/sim-host/build.sh copies its context with `cp -rL`: the image gets the file, not a dangling link."""
    build = (REPO / "docker" / "sim-host" / "build.sh").read_text()
    line = next(x for x in build.splitlines() if x.startswith("cp ") and '"$here/tools"' in x)
    assert line.startswith("cp -rL "), line
    subprocess.run(["cp", "-rL", str(REPO / "docker" / "sim-host" / "tools"), str(tmp_path)], check=True)
    copied = tmp_path / "tools" / "a3facts.py"
    assert not copied.is_symlink() and copied.read_bytes() == SOURCE.read_bytes()


def test_the_source_imports_the_standard_library_only() -> None:
    # it runs on the A3 host (through Ansible) and in the simulated host image, where nothing else is installed
    tree = ast.parse(SOURCE.read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert names <= set(sys.stdlib_module_names) | {"__future__"}, names


def test_dies_and_ports_agree_with_versions_yaml_and_topology() -> None:
    versions = yaml.safe_load((REPO / "docker" / "versions.yaml").read_text())
    assert _find(versions, "dies_per_node")["a3"] == a3facts.DIES_PER_NODE
    assert topology.DIES_PER_NODE == a3facts.DIES_PER_NODE
    assert topology.RAY_NODE_PORTS == a3facts.RAY_NODE_PORTS
    assert (topology.RAY_GCS_PORT, topology.RAY_DASHBOARD_PORT, topology.RAY_CLIENT_PORT) == (
        a3facts.RAY_GCS_PORT,
        a3facts.RAY_DASHBOARD_PORT,
        a3facts.RAY_CLIENT_PORT,
    )


def _find(doc: object, key: str) -> dict[str, int]:
    """The first mapping under `key` anywhere in the YAML document."""
    if isinstance(doc, dict):
        if key in doc:
            return doc[key]  # type: ignore[no-any-return]
        for value in doc.values():
            found = _find(value, key)
            if found:
                return found
    return {}


# The one HDK order, ascending; each row's spellings compare equal.
ORDER = [
    ["24.1.RC3"],
    ["24.1.rc3.7"],
    ["25.3.rc1", "25.3.RC1"],
    ["25.5.0", "25.5", "25.5.0.0"],
    ["26.0.RC1", "26.0.rc1", " 26.0.RC1\n"],
    ["26.0.RC2"],
    ["26.0.0", "26.0"],
    ["26.0.0.1"],
    ["26.0.1"],
    ["26.1.RC1"],
    ["27.0.0"],
]


@pytest.mark.parametrize("rank", range(len(ORDER) - 1))
def test_hdk_order_table(rank: int) -> None:
    lower, higher = ORDER[rank], ORDER[rank + 1]
    for a in lower:
        for b in higher:
            assert a3facts.hdk_key(a) < a3facts.hdk_key(b), (a, b)


@pytest.mark.parametrize("same", ORDER, ids=lambda row: row[0].strip())
def test_hdk_spellings_of_one_release_compare_equal(same: list[str]) -> None:
    assert len({a3facts.hdk_key(v) for v in same}) == 1


@pytest.mark.parametrize("bad", ["", "26", "26.x.1", "26.0.beta", "26.0.rc", "26.0.0-1", "26.0.RC1.b", "v26.0.0"])
def test_hdk_refuses_what_is_not_a_version(bad: str) -> None:
    with pytest.raises(ValueError, match="not an HDK version") as err:
        a3facts.hdk_key(bad)
    assert repr(bad) in str(err.value)


def test_version_info_parsing() -> None:
    # driver and firmware version.info as an HDK 25.3.rc1 install writes them (first of a repeated key counts)
    driver = a3facts.parse_version_info("Version=25.3.rc1\nascendhal_version=7.35.23\npackage_version=25.3.rc1\n")
    firmware = a3facts.parse_version_info("Version=7.7.0.5.231\npackage_version=25.3.rc1\nVersion=9\nnoise\n")
    assert a3facts.hdk_version(driver) == "25.3.rc1" and firmware["Version"] == "7.7.0.5.231"
    assert a3facts.hdk_version(firmware, a3facts.FIRMWARE_VERSION_KEYS) == "25.3.rc1"
    assert a3facts.hdk_version(a3facts.parse_version_info("package_version = 26.0.0 \n")) == "26.0.0"
    assert a3facts.hdk_version({}) == ""


def test_nearest_existing(tmp_path: Path) -> None:
    assert a3facts.nearest_existing(str(tmp_path / "a" / "b")) == str(tmp_path)
    assert a3facts.nearest_existing(str(tmp_path)) == str(tmp_path)
    assert a3facts.nearest_existing("/") == "/"
    assert a3facts.nearest_existing("no-such-dir-here/x") == "."
