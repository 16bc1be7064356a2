"""Render: a recipe plus resolved settings -> the exact launch (environment and argv)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from .devices import overlay as device_overlay
from .hydra_syntax import Raw, hydra_value, quote
from .layers import Resolved
from .recipes import Recipe, merge_hydra
from .secretfiles import HOOK_KEY as SECRET_HOOK_KEY
from .secretfiles import SECRET_FILES_ENV, SETUP_HOOK
from .secretfiles import encode as encode_secret_files
from .settings import BY_NAME, SETTINGS
from .settingtypes import (
    AS_IS,
    DEVICE_NAME,
    EXPERIMENT_DIR,
    FILES,
    LIST,
    WHILE_WORKAROUND,
    ZERO_IS_NULL,
    Setting,
    SettingsError,
)
from .workarounds import mm_cache_rule_active

ENTRY = ["python3", "-m", "verl.trainer.main_ppo"]
RUNTIME_ENV_PREFIX = "+ray_kwargs.ray_init.runtime_env.env_vars."
MM_CACHE = BY_NAME["MM_PROCESSOR_CACHE_GB"]  # rendered while the vLLM #42995 workaround is needed, or when set


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


def with_env(launch: Launch, extra: dict[str, str]) -> Launch:
    """The launch with more environment, for the driver and, through the job's runtime_env, every worker."""
    env = {**launch.env, **extra}
    overrides = dict(launch.overrides)
    overrides.update({f"{RUNTIME_ENV_PREFIX}{k}": Raw(quote(v)) for k, v in sorted(extra.items())})
    return Launch(launch.recipe, env, overrides, list(launch.extra), launch.memory)


def experiment_dir(root: str, values: dict[str, Any]) -> str:
    return f"{root.rstrip('/')}/{values['PROJECT_NAME']}/{values['EXPERIMENT_NAME']}"


# DEVICE -> verl's trainer.device; validate reads an extra override of trainer.device back through it.
DEVICE_HYDRA = {"npu": "npu", "gpu": "cuda", "cpu": "cpu"}

# One formatter per form of the settings table (settings.py): a setting's value -> its Hydra value.
FORMS: dict[str, Callable[[Any, dict[str, Any]], Any]] = {
    AS_IS: lambda value, values: value,
    DEVICE_NAME: lambda value, values: DEVICE_HYDRA.get(value, value),
    FILES: lambda value, values: value[0] if len(value) == 1 else list(value),  # verl takes a path or a list
    LIST: lambda value, values: list(value),
    EXPERIMENT_DIR: lambda value, values: experiment_dir(value, values),
    ZERO_IS_NULL: lambda value, values: value or None,
}


def rendered_settings(engine: str) -> list[Setting]:
    """The settings whose Hydra keys a launch on this engine always carries, in the table's order (the order of
    their overrides in argv)."""
    # MM_PROCESSOR_CACHE_GB (while the workaround is needed) is rendered by render() itself, when its rule holds.
    return [s for s in SETTINGS if not s.not_rendered and s.form != WHILE_WORKAROUND and engine in s.engines]


def settings_overrides(recipe: Recipe, values: dict[str, Any]) -> dict[str, Any]:
    """The Hydra keys each setting drives (settings.py's table). Settings win over the recipe's own Hydra entries.

    Consecutive settings of the same roles are written role by role: all of the actor's, then all of the ref's.
    """
    out: dict[str, Any] = {}
    for roles, run in groupby(rendered_settings(recipe.engine), key=lambda s: s.roles):
        group = list(run)
        for role in roles or (None,):
            for spec in group:
                hydra = FORMS[spec.form](values[spec.name], values)
                out.update(dict.fromkeys(spec.hydra_keys(role), hydra))
    return out


def device_parts(recipe: Recipe, values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The device's own Hydra entries and launch environment."""
    device = values["DEVICE"]
    if device == "npu":
        env = dict(recipe.npu_env)
        dies = visible_dies(values["NDEVICES_PER_NODE"], recipe.engine)
        env["ASCEND_RT_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(dies))
        return recipe.npu_hydra, env
    if device == "cpu":
        standin = device_overlay("cpu")
        return dict(standin["hydra"]), {k: str(v) for k, v in standin["env"].items()}
    return recipe.gpu_hydra, {}


def visible_dies(n: Any, engine: str) -> int:
    """NDEVICES_PER_NODE checked against its domain before the die list is built from it (render has no other
    check, and a huge count would build a huge list)."""
    spec = BY_NAME["NDEVICES_PER_NODE"]
    assert spec.domain is not None
    wrong = spec.domain.violation(n, engine) if isinstance(n, int) else "must be a whole number"
    if wrong:
        raise SettingsError(
            f"NDEVICES_PER_NODE={n}: {wrong} ({spec.domain.why}); fix: set NDEVICES_PER_NODE {spec.domain.range_text()}"
        )
    return int(n)


def launch_env(recipe: Recipe, resolved: Resolved) -> dict[str, str]:
    values = resolved.values
    env = dict(recipe.env)
    env.update(device_parts(recipe, values)[1])
    if "tensorboard" in values["LOGGER"]:
        env["TENSORBOARD_DIR"] = experiment_dir(values["LOG_DIR"], values) + "/tensorboard"
    env.update(resolved.env_overrides)
    if resolved.secret_files:  # where each worker reads its secrets; never their content (secretfiles.py)
        env[SECRET_FILES_ENV] = encode_secret_files(resolved.secret_files)
    return env


def render(recipe: Recipe, resolved: Resolved, extra: list[str]) -> Launch:
    values = resolved.values
    device_hydra = device_parts(recipe, values)[0]
    env = launch_env(recipe, resolved)
    # Every worker gets the launch environment through the job's runtime_env; Ray workers inherit the raylet's
    # environment, not the driver's, so exports in the driver alone would not reach them.
    runtime_env = {f"{RUNTIME_ENV_PREFIX}{k}": Raw(quote(env[k])) for k in sorted(env)}
    settings_part = settings_overrides(recipe, values)
    # The vLLM #42995 workaround: rendered on NPU, elsewhere while the pinned vLLM lacks the fix, or when set.
    if mm_cache_rule_active(str(values["DEVICE"])) or not resolved.origin.get(MM_CACHE.name, "").startswith("recipe"):
        settings_part.update(dict.fromkeys(MM_CACHE.hydra_keys(), values[MM_CACHE.name]))
    if resolved.secret_files:
        runtime_env[SECRET_HOOK_KEY] = Raw(SETUP_HOOK)
    overrides = merge_hydra(recipe.hydra, device_hydra, settings_part, runtime_env)
    return Launch(recipe=recipe.name, env=env, overrides=overrides, extra=list(extra))
