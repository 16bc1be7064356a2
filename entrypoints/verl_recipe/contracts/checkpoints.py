"""The files of an experiment's checkpoint folder, CKPT_DIR/<project>/<experiment>: verl's own (it writes them; the
resume check reads them) and the identity verl-recipe writes beside them. docs/contracts.md (§5, "The checkpoint
folder")."""

from __future__ import annotations

# verl 0.8.0 (verl/trainer/ppo/ray_trainer.py _save_checkpoint, verl/utils/checkpoint/checkpoint_manager.py
# find_latest_ckpt_path): each save goes into global_step_<N>/, and only after it is written does rank 0 put N into
# the tracker file, so a save cut short leaves the tracker on the step before (the one resumed).
TRACKER = "latest_checkpointed_iteration.txt"
STEP_DIR_PREFIX = "global_step_"

# What the checkpoints of this folder were written with (recipe, model, layout, data), rewritten by every launch
# that starts fresh or resumes with the same identity.
IDENTITY = "verl_recipe_checkpoint.json"
IDENTITY_SCHEMA = 1

# The identity's parts a resume must match (another model or layout cannot load the checkpoint), and the part that
# is only reported (other data trains on, from the checkpoint's step).
MUST_MATCH = ("engine", "model_path", "model_config_sha256", "layout")
REPORTED = ("train_files",)


# Where `verl-recipe export` writes a save's Hugging Face folder by default: <experiment folder>/export/global_step_<N>
# (beside the saves, out of CKPT_KEEP's reach: retention removes only global_step_<N> folders at the top).
EXPORT_DIR = "export"


def step_dir(step: int) -> str:
    return f"{STEP_DIR_PREFIX}{step}"
