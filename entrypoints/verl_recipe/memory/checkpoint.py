"""What one checkpoint save writes to CKPT_DIR, and what a run keeps there: the storage side of the plan.

A save of verl 0.8.0 with its defaults (`actor.checkpoint.save_contents: [model, optimizer, extra]`):
- Megatron (verl/utils/checkpoint/megatron_checkpoint_manager.py, release/v0.8.0): with a bridge and
  `use_dist_checkpointing: False` (engine/megatron.yaml) the model goes out as Hugging Face safetensors in bf16
  under `actor/huggingface/`; `actor/dist_ckpt/` holds the distributed optimizer's state, its fp32 master copy and
  Adam's two moments (Megatron-LM docs/api-guide/dist_optimizer.md: 12 bytes a parameter), and the RNG state.
- FSDP (verl/utils/checkpoint/fsdp_checkpoint_manager.py): every rank's `model_world_size_W_rank_R.pt` in the
  model dtype (fp32, engine/fsdp.yaml `model_dtype`) and its `optim_*.pt` (Adam's two moments, fp32).
The parameter count is the trained model's (the text layers, the embeddings and the vision tower); Megatron-Bridge's
Hugging Face export leaves the MTP head out, which is small beside the rest. Bytes here are decimal (a TB is 1e12),
as `df -H` and storage vendors count them.

Retention (verl's `trainer.max_actor_ckpt_to_keep`, set by CKPT_KEEP): verl removes its oldest saves only among
those of its own process (verl/utils/checkpoint/checkpoint_manager.py: the list starts empty), so the run's own
pruning (run/retention.py) keeps the count across attempts and resumes; at most CKPT_KEEP complete saves and the one
being written are on the storage at once."""

from __future__ import annotations

from dataclasses import dataclass

from ..models import ModelArch
from .coefficients import COEF
from .params import text_params, vision_params

# What a save holds besides the weights and the optimizer: the RNG and scheduler state, the tokenizer and config
# files, verl's dataloader state (data.pt): a few MB whatever the model.
EXTRA_BYTES = 64e6


@dataclass(frozen=True)
class SaveSize:
    engine: str
    params: int
    weights: float  # bytes of the model's weights in one save
    optimizer: float  # bytes of the optimizer's state (master copy and moments)
    extra: float

    @property
    def total(self) -> float:
        return self.weights + self.optimizer + self.extra

    @property
    def per_param(self) -> float:
        return (self.weights + self.optimizer) / self.params

    def text(self) -> str:
        return (
            f"{tb(self.total)} a save ({self.params / 1e9:.1f} B parameters x {self.per_param:g} bytes: weights "
            f"{tb(self.weights)}, optimizer {tb(self.optimizer)})"
        )


def save_size(model: ModelArch, engine: str, params: int | None = None) -> SaveSize:
    """`params`: the checkpoint's own count where it was read (checks/storage.py, from its safetensors headers);
    else the architecture's."""
    params = params or text_params(model) + vision_params(model)
    if engine == "megatron":
        weights, optimizer = COEF.param_bf16, COEF.optimizer_sharded
    else:
        weights, optimizer = COEF.fsdp_param, COEF.fsdp_optimizer
    return SaveSize(engine, params, weights * params, optimizer * params, EXTRA_BYTES)


def saves_ahead(total_steps: int, save_freq: int, resumed_from: int) -> int:
    """Saves verl writes after step `resumed_from` up to the last step: every SAVE_FREQ steps and at the last one
    (ray_trainer.py fit(): `is_last_step or global_steps % save_freq == 0`)."""
    if save_freq <= 0 or total_steps <= resumed_from:
        return 0
    multiples = total_steps // save_freq - resumed_from // save_freq
    return multiples + (0 if total_steps % save_freq == 0 else 1)


def peak_saves(keep: int, existing: int, ahead: int) -> int:
    """Saves on the storage at once: those kept from before (pruned to CKPT_KEEP at the launch), then each new one
    being written beside at most CKPT_KEEP complete ones."""
    kept = min(existing, keep)
    return min(kept + ahead, keep + 1) if ahead > 0 else kept


def tb(n: float) -> str:
    if n >= 1e12:
        return f"{n / 1e12:.2f} TB"
    if n >= 1e9:
        return f"{n / 1e9:.1f} GB"
    return f"{n / 1e6:.1f} MB"
