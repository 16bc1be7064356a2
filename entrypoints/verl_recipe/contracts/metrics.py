"""verl 0.8.0's metric names, as its file logger writes them into metrics.jsonl: the progress line, the health
rules, the run page and compare read these. Sources: trainer/ppo/ray_trainer.py (timing), trainer/ppo/
metric_utils.py (throughput, reward, lengths), workers/engine_workers.py (memory), utils/debug/metrics.py (the
rollout/train probability difference).

The legacy workers prefix the worker's perf metrics with "actor/", the new engine workers do not: each memory
figure is a tuple of both spellings, the first present counts."""

from __future__ import annotations

STEP_S = "timing_s/step"
SAVE_S = "timing_s/save_checkpoint"  # inside verl's step timer on the steps that save
TESTING_S = "timing_s/testing"  # validation, between verl's steps and outside its step timer
THROUGHPUT = "perf/throughput"
REWARD = "critic/rewards/mean"
RESPONSE_LENGTH = "response_length/mean"
PROBS_DIFF = "training/rollout_probs_diff_mean"
DEVICE_MEM = ("perf/max_memory_allocated_gb", "actor/perf/max_memory_allocated_gb")
HOST_MEM = ("perf/cpu_memory_used_gb", "actor/perf/cpu_memory_used_gb")
# Losses and gradient norms the NaN rule watches (besides any actor/critic metric named *loss or *grad_norm).
LOSSES = ("actor/pg_loss", "actor/loss", "actor/kl_loss", "actor/grad_norm", "critic/vf_loss", "critic/grad_norm")
