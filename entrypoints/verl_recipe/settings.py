"""The one vocabulary of launch settings, and how layers of them are merged.

Precedence, lowest first: recipe defaults < site file < environment < --set KEY=VALUE < extra Hydra overrides.
Upstream's spellings are accepted with a warning naming the canonical one; a key that looks like a typo of a
known one is refused with "did you mean".
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Setting:
    name: str
    kind: str  # int | str | bool | path | list
    help: str
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()


def _s(name: str, kind: str, text: str, *aliases: str, choices: tuple[str, ...] = ()) -> Setting:
    return Setting(name, kind, text, tuple(aliases), choices)


SETTINGS: tuple[Setting, ...] = (
    # cluster and layout
    _s("DEVICE", "str", "accelerator family", choices=("npu", "gpu")),
    _s("NNODES", "int", "nodes in the Ray cluster", "nnodes", "NUM_NODES"),
    _s(
        "NDEVICES_PER_NODE",
        "int",
        "dies (NPU) or GPUs per node",
        "n_devices_per_node",
        "N_GPUS_PER_NODE",
        "NPUS_PER_NODE",
    ),
    _s("TP", "int", "Megatron tensor parallel size (actor and ref)"),
    _s("PP", "int", "Megatron pipeline parallel size"),
    _s("CP", "int", "Megatron context parallel size (1 for Qwen3.5's Gated DeltaNet on megatron-core 0.16.0)"),
    _s("EP", "int", "Megatron expert parallel size"),
    _s("ETP", "int", "Megatron expert tensor parallel size"),
    _s("VPP", "int", "virtual pipeline stages per PP rank (0 = off)"),
    _s("GEN_TP", "int", "rollout (vLLM) tensor parallel size"),
    _s("GEN_DP", "int", "rollout (vLLM) data parallel size per replica"),
    _s("GEN_EP", "int", "rollout expert parallel size (1, or GEN_TP x GEN_DP)"),
    _s("FSDP_SIZE", "int", "FSDP shard group size (FSDP recipes; -1 = whole world)"),
    _s("SP_SIZE", "int", "Ulysses sequence parallel size (FSDP recipes)"),
    # paths and names
    _s("MODEL_PATH", "path", "Hugging Face checkpoint directory on shared storage", "HF_MODEL_PATH"),
    _s("TRAIN_FILES", "list", "training parquet file(s), comma separated", "train_path", "train_files", "TRAIN_FILE"),
    _s(
        "VAL_FILES",
        "list",
        "validation parquet file(s), comma separated",
        "test_path",
        "test_files",
        "TEST_FILE",
        "val_files",
    ),
    _s("CKPT_DIR", "path", "absolute checkpoint root on shared storage", "save_path", "default_local_dir"),
    _s("LOG_DIR", "path", "absolute root for run records and logs on shared storage"),
    _s("PROJECT_NAME", "str", "tracker project name", "project_name"),
    _s("EXPERIMENT_NAME", "str", "tracker experiment name", "experiment_name", "exp_name"),
    # batch and lengths
    _s("TRAIN_BATCH_SIZE", "int", "prompts per step (data.train_batch_size)", "train_batch_size"),
    _s("PPO_MINI_BATCH_SIZE", "int", "prompts per actor update", "ppo_mini_batch_size"),
    _s("PPO_MICRO_BATCH_SIZE_PER_GPU", "int", "sequences per device per micro step"),
    _s("LOG_PROB_MICRO_BATCH_SIZE_PER_GPU", "int", "sequences per device when computing log-probs"),
    _s("PPO_MAX_TOKEN_LEN_PER_GPU", "int", "token budget per device (log-prob and update)"),
    _s("ROLLOUT_N", "int", "responses sampled per prompt (GRPO group size)", "n_resp_per_prompt"),
    _s("MAX_PROMPT_LENGTH", "int", "tokens", "max_prompt_length"),
    _s("MAX_RESPONSE_LENGTH", "int", "tokens", "max_response_length"),
    # training loop
    _s("LR", "str", "actor learning rate"),
    _s("TOTAL_EPOCHS", "int", "epochs"),
    _s("SAVE_FREQ", "int", "checkpoint every N steps (must be > 0)"),
    _s("TEST_FREQ", "int", "validate every N steps"),
    _s("VAL_BEFORE_TRAIN", "bool", "validate before the first step"),
    _s("RESUME_MODE", "str", "resume from the latest checkpoint", choices=("auto", "disable")),
    _s("GEN_MEM_UTIL", "str", "vLLM gpu_memory_utilization"),
    _s("LOGGER", "list", "trackers: console, tensorboard, file, wandb, mlflow, swanlab, clearml, trackio"),
    # workarounds and cluster
    _s("MM_PROCESSOR_CACHE_GB", "int", "vLLM multimodal processor cache (0 = the vLLM #42995 workaround)"),
    _s("FORCE_MM_CACHE", "bool", "allow MM_PROCESSOR_CACHE_GB > 0 on NPU despite vLLM #42995"),
    _s("RAY_ADDRESS", "str", "Ray GCS address given to verl ('auto' = the cluster this node joined)"),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
ALIASES: dict[str, str] = {a: s.name for s in SETTINGS for a in s.aliases}
ENV_SECTION = "env"  # site-file section / --set prefix for the launch environment ("env.HCCL_BUFFSIZE=400")


class SettingsError(ValueError):
    """One problem with a setting, phrased as: the key and value, what is wrong, the fix."""


@dataclass
class Layer:
    """One source of settings, kept so the run record can say where each value came from."""

    source: str
    values: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Resolved:
    values: dict[str, Any]
    origin: dict[str, str]
    env_overrides: dict[str, str]
    env_origin: dict[str, str]
    warnings: list[str]


def suggest(word: str, candidates: list[str] | tuple[str, ...]) -> str | None:
    upper = {c.upper(): c for c in candidates}
    hits = difflib.get_close_matches(word.upper(), list(upper), n=1, cutoff=0.75)
    return upper[hits[0]] if hits else None


def canonical_key(key: str, source: str, warnings: list[str]) -> str:
    if key in BY_NAME:
        return key
    if key in ALIASES:
        canon = ALIASES[key]
        warnings.append(f"warning: {source}: '{key}' is upstream's spelling; use '{canon}' (value applied to {canon})")
        return canon
    if key.upper() in BY_NAME:
        canon = key.upper()
        warnings.append(f"warning: {source}: '{key}' read as '{canon}'")
        return canon
    hint = suggest(key, list(BY_NAME) + list(ALIASES))
    if hint is not None:
        hint = ALIASES.get(hint, hint)
    did = f"; did you mean '{hint}'?" if hint else f"; known settings: {', '.join(sorted(BY_NAME))}"
    raise SettingsError(f"{source}: unknown setting '{key}'{did}")


def coerce(name: str, raw: Any, source: str) -> Any:
    spec = BY_NAME[name]
    if raw is None:
        return None
    if spec.kind == "int":
        if isinstance(raw, bool):
            raise SettingsError(f"{source}: {name}={raw!r} is not an integer; fix: give a whole number")
        try:
            return int(str(raw).strip())
        except ValueError:
            raise SettingsError(f"{source}: {name}={raw!r} is not an integer; fix: give a whole number") from None
    if spec.kind == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise SettingsError(f"{source}: {name}={raw!r} is not a boolean; fix: use true or false")
    if spec.kind == "list":
        items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
        return [str(i).strip() for i in items if str(i).strip()]
    value = str(raw).strip()
    if spec.choices and value not in spec.choices:
        raise SettingsError(f"{source}: {name}={value!r} is not one of {', '.join(spec.choices)}")
    return value


def layer_from_mapping(data: Mapping[str, Any], source: str, warnings: list[str]) -> Layer:
    layer = Layer(source)
    for key, raw in data.items():
        if key == ENV_SECTION:
            if not isinstance(raw, Mapping):
                raise SettingsError(f"{source}: '{ENV_SECTION}' must map variable names to values")
            layer.env.update({str(k): str(v) for k, v in raw.items()})
            continue
        name = canonical_key(str(key), source, warnings)
        layer.values[name] = coerce(name, raw, source)
    return layer


def layer_from_site_file(path: Path, warnings: list[str]) -> Layer:
    if not path.is_file():
        raise SettingsError(f"site file {path} does not exist; fix: pass an existing --site file or drop the flag")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise SettingsError(f"site file {path}: expected a mapping of SETTING: value")
    return layer_from_mapping(data, f"site file {path}", warnings)


def layer_from_environ(environ: Mapping[str, str], env_keys: set[str], warnings: list[str]) -> Layer:
    """Canonical names and upstream aliases found in the process environment, plus launch-env overrides."""
    layer = Layer("environment")
    for name in BY_NAME:
        if name in environ:
            layer.values[name] = coerce(name, environ[name], "environment")
    for alias, canon in ALIASES.items():
        if alias in environ and canon not in environ:
            warnings.append(f"warning: environment: '{alias}' is upstream's spelling; use '{canon}'")
            layer.values[canon] = coerce(canon, environ[alias], "environment")
    for key in env_keys:
        if key in environ:
            layer.env[key] = environ[key]
    return layer


def layer_from_sets(pairs: list[str], warnings: list[str]) -> Layer:
    layer = Layer("--set")
    for pair in pairs:
        if "=" not in pair:
            raise SettingsError(f"--set {pair!r}: expected KEY=VALUE, e.g. --set TP=4")
        key, raw = pair.split("=", 1)
        key = key.strip()
        if key.startswith(ENV_SECTION + "."):
            layer.env[key[len(ENV_SECTION) + 1 :]] = raw
            continue
        name = canonical_key(key, f"--set {key}", warnings)
        layer.values[name] = coerce(name, raw, f"--set {key}")
    return layer


def merge(layers: list[Layer], warnings: list[str]) -> Resolved:
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    env: dict[str, str] = {}
    env_origin: dict[str, str] = {}
    for layer in layers:
        for k, v in layer.values.items():
            values[k] = v
            origin[k] = layer.source
        for k, v in layer.env.items():
            env[k] = v
            env_origin[k] = layer.source
    return Resolved(values, origin, env, env_origin, warnings)


def default_site_file(environ: Mapping[str, str] = os.environ) -> Path | None:
    raw = environ.get("VERL_RECIPE_SITE")
    return Path(raw) if raw else None
