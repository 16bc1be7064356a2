"""CKPT_KEEP across attempts: verl prunes only the saves of its own process (its list of saves starts empty,
verl/utils/checkpoint/checkpoint_manager.py), so after a restart or a resume the older saves would stay for ever.
The supervisor prunes the experiment's folder itself, before each attempt and as each save completes: the newest
CKPT_KEEP complete saves stay (verl's tracker names the newest complete one; a save past it is being written and is
never touched), older ones go."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ..checks.resume import latest_step
from ..checks.storage import safetensors_params, step_saves
from ..contracts import checkpoints
from ..memory.checkpoint import save_size
from ..models import ModelArch, ModelConfigError, arch_from_config, read_config_json
from ..recipes import load_recipe


def model_at(values: dict[str, Any], expected: ModelArch) -> ModelArch:
    """The architecture MODEL_PATH's config.json describes (validate has checked it), else the recipe's."""
    try:
        return arch_from_config(expected, read_config_json(Path(str(values["MODEL_PATH"])) / "config.json"))[0]
    except (ModelConfigError, OSError, ValueError, KeyError):
        return expected


def save_bytes(recipe: str, values: dict[str, Any]) -> float:
    """What one save of this launch writes (memory/checkpoint.py), for the checkpoint_space rule."""
    if int(values.get("SAVE_FREQ") or 0) <= 0:
        return 0.0
    r = load_recipe(recipe)
    params = safetensors_params(Path(str(values["MODEL_PATH"])))
    return save_size(model_at(values, r.model), r.engine, params).total


def prune(folder: Path, keep: int) -> list[Path]:
    """Remove the complete saves older than the newest `keep`; the folders removed (nothing when there is no
    tracker: which save is complete is not known)."""
    if keep < 1:
        return []
    newest = latest_step(folder)
    if newest is None:
        return []
    complete = [s for s in step_saves(folder) if s <= newest]
    if newest not in complete:
        return []  # the tracker names a folder that is not there: the resume check refuses it, nothing is removed
    removed = []
    for step in complete[:-keep]:
        path = folder / checkpoints.step_dir(step)
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
    return removed
