"""Compose a rendered launch against verl's own Hydra config (where verl is installed).

Only verl's YAML files are needed: the package is located without importing it, so this works with
`pip install --no-deps verl==0.8.0` and on the image alike.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

from .hydra_syntax import override_key
from .suggest import suggest

CONFIG_NAME = "ppo_trainer"


def verl_config_dir() -> Path | None:
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "trainer" / "config"
        if (candidate / f"{CONFIG_NAME}.yaml").is_file():
            return candidate
    return None


def hydra_available() -> bool:
    return importlib.util.find_spec("hydra") is not None and verl_config_dir() is not None


def _compose(overrides: list[str]) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    config_dir = verl_config_dir()
    assert config_dir is not None
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name=CONFIG_NAME, overrides=overrides)


def _known_keys(cfg: Any, prefix: str = "") -> list[str]:
    from omegaconf import DictConfig

    keys: list[str] = []
    if isinstance(cfg, DictConfig):
        for k in cfg:
            path = f"{prefix}.{k!s}" if prefix else str(k)
            keys.append(path)
            try:
                keys.extend(_known_keys(cfg._get_node(k), path))
            except Exception:  # noqa: BLE001 - interpolations that cannot resolve alone are still keys
                continue
    return keys


def _explain(message: str, overrides: list[str]) -> tuple[str, str]:
    """Turn Hydra's multi-line error into one line naming the override and a likely fix."""
    first = message.strip().splitlines()[0] if message.strip() else "composition failed"
    match = re.search(r"override '([^']+)'", first) or re.search(r"Key '([^']+)'", first)
    if match:
        bad = match.group(1)
        hint = None
        parent, _, leaf = bad.rpartition(".")
        try:
            base = _compose([o for o in overrides if override_key(o) != bad])
            siblings = [k.rpartition(".")[2] for k in _known_keys(base) if k.rpartition(".")[0] == parent]
            near = suggest(leaf, siblings)
            hint = f"{parent}.{near}" if near and parent else near
        except Exception:  # noqa: BLE001 - the hint is best effort; the error itself is what matters
            hint = None
        if hint and hint != bad:
            return first.rstrip("."), f"did you mean '{hint}'?"
        return first.rstrip("."), "check the key against verl's ppo_trainer.yaml, or prefix '+' to add a new key"
    return first.rstrip("."), "check the override's syntax against verl's ppo_trainer.yaml"


def compose_launch(hydra_args: list[str]) -> tuple[Any | None, tuple[str, str] | None]:
    """(composed config, None) or (None, (what is wrong, fix)), each one line."""
    try:
        return _compose(hydra_args), None
    except Exception as exc:  # noqa: BLE001 - Hydra raises several exception types for bad overrides
        return None, _explain(str(exc), hydra_args)


def composition_errors(hydra_args: list[str], limit: int = 10) -> tuple[Any | None, list[tuple[str, str]]]:
    """Every override Hydra refuses (it stops at the first, so drop each culprit and compose again)."""
    args = list(hydra_args)
    errors: list[tuple[str, str]] = []
    for _ in range(limit):
        cfg, error = compose_launch(args)
        if error is None:
            return (cfg if not errors else None), errors
        errors.append(error)
        match = re.search(r"'([^']+)'", error[0])
        culprit = match.group(1).lstrip("+") if match else None
        remaining = [a for a in args if culprit is None or override_key(a) != culprit]
        if len(remaining) == len(args):
            break
        args = remaining
    return None, errors


def select(cfg: Any, dotted: str) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.select(cfg, dotted, throw_on_missing=False)
