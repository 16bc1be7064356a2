"""A small shared-storage tree: a model directory with a real-shaped config.json, data files, output dirs."""

from __future__ import annotations

import json
from pathlib import Path

from verl_recipe.models import MODELS, ModelArch


def qwen_config(arch: ModelArch) -> dict[str, object]:
    text = {
        "model_type": "qwen3_5_moe_text",
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
    }
    return {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe", "text_config": text}


def make_shared(root: Path, model: str = "qwen3.5-397b-a17b") -> dict[str, str]:
    """Returns --set arguments pointing a recipe at this tree."""
    mdir = root / "models" / model
    mdir.mkdir(parents=True)
    (mdir / "config.json").write_text(json.dumps(qwen_config(MODELS[model])))
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
