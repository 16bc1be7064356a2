"""A small shared-storage tree: a model directory with a real-shaped config.json, data files, output dirs."""

from __future__ import annotations

import json
from pathlib import Path

from verl_recipe.assets import synthetic_config
from verl_recipe.models import MODELS


def make_shared(root: Path, model: str = "qwen3.5-397b-a17b") -> dict[str, str]:
    """Returns --set arguments pointing a recipe at this tree."""
    mdir = root / "models" / model
    mdir.mkdir(parents=True)
    (mdir / "config.json").write_text(json.dumps(synthetic_config(MODELS[model])))
    (mdir / "model-00001-of-00001.safetensors").write_bytes(b"\0" * 16)
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
