"""STAND-IN checkpoint and data for training on the simulated cluster (`make sim-seed`).

`python -m verl_sim_standin.seed --model DIR --data DIR` writes
- DIR (model): a randomly initialised Qwen3.5-MoE in the layout of the real checkpoints: `model_type` qwen3_5_moe,
  the Qwen3_5MoeForConditionalGeneration architecture (text tower with one Gated DeltaNet and one full-attention
  layer and 4 routed experts plus a shared one, a one-block vision tower), safetensors weights, a tokenizer with
  Qwen's chat-template markers and a generation config; about 0.3 M parameters, so it trains on a CPU;
- DIR (data): train.parquet and test.parquet in verl's GSM8K layout (data_source openai/gsm8k, a chat prompt,
  reward_model.ground_truth), with words the tokenizer knows.
The config.json carries `verl_recipe.models.TINY_STANDIN_KEY`, by which validate knows the model for what it is.
Existing files are kept (the seed is idempotent).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from . import LOG_PREFIX

SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
WORDS = [
    "user",
    "assistant",
    "system",
    "what",
    "is",
    "plus",
    "minus",
    "times",
    "?",
    ".",
    ",",
    "let's",
    "think",
    "step",
    "by",
    "and",
    "output",
    "the",
    "final",
    "answer",
    "after",
    "####",
    "so",
    "we",
    "have",
    "then",
    "a",
    "of",
    "to",
    "it",
    "equals",
    "add",
    "take",
    "away",
    "number",
    "result",
    "first",
    "next",
    "=",
    "+",
    "-",
]
DIGITS = [str(i) for i in range(100)]
VOCAB_SIZE = 160  # the words above and a few unused ids
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
INSTRUCTION = "let's think step by step and output the final answer after ####"
OPS = {"plus": lambda a, b: a + b, "minus": lambda a, b: a - b, "times": lambda a, b: a * b}


def vocab() -> dict[str, int]:
    tokens = SPECIAL + ["<unk>"] + WORDS + DIGITS
    assert len(tokens) <= VOCAB_SIZE
    return {t: i for i, t in enumerate(tokens)}


def model_config() -> Any:
    from transformers import Qwen3_5MoeConfig

    v = vocab()
    text = {
        "vocab_size": VOCAB_SIZE,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "layer_types": ["linear_attention", "full_attention"],
        "full_attention_interval": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 4,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 32,
        "max_position_embeddings": 512,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.25,
            "mrope_interleaved": True,
            "mrope_section": [1, 1, 0],
        },
        "eos_token_id": v["<|im_end|>"],
        "pad_token_id": v["<|endoftext|>"],
    }
    vision = {
        "depth": 1,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "out_hidden_size": 64,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "num_position_embeddings": 64,
    }
    from verl_recipe.models import TINY_STANDIN_KEY

    cfg = Qwen3_5MoeConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=v["<|image_pad|>"],
        video_token_id=v["<|video_pad|>"],
        vision_start_token_id=v["<|vision_start|>"],
        vision_end_token_id=v["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    cfg.architectures = ["Qwen3_5MoeForConditionalGeneration"]
    setattr(cfg, TINY_STANDIN_KEY, "STAND-IN: tiny random Qwen3.5-MoE for the simulated cluster, not a real model")
    return cfg


def write_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab=vocab(), unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=[t for t in SPECIAL if t not in ("<|endoftext|>", "<|im_end|>")],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)


def write_model(out: Path, seed: int = 0) -> bool:
    if (out / "config.json").is_file() and any(out.glob("*.safetensors")):
        return False
    import torch
    from transformers import GenerationConfig, Qwen3_5MoeForConditionalGeneration

    torch.manual_seed(seed)
    out.mkdir(parents=True, exist_ok=True)
    cfg = model_config()
    model = Qwen3_5MoeForConditionalGeneration(cfg)
    model.save_pretrained(out, safe_serialization=True)
    v = vocab()
    GenerationConfig(
        eos_token_id=[v["<|im_end|>"], v["<|endoftext|>"]],
        pad_token_id=v["<|endoftext|>"],
        do_sample=True,
        temperature=1.0,
    ).save_pretrained(out)
    write_tokenizer(out)
    params = sum(p.numel() for p in model.parameters())
    print(f"{LOG_PREFIX} seed: tiny random Qwen3.5-MoE ({params} parameters) written to {out}")
    return True


def rows(split: str, count: int, rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        op = rng.choice(sorted(OPS))
        question = f"what is {a} {op} {b} ?"
        answer = OPS[op](a, b)
        out.append(
            {
                "data_source": "openai/gsm8k",
                "prompt": [{"role": "user", "content": f"{question} {INSTRUCTION}"}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(answer)},
                "extra_info": {"split": split, "index": i, "question": question, "answer": f"#### {answer}"},
            }
        )
    return out


def write_data(train: Path, test: Path, rows_train: int = 16, rows_test: int = 4) -> list[Path]:
    import pandas as pd

    rng = random.Random(0)
    written = []
    for path, split, count in ((train, "train", rows_train), (test, "test", rows_test)):
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_bytes()[:4] != b"PAR1":
            pd.DataFrame(rows(split, count, rng)).to_parquet(path, index=False)
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m verl_sim_standin.seed", description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--data", type=Path, required=True)
    ns = p.parse_args(argv)
    write_model(ns.model)
    for path in write_data(ns.data / "train.parquet", ns.data / "test.parquet"):
        print(f"{LOG_PREFIX} seed: GSM8K-shaped data written to {path}")
    print(json.dumps({"model": str(ns.model), "data": str(ns.data)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
