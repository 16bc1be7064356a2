"""The storage a launch's checkpoints need, against what CKPT_DIR has free, before anything starts: the kept saves
(CKPT_KEEP) plus the one being written, each as large as memory/checkpoint.py says. A run that would fill the
volume is refused in one line with the figures; verl alone would fail at a save, hours in, on a full disk."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import hfweights
from ..a3facts import nearest_existing
from ..contracts import checkpoints
from ..memory.checkpoint import SaveSize, peak_saves, save_size, saves_ahead, tb
from ..models import ModelArch
from .problem import Problem
from .resume import checkpoint_dir, latest_step


@dataclass(frozen=True)
class StoragePlan:
    size: SaveSize
    keep: int
    existing: int  # saves of this experiment already there
    ahead: int  # saves this launch writes (the last step's included); TOTAL_TRAINING_STEPS=0: at least keep + 1
    peak: int  # saves there at once

    @property
    def more_bytes(self) -> float:
        """What the run adds to the volume at its peak, beyond the saves already there that it keeps."""
        return max(0, self.peak - min(self.existing, self.keep)) * self.size.total

    def line(self) -> str:
        return (
            f"storage: {self.size.text()}; CKPT_KEEP={self.keep}: up to {self.peak} at once "
            f"({tb(self.peak * self.size.total)})"
        )


def safetensors_params(model_path: Path) -> int | None:
    """The parameters the checkpoint at MODEL_PATH holds, from its safetensors headers (hfweights.py); None when
    there are no such files or one cannot be read: the architecture's count is used instead."""
    return hfweights.params(model_path)


def step_saves(folder: Path) -> list[int]:
    """The steps of the experiment's save folders (global_step_<N>), oldest first."""
    try:
        names = [p.name for p in folder.iterdir() if p.is_dir()]
    except OSError:
        return []
    tail = [n[len(checkpoints.STEP_DIR_PREFIX) :] for n in names if n.startswith(checkpoints.STEP_DIR_PREFIX)]
    return sorted(int(t) for t in tail if t.isdigit())


def plan(
    model: ModelArch,
    engine: str,
    values: dict[str, Any],
    existing: int = 0,
    resumed_from: int = 0,
    params: int | None = None,
) -> StoragePlan:
    keep = int(values["CKPT_KEEP"])
    total, freq = int(values.get("TOTAL_TRAINING_STEPS") or 0), int(values["SAVE_FREQ"])
    # TOTAL_TRAINING_STEPS=0: verl trains TOTAL_EPOCHS over the data, a length not known here; enough saves to
    # reach the retention's peak is the safe figure.
    ahead = saves_ahead(total, freq, resumed_from) if total > 0 else (keep + 1 if freq > 0 else 0)
    return StoragePlan(save_size(model, engine, params), keep, existing, ahead, peak_saves(keep, existing, ahead))


def no_saves(rehearse: bool, simulated: bool, values: dict[str, Any]) -> str:
    """Why a launch writes no save whatever its settings ('' when it does): a rehearsal starts no verl, and on the
    simulated cluster a launch on (simulated) dies ends before verl starts (run/launcher.py end_of_simulation)."""
    if rehearse:
        return "a rehearsal writes no save"
    if simulated and values.get("DEVICE") != "cpu":
        return "the simulation ends this launch before verl starts"
    return ""


def check(model: ModelArch, engine: str, values: dict[str, Any], skipped: str = "") -> tuple[list[Problem], list[str]]:
    """A refusal when CKPT_DIR cannot hold what the run keeps there at its peak; else a note with the figures.
    `skipped` (no_saves): the launch writes no save, so a refusal is only a note with what the real run would meet."""
    if int(values["SAVE_FREQ"]) <= 0:
        return [], ["note: storage: SAVE_FREQ=-1, this run writes no save"]
    if skipped:
        found, notes = check(model, engine, values)
        return [], [f"note: storage: {skipped}; a training launch would be refused: {p}" for p in found] + notes
    folder = checkpoint_dir(values)
    saves = step_saves(folder)
    resumed = (latest_step(folder) or 0) if str(values.get("RESUME_MODE", "auto")) == "auto" else 0
    params = safetensors_params(Path(str(values["MODEL_PATH"])))
    sp = plan(model, engine, values, existing=len(saves), resumed_from=resumed, params=params)
    where = Path(nearest_existing(str(folder)))
    try:
        free = float(shutil.disk_usage(where).free)
    except OSError:
        return [], [f"note: {sp.line()}; free space at {where} could not be read"]
    if free < sp.more_bytes:
        kept = f", {min(sp.existing, sp.keep)} of them there already" if sp.existing else ""
        return [
            Problem(
                f"CKPT_DIR={values['CKPT_DIR']}",
                f"{tb(free)} free at {where}, the run needs {tb(sp.more_bytes)} more: up to {sp.peak} saves at once "
                f"(CKPT_KEEP={sp.keep} kept plus the one being written{kept}) of {tb(sp.size.total)} each",
                "free space there, point CKPT_DIR at a larger volume, or lower CKPT_KEEP",
            )
        ], []
    return [], [f"note: {sp.line()}; {tb(free)} free at {where}"]
