"""Which save an export reads: a run (its folder, `<experiment>/<stamp>` or an experiment, as `runs` prints them)
or an experiment's checkpoint folder, and a step (the newest complete one by default). The identity verl-recipe
writes beside the saves (contracts/checkpoints.py) says the engine and the base model; a step past verl's tracker is
being written or was cut short, and is refused."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checks.problem import Problem
from ..checks.resume import checkpoint_dir, latest_step, read_identity
from ..checks.storage import step_saves
from ..contracts import checkpoints, runfiles

ACTOR = "actor"
# verl 0.8.0's FSDP checkpoint manager (verl/utils/checkpoint/fsdp_checkpoint_manager.py): one model file per rank
# and fsdp_config.json with the world size; Megatron's (megatron_checkpoint_manager.py): the model as Hugging Face
# safetensors in huggingface/ (use_dist_checkpointing False, its default with a bridge).
FSDP_CONFIG = "fsdp_config.json"
HF_DIR = "huggingface"


def fsdp_rank_file(world: int, rank: int) -> str:
    return f"model_world_size_{world}_rank_{rank}.pt"


@dataclass(frozen=True)
class Source:
    folder: Path  # CKPT_DIR/<project>/<experiment>
    step: int
    engine: str
    recipe: str
    model_path: Path

    @property
    def actor(self) -> Path:
        return self.folder / checkpoints.step_dir(self.step) / ACTOR


def _settings_values(run_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((run_dir / runfiles.SETTINGS).read_text())
        return {k: v["value"] for k, v in data["settings"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def checkpoint_folder(run_dir: Path) -> Path | Problem:
    values = _settings_values(run_dir)
    if values is None:
        return Problem(str(run_dir), f"has no readable {runfiles.SETTINGS}", "name another run (verl-recipe runs)")
    return checkpoint_dir(values)


def locate(folder: Path, step: int | None) -> Source | Problem:
    """The save at `folder` (an experiment's checkpoint folder) to export."""
    ident = read_identity(folder)
    if ident is None:
        return Problem(
            str(folder),
            f"has no {checkpoints.IDENTITY}: not an experiment's checkpoint folder written by verl-recipe train",
            "name a run (verl-recipe runs) or CKPT_DIR/<project>/<experiment>",
        )
    newest = latest_step(folder)
    saves = step_saves(folder)
    if newest is None:
        return Problem(str(folder), f"has no {checkpoints.TRACKER}: no save was completed", "train until a save")
    chosen = newest if step is None else step
    if chosen not in saves:
        have = ", ".join(str(s) for s in saves if s <= newest) or "none"
        return Problem(
            f"step {chosen}", f"no {checkpoints.step_dir(chosen)} in {folder} (complete saves: {have})", "name one"
        )
    if chosen > newest:
        return Problem(
            str(folder / checkpoints.step_dir(chosen)),
            f"is past the tracker's step {newest}: still being written, or cut short",
            f"export step {newest}, or wait for the save to complete",
        )
    src = Source(folder, chosen, str(ident.get("engine", "")), str(ident.get("recipe", "")), Path(ident["model_path"]))
    return _complete(src)


def _complete(src: Source) -> Source | Problem:
    """The save holds what its engine's export reads."""
    actor = src.actor
    if src.engine == "fsdp":
        cfg = actor / FSDP_CONFIG
        try:
            world = int(json.loads(cfg.read_text())["world_size"])
        except (OSError, ValueError, KeyError, TypeError):
            return Problem(str(cfg), "is missing or has no world_size", "export a complete save (another --step)")
        missing = [fsdp_rank_file(world, r) for r in range(world) if not (actor / fsdp_rank_file(world, r)).is_file()]
        if missing:
            return Problem(
                str(actor),
                f"lacks {len(missing)} of its {world} rank files: {', '.join(missing[:3])}",
                "export a complete save (another --step)",
            )
    elif src.engine == "megatron":
        if not (actor / HF_DIR).is_dir():
            return Problem(
                str(actor / HF_DIR),
                "is missing: this save keeps its model elsewhere (use_dist_checkpointing on?)",
                "train with the recipe's checkpoint settings, whose saves hold the model as Hugging Face weights",
            )
    else:
        return Problem(str(src.folder), f"engine {src.engine!r} in its identity file", "name a verl-recipe checkpoint")
    return src
