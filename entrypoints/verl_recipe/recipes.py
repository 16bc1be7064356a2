"""Recipe files: one declarative YAML per model launch, on top of the shared base and engine files."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .contracts.health_rules import THRESHOLD_DEFAULTS
from .hydra_syntax import bare_key
from .layers import layer_from_mapping
from .models import MODELS, ModelArch
from .settingtypes import ENGINES, SettingsError
from .suggest import suggest

RECIPE_DIR = Path(__file__).resolve().parent / "recipes"
_TOP_KEYS = {
    "description",
    "model",
    "engine",
    "settings",
    "gpu_settings",
    "hydra",
    "npu_hydra",
    "gpu_hydra",
    "env",
    "npu_env",
}


@dataclass
class Recipe:
    name: str
    description: str
    model: ModelArch
    engine: str
    # Each part merged base < engine < recipe; device-specific parts are applied by the renderer.
    settings: dict[str, Any] = field(default_factory=dict)
    gpu_settings: dict[str, Any] = field(default_factory=dict)
    hydra: dict[str, Any] = field(default_factory=dict)
    npu_hydra: dict[str, Any] = field(default_factory=dict)
    gpu_hydra: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    npu_env: dict[str, str] = field(default_factory=dict)


def recipe_names(recipe_dir: Path = RECIPE_DIR) -> list[str]:
    return sorted(p.stem for p in recipe_dir.glob("*.yaml") if not p.name.startswith("_"))


SERVICE_PREFIX = "train-"
MODEL_FAMILY = "qwen3.5-"


def service_name(recipe: str) -> str:
    """The compose service that runs a recipe's launch: qwen3.5-397b -> train-397b (make docs writes the train-*
    services of compose.yaml and compose.sim.yaml from the recipes)."""
    return SERVICE_PREFIX + recipe.removeprefix(MODEL_FAMILY)


def _load_yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: expected a mapping")
    unknown = set(data) - _TOP_KEYS
    if unknown:
        key = sorted(unknown)[0]
        hint = suggest(key, sorted(_TOP_KEYS))
        raise SettingsError(f"{path}: unknown key '{key}'" + (f"; did you mean '{hint}'?" if hint else ""))
    return data


def merge_hydra(*parts: dict[str, Any]) -> dict[str, Any]:
    """Later parts win; a key is the same key whatever its +/++ prefix (the last prefix is kept)."""
    out: dict[str, Any] = {}
    index: dict[str, str] = {}
    for part in parts:
        for key, value in part.items():
            bare = bare_key(key)
            if bare in index:
                out.pop(index[bare])
            out[key] = value
            index[bare] = key
    return out


def load_recipe(name: str, recipe_dir: Path = RECIPE_DIR) -> Recipe:
    path = recipe_dir / f"{name}.yaml"
    if name.startswith("_") or not path.is_file():
        known = recipe_names(recipe_dir)
        hint = suggest(name, known)
        did = f"did you mean '{hint}'? " if hint else ""
        raise SettingsError(f"unknown recipe '{name}'; {did}known recipes: {', '.join(known)}")
    own = _load_yaml(path)
    engine = own.get("engine")
    if engine not in ENGINES:
        raise SettingsError(f"{path}: engine={engine!r} must be one of {', '.join(ENGINES)}")
    model_name = own.get("model")
    if model_name not in MODELS:
        raise SettingsError(f"{path}: model={model_name!r} must be one of {', '.join(MODELS)}")
    # The health rules' threshold defaults are the lowest layer: they live with the rules, not in _base.yaml.
    defaults = {"settings": dict(THRESHOLD_DEFAULTS)}
    parts = [defaults, _load_yaml(recipe_dir / "_base.yaml"), _load_yaml(recipe_dir / f"_{engine}.yaml"), own]
    warnings: list[str] = []

    def settings_of(key: str) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for p in parts:
            layer = layer_from_mapping(p.get(key) or {}, f"recipe {name} ({key})", warnings)
            merged.update(layer.values)
        return merged

    def dicts_of(key: str) -> dict[str, Any]:
        return merge_hydra(*[p.get(key) or {} for p in parts])

    settings, gpu_settings = settings_of("settings"), settings_of("gpu_settings")
    if warnings:
        # Recipe files must use canonical names: aliases are for users, not for us.
        raise SettingsError(warnings[0].replace("warning: ", ""))
    return Recipe(
        name=name,
        description=str(own.get("description", "")),
        model=MODELS[model_name],
        engine=engine,
        settings=settings,
        gpu_settings=gpu_settings,
        hydra=dicts_of("hydra"),
        npu_hydra=dicts_of("npu_hydra"),
        gpu_hydra=dicts_of("gpu_hydra"),
        env={k: str(v) for k, v in dicts_of("env").items()},
        npu_env={k: str(v) for k, v in dicts_of("npu_env").items()},
    )
