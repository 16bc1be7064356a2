"""The validation-only launch of one model, made from the training run's own launch (launch.json): the same argv and
environment, so the same reward function, data handling and rollout settings score it, with a few keys replaced.

verl 0.8.0 (verl/trainer/ppo/ray_trainer.py, fit()): `trainer.val_only` is honoured only inside the
`val_before_train` branch, after `_load_checkpoint`; so both are on, and resume_mode says which weights load:
`disable` for a Hugging Face folder (the base model or an export), `resume_path` with a `global_step_N` folder for a
save. Its file logger opens VERL_FILE_LOGGER_PATH for writing (truncating it) and runs in the trainer's Ray actor,
so each model gets its own file through the job's runtime_env; `trainer.validation_data_dir` makes verl dump every
validation sample with its score (`_dump_generations`), which the confidence interval needs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..hydra_syntax import hydra_value, override_key, quote
from ..render import RUNTIME_ENV_PREFIX
from ..run.record import METRICS_ENV

BASE, TRAINED = "base", "trained"
GENERATIONS = "generations"  # verl's dump folder inside each model's eval folder: <global_steps>.jsonl
LOG = "verl.log"  # verl's whole output for this model


@dataclass(frozen=True)
class Subject:
    """One model to score: a Hugging Face folder, or a save of the run (its global_step_N folder)."""

    label: str  # BASE or TRAINED
    model_path: str
    save: str | None = None  # CKPT_DIR/<project>/<experiment>/global_step_N, loaded by verl's resume_path

    @property
    def step(self) -> int:
        """verl's global step at validation (the dump's file name): 0 from a folder, N from a save."""
        return int(self.save.rsplit("_", 1)[1]) if self.save else 0


def _replaced(argv: list[str], changes: dict[str, str]) -> list[str]:
    """argv with every override of a key in `changes` dropped, then each change appended (Hydra refuses a key
    given twice, and a later one must not depend on order)."""
    keys = {override_key(k) for k in changes}
    kept = [a for a in argv if "=" not in a or override_key(a) not in keys]
    return kept + [f"{k}={v}" for k, v in changes.items()]


def eval_launch(
    argv: list[str], env: dict[str, str], subject: Subject, out: Path, val_files: list[str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """The training launch (argv, env) turned into the validation of `subject`, writing into `out`."""
    metrics = str(out / "metrics.jsonl")
    changes = {
        "trainer.val_before_train": "True",
        "trainer.val_only": "True",
        "trainer.validation_data_dir": hydra_value(str(out / GENERATIONS)),
        "actor_rollout_ref.model.path": hydra_value(subject.model_path),
        "trainer.resume_mode": "resume_path" if subject.save else "disable",
        "trainer.resume_from_path": hydra_value(subject.save) if subject.save else "null",
        f"{RUNTIME_ENV_PREFIX}{METRICS_ENV}": quote(metrics),
    }
    if val_files:
        changes["data.val_files"] = hydra_value(val_files[0] if len(val_files) == 1 else list(val_files))
    return _replaced(list(argv), changes), {**env, METRICS_ENV: metrics}
