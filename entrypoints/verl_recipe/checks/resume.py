"""Resume that cannot pick up the wrong checkpoint: with RESUME_MODE=auto, the checkpoint verl would resume (its
tracker file) is compared with this launch before anything starts. Another model or layout is refused in one line
naming the checkpoint, what differs and the fix; a tracker naming a step folder that is not there is refused (verl
would silently start from scratch); a checkpoint at or past TOTAL_TRAINING_STEPS means the run is complete."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..contracts import checkpoints
from ..render import experiment_dir
from .problem import Problem

# The settings that shape what a checkpoint holds, by engine: FSDP shards by world size (verl's
# model_world_size_<W>_rank_<r>.pt) and FSDP_SIZE; Megatron's distributed checkpoint by its parallel sizes.
LAYOUT = {
    "fsdp": ("FSDP_SIZE",),
    "megatron": ("TP", "PP", "CP", "EP", "ETP"),
}
CONFIG_MAX_BYTES = 16 * 1024 * 1024


def checkpoint_dir(values: dict[str, Any]) -> Path:
    return Path(experiment_dir(str(values["CKPT_DIR"]), values))


def config_sha256(model_path: str) -> str | None:
    cfg = Path(model_path) / "config.json"
    try:
        if cfg.stat().st_size > CONFIG_MAX_BYTES:
            return None
        return hashlib.sha256(cfg.read_bytes()).hexdigest()
    except OSError:
        return None


def identity(recipe: str, engine: str, values: dict[str, Any]) -> dict[str, Any]:
    """What a checkpoint written by this launch holds it was written with."""
    world = int(values["NNODES"]) * int(values["NDEVICES_PER_NODE"])
    layout = {"world_size": world, **{k: values[k] for k in LAYOUT.get(engine, ()) if k in values}}
    return {
        "schema": checkpoints.IDENTITY_SCHEMA,
        "recipe": recipe,
        "engine": engine,
        "model_path": str(values["MODEL_PATH"]),
        "model_config_sha256": config_sha256(str(values["MODEL_PATH"])),
        "layout": layout,
        "train_files": [str(f) for f in values.get("TRAIN_FILES") or []],
    }


def latest_step(folder: Path) -> int | None:
    """The step verl's tracker names, or None when there is no (readable) tracker: verl starts from scratch."""
    try:
        text = (folder / checkpoints.TRACKER).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def read_identity(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / checkpoints.IDENTITY).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _describe(key: str, value: Any) -> str:
    if key == "layout" and isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items()))
    if key == "model_config_sha256" and isinstance(value, str):
        return f"config.json sha256 {value[:12]}"
    return f"{key}={value}"


def check(recipe: str, engine: str, values: dict[str, Any]) -> tuple[list[Problem], list[str]]:
    """Problems (refused) and notes of resuming this experiment's checkpoint with this launch."""
    if str(values.get("RESUME_MODE", "auto")) != "auto":
        return [], []
    folder = checkpoint_dir(values)
    step = latest_step(folder)
    if step is None:
        return [], []
    ckpt = folder / checkpoints.step_dir(step)
    subject = f"checkpoint {ckpt}"
    fixes = "another EXPERIMENT_NAME for a new run, or RESUME_MODE=disable to train from scratch over it"
    if not ckpt.is_dir():
        what = f"{checkpoints.TRACKER} names step {step}, whose folder is missing (verl would start from scratch)"
        return [Problem(subject, what, f"restore the folder, or {fixes}")], []
    written = read_identity(folder)
    if written is None:
        note = f"note: {subject} has no {checkpoints.IDENTITY} (written by another tool): resumed without comparing"
        return [], [note]
    now = identity(recipe, engine, values)
    problems: list[Problem] = []
    for key in checkpoints.MUST_MATCH:
        old, new = written.get(key), now.get(key)
        if key == "model_config_sha256" and (old is None or new is None):
            continue  # one side could not read config.json: model_path still compares
        if old != new:
            if isinstance(old, dict) and isinstance(new, dict):  # name only the layout parts that differ
                keys = sorted(k for k in {*old, *new} if old.get(k) != new.get(k))
                old, new = {k: old.get(k) for k in keys}, {k: new.get(k) for k in keys}
            what = f"was written with {_describe(key, old)}, this launch has {_describe(key, new)}"
            fix = f"set the checkpoint's {key.replace('_', ' ')} back, or {fixes}"
            problems.append(Problem(subject, what, fix))
    notes = []
    for key in checkpoints.REPORTED:
        if written.get(key) != now.get(key):
            notes.append(f"note: {subject} was trained on {written.get(key)}; this launch goes on with {now.get(key)}")
    return problems, notes


def complete(values: dict[str, Any]) -> str | None:
    """One line when RESUME_MODE=auto would resume a checkpoint at or past TOTAL_TRAINING_STEPS: nothing to train."""
    total = int(values.get("TOTAL_TRAINING_STEPS") or 0)
    if str(values.get("RESUME_MODE", "auto")) != "auto" or total <= 0:
        return None
    folder = checkpoint_dir(values)
    step = latest_step(folder)
    if step is None or step < total or not (folder / checkpoints.step_dir(step)).is_dir():
        return None
    return (
        f"complete: {folder / checkpoints.step_dir(step)} is step {step} of TOTAL_TRAINING_STEPS={total}; nothing "
        "to train (a larger TOTAL_TRAINING_STEPS goes on from it, another EXPERIMENT_NAME starts a new run)"
    )
