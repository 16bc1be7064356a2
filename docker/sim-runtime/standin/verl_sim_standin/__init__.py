"""STAND-IN: what lets verl 0.8.0's own trainer run on the simulated A3 cluster, which has no NPU.

Nothing here runs on a real cluster. It is installed in the simulated runtime image and the development venv only.

- `plugin`: loaded by verl itself in the driver and in every Ray worker through verl's `VERL_USE_EXTERNAL_MODULES`
  hook (verl/__init__.py); small shims for a CPU-only torch (gloo instead of NCCL/HCCL, the FSDP engine registered
  for `cpu`, no pinned memory, verl's pure-torch padding helpers instead of flash_attn, the CUDA memory calls verl
  makes) and the registration of the stand-in rollout. No verl file is changed.
- `rollout`: a rollout backend named `standin` (no rollout backend of verl 0.8.0 runs on CPU): Hugging Face forward
  passes with vLLM's sampling parameters and log-probs, fed by verl's own weight sync.
- `seed`: a tiny random Qwen3.5-MoE checkpoint in the shape of the real ones, and GSM8K-shaped data.
- `reward`: a rule reward that gives a random model non-zero advantages.

`overlay()` is the part of a launch that DEVICE=cpu adds; verl-recipe finds it through `device`, this package's
`verl_recipe.devices` entry point, so the names below have one home.
"""

from __future__ import annotations

from typing import Any

# The rollout backend name registered in verl's registries (actor_rollout_ref.rollout.name).
ROLLOUT_NAME = "standin"
PLUGIN_MODULE = "verl_sim_standin.plugin"
# Every log line of the stand-ins starts with this, so no one mistakes them for a real engine.
LOG_PREFIX = "[STAND-IN]"


def overlay() -> dict[str, Any]:
    """Hydra overrides and launch environment that run a recipe on the CPU stand-ins."""
    return {
        "hydra": {
            "actor_rollout_ref.rollout.name": ROLLOUT_NAME,
            # transformers' default for Qwen3.5 in verl is flash_attention_2 (verl workers/config/model.py).
            "+actor_rollout_ref.model.override_config.attn_implementation": "sdpa",
            # Packed sequences through the torch Gated DeltaNet fallback are not checked to stay separated.
            "actor_rollout_ref.model.use_remove_padding": False,
            "actor_rollout_ref.actor.fsdp_config.model_dtype": "fp32",
            "actor_rollout_ref.ref.fsdp_config.model_dtype": "fp32",
            # Each is a Ray actor (a Python process with torch): the simulated hosts share two cores.
            "actor_rollout_ref.rollout.agent.num_workers": 1,
            "reward.num_workers": 1,
            "reward.custom_reward_function.path": "pkg://verl_sim_standin.reward",
            "reward.custom_reward_function.name": "compute_score",
        },
        "env": {
            "VERL_USE_EXTERNAL_MODULES": PLUGIN_MODULE,
            "OMP_NUM_THREADS": "1",
            # The simulated Ray nodes keep the NPU nodes' RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1 (they
            # stand in for NPU hosts); with it set, verl's workers look up an NPU/GPU id Ray never gave a CPU rank
            # (single_controller/base/worker.py:279). verl tests the value for truth, so the empty string unsets it.
            "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "",
        },
    }
