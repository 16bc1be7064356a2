#!/usr/bin/env python3
"""Print the --set arguments that scale a recipe's layout to NODES simulated nodes (16 dies each).

Tensor and pipeline sizes stay; expert, rollout and batch sizes shrink to the smallest values that keep every
rule of `verl-recipe validate`. With the recipe's own node count nothing is printed: the layout is unchanged.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "entrypoints"))

from verl_recipe.recipes import load_recipe  # noqa: E402


def scaled(recipe_name: str, nodes: int) -> list[str]:
    r = load_recipe(recipe_name)
    s = r.settings
    if nodes == s["NNODES"]:
        return []
    world = nodes * s["NDEVICES_PER_NODE"]
    out = {"NNODES": nodes}
    if r.engine == "megatron":
        tp, pp, cp, etp = s["TP"], s["PP"], s["CP"], s["ETP"]
        ep = max(e for e in range(1, s["EP"] + 1) if r.model.num_experts % e == 0 and world % (etp * e * pp) == 0)
        out["EP"] = ep
        dp = world // (tp * pp * cp)
    else:
        dp = world // s["SP_SIZE"]
    gen_tp = s["GEN_TP"]
    if s["GEN_DP"] > 1:
        out["GEN_DP"] = max(1, world // gen_tp)
        if s["GEN_EP"] > 1:
            out["GEN_EP"] = gen_tp * out["GEN_DP"]
    n = s["ROLLOUT_N"]
    minimal = dp if r.engine == "megatron" else world
    unit = math.lcm(8, minimal // math.gcd(minimal, n), dp // math.gcd(dp, n))
    tbs = s["TRAIN_BATCH_SIZE"] if (s["TRAIN_BATCH_SIZE"] % unit == 0) else unit
    mini = s["PPO_MINI_BATCH_SIZE"] if (s["PPO_MINI_BATCH_SIZE"] * n) % dp == 0 else dp // math.gcd(dp, n)
    out["TRAIN_BATCH_SIZE"], out["PPO_MINI_BATCH_SIZE"] = tbs, min(mini, tbs)
    # Simulated dies hold no model: a layout scaled down for the simulation may not fit a real die, so the
    # memory plan says so in one line instead of refusing (docs/memory.md).
    out["MEMORY_CHECK"] = "scaled"
    return [f"--set {k}={v}" for k, v in out.items()]


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: sim_scale.py RECIPE NODES")
    print(" ".join(scaled(sys.argv[1], int(sys.argv[2]))))
