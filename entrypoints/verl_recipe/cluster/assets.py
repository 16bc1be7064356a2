"""Shared assets: the model and data a recipe reads. Verified on a real cluster; never downloaded at launch.

On the simulated cluster, `--synthetic` writes a config.json with the recipe model's real architecture, a
placeholder weight file and placeholder data files, so every path check and the rehearsal run for real. They
cannot train anything, and say so in their content. A launch with DEVICE=cpu (the simulated site's layout for the
FSDP recipe) gets instead a real tiny random checkpoint and GSM8K-shaped data from the CPU stand-ins, which train.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..devices import device_module
from ..models import ModelArch
from ..placeholder import PLACEHOLDER
from ..recipes import Recipe
from ..validate import check_paths


def synthetic_config(arch: ModelArch) -> dict[str, Any]:
    return {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "model_type": arch.model_type,
        "verl_recipe_placeholder": True,
        "text_config": {
            "model_type": f"{arch.model_type}_text",
            "num_hidden_layers": arch.num_layers,
            "hidden_size": arch.hidden_size,
            "num_attention_heads": arch.num_attention_heads,
            "num_key_value_heads": arch.num_kv_heads,
            "num_experts": arch.num_experts,
            "num_experts_per_tok": arch.experts_per_token,
            "moe_intermediate_size": arch.moe_ffn_hidden_size,
            "linear_num_key_heads": arch.linear_num_key_heads,
            "linear_num_value_heads": arch.linear_num_value_heads,
            "full_attention_interval": arch.full_attention_interval,
        },
    }


def write_standin(values: dict[str, Any]) -> None:
    """DEVICE=cpu: a real tiny checkpoint and data the CPU stand-ins train on (their package writes them)."""
    device = device_module("cpu")  # refuses with one line where the stand-ins are not installed
    device.write_model(Path(str(values["MODEL_PATH"])))
    train, test = values["TRAIN_FILES"], values["VAL_FILES"]
    device.write_data(Path(train[0]), Path(test[0]))
    for name in ("CKPT_DIR", "LOG_DIR"):
        Path(str(values[name])).mkdir(parents=True, exist_ok=True)


def write_synthetic(recipe: Recipe, values: dict[str, Any]) -> None:
    if values["DEVICE"] == "cpu":
        write_standin(values)
        return
    model = Path(str(values["MODEL_PATH"]))
    model.mkdir(parents=True, exist_ok=True)
    cfg = model / "config.json"
    if not cfg.exists():
        cfg.write_text(json.dumps(synthetic_config(recipe.model), indent=2) + "\n")
    weights = model / "model-placeholder.safetensors"
    if not weights.exists():
        weights.write_bytes(PLACEHOLDER)
    for f in [*values["TRAIN_FILES"], *values["VAL_FILES"]]:
        path = Path(f)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_bytes(PLACEHOLDER)
    for name in ("CKPT_DIR", "LOG_DIR"):
        Path(str(values[name])).mkdir(parents=True, exist_ok=True)


def prepare_assets(recipe: Recipe, values: dict[str, Any], *, synthetic: bool) -> list[str]:
    if synthetic:
        write_synthetic(recipe, values)
    problems, _ = check_paths(values, recipe.model)
    if not problems:
        print(f"ok: {recipe.name}: model {values['MODEL_PATH']} and data present")
    return [str(p) for p in problems]
