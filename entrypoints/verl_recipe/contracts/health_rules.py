"""The health rules of a watched run, as data: each rule's name (what HEALTH_STOP takes), when it fires, the
settings that hold its thresholds, and the public reports of the failure it catches. run/health.py checks them;
HEALTH_STOP's help, the validation of its names and docs/watch.md's table (scripts/gen_docs.py) are derived from
this table, so a rule is added here, with its check in run/health.py."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HealthRule:
    name: str
    fires_when: str  # Markdown, as docs/watch.md shows it
    settings: str  # the settings that hold its thresholds, with their defaults
    catches: str  # the failure it catches, with the public reports of it


ALL = "all"  # HEALTH_STOP=all names every rule
MEMORY_GROWTH = "memory_growth"
STEP_TIME = "step_time"
THROUGHPUT = "throughput"
NAN = "nan"
REWARD_DROP = "reward_drop"
STALL = "stall"
HOST_MEMORY = "host_memory"

HEALTH_RULES: tuple[HealthRule, ...] = (
    HealthRule(
        MEMORY_GROWTH,
        (
            "device memory (`[actor/]perf/max_memory_allocated_gb`) or host memory "
            "(`[actor/]perf/cpu_memory_used_gb`) rose at every step of the last `HEALTH_MEM_WINDOW` steps (no "
            "step falling by more than 0.01 GB) and by more than `HEALTH_MEM_GROWTH_GB` in all"
        ),
        "`HEALTH_MEM_GROWTH_GB` (2), `HEALTH_MEM_WINDOW` (10)",
        "NPU memory growing over sleep/wake cycles until out of memory at step 223: vllm-ascend#9563, verl#3902",
    ),
    HealthRule(
        STEP_TIME,
        (
            "a step's `timing_s/step`, less its `timing_s/save_checkpoint`, is more than `HEALTH_STEP_TIME_RATIO`"
            " times the median of this run's steps 2-4 (step 1 is warm-up)"
        ),
        "`HEALTH_STEP_TIME_RATIO` (1.5)",
        "a decode path 7x slower when graph capture silently fell back: vllm-ascend#16049",
    ),
    HealthRule(
        THROUGHPUT,
        (
            "`perf/throughput` (scaled to the step time without the checkpoint save) is below the median of steps"
            " 2-4 divided by `HEALTH_STEP_TIME_RATIO`"
        ),
        "`HEALTH_STEP_TIME_RATIO` (1.5)",
        "as above",
    ),
    HealthRule(
        NAN,
        (
            "a loss or gradient norm (`actor/pg_loss`, `actor/loss`, `actor/kl_loss`, `actor/grad_norm`, "
            "`critic/vf_loss`, `critic/grad_norm`, any `actor/...` or `critic/...` metric ending in `loss` or "
            "`grad_norm`) is NaN, inf or null (orjson, verl's writer, writes NaN as null)"
        ),
        "none",
        "a diverging update",
    ),
    HealthRule(
        REWARD_DROP,
        (
            "the mean of the last 3 steps' `critic/rewards/mean` is more than `HEALTH_REWARD_DROP` below the best"
            " such mean of the run"
        ),
        "`HEALTH_REWARD_DROP` (0.3)",
        "a collapsing policy",
    ),
    HealthRule(
        STALL,
        (
            "no new step within `HEALTH_STALL_FACTOR` times the median `timing_s/step` of the run, plus the "
            "longest validation (`timing_s/testing`, run between steps) seen so far; checked every second, from "
            "the first step to the last (`TOTAL_TRAINING_STEPS`)"
        ),
        "`HEALTH_STALL_FACTOR` (5)",
        "HCCL timeouts and hangs: vllm-ascend#3413, verl#849; slow checkpoint saves: verl#2932, #2860",
    ),
    HealthRule(
        HOST_MEMORY,
        (
            "host memory in use (`[actor/]perf/cpu_memory_used_gb`, psutil's `used` on a worker's host) reaches "
            "`HEALTH_HOST_MEM_FRACTION` of the host's RAM: `HOST_MEM_GIB` when set, else `MemTotal` of "
            "`/proc/meminfo` on the head"
        ),
        "`HEALTH_HOST_MEM_FRACTION` (0.9)",
        (
            "Ray's OOM killer (it acts at `RAY_memory_usage_threshold`, 0.95 by default) taking the TaskRunner: "
            "verl#3453, #1964"
        ),
    ),
)
RULES: tuple[str, ...] = tuple(r.name for r in HEALTH_RULES)


def unknown_stop_rules(names: list[str] | tuple[str, ...]) -> list[str]:
    """The HEALTH_STOP entries that name no rule (validate refuses them)."""
    return [n for n in names if n != ALL and n not in RULES]


def stop_help() -> str:
    """HEALTH_STOP's help text in the settings table."""
    return f"health rules that stop the run (exit 5): {', '.join(RULES)}, or {ALL}"


def markdown_table() -> str:
    """docs/watch.md's table of the rules."""
    lines = ["| rule | fires when | setting (default) | source of the failure it catches |", "|---|---|---|---|"]
    lines += [f"| `{r.name}` | {r.fires_when} | {r.settings} | {r.catches} |" for r in HEALTH_RULES]
    return "\n".join(lines)
