"""A small shared-storage tree: a model directory with a real-shaped config.json, data files, output dirs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from verl_recipe.cluster.assets import synthetic_config
from verl_recipe.models import MODELS


def make_shared(root: Path, model: str = "qwen3.5-397b-a17b") -> dict[str, str]:
    """Returns --set arguments pointing a recipe at this tree."""
    mdir = root / "models" / model
    mdir.mkdir(parents=True)
    (mdir / "config.json").write_text(json.dumps(synthetic_config(MODELS[model])))
    # a stand-in shard: its safetensors header declares one small tensor, so the storage plan (checks/storage.py)
    # counts a small checkpoint, as it counts the real one's parameters from its headers
    header = json.dumps({"w": {"dtype": "BF16", "shape": [1000], "data_offsets": [0, 2000]}}).encode()
    (mdir / "model-00001-of-00001.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 2000)
    data = root / "data"
    data.mkdir()
    for name in ("train.parquet", "test.parquet"):
        (data / name).write_bytes(b"PAR1")
    return {
        "MODEL_PATH": str(mdir),
        "TRAIN_FILES": str(data / "train.parquet"),
        "VAL_FILES": str(data / "test.parquet"),
        "CKPT_DIR": str(root / "checkpoints"),
        "LOG_DIR": str(root / "runs"),
    }


def set_args(values: dict[str, str]) -> list[str]:
    out: list[str] = []
    for k, v in values.items():
        out += ["--set", f"{k}={v}"]
    return out


def install_fake_verl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, main_source: str) -> None:
    """`python3 -m verl.trainer.main_ppo` runs `main_source` instead of verl, with this interpreter as `python3`
    (it has the project installed): a launch runs exactly what it rendered, against a stand-in."""
    pkg = tmp_path / "fakeverl" / "verl" / "trainer"
    pkg.mkdir(parents=True)
    for d in (pkg.parent, pkg):
        (d / "__init__.py").write_text("")
    (pkg / "main_ppo.py").write_text(main_source)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "fakeverl"))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
