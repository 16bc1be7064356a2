"""Qwen3.5 MoE architectures: the numbers the layout rules need, and reading them from a real config.json.

Values and their sources: docs/rules.md section 1. When MODEL_PATH holds a config.json, its values win and are
checked against the recipe's model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ModelArch:
    name: str
    model_type: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    num_experts: int
    experts_per_token: int
    moe_ffn_hidden_size: int
    linear_num_key_heads: int  # Gated DeltaNet QK heads
    linear_num_value_heads: int  # Gated DeltaNet V heads
    full_attention_interval: int = 4
    # The numbers the memory plan needs (memory.py); the same for the three Qwen3.5 MoE models but the shared
    # expert, which is as wide as one routed expert.
    shared_expert_ffn_hidden_size: int = 0  # 0 = as wide as moe_ffn_hidden_size
    head_dim: int = 256
    vocab_size: int = 248320
    linear_key_head_dim: int = 128
    linear_value_head_dim: int = 128
    linear_conv_kernel_dim: int = 4
    max_position_embeddings: int = 262144
    tie_word_embeddings: bool = False
    has_vision: bool = True  # Qwen3.5 checkpoints carry the vision tower; vLLM and the trainer load it

    @property
    def has_gdn(self) -> bool:
        return self.linear_num_key_heads > 0

    def heads_split_over(self, ranks: int) -> bool:
        """Tensor parallelism over `ranks` splits every kind of head: attention heads, KV groups (or replicates
        them, when `ranks` is a multiple of the groups) and Gated DeltaNet key and value heads."""
        return (
            self.num_attention_heads % ranks == 0
            and (self.num_kv_heads % ranks == 0 or ranks % self.num_kv_heads == 0)
            and (
                not self.has_gdn
                or (self.linear_num_key_heads % ranks == 0 and self.linear_num_value_heads % ranks == 0)
            )
        )

    @property
    def shared_ffn(self) -> int:
        return self.shared_expert_ffn_hidden_size or self.moe_ffn_hidden_size

    def is_full_attention(self, layer: int) -> bool:
        """Layer `layer` (0-based) is full attention every full_attention_interval layers, else Gated DeltaNet."""
        return not self.has_gdn or (layer + 1) % self.full_attention_interval == 0

    @property
    def num_full_attention_layers(self) -> int:
        return sum(self.is_full_attention(i) for i in range(self.num_layers))

    def largest_tensor(self) -> tuple[str, int]:
        """The largest single tensor verl's weight sync sends, by its Hugging Face name, and its bytes in bf16.

        verl 0.8.0 sends the trainer's weights tensor by tensor in their Hugging Face layout, experts one by one
        (verl/workers/rollout/vllm_rollout/vllm_rollout.py, update_weights); of those, the word embedding (and the
        untied output layer of the same shape) is the largest for every Qwen3.5 size, ahead of a full-attention
        query projection (queries and their output gate) and a Gated DeltaNet input projection.
        """
        bf16 = 2
        linear_in = 2 * self.linear_num_key_heads * self.linear_key_head_dim
        linear_in += 2 * self.linear_num_value_heads * self.linear_value_head_dim
        sizes = {
            "embed_tokens": self.vocab_size * self.hidden_size,
            "q_proj": self.hidden_size * 2 * self.num_attention_heads * self.head_dim,
            "in_proj_qkvz": self.hidden_size * linear_in,
            "experts.gate_proj": self.hidden_size * self.moe_ffn_hidden_size,
            "shared_expert.gate_proj": self.hidden_size * self.shared_ffn,
        }
        name = max(sizes, key=lambda k: sizes[k])
        return name, sizes[name] * bf16


QWEN35_35B = ModelArch("qwen3.5-35b-a3b", "qwen3_5_moe", 40, 2048, 16, 2, 256, 8, 512, 16, 32)
QWEN35_122B = ModelArch("qwen3.5-122b-a10b", "qwen3_5_moe", 48, 3072, 32, 2, 256, 8, 1024, 16, 64)
QWEN35_397B = ModelArch("qwen3.5-397b-a17b", "qwen3_5_moe", 60, 4096, 32, 2, 512, 10, 1024, 16, 64)

MODELS: dict[str, ModelArch] = {m.name: m for m in (QWEN35_35B, QWEN35_122B, QWEN35_397B)}

# config.json key of the simulated cluster's tiny random checkpoint (verl_sim_standin.seed). Such a checkpoint is
# read like a real one: its numbers replace the recipe's in every layout rule; only the "is this the recipe's model"
# comparison is waived, and only with DEVICE=cpu (checks/paths.py).
TINY_STANDIN_KEY = "verl_recipe_sim_tiny"

# config.json field -> ModelArch field. Qwen3.5 nests the text tower under "text_config".
_CONFIG_FIELDS = {
    "num_hidden_layers": "num_layers",
    "hidden_size": "hidden_size",
    "num_attention_heads": "num_attention_heads",
    "num_key_value_heads": "num_kv_heads",
    "num_experts": "num_experts",
    "num_experts_per_tok": "experts_per_token",
    "moe_intermediate_size": "moe_ffn_hidden_size",
    "linear_num_key_heads": "linear_num_key_heads",
    "linear_num_value_heads": "linear_num_value_heads",
    "full_attention_interval": "full_attention_interval",
    "shared_expert_intermediate_size": "shared_expert_ffn_hidden_size",
    "head_dim": "head_dim",
    "vocab_size": "vocab_size",
    "linear_key_head_dim": "linear_key_head_dim",
    "linear_value_head_dim": "linear_value_head_dim",
    "linear_conv_kernel_dim": "linear_conv_kernel_dim",
    "max_position_embeddings": "max_position_embeddings",
}
# Fields whose value in config.json may legitimately differ from the recipe's (a longer-context checkpoint):
# they are taken from config.json without being reported as a different model.
_FREE_FIELDS = {"max_position_embeddings"}
# The whole numbers each config.json field may hold. The upper bounds are far above any published model (Qwen3.5
# has at most 60 layers and 512 experts) and keep every rule, the memory plan and `plan`'s layout search bounded
# (they loop over layers and divisors); 0 is allowed where it means "none" (no Gated DeltaNet heads, a shared
# expert as wide as a routed one).
_LIMITS: dict[str, tuple[int, int]] = {
    "num_hidden_layers": (1, 1024),
    "hidden_size": (1, 1 << 20),
    "num_attention_heads": (1, 4096),
    "num_key_value_heads": (1, 4096),
    "num_experts": (1, 1 << 16),
    "num_experts_per_tok": (1, 1 << 16),
    "moe_intermediate_size": (1, 1 << 20),
    "linear_num_key_heads": (0, 4096),
    "linear_num_value_heads": (0, 4096),
    "full_attention_interval": (1, 1024),
    "shared_expert_intermediate_size": (0, 1 << 20),
    "head_dim": (1, 1 << 16),
    "vocab_size": (1, 1 << 24),
    "linear_key_head_dim": (1, 1 << 16),
    "linear_value_head_dim": (1, 1 << 16),
    "linear_conv_kernel_dim": (1, 1024),
    "max_position_embeddings": (1, 1 << 30),
}


class ModelConfigError(ValueError):
    pass


def read_config_json(path: Path) -> dict[str, Any]:
    """config.json's fields with the text tower's (text_config) over the top level's, each number the rules read
    checked against _LIMITS: ModelConfigError naming the file, the key and the value otherwise."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelConfigError(f"{path}: cannot read config.json ({exc})") from exc
    except UnicodeDecodeError:
        raise  # checks/paths.py names the byte
    except ValueError as exc:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        raise ModelConfigError(f"{path}: cannot read config.json ({str(exc)[:120]})") from exc
    if not isinstance(data, dict):
        raise ModelConfigError(f"{path}: config.json is not a JSON object")
    text = data.get("text_config")
    merged: dict[str, Any] = dict(data)
    if isinstance(text, dict):
        merged.update(text)
    for key, (lo, hi) in _LIMITS.items():
        value = merged.get(key)
        if value is None:
            continue  # absent or null: the recipe's own value stands
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            where = f"text_config.{key}" if isinstance(text, dict) and key in text else key
            if isinstance(value, list | dict):
                shown = f"(a {'list' if isinstance(value, list) else 'mapping'})"
            elif isinstance(value, int) and abs(value) >= 10**30:
                shown = f"{str(value)[:12]}... ({len(str(abs(value)))} digits)"
            else:
                shown = repr(value)
            raise ModelConfigError(
                f"{path}: {where}={shown[:60]} is not a whole number in [{lo}, {hi}], which a Qwen3.5 model's "
                f"config.json holds there"
            )
    return merged


def arch_from_config(expected: ModelArch, config: dict[str, Any]) -> tuple[ModelArch, list[str]]:
    """The real architecture (expected values replaced by config.json's) and the fields that differ."""
    updates: dict[str, Any] = {}
    differences: list[str] = []
    known = {f.name for f in fields(ModelArch)}
    for cfg_key, field_name in _CONFIG_FIELDS.items():
        if cfg_key in config and field_name in known:
            value = config[cfg_key]
            if not isinstance(value, int) or isinstance(value, bool):
                continue
            want = (
                expected.shared_ffn if field_name == "shared_expert_ffn_hidden_size" else getattr(expected, field_name)
            )
            if value != want and field_name not in _FREE_FIELDS:
                differences.append(f"{cfg_key}={value} (expected {want})")
            updates[field_name] = value
    model_type = str(config.get("model_type", expected.model_type))
    base_type = model_type.removesuffix("_text")
    if base_type != expected.model_type:
        differences.insert(0, f"model_type={model_type} (expected {expected.model_type})")
    return replace(expected, **updates), differences
