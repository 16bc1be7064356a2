"""verl-recipe: validated, reproducible verl 0.8.0 GRPO launches of Qwen3.5 on Ascend A3 clusters."""

__version__ = "0.1.0"
