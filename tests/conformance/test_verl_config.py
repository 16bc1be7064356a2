"""Conformance: every rendered launch composes against verl 0.8.0's real Hydra config with the intended values."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from verl_recipe.hydra_check import compose_launch, hydra_available, select, verl_config_dir
from verl_recipe.render import render
from verl_recipe.resolve import Request, resolve

# Upstream's launch arguments, carried in the repository with their source (repository, commit, script).
UPSTREAM = Path(__file__).with_name("upstream_launches.yaml")


def test_verl_config_is_the_pinned_release() -> None:
    assert hydra_available(), "the dev environment installs verl==0.8.0 (--no-deps) and hydra-core"
    config_dir = verl_config_dir()
    assert config_dir is not None
    version = (config_dir.parents[1] / "version" / "version").read_text().strip()
    assert version == "0.8.0"


def compose(recipe: str, sets: list[str], extra: list[str] | None = None) -> Any:
    r, res = resolve(Request(recipe, sets=sets), environ={})
    cfg, error = compose_launch(render(r, res, extra or []).hydra_args)
    assert error is None, error
    return cfg


MATRIX = [
    ("qwen3.5-397b", {}),
    ("qwen3.5-397b", {"TP": 4, "PP": 2, "EP": 32, "GEN_TP": 8, "GEN_DP": 32, "GEN_EP": 256}),
    ("qwen3.5-397b", {"NNODES": 4, "EP": 16, "GEN_DP": 4, "GEN_EP": 64, "VPP": 5}),
    ("qwen3.5-122b", {}),
    ("qwen3.5-122b", {"NNODES": 16, "VPP": 3}),
    ("qwen3.5-35b", {}),
    ("qwen3.5-35b", {"NNODES": 16, "TRAIN_BATCH_SIZE": 64, "PPO_MINI_BATCH_SIZE": 64, "EP": 16}),
    ("qwen3.5-35b-fsdp", {}),
    ("qwen3.5-35b-fsdp", {"NNODES": 16, "TRAIN_BATCH_SIZE": 256, "PPO_MINI_BATCH_SIZE": 256, "SP_SIZE": 2}),
    ("qwen3.5-35b", {"DEVICE": "gpu"}),
    ("qwen3.5-397b", {"DEVICE": "gpu"}),
]


@pytest.mark.parametrize(("recipe", "layout"), MATRIX)
def test_composed_config_holds_intended_values(recipe: str, layout: dict[str, Any]) -> None:
    cfg = compose(recipe, [f"{k}={v}" for k, v in layout.items()])
    r, res = resolve(Request(recipe, sets=[f"{k}={v}" for k, v in layout.items()]), environ={})
    v = res.values
    arr = "actor_rollout_ref"
    expect = {
        "trainer.nnodes": v["NNODES"],
        "trainer.n_gpus_per_node": v["NDEVICES_PER_NODE"],
        "trainer.device": "npu" if v["DEVICE"] == "npu" else "cuda",
        "trainer.resume_mode": "auto",
        "trainer.save_freq": v["SAVE_FREQ"],
        "data.train_batch_size": v["TRAIN_BATCH_SIZE"],
        f"{arr}.rollout.n": v["ROLLOUT_N"],
        f"{arr}.rollout.tensor_model_parallel_size": v["GEN_TP"],
        f"{arr}.rollout.data_parallel_size": v["GEN_DP"],
        f"{arr}.rollout.expert_parallel_size": v["GEN_EP"],
        f"{arr}.rollout.engine_kwargs.vllm.mm_processor_cache_gb": 0,
        "ray_kwargs.ray_init.address": "auto",
    }
    if r.engine == "megatron":
        expect.update(
            {
                f"{arr}.actor.strategy": "megatron",
                f"{arr}.actor.megatron.tensor_model_parallel_size": v["TP"],
                f"{arr}.actor.megatron.pipeline_model_parallel_size": v["PP"],
                f"{arr}.actor.megatron.expert_model_parallel_size": v["EP"],
                f"{arr}.ref.megatron.expert_model_parallel_size": v["EP"],
                f"{arr}.actor.megatron.virtual_pipeline_model_parallel_size": v["VPP"] or None,
                f"{arr}.actor.megatron.use_remove_padding": False,
                f"{arr}.model.use_remove_padding": False,
            }
        )
    else:
        expect.update(
            {
                f"{arr}.actor.strategy": "fsdp2",
                f"{arr}.actor.fsdp_config.fsdp_size": v["FSDP_SIZE"],
                f"{arr}.actor.fsdp_config.ulysses_sequence_parallel_size": v["SP_SIZE"],
            }
        )
    for key, value in expect.items():
        assert select(cfg, key) == value, key
    # verl's file logger is the run record's metric stream (metrics.jsonl), so it is on by default
    assert list(select(cfg, "trainer.logger")) == list(v["LOGGER"]) == ["console", "tensorboard", "file"]
    assert str(select(cfg, "trainer.default_local_dir")).startswith("/")
    env_vars = select(cfg, "ray_kwargs.ray_init.runtime_env.env_vars")
    assert all(isinstance(x, str) for x in env_vars.values()), "Ray requires string env values"


def test_mistyped_key_fails_composition_with_a_clear_message() -> None:
    r, res = resolve(Request("qwen3.5-397b"), environ={})
    cfg, error = compose_launch(render(r, res, ["actor_rollout_ref.rollout.tensor_model_paralel_size=4"]).hydra_args)
    assert cfg is None and error is not None
    what, fix = error
    assert "actor_rollout_ref.rollout.tensor_model_paralel_size" in what
    assert fix == "did you mean 'actor_rollout_ref.rollout.tensor_model_parallel_size'?"


def upstream_overrides(recipe: str) -> list[str]:
    doc = yaml.safe_load(UPSTREAM.read_text())
    assert doc["source"]["repository"] == "verl-project/verl" and doc["source"]["commit"], "provenance is recorded"
    launch = doc["launches"][recipe]
    assert launch["script"].endswith(".sh")
    placeholders = {
        "<MODEL_PATH>": "/m",
        "<TRAIN_FILES>": "/t.parquet",
        "<VAL_FILES>": "/v.parquet",
        "<CKPT_DIR>": "/c",
        "<PROJECT>": "p",
        "<EXPERIMENT>": "e",
    }
    out = []
    for line in launch["args"]:
        for k, val in placeholders.items():
            line = line.replace(k, val)
        # The file records the shell text of the scripts: unquote it as the shell does.
        out.append(shlex.split(line)[0])
    return out


# Differences from upstream that are deliberate (docs/recipes.md, "Upstream defects fixed").
DELIBERATE = {
    "trainer.logger",
    "trainer.project_name",
    "trainer.experiment_name",
    "trainer.default_local_dir",
    "trainer.resume_from_path",
    "data.train_files",
    "data.val_files",
    "actor_rollout_ref.model.path",
}


@pytest.mark.parametrize("recipe", ["qwen3.5-397b", "qwen3.5-122b", "qwen3.5-35b", "qwen3.5-35b-fsdp"])
def test_npu_launch_matches_upstream_except_documented_fixes(recipe: str) -> None:
    upstream_args = upstream_overrides(recipe)
    up_cfg, error = compose_launch(upstream_args)
    assert error is None, error
    ours = compose(recipe, [])
    checked = 0
    for arg in upstream_args:
        key = re.sub(r"^\+*", "", arg.split("=", 1)[0])
        if key in DELIBERATE or key == "model_engine":
            continue
        assert select(ours, key) == select(up_cfg, key), f"{recipe}: {key}"
        checked += 1
    assert checked > 40
