"""The health rules of a watched run, as data: each rule's name (what HEALTH_STOP takes), when it fires, the
settings that hold its thresholds, and the public reports of the failure it catches. run/health.py checks them;
HEALTH_STOP's help, the validation of its names and docs/watch.md's table (scripts/gen_docs.py) are derived from
this table, so a rule is added here, with its check in run/health.py."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Threshold:
    """A setting that holds a rule's threshold: settings.py makes it a row of the settings table (help, type,
    domain), recipes.py puts its default under every recipe, docs/watch.md shows it beside its rules."""

    name: str
    kind: str  # float (kept as the text given) or int
    help: str
    default: str | int
    lo: float
    hi: float | None = None
    lo_open: bool = False
    blocks_layout: bool = True


@dataclass(frozen=True)
class HealthRule:
    name: str
    fires_when: str  # Markdown, as docs/watch.md shows it
    settings: tuple[str, ...]  # the Threshold names that hold its thresholds
    catches: str  # the failure it catches, with the public reports of it


# In the settings table's order.
THRESHOLDS: tuple[Threshold, ...] = (
    Threshold(
        "HEALTH_MEM_GROWTH_GB",
        "float",
        "alert when device or host memory rises every step of HEALTH_MEM_WINDOW steps by more than this many GB",
        "2",
        lo=0,
        lo_open=True,
    ),
    Threshold(
        "HEALTH_MEM_WINDOW", "int", "steps the memory-growth rule looks back over", 10, lo=2, blocks_layout=False
    ),
    Threshold(
        "HEALTH_STEP_TIME_RATIO",
        "float",
        "alert when a step is this many times slower (or throughput this many times lower) than the run's first "
        "steps after warm-up",
        "1.5",
        lo=1,
        lo_open=True,
    ),
    Threshold(
        "HEALTH_STALL_FACTOR",
        "float",
        "alert when no step arrives within this many times the run's median step time",
        "5",
        lo=1,
        lo_open=True,
    ),
    Threshold(
        "HEALTH_REWARD_DROP",
        "float",
        "alert when critic/rewards/mean falls this far below its running best",
        "0.3",
        lo=0,
        lo_open=True,
    ),
    Threshold(
        "HEALTH_HOST_MEM_FRACTION",
        "float",
        "alert when host memory in use reaches this share of the host's RAM (Ray's OOM killer acts at 0.95)",
        "0.9",
        lo=0,
        hi=1,
        lo_open=True,
    ),
)
THRESHOLD_DEFAULTS: dict[str, str | int] = {t.name: t.default for t in THRESHOLDS}


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
        ("HEALTH_MEM_GROWTH_GB", "HEALTH_MEM_WINDOW"),
        "NPU memory growing over sleep/wake cycles until out of memory at step 223: vllm-ascend#9563, verl#3902",
    ),
    HealthRule(
        STEP_TIME,
        (
            "a step's `timing_s/step`, less its `timing_s/save_checkpoint`, is more than `HEALTH_STEP_TIME_RATIO`"
            " times the median of this run's steps 2-4 (step 1 is warm-up)"
        ),
        ("HEALTH_STEP_TIME_RATIO",),
        "a decode path 7x slower when graph capture silently fell back: vllm-ascend#16049",
    ),
    HealthRule(
        THROUGHPUT,
        (
            "`perf/throughput` (scaled to the step time without the checkpoint save) is below the median of steps"
            " 2-4 divided by `HEALTH_STEP_TIME_RATIO`"
        ),
        ("HEALTH_STEP_TIME_RATIO",),
        "as above",
    ),
    HealthRule(
        NAN,
        (
            "a loss or gradient norm (`actor/pg_loss`, `actor/loss`, `actor/kl_loss`, `actor/grad_norm`, "
            "`critic/vf_loss`, `critic/grad_norm`, any `actor/...` or `critic/...` metric ending in `loss` or "
            "`grad_norm`) is NaN, inf or null (orjson, verl's writer, writes NaN as null)"
        ),
        (),
        "a diverging update",
    ),
    HealthRule(
        REWARD_DROP,
        (
            "the mean of the last 3 steps' `critic/rewards/mean` is more than `HEALTH_REWARD_DROP` below the best"
            " such mean of the run"
        ),
        ("HEALTH_REWARD_DROP",),
        "a collapsing policy",
    ),
    HealthRule(
        STALL,
        (
            "no new step within `HEALTH_STALL_FACTOR` times the median `timing_s/step` of the run, plus the "
            "longest validation (`timing_s/testing`, run between steps) seen so far; checked every second, from "
            "the first step to the last (`TOTAL_TRAINING_STEPS`)"
        ),
        ("HEALTH_STALL_FACTOR",),
        "HCCL timeouts and hangs: vllm-ascend#3413, verl#849; slow checkpoint saves: verl#2932, #2860",
    ),
    HealthRule(
        HOST_MEMORY,
        (
            "host memory in use (`[actor/]perf/cpu_memory_used_gb`, psutil's `used` on a worker's host) reaches "
            "`HEALTH_HOST_MEM_FRACTION` of the host's RAM: `HOST_MEM_GIB` when set, else `MemTotal` of "
            "`/proc/meminfo` on the head"
        ),
        ("HEALTH_HOST_MEM_FRACTION",),
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
    for r in HEALTH_RULES:
        held = ", ".join(f"`{n}` ({THRESHOLD_DEFAULTS[n]})" for n in r.settings) or "none"
        lines.append(f"| `{r.name}` | {r.fires_when} | {held} | {r.catches} |")
    return "\n".join(lines)
