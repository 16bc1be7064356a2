"""The health rules on verl's metric stream (health.py): each fires on a crafted stream that uses the metric names of
a recorded 3-step verl 0.8.0 run on the simulated cluster (data/sample-metrics.jsonl), and that run itself gives no
alert. The stall rule runs on an injected clock; a rule in HEALTH_STOP stops a launch with exit 5."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from verl_recipe.exitcodes import EXIT_HEALTH
from verl_recipe.resolve import Request, resolve
from verl_recipe.watch.health import ALERTS_FILE, Alert, Health, Thresholds, host_mem_total_gb

from tests.fakes import FakeClock
from tests.unit.fixtures import install_fake_verl, make_shared, set_args
from tests.unit.helpers import run

RECORDED = Path(__file__).parent / "data" / "sample-metrics.jsonl"
SAMPLE = [json.loads(line) for line in RECORDED.read_text().splitlines()]
DEFAULTS = Thresholds.from_values(resolve(Request("qwen3.5-35b-fsdp"))[1].values)


def stream(n: int, change: dict[str, Any] | None = None, at: int = 0) -> list[dict[str, Any]]:
    """n steps: the recorded ones, then steps 2 and 3 again; from step `at` on, `change` (key -> value or a
    function of the step) is applied."""
    out = []
    for k in range(1, n + 1):
        data = dict(SAMPLE[k - 1 if k <= 3 else 1 + k % 2]["data"])
        if change and at and k >= at:
            data.update({key: v(k) if callable(v) else v for key, v in change.items()})
        out.append({"step": k, "data": data})
    return out


def feed(records: list[dict[str, Any]], thresholds: Thresholds = DEFAULTS, **kw: Any) -> tuple[Health, list[Alert]]:
    health = Health(thresholds, host_total_gb=kw.pop("host_total_gb", 64.0), describe_cluster=lambda: "ray: -", **kw)
    fired: list[Alert] = []
    for rec in records:
        fired += health.on_record(rec)
    return health, fired


def test_the_defaults_are_the_recipes_settings() -> None:
    assert Thresholds(2.0, 10, 1.5, 5.0, 0.3, 0.9, frozenset()) == DEFAULTS
    assert (DEFAULTS.phase_factor, DEFAULTS.phase_baseline, DEFAULTS.phase_k, DEFAULTS.phase_n) == (2.0, 5, 3, 5)
    assert DEFAULTS.save_stall_s == 3600.0
    custom = {**resolve(Request("qwen3.5-35b-fsdp"))[1].values, "HEALTH_PHASE_K": 2, "HEALTH_SAVE_STALL_S": "90"}
    assert (Thresholds.from_values(custom).phase_k, Thresholds.from_values(custom).save_stall_s) == (2, 90.0)


def test_the_recorded_run_and_a_longer_clean_one_give_no_alert() -> None:
    assert feed(SAMPLE)[1] == []
    assert feed(stream(40))[1] == []


def test_device_memory_rising_every_step_fires_once_naming_metric_value_threshold_and_fix(tmp_path: Path) -> None:
    key = "actor/perf/max_memory_allocated_gb"
    health, fired = feed(stream(30, {key: lambda k: 0.6 + 0.3 * (k - 1)}, at=1), run_dir=tmp_path)
    assert [a.rule for a in fired] == ["memory_growth"]
    (alert,) = fired
    # 0.3 GB more every step: 2.7 GB over the 10 steps 1..10 > 2 GB; it fires at step 10, not again while it grows.
    assert alert.step == 10 and alert.metric == key and alert.value == pytest.approx(3.3)
    assert "HEALTH_MEM_GROWTH_GB=2" in alert.line and "vllm-ascend#9563" in alert.line and "fix: " in alert.line
    saved = json.loads((tmp_path / ALERTS_FILE).read_text())
    assert saved[0]["rule"] == "memory_growth" and saved[0]["stops_run"] is False
    assert set(saved[0]) == {"rule", "metric", "value", "threshold", "step", "time_utc", "line", "stops_run"}


def test_host_memory_growth_counts_too_but_not_growth_with_a_dip() -> None:
    key = "actor/perf/cpu_memory_used_gb"
    _, fired = feed(stream(20, {key: lambda k: 4.2 + 0.25 * k}, at=2))
    assert [(a.rule, a.metric) for a in fired] == [("memory_growth", key)]
    _, fired = feed(stream(20, {key: lambda k: 4.2 + 0.25 * k - (1.0 if k % 4 == 0 else 0)}, at=2))
    assert fired == []


def test_a_slow_step_and_low_throughput_against_the_runs_own_first_steps() -> None:
    slow = {"timing_s/step": 4.0, "perf/throughput": 30.0}
    _, fired = feed(stream(12, slow, at=8))
    assert [(a.rule, a.step) for a in fired] == [("step_time", 8), ("throughput", 8)]
    assert "HEALTH_STEP_TIME_RATIO=1.5" in fired[0].line


def test_a_checkpoint_save_is_not_a_slow_step_but_a_slow_save_is_named_as_one() -> None:
    _, fired = feed(stream(12, {"timing_s/step": 6.0, "timing_s/save_checkpoint": 3.7}, at=8))
    # no step_time alert: the save is taken off the step; the save itself, 3.7 s against its 0.04 s baseline in 3 of
    # the last 5 saves, is the phase rule's
    assert [(a.rule, a.metric, a.step) for a in fired] == [("phase_time", "timing_s/save_checkpoint", 10)]


@pytest.mark.parametrize("bad", [None, float("nan"), float("inf")])
@pytest.mark.parametrize("key", ["actor/pg_loss", "actor/grad_norm", "actor/kl_loss"])
def test_nan_inf_or_null_in_a_loss_or_grad_norm(key: str, bad: float | None) -> None:
    _, fired = feed(stream(6, {key: bad}, at=4))
    assert [(a.rule, a.metric, a.step) for a in fired] == [("nan", key, 4)]


def test_nan_read_from_json_text_as_verl_may_write_it() -> None:
    rec = json.loads('{"step": 2, "data": {"actor/pg_loss": NaN, "actor/grad_norm": null, "actor/entropy": 5.0}}')
    _, fired = feed([rec])
    assert sorted(a.metric for a in fired) == ["actor/grad_norm", "actor/pg_loss"]


def test_a_reward_that_collapses_below_its_running_best() -> None:
    _, fired = feed(stream(14, {"critic/rewards/mean": lambda k: 0.6 if k < 10 else 0.1}, at=4))
    assert [a.rule for a in fired] == ["reward_drop"]
    assert fired[0].step == 11  # the 3-step mean (0.6, 0.1, 0.1 = 0.27) is 0.33 below the best 0.6
    assert "HEALTH_REWARD_DROP=0.3" in fired[0].line


def test_host_memory_near_rays_oom_threshold() -> None:
    _, fired = feed(stream(5, {"actor/perf/cpu_memory_used_gb": 58.0}, at=5))
    assert [a.rule for a in fired] == ["host_memory"]
    assert "HEALTH_HOST_MEM_FRACTION=0.9 of 64 GB" in fired[0].threshold
    assert feed(stream(5, {"actor/perf/cpu_memory_used_gb": 58.0}, at=5), host_total_gb=None)[1] == []


def test_host_mem_total_read_from_meminfo(tmp_path: Path) -> None:
    (tmp_path / "meminfo").write_text("MemTotal:       67108864 kB\nMemFree: 1 kB\n")
    assert host_mem_total_gb(tmp_path / "meminfo") == 64.0
    assert host_mem_total_gb(tmp_path / "absent") is None


def test_stall_fires_on_the_clock_names_the_cluster_and_rearms_after_a_step() -> None:
    clock = FakeClock(1_800_000_000.0)
    health = Health(DEFAULTS, host_total_gb=64.0, clock=clock, describe_cluster=lambda: "Ray actors: 8x WorkerDict")
    assert health.tick() == []  # no step yet: model loading is not a stall
    for rec in SAMPLE:
        health.on_record(rec)
    # The median of 9.9, 2.3 and 2.4 s is 2.37 s; 5 times that is 11.8 s.
    clock.t += 11.0
    assert health.tick() == []
    clock.t += 2.0
    (alert,) = health.tick()
    assert alert.rule == "stall" and alert.step == 3 and "8x WorkerDict" in alert.line
    assert health.tick() == [], "once per stall"
    health.on_record({"step": 4, "data": SAMPLE[2]["data"]})
    clock.t += 20.0
    assert [a.rule for a in health.tick()] == ["stall"]


def test_stall_allows_the_longest_validation_and_ends_with_the_last_step() -> None:
    clock = FakeClock(1_800_000_000.0)
    health = Health(DEFAULTS, clock=clock, describe_cluster=lambda: "-", total_steps=6)
    for rec in stream(4, {"timing_s/testing": 30.0}, at=4):
        health.on_record(rec)
    clock.t += 40.0  # 5 x 2.34 s + the 30 s validation seen at step 4 = 41.7 s
    assert health.tick() == []
    clock.t += 2.0
    assert [a.rule for a in health.tick()] == ["stall"]
    for rec in stream(6)[4:]:
        health.on_record(rec)
    clock.t += 600.0  # verl validates and shuts down after the last step
    assert health.tick() == []


def test_stall_without_ray_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    from verl_recipe.watch.health import ray_actors_summary

    real = builtins.__import__

    def no_ray(name: str, *args: Any, **kw: Any) -> Any:
        if name.startswith("ray"):
            raise ImportError(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    assert ray_actors_summary() == "no Ray state API here"


def test_a_rule_in_health_stop_marks_its_alert() -> None:
    stop = Thresholds.from_values({**resolve(Request("qwen3.5-35b-fsdp"))[1].values, "HEALTH_STOP": ["nan"]})
    _, fired = feed(stream(5, {"actor/pg_loss": None}, at=3), stop)
    assert fired[0].stops_run and "HEALTH_STOP" in fired[0].line
    every = Thresholds.from_values({**resolve(Request("qwen3.5-35b-fsdp"))[1].values, "HEALTH_STOP": ["all"]})
    assert "stall" in every.stop and "memory_growth" in every.stop


def test_an_unknown_rule_in_health_stop_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    paths = make_shared(tmp_path / "shared")
    res = run(capsys, "validate", "qwen3.5-397b", *set_args(paths), "--set", "HEALTH_STOP=nan,stal")
    assert res.rc == 2
    assert "HEALTH_STOP=nan,stal" in res.out + res.err and "stal names no health rule" in res.out + res.err


# verl's stand-in: writes its metric stream where the launcher points VERL_FILE_LOGGER_PATH, a NaN loss at step 3,
# then waits to be stopped (a real verl would go on training).
FAKE_NAN = """
import json, os, time
with open(os.environ["VERL_FILE_LOGGER_PATH"], "w") as f:
    for k in range(1, 6):
        data = {"timing_s/step": 0.1, "critic/rewards/mean": 0.5, "actor/pg_loss": None if k == 3 else 0.1}
        f.write(json.dumps({"step": k, "data": data}) + "\\n")
        f.flush()
time.sleep(120)
"""


def test_a_stopping_rule_ends_the_launch_with_exit_5_and_records_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake_verl(tmp_path, monkeypatch, FAKE_NAN)
    paths = make_shared(tmp_path / "shared")
    res = run(capsys, "launch", "qwen3.5-397b", *set_args(paths), "--set", "HEALTH_STOP=nan")
    assert res.rc == EXIT_HEALTH == 5, res.err
    (run_dir,) = (Path(paths["LOG_DIR"]) / "verl_grpo_qwen3_5" / "qwen3.5-397b" / "runs").iterdir()
    outcome = json.loads((run_dir / "outcome.json").read_text())
    assert outcome["exit_code"] == 5 and outcome["health_stop"]["metric"] == "actor/pg_loss"
    assert outcome["verl_exit_code"] != 0, "verl was terminated, not left running"
    alerts = json.loads((run_dir / ALERTS_FILE).read_text())
    assert [(a["rule"], a["step"], a["stops_run"]) for a in alerts] == [("nan", 3, True)]
    assert "alert nan: actor/pg_loss = null (NaN) at step 3" in res.err
    assert "progress: step 2" in res.out
    assert "alert nan" in (run_dir / "train.log").read_text()


def test_each_threshold_is_defined_once_with_its_rule() -> None:
    """A threshold's type, domain, help and default live in the rule table: the settings table and every recipe
    take them from there (no second copy in _base.yaml or settings.py)."""
    from verl_recipe.contracts.health_rules import HEALTH_RULES, THRESHOLDS
    from verl_recipe.recipes import RECIPE_DIR, load_recipe, recipe_names
    from verl_recipe.settings import BY_NAME

    names = {t.name for t in THRESHOLDS}
    assert names == {n for r in HEALTH_RULES for n in r.settings}
    for t in THRESHOLDS:
        row = BY_NAME[t.name]
        assert (row.kind, row.help, row.domain.lo if row.domain else None) == (t.kind, t.help, t.lo)
        assert t.name not in (RECIPE_DIR / "_base.yaml").read_text()
        for name in recipe_names():
            assert load_recipe(name).settings[t.name] == t.default


# -- the phase rule: each phase of verl 0.8.0's step (timing_s/<phase>) against its own first steps, k of n


def test_a_slow_phase_fires_on_k_of_n_steps_naming_the_phase_its_value_and_baseline() -> None:
    gen = {"timing_s/gen": lambda k: 10.0 if k in (9, 11, 12) else 2.0}
    _, fired = feed(stream(14, gen, at=1))
    assert [(a.rule, a.metric, a.step) for a in fired] == [("phase_time", "timing_s/gen", 12)]
    line = fired[0].line
    assert "phase generation" in line and "took 10.0 s at step 12" in line and "baseline 2.0 s" in line
    assert "slow in 3 of the last 5 steps" in line and "HEALTH_PHASE_FACTOR=2 x 2.00 s" in line
    assert "HEALTH_PHASE_K=3 of HEALTH_PHASE_N=5" in fired[0].threshold
    # two slow steps of five are not enough, and the step time (unchanged here) fires nothing
    assert feed(stream(14, {"timing_s/gen": lambda k: 10.0 if k in (9, 11) else 2.0}, at=1))[1] == []


def test_each_phase_has_its_own_baseline_and_the_rule_rearms_after_it_clears() -> None:
    slow = (9, 10, 11, 20, 21, 22)
    sync = {"timing_s/update_weights": lambda k: 9.0 if k in slow else 3.0, "timing_s/gen": 2.0}
    _, fired = feed(stream(24, sync, at=1))
    assert [(a.metric, a.step) for a in fired] == [("timing_s/update_weights", 11), ("timing_s/update_weights", 22)]
    assert "phase weight_sync" in fired[0].line and "baseline 3.0 s" in fired[0].line


def test_a_sub_second_phase_that_jumps_by_a_large_factor_is_noise() -> None:
    # 0.085 s -> 0.9 s is 10x its baseline but less than a second more: no alert
    _, fired = feed(stream(16, {"timing_s/ref": lambda k: 0.9 if k >= 9 else 0.085}, at=1))
    assert fired == []


def test_the_phase_rule_takes_its_settings() -> None:
    values = resolve(Request("qwen3.5-35b-fsdp"))[1].values
    t = Thresholds.from_values({**values, "HEALTH_PHASE_K": 1, "HEALTH_PHASE_N": 1, "HEALTH_PHASE_BASELINE": 2})
    _, fired = feed(stream(6, {"timing_s/update_actor": lambda k: 9.0 if k == 5 else 1.0}, at=1), t)
    # samples 2-3 are the baseline (1.0 s); one slow step of one fires at once
    assert [(a.metric, a.step) for a in fired] == [("timing_s/update_actor", 5)]


# -- the stall rule during a checkpoint save, and its look at the cluster


def _three_steps(**kw: Any) -> tuple[Health, FakeClock, list[str]]:
    clock = FakeClock(1_800_000_000.0)
    looks: list[str] = []

    def describe() -> str:
        looks.append("look")
        return "stopped making progress: a3-02 rank 1 (WorkerDict_0:1) pid 7: process stopped (state T)"

    health = Health(DEFAULTS, clock=clock, describe_cluster=describe, **kw)
    for rec in SAMPLE:
        health.on_record(rec)
    return health, clock, looks


def test_a_save_verl_announces_gets_its_own_allowance_then_the_stall_fires_naming_the_rank() -> None:
    health, clock, looks = _three_steps()
    # verl 0.8.0's own line at the start of _save_checkpoint, as Ray prefixes it in train.log
    health.on_output(b"(TaskRunner pid=2301) local_global_step_folder: /mnt/shared/checkpoints/x/global_step_4\n")
    clock.t += 11.0 + 3600.0  # within 11.8 s of steps + HEALTH_SAVE_STALL_S=3600
    assert health.tick() == []
    clock.t += 2.0
    (alert,) = health.tick()
    assert alert.rule == "stall" and "HEALTH_SAVE_STALL_S=3600 s (a checkpoint save under way)" in alert.threshold
    assert "a3-02 rank 1 (WorkerDict_0:1)" in alert.line
    assert [health.tick() for _ in range(5)] == [[]] * 5 and looks == ["look"], "one look per stall, not per second"
    health.on_record({"step": 4, "data": SAMPLE[2]["data"]})  # the save ended with its step: no allowance now
    clock.t += 13.0
    assert [a.rule for a in health.tick()] == ["stall"] and "HEALTH_SAVE_STALL_S" not in health.alerts[-1].threshold


def test_a_save_seen_in_the_checkpoint_folder_until_verls_tracker_names_it(tmp_path: Path) -> None:
    health, clock, _ = _three_steps(checkpoint_dir=tmp_path)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("3")
    (tmp_path / "global_step_4" / "actor").mkdir(parents=True)  # verl is writing step 4's checkpoint
    clock.t += 100.0
    assert health.saving() and health.tick() == []
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("4")  # written last: the save is over
    assert not health.saving() and [a.rule for a in health.tick()] == ["stall"]


def test_no_save_folder_means_no_allowance(tmp_path: Path) -> None:
    health, clock, _ = _three_steps(checkpoint_dir=tmp_path)
    clock.t += 13.0
    assert not health.saving() and [a.rule for a in health.tick()] == ["stall"]


# -- every host's own memory (cluster/hostsample.py's samples)


def test_host_memory_of_every_host_names_the_host_and_replaces_the_one_worker_figure() -> None:
    from verl_recipe.cluster.hostsample import HostMem

    clock = FakeClock(1_800_000_000.0)
    reads: list[float] = []

    def samples() -> list[HostMem]:
        reads.append(clock.t)
        return [HostMem("a3-01", clock.t, 64.0, 20.0), HostMem("a3-02", clock.t, 128.0, 121.0)]

    health = Health(DEFAULTS, host_total_gb=64.0, clock=clock, describe_cluster=lambda: "-", host_samples=samples)
    (alert,) = health.tick()  # before the first step too: loading the model can fill a host
    assert alert.rule == "host_memory" and alert.metric == "host memory of a3-02" and alert.value == 121.0
    assert "host a3-02: memory in use 121.0 of 128 GB (95%)" in alert.line and "of 128 GB" in alert.threshold
    clock.t += 5.0
    assert health.tick() == [] and len(reads) == 1, "read every 10 s, not every tick"
    # verl's own figure (58 of HOST_MEM_GIB 64) is one worker's host: not judged once the hosts' own are read
    _, fired = health, health.on_record({"step": 1, "data": {"actor/perf/cpu_memory_used_gb": 58.0}})
    assert fired == []
    clock.t += 10.0
    assert health.tick() == [] and len(reads) == 2, "fired once while it holds"
