"""A real launch on the simulated cluster ends where the simulation ends: one line, a run record, exit 4."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from verl_recipe.cli import EXIT_BAD_INPUT, EXIT_NOT_READY, EXIT_OK, EXIT_SIMULATED
from verl_recipe.render import render
from verl_recipe.resolve import Request, resolve
from verl_recipe.run.launcher import end_of_simulation

from .fixtures import make_shared, set_args


def test_simulated_launch_writes_the_record_and_says_why_verl_did_not_start(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    paths = make_shared(tmp_path / "shared", model="qwen3.5-35b-a3b")
    sets = [a for a in set_args(paths) if a != "--set"]
    recipe, resolved = resolve(Request("qwen3.5-35b", sets=sets), environ={})
    launch = render(recipe, resolved, [])
    rc = end_of_simulation(launch, resolved, {"cluster": "10.0.0.1:6379"}, EXIT_SIMULATED)
    assert rc == EXIT_SIMULATED
    assert EXIT_SIMULATED not in (EXIT_OK, EXIT_BAD_INPUT, EXIT_NOT_READY), "a code of its own"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("simulated cluster: "), err
    assert "Traceback" not in err[0] and "--rehearse" in err[0]
    (run_dir,) = (Path(paths["LOG_DIR"]) / "verl_grpo_qwen3_5" / "qwen3.5-35b" / "runs").iterdir()
    assert str(run_dir / "command.sh") in err[0], "the line says where the rendered command is"
    assert (run_dir / "exit_code").read_text().strip() == str(EXIT_SIMULATED)
    assert "verl.trainer.main_ppo" in (run_dir / "command.sh").read_text()
    assert json.loads((run_dir / "settings.json").read_text())["simulated"] is True
    assert not (run_dir / "train.log").exists(), "nothing was run"


def test_a_site_files_recipe_section_is_its_own_layer(tmp_path: Path) -> None:
    """deploy.yml's site.yaml: site-wide data files, the simulated site's tiny layout for one recipe above them."""
    site = tmp_path / "site.yaml"
    site.write_text(
        "TRAIN_FILES: [/data/all.parquet]\nGEN_TP: 2\n"
        "recipes:\n  qwen3.5-35b-fsdp: {TRAIN_FILES: [/data/tiny.parquet], NNODES: 2}\n"
    )
    _, fsdp = resolve(Request("qwen3.5-35b-fsdp", site=site), environ={})
    assert fsdp.values["TRAIN_FILES"] == ["/data/tiny.parquet"] and fsdp.values["GEN_TP"] == 2
    assert fsdp.origin["TRAIN_FILES"] == f"site file {site} (recipes.qwen3.5-35b-fsdp)"
    assert fsdp.origin["GEN_TP"] == f"site file {site}"
    _, other = resolve(Request("qwen3.5-35b", site=site), environ={})
    assert other.values["TRAIN_FILES"] == ["/data/all.parquet"] and other.values["NNODES"] != 2
    # the environment (node.env) is above the site file: a data path there would hide the recipe's own
    _, env = resolve(Request("qwen3.5-35b-fsdp", site=site), environ={"TRAIN_FILES": "/data/env.parquet"})
    assert env.values["TRAIN_FILES"] == ["/data/env.parquet"]
