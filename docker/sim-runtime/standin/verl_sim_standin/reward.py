"""STAND-IN reward for the simulated cluster's GSM8K-shaped data.

verl's own GSM8K rule (utils/reward_score/gsm8k.py: 1 for "#### <answer>" matching the ground truth, else 0) plus a
small term for the share of digits in the response. A random tiny model almost never writes the answer, so the rule
alone scores every response 0, every GRPO advantage is 0 and so is every gradient; the digit share differs between
the responses of a group, so advantages, the policy loss and the gradient are real numbers.
"""

from __future__ import annotations

from typing import Any

DIGIT_WEIGHT = 0.1


def digit_share(text: str) -> float:
    words = text.split()
    return sum(w.isdigit() for w in words) / len(words) if words else 0.0


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None, **_: Any) -> float:
    from verl.utils.reward_score import gsm8k

    return float(gsm8k.compute_score(solution_str, ground_truth)) + DIGIT_WEIGHT * digit_share(solution_str)
