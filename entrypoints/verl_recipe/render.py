"""Render: a recipe plus resolved settings -> the exact launch (environment and argv)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .manifest import load_manifest, version_tuple
from .recipes import Recipe, merge_hydra
from .settings import Resolved

ENTRY = ["python3", "-m", "verl.trainer.main_ppo"]
_PLAIN = re.compile(r"^[A-Za-z0-9_./\-]+$")
RUNTIME_ENV_PREFIX = "+ray_kwargs.ray_init.runtime_env.env_vars."
MM_CACHE_KEY = "+actor_rollout_ref.rollout.engine_kwargs.vllm.mm_processor_cache_gb"


@dataclass
class Launch:
    recipe: str
    env: dict[str, str]
    overrides: dict[str, Any]  # Hydra key (with its +/++ prefix) -> value, before formatting
    extra: list[str]
    memory: dict[str, Any] | None = None  # the memory plan's estimate (memory.py), None when not computable

    @property
    def hydra_args(self) -> list[str]:
        return [f"{k}={hydra_value(v)}" for k, v in self.overrides.items()] + list(self.extra)

    @property
    def argv(self) -> list[str]:
        return [*ENTRY, *self.hydra_args]

    def to_json(self) -> str:
        doc = {"recipe": self.recipe, "env": dict(sorted(self.env.items())), "argv": self.argv, "memory": self.memory}
        return json.dumps(doc, indent=2, sort_keys=False) + "\n"


class Raw(str):
    """A value already in Hydra override syntax."""


def quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def hydra_value(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(quote(str(v)) for v in value) + "]"
    text = str(value)
    # Recipe authors may write Hydra list syntax directly ("[4,12,24]").
    if text.startswith("[") and text.endswith("]"):
        return text
    return text if _PLAIN.match(text) else quote(text)


def mm_cache_rule_active() -> bool:
    """The vLLM #42995 workaround is needed while the pinned vLLM predates its fix."""
    manifest = load_manifest()
    pinned = version_tuple(str(manifest["git_sources"]["vllm"]["version"]))
    fixed = version_tuple(str(manifest["workarounds"]["vllm_mm_processor_cache"]["fixed_in_vllm"]))
    return pinned < fixed


def experiment_dir(root: str, v: dict[str, Any]) -> str:
    return f"{root.rstrip('/')}/{v['PROJECT_NAME']}/{v['EXPERIMENT_NAME']}"


def settings_overrides(recipe: Recipe, v: dict[str, Any]) -> dict[str, Any]:
    """The Hydra keys each setting drives. Settings win over the recipe's own Hydra entries."""
    arr = "actor_rollout_ref"
    files = lambda xs: xs[0] if len(xs) == 1 else list(xs)  # noqa: E731 - verl takes a path or a list
    out: dict[str, Any] = {
        "trainer.device": "npu" if v["DEVICE"] == "npu" else "cuda",
        "trainer.nnodes": v["NNODES"],
        "trainer.n_gpus_per_node": v["NDEVICES_PER_NODE"],
        "data.train_files": files(v["TRAIN_FILES"]),
        "data.val_files": files(v["VAL_FILES"]),
        "data.train_batch_size": v["TRAIN_BATCH_SIZE"],
        "data.max_prompt_length": v["MAX_PROMPT_LENGTH"],
        "data.max_response_length": v["MAX_RESPONSE_LENGTH"],
        f"{arr}.model.path": v["MODEL_PATH"],
        f"{arr}.actor.optim.lr": v["LR"],
        f"{arr}.actor.ppo_mini_batch_size": v["PPO_MINI_BATCH_SIZE"],
        f"{arr}.actor.ppo_micro_batch_size_per_gpu": v["PPO_MICRO_BATCH_SIZE_PER_GPU"],
        f"{arr}.rollout.tensor_model_parallel_size": v["GEN_TP"],
        f"{arr}.rollout.data_parallel_size": v["GEN_DP"],
        f"{arr}.rollout.expert_parallel_size": v["GEN_EP"],
        f"{arr}.rollout.gpu_memory_utilization": v["GEN_MEM_UTIL"],
        f"{arr}.rollout.n": v["ROLLOUT_N"],
        f"{arr}.rollout.log_prob_micro_batch_size_per_gpu": v["LOG_PROB_MICRO_BATCH_SIZE_PER_GPU"],
        f"{arr}.ref.log_prob_micro_batch_size_per_gpu": v["LOG_PROB_MICRO_BATCH_SIZE_PER_GPU"],
        "trainer.logger": list(v["LOGGER"]),
        "trainer.project_name": v["PROJECT_NAME"],
        "trainer.experiment_name": v["EXPERIMENT_NAME"],
        "trainer.save_freq": v["SAVE_FREQ"],
        "trainer.test_freq": v["TEST_FREQ"],
        "trainer.total_epochs": v["TOTAL_EPOCHS"],
        "trainer.val_before_train": v["VAL_BEFORE_TRAIN"],
        # Absolute, on shared storage: the TaskRunner may land on any node after a restart.
        "trainer.default_local_dir": experiment_dir(v["CKPT_DIR"], v),
        "trainer.resume_mode": v["RESUME_MODE"],
        # Fail fast when no cluster is reachable instead of silently starting a private one-node cluster.
        "+ray_kwargs.ray_init.address": v["RAY_ADDRESS"],
    }
    if recipe.engine == "megatron":
        for role in ("actor", "ref"):
            m = f"{arr}.{role}.megatron"
            out[f"{m}.tensor_model_parallel_size"] = v["TP"]
            out[f"{m}.pipeline_model_parallel_size"] = v["PP"]
            out[f"{m}.context_parallel_size"] = v["CP"]
            out[f"{m}.expert_model_parallel_size"] = v["EP"]
            out[f"{m}.expert_tensor_parallel_size"] = v["ETP"]
        out[f"{arr}.actor.megatron.virtual_pipeline_model_parallel_size"] = v["VPP"] or None
        tokens = v["PPO_MAX_TOKEN_LEN_PER_GPU"]
        out[f"{arr}.actor.ppo_max_token_len_per_gpu"] = tokens
        out[f"{arr}.rollout.log_prob_max_token_len_per_gpu"] = tokens
        out[f"{arr}.ref.log_prob_max_token_len_per_gpu"] = tokens
    else:
        out[f"{arr}.actor.fsdp_config.fsdp_size"] = v["FSDP_SIZE"]
        out[f"{arr}.actor.fsdp_config.ulysses_sequence_parallel_size"] = v["SP_SIZE"]
        out[f"{arr}.ref.fsdp_config.ulysses_sequence_parallel_size"] = v["SP_SIZE"]
    return out


def launch_env(recipe: Recipe, resolved: Resolved) -> dict[str, str]:
    v = resolved.values
    env = dict(recipe.env)
    if v["DEVICE"] == "npu":
        env.update(recipe.npu_env)
        env["ASCEND_RT_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(v["NDEVICES_PER_NODE"]))
    if "tensorboard" in v["LOGGER"]:
        env["TENSORBOARD_DIR"] = experiment_dir(v["LOG_DIR"], v) + "/tensorboard"
    env.update(resolved.env_overrides)
    return env


def render(recipe: Recipe, resolved: Resolved, extra: list[str]) -> Launch:
    v = resolved.values
    npu = v["DEVICE"] == "npu"
    device_hydra = recipe.npu_hydra if npu else recipe.gpu_hydra
    env = launch_env(recipe, resolved)
    # Every worker gets the launch environment through the job's runtime_env; Ray workers inherit the raylet's
    # environment, not the driver's, so exports in the driver alone would not reach them.
    runtime_env = {f"{RUNTIME_ENV_PREFIX}{k}": Raw(quote(env[k])) for k in sorted(env)}
    settings_part = settings_overrides(recipe, v)
    # The vLLM #42995 workaround: rendered while the pinned vLLM lacks the fix, or when the user sets the value.
    if mm_cache_rule_active() or not resolved.origin.get("MM_PROCESSOR_CACHE_GB", "").startswith("recipe"):
        settings_part[MM_CACHE_KEY] = v["MM_PROCESSOR_CACHE_GB"]
    overrides = merge_hydra(recipe.hydra, device_hydra, settings_part, runtime_env)
    launch = Launch(recipe=recipe.name, env=env, overrides=overrides, extra=list(extra))
    launch.memory = memory_estimate(recipe, v, launch)
    return launch


def memory_estimate(recipe: Recipe, values: dict[str, Any], launch: Launch) -> dict[str, Any] | None:
    """The memory plan for this launch, with the recipe's architecture; None when the settings give no layout."""
    from .memory import Knobs, estimate

    try:
        knobs = Knobs.from_launch(launch.overrides, launch.extra, launch.env)
        return estimate(recipe.name, recipe.engine, recipe.model, values, knobs).to_dict()
    except (ArithmeticError, ValueError, TypeError, KeyError):
        return None


class _Marker(str):
    """Stands in for a setting's value to learn which Hydra key it drives."""


def setting_keys(recipe: Recipe) -> dict[str, str]:
    """Hydra key (without +) -> the setting that drives it one-to-one."""
    from .settings import BY_NAME

    probe: dict[str, Any] = {name: _Marker(name) for name in BY_NAME}
    probe["DEVICE"], probe["TRAIN_FILES"], probe["VAL_FILES"], probe["LOGGER"] = "npu", ["x"], ["x"], []
    out = {k.lstrip("+"): str(val) for k, val in settings_overrides(recipe, probe).items() if isinstance(val, _Marker)}
    out.update({"data.train_files": "TRAIN_FILES", "data.val_files": "VAL_FILES", "trainer.logger": "LOGGER"})
    return out
