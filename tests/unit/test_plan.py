"""`verl-recipe plan`: layouts that pass every rule and the memory plan, ranked, as a table and as JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .helpers import run

S = "--skip-path-checks"


def plan_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    res = run(capsys, "plan", *args, "--json")
    data = json.loads(res.out)
    assert isinstance(data, dict)
    return res.rc, data


def test_397b_on_16_nodes_lists_the_recipe_layout_ranked(capsys: pytest.CaptureFixture[str]) -> None:
    rc, data = plan_json(capsys, "qwen3.5-397b", "--nodes", "16", "--top", "100")
    assert rc == 0
    assert data["criterion"].startswith("fewest pipeline stages, then most headroom")
    layouts = [row["layout"] for row in data["layouts"]]
    recipe_layout = {"TP": 2, "PP": 4, "CP": 1, "EP": 64, "ETP": 1, "VPP": 0, "GEN_TP": 16, "GEN_DP": 16, "GEN_EP": 256}
    assert recipe_layout in layouts
    keys = [(row["layout"]["PP"], -row["headroom_gib"]) for row in data["layouts"]]
    assert keys == sorted(keys), "ranked by pipeline stages, then headroom"
    assert all(row["headroom_gib"] >= 0 for row in data["layouts"])
    assert data["count"] == len(layouts) and data["smallest_nodes_that_fit"] == 16


@pytest.mark.parametrize(("recipe", "nodes"), [("qwen3.5-397b", 8), ("qwen3.5-122b", 8), ("qwen3.5-35b-fsdp", 2)])
def test_every_listed_layout_validates(capsys: pytest.CaptureFixture[str], recipe: str, nodes: int) -> None:
    rc, data = plan_json(capsys, recipe, "--nodes", str(nodes), "--top", "3")
    assert rc == 0 and data["layouts"]
    for row in data["layouts"]:
        sets = [a for k, v in {"NNODES": nodes, **row["layout"]}.items() for a in ("--set", f"{k}={v}")]
        res = run(capsys, "validate", recipe, S, *sets)
        assert res.rc == 0, (row, res.err)
        assert f"memory: peak {row['peak_gib']} GiB" in res.err


def test_no_layout_fits_names_the_smallest_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "plan", "qwen3.5-397b", "--nodes", "2", "--set", "HOST_MEM_GIB=1536")
    assert res.rc == 2
    assert "no layout fits:" in res.out
    assert "the smallest cluster that fits is 6 nodes" in res.out
    rc, data = plan_json(capsys, "qwen3.5-397b", "--nodes", "6", "--set", "HOST_MEM_GIB=1536")
    assert rc == 0 and data["count"] > 0 and data["host_memory_checked"] is True
    assert all(row["host_per_node_gib"] <= 1536 for row in data["layouts"])


def test_table_output_and_the_line_to_use(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "plan", "qwen3.5-122b", "--nodes", "8", "--top", "5")
    assert res.rc == 0
    lines = res.out.splitlines()
    assert lines[0].startswith("plan for qwen3.5-122b on 8 nodes; ranked by fewest pipeline stages")
    assert lines[1].split()[:3] == ["TP", "PP", "CP"]
    assert len([line for line in lines[2:] if line[:1].isdigit() and "layouts fit" not in line]) == 5
    assert lines[-1].startswith("use: --set NNODES=8 --set TP=")
    assert "host memory per node is estimated, not checked: set HOST_MEM_GIB" in res.out


def test_bad_node_count_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "plan", "qwen3.5-397b", "--nodes", "0")
    assert res.rc == 2
    assert res.err.startswith("error: --nodes=0")
