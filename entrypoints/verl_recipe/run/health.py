"""Health rules on verl's own metric stream (metrics.jsonl), checked as each step arrives (docs/watch.md).

Each rule that fires gives one line naming the metric, its value, the threshold (the setting that holds it) and a
fix; the alerts are kept in the run record's alerts.json. A rule named in HEALTH_STOP also ends the run (exit 5).
A rule fires once when its condition starts and again only after the condition has cleared.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..contracts import metrics as verl_metrics
from ..contracts import runfiles
from ..contracts.health_rules import (
    ALL,
    HOST_MEMORY,
    MEMORY_GROWTH,
    NAN,
    REWARD_DROP,
    RULES,
    STALL,
    STEP_TIME,
    THROUGHPUT,
)

ALERTS_FILE = runfiles.ALERTS


# verl 0.8.0's names: the legacy workers prefix the worker's perf metrics with "actor/", the new engine workers
# (workers/engine_workers.py) do not.
DEVICE_MEM, HOST_MEM = verl_metrics.DEVICE_MEM, verl_metrics.HOST_MEM
STEP_S, SAVE_S, TESTING_S = verl_metrics.STEP_S, verl_metrics.SAVE_S, verl_metrics.TESTING_S
THROUGHPUT_KEY, REWARD = verl_metrics.THROUGHPUT, verl_metrics.REWARD
# A loss or a gradient norm that is NaN, inf or null (orjson writes NaN as null): these, and any other metric of
# the actor or critic whose name ends in "loss" or "grad_norm".
LOSS_KEYS = verl_metrics.LOSSES

# The first step compiles and captures graphs; the run's own reference is the median of the next BASELINE_STEPS.
WARMUP_STEPS = 1
BASELINE_STEPS = 3
REWARD_SMOOTHING = 3  # the reward rule compares moving means of this many steps, not one noisy step
MEM_DIP_GB = 0.01  # a rise counts as monotonic when no step falls by more than this
# Ray's memory monitor kills workers above this share of host memory (RAY_memory_usage_threshold, Ray's default).
OOM_KILL_THRESHOLD = 0.95


@dataclass(frozen=True)
class Thresholds:
    """The HEALTH_* settings (their defaults live in recipes/_base.yaml, README lists them)."""

    mem_growth_gb: float
    mem_window: int
    step_time_ratio: float
    stall_factor: float
    reward_drop: float
    host_mem_fraction: float
    stop: frozenset[str] = frozenset()

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> Thresholds:
        """From the resolved settings (a float setting keeps the text it was given)."""
        stop = set(values["HEALTH_STOP"] or ())
        return cls(
            mem_growth_gb=float(values["HEALTH_MEM_GROWTH_GB"]),
            mem_window=int(values["HEALTH_MEM_WINDOW"]),
            step_time_ratio=float(values["HEALTH_STEP_TIME_RATIO"]),
            stall_factor=float(values["HEALTH_STALL_FACTOR"]),
            reward_drop=float(values["HEALTH_REWARD_DROP"]),
            host_mem_fraction=float(values["HEALTH_HOST_MEM_FRACTION"]),
            stop=frozenset(RULES if ALL in stop else stop),
        )


@dataclass
class Alert:
    rule: str
    metric: str
    value: float | str | None
    threshold: str
    step: int | None
    time_utc: str
    line: str
    stops_run: bool


def host_mem_total_gb(meminfo: Path = Path("/proc/meminfo")) -> float | None:
    """This host's MemTotal in GiB (verl's cpu_memory_used_gb is psutil's `used` / 1024**3), None when unreadable."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 / 1024**3
    except (OSError, ValueError, IndexError):
        return None
    return None


def ray_actors_summary() -> str:
    """Ray's own view of the job's actors for a stall alert: those not alive first, then the alive ones per node."""
    try:
        from ray.util.state import list_actors
    except ImportError:
        return "no Ray state API here"
    try:
        actors = list_actors(address="auto", filters=[("state", "!=", "DEAD")], limit=1000, timeout=10)
        dead = list_actors(address="auto", filters=[("state", "=", "DEAD")], limit=1000, timeout=10)
    except Exception as exc:  # noqa: BLE001 - any failure of the state API only leaves the alert without it
        return f"Ray state API not reachable ({type(exc).__name__}: {str(exc)[:120]})"
    counts: dict[str, int] = {}
    for a in actors:
        key = f"{a.class_name} {a.state} on node {str(a.node_id)[:8]}"
        counts[key] = counts.get(key, 0) + 1
    parts = [f"dead: {a.class_name} on node {str(a.node_id)[:8]}" for a in dead[:5]]
    parts += [f"{n}x {k}" for k, n in sorted(counts.items())]
    return "Ray actors: " + ("; ".join(parts) if parts else "none")


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _value(data: dict[str, Any], keys: Iterable[str]) -> tuple[str, float] | None:
    for key in keys:
        v = data.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            return key, float(v)
    return None


def _bad_number(v: Any) -> bool:
    return v is None or (isinstance(v, float) and not math.isfinite(v))


@dataclass
class Health:
    """The rules' state over one run. `on_record` per step, `tick` on a timer (the stall rule), both from one
    thread. `clock` and `describe_cluster` are injectable for tests."""

    thresholds: Thresholds
    run_dir: Path | None = None
    host_total_gb: float | None = None
    total_steps: int | None = None  # after the last step verl validates and shuts down: no stall to watch for
    clock: Callable[[], float] = time.time
    describe_cluster: Callable[[], str] = ray_actors_summary
    emit: Callable[[Alert], None] = lambda alert: None
    alerts: list[Alert] = field(default_factory=list)
    _active: set[str] = field(default_factory=set)
    _series: dict[str, list[float]] = field(default_factory=dict)
    _steps: int = 0
    _step_s: list[float] = field(default_factory=list)
    _rewards: list[float] = field(default_factory=list)
    _best_reward: float | None = None
    _last_step_at: float | None = None
    _last_step: int | None = None
    _testing_s: float = 0.0

    # -- the stream

    def on_record(self, rec: dict[str, Any]) -> list[Alert]:
        step, data = rec["step"], rec["data"]
        self._steps += 1
        self._last_step_at, self._last_step = self.clock(), step
        self._active.discard(STALL)
        testing = _value(data, (TESTING_S,))
        if testing:
            self._testing_s = max(self._testing_s, testing[1])
        fired: list[Alert] = []
        fired += self._nan(step, data)
        fired += self._memory(step, data)
        fired += self._speed(step, data)
        fired += self._reward(step, data)
        fired += self._host(step, data)
        return fired

    def tick(self) -> list[Alert]:
        """The stall rule: no new step within HEALTH_STALL_FACTOR times the run's median step time."""
        if self._last_step_at is None or not self._step_s:
            return []  # before the first step (model loading) there is no step time to compare with
        if self.total_steps and self._last_step is not None and self._last_step >= self.total_steps:
            return []
        median = statistics.median(self._step_s)
        waited = self.clock() - self._last_step_at
        # Validation runs between steps, outside verl's step timer: the longest one seen is allowed on top.
        limit = self.thresholds.stall_factor * median + self._testing_s
        if waited <= limit:
            return []
        return self._fire(
            STALL,
            True,
            "time since the last step",
            round(waited, 1),
            f"HEALTH_STALL_FACTOR={self.thresholds.stall_factor:g} x median step {median:.1f} s"
            + (f" + validation {self._testing_s:.0f} s" if self._testing_s else "")
            + f" = {limit:.0f} s",
            self._last_step,
            f"no step for {waited:.0f} s after step {self._last_step} (median step {median:.1f} s); "
            f"{self.describe_cluster()}",
            "look for an HCCL timeout or a hung collective in the node logs (`verl-recipe diagnose RUN_DIR`); a "
            "checkpoint save or validation that takes long also waits here",
        )

    # -- the rules

    def _nan(self, step: int, data: dict[str, Any]) -> list[Alert]:
        keys = [k for k in data if k in LOSS_KEYS or (k.startswith(("actor/", "critic/")) and _lossy(k))]
        fired: list[Alert] = []
        for key in sorted(set(keys)):
            v = data[key]
            shown = "null (NaN)" if v is None else str(v)
            fired += self._fire(
                f"{NAN}:{key}",
                _bad_number(v),
                key,
                shown,
                "a finite number",
                step,
                f"{key} = {shown} at step {step}",
                "lower LR, check the reward function for NaN and the data for empty responses; resume from the last "
                "checkpoint before this step",
                rule=NAN,
            )
        return fired

    def _memory(self, step: int, data: dict[str, Any]) -> list[Alert]:
        fired: list[Alert] = []
        window = self.thresholds.mem_window
        for keys in (DEVICE_MEM, HOST_MEM):
            found = _value(data, keys)
            if found is None:
                continue
            key, v = found
            series = self._series.setdefault(key, [])
            series.append(v)
            del series[:-window]
            rise = series[-1] - series[0]
            monotonic = all(b >= a - MEM_DIP_GB for a, b in zip(series, series[1:], strict=False))
            growing = len(series) == window and monotonic and rise > self.thresholds.mem_growth_gb
            fired += self._fire(
                f"{MEMORY_GROWTH}:{key}",
                growing,
                key,
                round(v, 3),
                f"HEALTH_MEM_GROWTH_GB={self.thresholds.mem_growth_gb:g} over HEALTH_MEM_WINDOW={window} steps",
                step,
                f"{key} rose {rise:.2f} GB over the last {window} steps, every step ({series[0]:.2f} -> {v:.2f} GB)",
                "the sleep/wake memory leak (vllm-ascend#9563, verl#3902): update vllm-ascend, or lower GEN_MEM_UTIL "
                "and resume from the last checkpoint before the device runs out",
                rule=MEMORY_GROWTH,
            )
        return fired

    def _speed(self, step: int, data: dict[str, Any]) -> list[Alert]:
        secs = _value(data, (STEP_S,))
        if secs is None:
            return []
        saved = _value(data, (SAVE_S,))
        step_s = secs[1] - (saved[1] if saved else 0.0)  # a checkpoint save is not a slow step
        self._step_s.append(secs[1])
        thr = _value(data, (THROUGHPUT_KEY,))
        throughput = thr[1] * secs[1] / step_s if thr and step_s > 0 else None
        self._series.setdefault("_step", []).append(step_s)
        if throughput is not None:
            self._series.setdefault("_thr", []).append(throughput)
        # Counted in timed steps: the baseline is taken from those, and a run whose first steps lack the timer
        # would otherwise ask for the median of none.
        if len(self._series["_step"]) <= WARMUP_STEPS + BASELINE_STEPS:
            return []
        ratio = self.thresholds.step_time_ratio
        fired: list[Alert] = []
        base = statistics.median(self._series["_step"][WARMUP_STEPS : WARMUP_STEPS + BASELINE_STEPS])
        fired += self._fire(
            STEP_TIME,
            step_s > ratio * base,
            STEP_S,
            round(step_s, 2),
            f"HEALTH_STEP_TIME_RATIO={ratio:g} x {base:.2f} s (median of this run's steps after warm-up)",
            step,
            f"step {step} took {step_s:.1f} s, {step_s / base:.1f}x this run's first steps ({base:.1f} s)",
            "a slower decode path (graph capture fell back, vllm-ascend#16049) or a slow node: compare "
            "timing_s/gen and timing_s/update_actor with the first steps in metrics.jsonl",
        )
        thr_series = self._series.get("_thr", [])
        if throughput is not None and len(thr_series) > WARMUP_STEPS + BASELINE_STEPS:
            base_thr = statistics.median(thr_series[WARMUP_STEPS : WARMUP_STEPS + BASELINE_STEPS])
            fired += self._fire(
                THROUGHPUT,
                throughput * ratio < base_thr,
                THROUGHPUT_KEY,
                round(throughput, 2),
                f"1/HEALTH_STEP_TIME_RATIO={1 / ratio:.2f} x {base_thr:.1f} tokens/s (this run's first steps)",
                step,
                f"{THROUGHPUT_KEY} {throughput:.1f} tokens/s at step {step}, {throughput / base_thr:.2f}x this run's "
                f"first steps ({base_thr:.1f})",
                "the same causes as a slow step; also longer responses than at the start (response_length/mean)",
            )
        return fired

    def _reward(self, step: int, data: dict[str, Any]) -> list[Alert]:
        found = _value(data, (REWARD,))
        if found is None:
            return []
        self._rewards.append(found[1])
        if len(self._rewards) < REWARD_SMOOTHING:
            return []
        mean = statistics.fmean(self._rewards[-REWARD_SMOOTHING:])
        self._best_reward = mean if self._best_reward is None else max(self._best_reward, mean)
        drop = self._best_reward - mean
        return self._fire(
            REWARD_DROP,
            drop > self.thresholds.reward_drop,
            REWARD,
            round(mean, 4),
            f"HEALTH_REWARD_DROP={self.thresholds.reward_drop:g} below the best {self._best_reward:.3f}",
            step,
            f"{REWARD} (mean of the last {REWARD_SMOOTHING} steps) fell to {mean:.3f}, {drop:.3f} below its best "
            f"{self._best_reward:.3f}",
            "the policy collapsed: lower LR or raise the KL loss coefficient, and resume from a checkpoint from "
            "before the fall",
        )

    def _host(self, step: int, data: dict[str, Any]) -> list[Alert]:
        found = _value(data, HOST_MEM)
        if found is None or not self.host_total_gb:
            return []
        key, used = found
        share = used / self.host_total_gb
        limit = self.thresholds.host_mem_fraction
        return self._fire(
            HOST_MEMORY,
            share >= limit,
            key,
            round(used, 2),
            f"HEALTH_HOST_MEM_FRACTION={limit:g} of {self.host_total_gb:.0f} GB (Ray kills at {OOM_KILL_THRESHOLD:g})",
            step,
            f"host memory {used:.1f} of {self.host_total_gb:.0f} GB ({share:.0%}) at step {step}",
            "Ray's OOM killer takes the TaskRunner next (verl#3453, #1964): offload less to the CPU (optimizer/param "
            "offload), lower the rollout batch, or use hosts with more RAM (HOST_MEM_GIB checks the plan)",
        )

    # -- alerts

    def _fire(
        self,
        key: str,
        condition: bool,
        metric: str,
        value: float | str | None,
        threshold: str,
        step: int | None,
        what: str,
        fix: str,
        rule: str | None = None,
    ) -> list[Alert]:
        """An alert when `condition` starts (not again while it holds)."""
        if not condition:
            self._active.discard(key)
            return []
        if key in self._active:
            return []
        self._active.add(key)
        name = rule or key
        stops = name in self.thresholds.stop
        line = f"alert {name}: {what}; threshold {threshold}; fix: {fix}"
        if stops:
            line += " (HEALTH_STOP: the run is stopped)"
        alert = Alert(name, metric, value, threshold, step, _utc(self.clock()), line, stops)
        self.alerts.append(alert)
        self.save()
        self.emit(alert)
        return [alert]

    def save(self) -> None:
        if self.run_dir is not None:
            text = json.dumps([asdict(a) for a in self.alerts], indent=2) + "\n"
            (self.run_dir / ALERTS_FILE).write_text(text)


def _lossy(key: str) -> bool:
    return key.endswith(("loss", "grad_norm"))
