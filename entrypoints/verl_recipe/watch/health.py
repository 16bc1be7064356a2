"""Health rules on verl's own metric stream (metrics.jsonl), checked as each step arrives (docs/watch.md).

Each rule that fires gives one line naming the metric, its value, the threshold (the setting that holds it) and a
fix; the alerts are kept in the run record's alerts.json. A rule named in HEALTH_STOP also ends the run (exit 5).
A rule fires once when its condition starts and again only after the condition has cleared.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..a3facts import nearest_existing
from ..cluster.hostsample import HostMem
from ..contracts import checkpoints, runfiles
from ..contracts import metrics as verl_metrics
from ..contracts.health_rules import (
    ALL,
    CHECKPOINT_SPACE,
    HOST_MEMORY,
    MEMORY_GROWTH,
    NAN,
    PHASE_FLOOR_S,
    PHASE_TIME,
    PHASES,
    REWARD_DROP,
    RULES,
    SAVE_STARTED,
    STALL,
    STEP_TIME,
    THROUGHPUT,
)
from .stall import StallProbe

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
HOSTS_EVERY_S = 10.0  # the hosts' memory samples are read this often (each host writes one every 5 s)
HOST_MEMORY_FIX = (
    "Ray's OOM killer takes the TaskRunner next (verl#3453, #1964): offload less to the CPU (optimizer/param "
    "offload), lower the rollout batch, or use hosts with more RAM (HOST_MEM_GIB checks the plan)"
)
# What to look at when a phase is slow, by phase ("" for any other).
_PHASE_FIX = {
    "generation": "a slower decode path (graph capture fell back, vllm-ascend#16049) or longer responses "
    "(response_length/mean); compare timing_s/agent_loop/slowest/* with the first steps",
    "weight_sync": "the weight sync path changed (IPC or shared memory, `verl-recipe doctor`) or a slow link between "
    "trainer and rollout hosts",
    "checkpoint_save": "slow shared storage (verl#2932, #2860): check the storage's load and free space",
    "": "a slow node or link: compare the phase in metrics.jsonl with the first steps, then the node logs",
}


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
    phase_factor: float = 2.0
    phase_baseline: int = 5
    phase_k: int = 3
    phase_n: int = 5
    save_stall_s: float = 3600.0

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
            phase_factor=float(values["HEALTH_PHASE_FACTOR"]),
            phase_baseline=int(values["HEALTH_PHASE_BASELINE"]),
            phase_k=int(values["HEALTH_PHASE_K"]),
            phase_n=int(values["HEALTH_PHASE_N"]),
            save_stall_s=float(values["HEALTH_SAVE_STALL_S"]),
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
    """The stall alert's look at the cluster without the run's members or the hosts' samples (watch/stall.py): this
    job's actors per host from Ray's state API."""
    return StallProbe(None, [], since=0.0).describe()


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
    """The rules' state over one run. `on_record` per step, `tick` on a timer (the stall rule, the hosts' memory),
    `on_output` per line of verl's output (a checkpoint save starting), all from one thread. `clock`,
    `describe_cluster` (the stall alert's look at the cluster, watch/stall.py) and `host_samples` (each host's latest
    memory sample, cluster/hostsample.py) are injectable for tests."""

    thresholds: Thresholds
    run_dir: Path | None = None
    host_total_gb: float | None = None
    total_steps: int | None = None  # after the last step verl validates and shuts down: no stall to watch for
    clock: Callable[[], float] = time.time
    describe_cluster: Callable[[], str] = ray_actors_summary
    emit: Callable[[Alert], None] = lambda alert: None
    checkpoint_dir: Path | None = None  # CKPT_DIR/<project>/<experiment>: a save under way shows there
    host_samples: Callable[[], list[HostMem]] | None = None
    save_bytes: float = 0.0  # what one save writes (memory/checkpoint.py); 0: the checkpoint_space rule is off
    save_freq: int = 0
    disk_free: Callable[[Path], float | None] = lambda path: disk_free(path)
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
    _phases: dict[str, list[float]] = field(default_factory=dict)
    _slow: dict[str, list[bool]] = field(default_factory=dict)
    _save_seen_at: float | None = None  # verl said a save started, since the last step
    _hosts_checked_at: float | None = None
    _per_host: bool = False  # a host's own sample was read: verl's one figure is not judged any more

    # -- the stream

    def on_record(self, rec: dict[str, Any]) -> list[Alert]:
        step, data = rec["step"], rec["data"]
        self._steps += 1
        self._last_step_at, self._last_step = self.clock(), step
        self._active.discard(STALL)
        self._save_seen_at = None
        testing = _value(data, (TESTING_S,))
        if testing:
            self._testing_s = max(self._testing_s, testing[1])
        fired: list[Alert] = []
        fired += self._nan(step, data)
        fired += self._memory(step, data)
        fired += self._speed(step, data)
        fired += self._phase_time(step, data)
        fired += self._reward(step, data)
        fired += self._host(step, data)
        fired += self._space(step)
        return fired

    def on_output(self, line: bytes) -> None:
        """A line of verl's output: the start of a checkpoint save gives the stall rule HEALTH_SAVE_STALL_S more."""
        if SAVE_STARTED in line:
            self._save_seen_at = self.clock()

    def saving(self) -> bool:
        """A checkpoint save is under way: verl said so since the last step, or the next step's folder is there and
        verl's tracker does not name it yet (it writes the tracker last)."""
        if self._save_seen_at is not None:
            return True
        if self.checkpoint_dir is None or self._last_step is None:
            return False
        nxt = self._last_step + 1
        try:
            if not (self.checkpoint_dir / checkpoints.step_dir(nxt)).is_dir():
                return False
            tracker = (self.checkpoint_dir / checkpoints.TRACKER).read_text().strip()
        except OSError:
            return True  # the folder is there and the tracker not yet
        return tracker != str(nxt)

    def tick(self) -> list[Alert]:
        """The stall rule: no new step within HEALTH_STALL_FACTOR times the run's median step time (more during a
        checkpoint save); and every HOSTS_EVERY_S the memory of every host."""
        return self._hosts() + self._stall()

    def _stall(self) -> list[Alert]:
        if STALL in self._active:
            return []  # fired once for this stall; the look at the cluster is not taken again each second
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
        save = self.thresholds.save_stall_s if self.saving() else 0.0
        if waited <= limit + save:
            return []  # a checkpoint save under way has its own allowance
        return self._fire(
            STALL,
            True,
            "time since the last step",
            round(waited, 1),
            f"HEALTH_STALL_FACTOR={self.thresholds.stall_factor:g} x median step {median:.1f} s"
            + (f" + validation {self._testing_s:.0f} s" if self._testing_s else "")
            + (f" + HEALTH_SAVE_STALL_S={save:g} s (a checkpoint save under way)" if save else "")
            + f" = {limit + save:.0f} s",
            self._last_step,
            f"no step for {waited:.0f} s after step {self._last_step} (median step {median:.1f} s); "
            f"{self.describe_cluster()}",
            "look at the rank named (a stopped process, a hung collective: `verl-recipe diagnose RUN_DIR` reads the "
            "node logs); a validation that takes long also waits here, a checkpoint save gets HEALTH_SAVE_STALL_S",
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
            f"step {step} took {step_s:.1f} s, {_times(step_s, base, 1)} this run's first steps ({base:.1f} s)",
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
                f"{THROUGHPUT_KEY} {throughput:.1f} tokens/s at step {step}, {_times(throughput, base_thr, 2)} this "
                f"run's first steps ({base_thr:.1f})",
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
        last = self._rewards[-REWARD_SMOOTHING:]
        try:
            mean = statistics.fmean(last)
        except OverflowError:  # fmean's exact sum overflows on rewards near the float's limit: divided first
            mean = sum(r / len(last) for r in last)
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

    def _phase_time(self, step: int, data: dict[str, Any]) -> list[Alert]:
        """Each phase of the step against its own baseline (the median of its first samples after warm-up): slow
        when above HEALTH_PHASE_FACTOR times it and PHASE_FLOOR_S more; fires on HEALTH_PHASE_K of the last
        HEALTH_PHASE_N samples, clears below that."""
        t = self.thresholds
        fired: list[Alert] = []
        for ph in PHASES:
            found = _value(data, (ph.key,))
            if found is None:
                continue
            series = self._phases.setdefault(ph.name, [])
            needed = ph.warmup + t.phase_baseline
            if len(series) < needed:
                series.append(found[1])  # only the warm-up and the baseline are kept
                continue
            base = statistics.median(series[ph.warmup : needed])
            value = found[1]
            flags = self._slow.setdefault(ph.name, [])
            flags.append(value > t.phase_factor * base and value - base > PHASE_FLOOR_S)
            del flags[: -t.phase_n]
            slow = sum(flags)
            first = ph.warmup + 1
            fired += self._fire(
                f"{PHASE_TIME}:{ph.name}",
                slow >= t.phase_k,
                ph.key,
                round(value, 2),
                f"HEALTH_PHASE_FACTOR={t.phase_factor:g} x {base:.2f} s (median of its samples {first}-{needed}) in "
                f"HEALTH_PHASE_K={t.phase_k} of HEALTH_PHASE_N={t.phase_n} steps",
                step,
                f"phase {ph.name} ({ph.what}, {ph.key}) took {value:.1f} s at step {step}, "
                f"{_times(value, base, 1)} its baseline {base:.1f} s; slow in {slow} of the last {len(flags)} steps",
                _PHASE_FIX.get(ph.name, _PHASE_FIX[""]),
                rule=PHASE_TIME,
            )
        return fired

    def _hosts(self) -> list[Alert]:
        """Every host's own memory, from the samples its node service writes (cluster/hostsample.py)."""
        if self.host_samples is None:
            return []
        now = self.clock()
        if self._hosts_checked_at is not None and now - self._hosts_checked_at < HOSTS_EVERY_S:
            return []
        self._hosts_checked_at = now
        limit = self.thresholds.host_mem_fraction
        fired: list[Alert] = []
        for sample in self.host_samples():
            self._per_host = True
            fired += self._fire(
                f"{HOST_MEMORY}:{sample.host}",
                sample.share >= limit,
                f"host memory of {sample.host}",
                round(sample.used_gb, 2),
                f"HEALTH_HOST_MEM_FRACTION={limit:g} of {sample.total_gb:.0f} GB (Ray kills at {OOM_KILL_THRESHOLD:g})",
                self._last_step,
                f"host {sample.host}: memory in use {sample.used_gb:.1f} of {sample.total_gb:.0f} GB "
                f"({sample.share:.0%})" + (f" after step {self._last_step}" if self._last_step is not None else ""),
                HOST_MEMORY_FIX,
                rule=HOST_MEMORY,
            )
        return fired

    def _host(self, step: int, data: dict[str, Any]) -> list[Alert]:
        """verl's one figure (a worker's host), where no host's own sample has been read."""
        found = _value(data, HOST_MEM)
        if found is None or not self.host_total_gb or self._per_host:
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
            HOST_MEMORY_FIX,
        )

    def _space(self, step: int) -> list[Alert]:
        """Before the next save: the free space at CKPT_DIR against what the save writes."""
        if self.save_bytes <= 0 or self.save_freq <= 0 or self.checkpoint_dir is None:
            return []
        nxt = (step // self.save_freq + 1) * self.save_freq
        if self.total_steps and nxt > self.total_steps:
            nxt = self.total_steps  # verl saves at the last step too
        if self.total_steps and step >= self.total_steps:
            return []
        free = self.disk_free(self.checkpoint_dir)
        if free is None:
            return []
        where = nearest_existing(str(self.checkpoint_dir))
        return self._fire(
            CHECKPOINT_SPACE,
            free < self.save_bytes,
            "free space at CKPT_DIR",
            round(free / 1e9, 3),
            f"the next save's {self.save_bytes / 1e9:.3g} GB",
            step,
            f"{free / 1e9:.3g} GB free at {where}, the save at step {nxt} writes about {self.save_bytes / 1e9:.3g} GB",
            "free space on that volume now (older experiments' saves), or stop the run and resume it with a lower "
            "CKPT_KEEP or CKPT_DIR on a larger volume",
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


def disk_free(path: Path) -> float | None:
    """Free bytes on the volume that holds `path` (or its nearest existing parent); None when it cannot be read."""
    try:
        return float(shutil.disk_usage(nearest_existing(str(path))).free)
    except OSError:
        return None


def _times(value: float, base: float, digits: int) -> str:
    """value / base as "N.Nx"; a base of 0 (every early step took 0 s) has no ratio to divide by."""
    return f"{value / base:.{digits}f}x" if base else "infinitely many times"


def _lossy(key: str) -> bool:
    return key.endswith(("loss", "grad_norm"))
