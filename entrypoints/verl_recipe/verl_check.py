"""verl 0.8.0's own start-up checks, in verl's order, wherever verl can be imported.

`verl.trainer.main_ppo` composes its Hydra config, then `auto_set_device`, `migrate_legacy_reward_impl`,
`OmegaConf.resolve` and `verl.utils.config.validate_config` (which builds the actor's `ActorConfig` and runs its
`validate`); each worker then builds its dataclasses in `verl/workers/engine_workers.py` `init_model`: the
reference's `ActorConfig`, the dynamic-batch asserts, `RolloutConfig` and the rollout world-size assert, the
`CheckpointEngineConfig`; `RolloutReplica.__init__` asserts that a replica fills whole nodes. The last three only
fail after the models have been loaded on every die, so they are run here before anything starts.

verl needs torch, ray and tensordict to be imported at all: the development venv (`make venv`), verl-recipe:sim and
the NPU image have them. The checks run in a child process (verl's imports take 3-4 s and print to stdout) with a
deadline; where verl cannot be imported, the caller prints why instead of silently skipping. The Hugging Face
model config (`HFModelConfig`, which reads the checkpoint's tokenizer) is not built here.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from typing import Any

VERL_NEEDS = ("torch", "ray", "tensordict", "numpy", "verl")
TIMEOUT_S = 120
# VERL_RECIPE_VERL_CHECKS=0 turns them off (said in the output): quick iterations on our own rules, and the test
# suite, whose tests of these checks turn them back on (tests/conftest.py, marker verl_checks).
SWITCH = "VERL_RECIPE_VERL_CHECKS"
ARR = "actor_rollout_ref"


def missing_modules() -> list[str]:
    return [m for m in VERL_NEEDS if importlib.util.find_spec(m) is None]


def run_verl_checks(config_yaml: str, timeout_s: float = TIMEOUT_S) -> tuple[list[tuple[str, str]], str]:
    """(problems as (what, fix)), and one note saying what ran or why nothing did."""
    if os.environ.get(SWITCH) == "0":
        return [], f"note: verl's own start-up checks were not run: {SWITCH}=0 turns them off"
    missing = missing_modules()
    if missing:
        return [], (
            f"note: verl's own start-up checks were not run: verl 0.8.0 cannot be imported here "
            f"(missing {', '.join(missing)}); they run where verl imports with its dependencies "
            "(the development venv `make venv` builds, verl-recipe:sim and the NPU image)"
        )
    start = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "verl_recipe.verl_check"],
            input=config_yaml,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return [], f"note: verl's own start-up checks did not finish within {timeout_s:g} s and were not run"
    took = time.monotonic() - start
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return [], f"note: verl's own start-up checks could not run (exit {proc.returncode}: {tail})"
    if not result.get("imported"):
        return [], (
            f"note: verl's own start-up checks were not run: importing verl failed ({result.get('import_error')})"
        )
    problems = [
        (f"verl 0.8.0 {step} refuses the configuration: {message}", fix_for(step))
        for step, message in result.get("problems", [])
    ]
    ran = ", ".join(result.get("steps", []))
    return problems, f"note: verl's own start-up checks ran in {took:.1f} s ({ran})"


FIXES = {
    "validate_config": "change the extra override it names; verl stops at start-up otherwise",
    "ref ActorConfig": "fix the reference's settings (actor_rollout_ref.ref.*) it names",
    "dynamic batching": "set use_dynamic_bsz the same on actor.use_dynamic_bsz and rollout.log_prob_use_dynamic_bsz",
    "RolloutConfig": "fix the rollout override it names; verl fails after loading the models otherwise",
    "rollout world size": "choose GEN_TP x GEN_DP x rollout pipeline size dividing the world",
    "CheckpointEngineConfig": "fix actor_rollout_ref.rollout.checkpoint_engine.*",
    "RolloutReplica": "make a rollout replica fill whole nodes or fit in one",
}


def fix_for(step: str) -> str:
    return FIXES.get(step, "change the override it names (verl 0.8.0 refuses it at start-up)")


def first_line(exc: BaseException) -> str:
    """The innermost cause's first line: Hydra's instantiate wraps the dataclass's own error."""
    inner = exc
    for _ in range(10):
        nxt = inner.__cause__ or inner.__context__
        if nxt is None:
            break
        inner = nxt
    text = str(inner).strip() or type(inner).__name__
    return f"{type(inner).__name__}: {text.splitlines()[0]}"


def _child(config_yaml: str) -> dict[str, Any]:
    out: dict[str, Any] = {"imported": False, "problems": [], "steps": []}
    try:
        from omegaconf import OmegaConf, open_dict
        from verl.experimental.reward_loop import migrate_legacy_reward_impl
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.config import omega_conf_to_dataclass, validate_config
        from verl.utils.device import auto_set_device
    except Exception as exc:  # noqa: BLE001 - any import failure means the checks cannot run here
        out["import_error"] = first_line(exc)
        return out
    out["imported"] = True
    problems: list[tuple[str, str]] = out["problems"]

    def step(name: str, fn: Any) -> Any:
        out["steps"].append(name)
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - verl raises AssertionError, ValueError, TypeError, ...
            problems.append((name, first_line(exc)))
            return None

    config: Any = OmegaConf.create(config_yaml)
    step("auto_set_device", lambda: auto_set_device(config))
    migrated = step("migrate_legacy_reward_impl", lambda: migrate_legacy_reward_impl(config))
    config = migrated if migrated is not None else config
    if step("OmegaConf.resolve", lambda: OmegaConf.resolve(config) or True) is None:
        return out
    use_ref = bool(need_reference_policy(config))
    step(
        "validate_config",
        lambda: validate_config(config=config, use_reference_policy=use_ref, use_critic=need_critic(config)),
    )
    cfg = config[ARR]

    def ref_config() -> None:
        ref = cfg.ref.copy()
        with open_dict(ref):  # what init_model does before building the reference's ActorConfig
            ref.ppo_mini_batch_size = cfg.actor.ppo_mini_batch_size
            ref.ppo_micro_batch_size = ref.pop("log_prob_micro_batch_size", None)
            ref.ppo_micro_batch_size_per_gpu = ref.pop("log_prob_micro_batch_size_per_gpu", None)
            ref.use_dynamic_bsz = ref.pop("log_prob_use_dynamic_bsz", False)
            ref.ppo_max_token_len_per_gpu = ref.pop("log_prob_max_token_len_per_gpu", None)
        omega_conf_to_dataclass(ref)

    if use_ref:
        step("ref ActorConfig", ref_config)

    def dynamic_batching() -> None:
        # engine_workers.py init_model, the actor's asserts (verl 0.8.0)
        if cfg.actor.use_dynamic_bsz != cfg.rollout.log_prob_use_dynamic_bsz:
            raise AssertionError(
                f"actor.use_dynamic_bsz={cfg.actor.use_dynamic_bsz} but "
                f"rollout.log_prob_use_dynamic_bsz={cfg.rollout.log_prob_use_dynamic_bsz}"
            )
        if cfg.actor.use_dynamic_bsz:
            assert cfg.rollout.log_prob_max_token_len_per_gpu is not None, "log_prob_max_token_len_per_gpu is None"
            assert cfg.actor.ppo_max_token_len_per_gpu is not None, "ppo_max_token_len_per_gpu is None"
        else:
            assert cfg.rollout.log_prob_micro_batch_size_per_gpu is not None, (
                "log_prob_micro_batch_size_per_gpu is None"
            )
            assert cfg.actor.ppo_micro_batch_size_per_gpu is not None, "ppo_micro_batch_size_per_gpu is None"

    step("dynamic batching", dynamic_batching)
    rollout = step("RolloutConfig", lambda: omega_conf_to_dataclass(cfg.rollout))
    world = int(config.trainer.n_gpus_per_node) * int(config.trainer.nnodes)
    if rollout is not None:
        replica = rollout.tensor_model_parallel_size * rollout.data_parallel_size * rollout.pipeline_model_parallel_size

        def world_size() -> None:
            assert world % replica == 0, f"rollout world_size {world} is not divisible by infer_world_size {replica}"

        def replica_nodes() -> None:
            per_node = min(int(config.trainer.n_gpus_per_node), replica)
            assert replica % per_node == 0, f"world_size {replica} must be divisible by gpus_per_node {per_node}"

        step("rollout world size", world_size)
        step("RolloutReplica", replica_nodes)
    step("CheckpointEngineConfig", lambda: omega_conf_to_dataclass(cfg.rollout.checkpoint_engine))
    return out


def main() -> int:
    config_yaml = sys.stdin.read()
    real_stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):  # verl prints notices; only the result goes to stdout
        result = _child(config_yaml)
    real_stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
