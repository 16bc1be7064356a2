"""The health rules of a watched run, as data: each rule's name (what HEALTH_STOP takes), when it fires, the
settings that hold its thresholds, and the public reports of the failure it catches. watch/health.py checks them;
HEALTH_STOP's help, the validation of its names and docs/watch.md's table (scripts/gen_docs.py) are derived from
this table, so a rule is added here, with its check in watch/health.py."""

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
        hi=65536,  # 64 TB a step: no host or die grows so much
        lo_open=True,
    ),
    Threshold(
        "HEALTH_MEM_WINDOW",
        "int",
        "steps the memory-growth rule looks back over",
        10,
        lo=2,
        hi=1000,
        blocks_layout=False,
    ),
    Threshold(
        "HEALTH_STEP_TIME_RATIO",
        "float",
        "alert when a step is this many times slower (or throughput this many times lower) than the run's first "
        "steps after warm-up",
        "1.5",
        lo=1,
        hi=1000,
        lo_open=True,
    ),
    Threshold(
        "HEALTH_PHASE_FACTOR",
        "float",
        "alert when a phase of the step (generation, log-probs, actor update, weight sync, checkpoint save) takes "
        "this many times its own baseline in HEALTH_PHASE_K of the last HEALTH_PHASE_N steps",
        "2",
        lo=1,
        hi=1000,
        lo_open=True,
    ),
    Threshold(
        "HEALTH_PHASE_BASELINE",
        "int",
        "steps after warm-up whose median is each phase's baseline (the phase rule starts after them)",
        5,
        lo=1,
        hi=1000,
        blocks_layout=False,
    ),
    Threshold(
        "HEALTH_PHASE_K",
        "int",
        "steps of the last HEALTH_PHASE_N a phase must be slow in for the phase rule to fire",
        3,
        lo=1,
        hi=1000,
        blocks_layout=False,
    ),
    Threshold(
        "HEALTH_PHASE_N",
        "int",
        "steps the phase rule looks back over (HEALTH_PHASE_K of them slow fire it)",
        5,
        lo=1,
        hi=1000,
        blocks_layout=False,
    ),
    Threshold(
        "HEALTH_STALL_FACTOR",
        "float",
        "alert when no step arrives within this many times the run's median step time",
        "5",
        lo=1,
        hi=1000,
        lo_open=True,
    ),
    Threshold(
        "HEALTH_SAVE_STALL_S",
        "float",
        "seconds more the stall rule waits while a checkpoint save is under way (verl's save line, or the step's "
        "checkpoint folder there and not yet in verl's tracker)",
        "3600",
        lo=0,
        hi=7 * 24 * 3600,  # a week
        lo_open=True,
    ),
    Threshold(
        "HEALTH_REWARD_DROP",
        "float",
        "alert when critic/rewards/mean falls this far below its running best",
        "0.3",
        lo=0,
        hi=1e9,  # beyond any reward scale
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
PHASE_TIME = "phase_time"
THROUGHPUT = "throughput"
NAN = "nan"
REWARD_DROP = "reward_drop"
STALL = "stall"
HOST_MEMORY = "host_memory"
CHECKPOINT_SPACE = "checkpoint_space"


@dataclass(frozen=True)
class Phase:
    """A phase of verl's training step that the phase rule times against the run's own first steps."""

    name: str  # as the alert names it
    key: str  # verl's metric
    what: str
    warmup: int  # samples left out of the baseline (the first step compiles and captures graphs)


# verl 0.8.0 times each phase of a step with marked_timer(<name>, timing_raw) in RayPPOTrainer.fit()
# (verl/trainer/ppo/ray_trainer.py @3e4edb6e, release/v0.8.0) and writes timing_s/<name>
# (verl/trainer/ppo/metric_utils.py compute_timing_metrics). The reference's name is str(Role.RefPolicy), "ref"
# (verl/trainer/ppo/utils.py). A checkpoint save happens only every SAVE_FREQ steps: its baseline is its own first
# saves, none left out. The per-phase approach, a baseline from the run's own first steps and an event when 3 of 5
# consecutive points are out of range, is RL-Insight's (verl-project/rl-insight, degradation association; its
# verl logger is verl#6680, on main after release/v0.8.0).
PHASES: tuple[Phase, ...] = (
    Phase("generation", "timing_s/gen", "the rollout's generation", 1),
    Phase("old_log_prob", "timing_s/old_log_prob", "the actor's old log-probs", 1),
    Phase("reference", "timing_s/ref", "the reference policy's log-probs", 1),
    Phase("actor_update", "timing_s/update_actor", "the actor's update", 1),
    Phase("weight_sync", "timing_s/update_weights", "the weight sync from the trainer to the rollout", 1),
    Phase("checkpoint_save", "timing_s/save_checkpoint", "the checkpoint save", 0),
)
# A phase counts as slow only when it is also this many seconds above its baseline: sub-second phases jitter by
# more than any factor without anything being wrong.
PHASE_FLOOR_S = 1.0
# verl 0.8.0 prints this line as a checkpoint save starts (RayPPOTrainer._save_checkpoint, ray_trainer.py
# @3e4edb6e); the stall rule gives the save HEALTH_SAVE_STALL_S more.
SAVE_STARTED = b"local_global_step_folder: "

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
        PHASE_TIME,
        (
            "a phase of the step ("
            + ", ".join(f"{ph.name} `{ph.key}`" for ph in PHASES)
            + f") is more than `HEALTH_PHASE_FACTOR` times, and {PHASE_FLOOR_S:g} s more than, the median of its "
            "first `HEALTH_PHASE_BASELINE` samples after warm-up (step 1; none for the save) in `HEALTH_PHASE_K` of "
            "its last `HEALTH_PHASE_N` samples; the alert names the phase, its value and the baseline"
        ),
        ("HEALTH_PHASE_FACTOR", "HEALTH_PHASE_BASELINE", "HEALTH_PHASE_K", "HEALTH_PHASE_N"),
        (
            "a slow phase hidden in the step time (rollout, log-prob, update, weight sync or save): RL-Insight's "
            "per-phase degradation events, verl#6680"
        ),
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
            "longest validation (`timing_s/testing`, run between steps) seen so far, plus `HEALTH_SAVE_STALL_S` "
            "while a checkpoint save is under way (verl's `local_global_step_folder:` line since the last step, or "
            "the next step's `global_step_<N>` folder there and not yet in verl's tracker); checked every second, "
            "from the first step to the last (`TOTAL_TRAINING_STEPS`); the alert names the host and rank that "
            "stopped (a process stopped or making no CPU progress while the others do)"
        ),
        ("HEALTH_STALL_FACTOR", "HEALTH_SAVE_STALL_S"),
        "HCCL timeouts and hangs: vllm-ascend#3413, verl#849; slow checkpoint saves: verl#2932, #2860",
    ),
    HealthRule(
        HOST_MEMORY,
        (
            "host memory in use on any host (`MemTotal` less `MemAvailable`, sampled by each host's node service "
            "into `LOG_DIR/nodes/<host>/`) reaches `HEALTH_HOST_MEM_FRACTION` of that host's `MemTotal`, the host "
            "named; where no host has a recent sample, verl's one figure (`[actor/]perf/cpu_memory_used_gb`) "
            "against `HOST_MEM_GIB` (else `MemTotal` on the head)"
        ),
        ("HEALTH_HOST_MEM_FRACTION",),
        (
            "Ray's OOM killer (it acts at `RAY_memory_usage_threshold`, 0.95 by default) taking the TaskRunner: "
            "verl#3453, #1964"
        ),
    ),
    HealthRule(
        CHECKPOINT_SPACE,
        (
            "after a step, the free space at `CKPT_DIR` is less than the next save writes (the plan's bytes a save, "
            "`verl-recipe plan`), before that save starts; the alert names the path, the free space, the step of "
            "the save and its size"
        ),
        (),
        (
            "a save that fails on a full disk hours into a run, `OSError: [Errno 28] No space left on device` "
            "(verl keeps every save by default: `trainer.max_actor_ckpt_to_keep: null`)"
        ),
    ),
)
RULES: tuple[str, ...] = tuple(r.name for r in HEALTH_RULES)


def unknown_stop_rules(names: list[str] | tuple[str, ...]) -> list[str]:
    """The HEALTH_STOP entries that name no rule (validate refuses them)."""
    return [n for n in names if n != ALL and n not in RULES]


def threshold_problems(values: dict[str, object]) -> list[tuple[str, str, str]]:
    """What the thresholds' domains cannot say alone, as (subject, what is wrong, fix): validate refuses them."""
    k, n = values.get("HEALTH_PHASE_K"), values.get("HEALTH_PHASE_N")
    if isinstance(k, int) and isinstance(n, int) and k > n:
        return [
            (
                f"HEALTH_PHASE_K={k}",
                f"is more than HEALTH_PHASE_N={n}, so the phase rule could never fire",
                f"set HEALTH_PHASE_K <= {n} (or raise HEALTH_PHASE_N)",
            )
        ]
    return []


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
