"""The memory plan: docs/memory.md's hand-worked examples, the four recipes' headroom, refusals and warnings."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from verl_recipe.memory import (
    COEF,
    GIB,
    MIB,
    Estimate,
    Knobs,
    estimate,
    gdn_state_bytes_per_seq,
    kv_bytes_per_token,
    megatron_rank_params,
    text_params,
    vision_params,
    vllm_weight_bytes,
)
from verl_recipe.models import MODELS
from verl_recipe.render import render
from verl_recipe.resolve import Request, resolve

from .fixtures import make_shared
from .helpers import run

S = "--skip-path-checks"
M35, M122, M397 = MODELS["qwen3.5-35b-a3b"], MODELS["qwen3.5-122b-a10b"], MODELS["qwen3.5-397b-a17b"]


def recipe_estimate(recipe: str, *sets: str) -> Estimate:
    r, res = resolve(Request(recipe, sets=list(sets)), environ={})
    launch = render(r, res, [])
    return estimate(r.name, r.engine, r.model, res.values, Knobs.from_launch(launch.overrides, [], launch.env))


def term(est: Estimate, phase: str, name: str) -> float:
    p = next(p for p in est.phases if p.phase == phase)
    return sum(t.bytes for t in p.terms if t.name.startswith(name))


def phase_total(est: Estimate, phase: str) -> float:
    return next(p for p in est.phases if p.phase == phase).total


# ---- parameter counts match the model names (and the published totals) ------------------------------------
@pytest.mark.parametrize(
    ("model", "text_b", "vision_b"),
    [(M35, 34.66, 0.447), (M122, 122.11, 0.451), (M397, 396.35, 0.456)],
)
def test_parameter_counts(model: object, text_b: float, vision_b: float) -> None:
    assert round(text_params(model) / 1e9, 2) == text_b  # type: ignore[arg-type]
    assert round(vision_params(model) / 1e9, 3) == vision_b  # type: ignore[arg-type]


# ---- worked example 1: 122B log-prob, last stage -----------------------------------------------------------
def test_worked_example_1_122b_logprob_last_stage() -> None:
    dense, expert = megatron_rank_params(M122, 2, 4, 16, 1, 3)
    assert dense == (3 * 78_643_712 + 9 * 88_523_008 + 12 * 9_437_184) / 2 + 12 * 795_648 + 762_839_040 / 2 + 3072
    assert dense == 963_912_576
    assert expert == 12 * 2_415_919_104 / 16 == 1_811_939_328
    est = recipe_estimate("qwen3.5-122b")
    logprob = next(p for p in est.phases if p.phase == "log-prob")
    assert logprob.where == "pipeline stage 4/4"
    assert term(est, "log-prob", "actor bf16 parameters") == 5_551_703_808
    assert term(est, "log-prob", "logits") == 4 * 7336 * 124_160 * 10 == 36_433_510_400
    working = 34 * 14_672 * 3072 + 14_672 * 8 * 2 * (2 * 3072 + 3 * 1024) + math.ceil(29_344 / 64) * 32 * 128 * 128 * 4
    assert working == 4_658_528_256
    assert term(est, "log-prob", "one layer's forward working set") == working
    assert term(est, "log-prob", "collective buffers (8 communicators)") == 8 * 2 * 300e6
    # vLLM sleeps with its graphs on the die (enforce_eager false, verl's default): 2 GiB assumed
    assert term(est, "log-prob", "vLLM graph pool") == 2 * GIB
    assert logprob.total == pytest.approx(56_108_116_710 + 2 * GIB, abs=2)
    assert est.peak.phase == "log-prob"
    assert round(est.headroom / GIB, 2) == 9.75


# ---- worked example 2: 397B vLLM on one die ----------------------------------------------------------------
def test_worked_example_2_397b_vllm() -> None:
    assert vllm_weight_bytes(M397, 16, 16) == pytest.approx(2 * ((9_799_293_696 + 456_010_480) / 16 + 1_509_949_440))
    assert round(vllm_weight_bytes(M397, 16, 16)) == 4_301_811_902
    assert kv_bytes_per_token(M397, 16) == 15 * 2 * 1 * 256 * 2 == 15_360
    assert gdn_state_bytes_per_seq(M397, 16) == 45 * ((64 / 16) * 128 * 128 * 4 + (12_288 / 16) * 3 * 2) == 12_003_840
    est = recipe_estimate("qwen3.5-397b")
    pool = 0.6 * 64 * GIB - 4_301_811_902 - 3 * GIB - 4 * 600e6
    assert est.rollout["kv_state_pool"] == pytest.approx(pool, abs=2)
    assert round(pool / GIB, 2) == 29.16
    assert est.rollout["sequence_at_max_len"] == 3072 * 15_360 + 12_003_840 == 59_189_760
    assert math.floor(est.rollout["sequences_per_rank"]) == 528
    # vllm-ascend's 15 % of the die beyond its share, then the trainer's 6 communicators
    assert term(est, "rollout", "vLLM beyond GEN_MEM_UTIL") == pytest.approx(0.15 * 64 * GIB)
    assert phase_total(est, "rollout") == pytest.approx((0.6 + 0.15) * 64 * GIB + 6 * 600e6, abs=2)
    assert term(est, "rollout", "vLLM graph pool") == 0  # inside the share while vLLM is awake


# ---- worked example 3: 397B update, last stage -------------------------------------------------------------
def test_worked_example_3_397b_update_last_stage() -> None:
    est = recipe_estimate("qwen3.5-397b")
    upd = next(p for p in est.phases if p.phase == "update")
    assert upd.where == "pipeline stage 4/4"
    assert term(est, "update", "actor bf16 parameters") == 2 * (1_493_371_264 + 1_509_949_440) == 6_006_641_408
    assert term(est, "update", "actor fp32 gradients") == 12_013_282_816
    assert term(est, "update", "optimizer state") == 0  # optimizer_cpu_offload
    assert term(est, "update", "activation checkpoints") == 2 * 3072 * 4096 / 2 * 15 == 188_743_680
    assert term(est, "update", "recompute working set") == 660_602_880
    assert term(est, "update", "logits") == 3072 * 124_160 * 14 == 5_339_873_280
    assert term(est, "update", "collective buffers (10 communicators)") == 6e9
    assert term(est, "update", "vLLM graph pool") == 2 * GIB
    assert upd.total == pytest.approx(32_630_058_470 + 2 * GIB, abs=2)


# ---- worked example 4: 397B host memory --------------------------------------------------------------------
def test_worked_example_4_397b_host() -> None:
    est = recipe_estimate("qwen3.5-397b")
    per_die = 2 * 3_465_905_136 + 16 * (1_955_955_696 / 32 + 1_509_949_440) + 2 * 3_465_905_136 + 4_301_811_902
    assert est.host_total == pytest.approx(16 * per_die, rel=1e-9)
    assert round(est.host_total / GIB, 1) == 645.3
    assert est.host_bytes is None  # HOST_MEM_GIB not set: printed, not checked


# ---- the four recipes are accepted, with the headroom docs/memory.md states ---------------------------------
HEADROOM = {
    "qwen3.5-35b": ("rollout", 51.4),
    "qwen3.5-35b-fsdp": ("rollout", 49.1),
    "qwen3.5-122b": ("log-prob", 54.3),
    "qwen3.5-397b": ("rollout", 51.4),
}


@pytest.mark.parametrize("recipe", sorted(HEADROOM))
def test_recipe_defaults_fit_with_stated_headroom(capsys: pytest.CaptureFixture[str], recipe: str) -> None:
    est = recipe_estimate(recipe)
    phase, peak = HEADROOM[recipe]
    assert (est.peak.phase, round(est.peak.total / GIB, 1)) == (phase, peak)
    assert est.fits() and est.headroom > COEF.warn_headroom * est.device_bytes
    table = Path(__file__).resolve().parents[2].joinpath("docs", "memory.md").read_text()
    assert f"| {recipe} | {phase}" in table and f"{peak} GiB" in table
    res = run(capsys, "validate", recipe, S)
    assert res.rc == 0, res.err
    assert f"memory: peak {peak} GiB of 64.0 GiB per die in {phase}" in res.err
    assert "warning: memory" not in res.err


# ---- refusals name the phase and the largest terms; warnings under the margin -------------------------------
REFUSED = [
    # forward logits of 8 x 7336 tokens on the last stage
    (
        "qwen3.5-122b",
        ["LOG_PROB_MICRO_BATCH_SIZE_PER_GPU=8"],
        "memory (log-prob, pipeline stage 4/4)",
        "logits (forward)",
    ),
    # vLLM may take 95 % of a die the trainer's buffers already use
    ("qwen3.5-397b", ["GEN_MEM_UTIL=0.98"], "memory (rollout, pipeline stage 1/4)", "vLLM KV"),
    # one 16-die replica cannot hold 800 GB of bf16 weights
    ("qwen3.5-397b", ["GEN_DP=1", "GEN_EP=16"], "memory (rollout)", "cannot hold one sequence"),
    # the 397B on 4 nodes with the recipe's tensor and pipeline sizes: EP 8 puts 8x the recipe's experts on each die
    (
        "qwen3.5-397b",
        ["NNODES=4", "EP=8", "GEN_DP=4", "GEN_EP=64"],
        "memory (update, pipeline stage 4/4)",
        "actor fp32",
    ),
    # the host
    ("qwen3.5-397b", ["HOST_MEM_GIB=512"], "host memory (HOST_MEM_GIB=512)", "optimizer on the CPU"),
]


@pytest.mark.parametrize(("recipe", "sets", "subject", "largest"), REFUSED)
def test_over_memory_refused_with_phase_and_largest_terms(
    capsys: pytest.CaptureFixture[str], recipe: str, sets: list[str], subject: str, largest: str
) -> None:
    res = run(capsys, "validate", recipe, S, *[a for s in sets for a in ("--set", s)])
    assert res.rc == 2, res.err
    lines = [line for line in res.err.splitlines() if line.startswith(f"error: {subject}")]
    assert len(lines) == 1, res.err
    assert largest in lines[0] and "fix:" in lines[0] and f"verl-recipe plan {recipe}" in lines[0]


def test_memory_check_warn_turns_the_refusal_into_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "validate", "qwen3.5-122b", S, "--set", "LOG_PROB_MICRO_BATCH_SIZE_PER_GPU=8")
    assert res.rc == 2
    res = run(
        capsys,
        "validate",
        "qwen3.5-122b",
        S,
        "--set",
        "LOG_PROB_MICRO_BATCH_SIZE_PER_GPU=8",
        "--set",
        "MEMORY_CHECK=warn",
    )
    assert res.rc == 0, res.err
    assert "warning: memory (log-prob, pipeline stage 4/4)" in res.err


def test_warning_under_the_headroom_margin(capsys: pytest.CaptureFixture[str]) -> None:
    # The 122B's 54.3 GiB log-prob peak on a 60 GiB die leaves 5.7 GiB, under 10 %: accepted, with a warning
    res = run(capsys, "validate", "qwen3.5-122b", S, "--set", "DEVICE_MEM_GIB=60")
    assert res.rc == 0, res.err
    assert "warning: memory: the log-prob phase (pipeline stage 4/4) leaves 5.7 GiB" in res.err
    assert "under the 10% margin" in res.err


# ---- what vLLM keeps outside GEN_MEM_UTIL (vllm-ascend#3368, #5020; verl perf_tuning.rst) -------------------
def test_vllm_ascend_evidence_85_percent_refused_75_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    """#5020: 0.85 ran out of memory on an A3 die where 0.75 ran; the plan refuses the first, warns on the second."""
    res = run(capsys, "validate", "qwen3.5-397b", S, "--set", "GEN_MEM_UTIL=0.85")
    assert res.rc == 2, res.err
    assert "error: memory (rollout, pipeline stage 1/4)" in res.err and "vLLM beyond GEN_MEM_UTIL" in res.err
    res = run(capsys, "validate", "qwen3.5-397b", S, "--set", "GEN_MEM_UTIL=0.75")
    assert res.rc == 0, res.err
    assert "warning: memory: the rollout phase (pipeline stage 1/4) leaves 3.0 GiB" in res.err


def test_graph_pool_counted_only_while_graphs_are_captured() -> None:
    base = recipe_estimate("qwen3.5-397b")
    r, res = resolve(Request("qwen3.5-397b"), environ={})
    launch = render(r, res, ["actor_rollout_ref.rollout.enforce_eager=true"])
    eager = estimate(
        r.name, r.engine, r.model, res.values, Knobs.from_launch(launch.overrides, launch.extra, launch.env)
    )
    for phase in ("log-prob", "update", "weight-sync"):
        assert phase_total(base, phase) - phase_total(eager, phase) == pytest.approx(COEF.vllm_graph_pool_asleep)
    assert phase_total(base, "rollout") == pytest.approx(phase_total(eager, "rollout"))


def test_gpu_plan_has_no_vllm_ascend_overshoot_but_keeps_the_sleeping_weights_on_the_host() -> None:
    npu = recipe_estimate("qwen3.5-35b")
    gpu = recipe_estimate("qwen3.5-35b", "DEVICE=gpu")
    assert term(npu, "rollout", "vLLM beyond GEN_MEM_UTIL") > 0
    assert term(gpu, "rollout", "vLLM beyond GEN_MEM_UTIL") == 0
    assert term(gpu, "update", "vLLM graph pool") == COEF.vllm_graph_pool_asleep
    # Level-1 sleep copies vLLM's weights to host memory on GPUs too (the DeepSeek-V3 96 x H20 data point).
    asleep = [t for t in gpu.host_terms if t.name.startswith("vLLM weights asleep")]
    assert len(asleep) == 1 and asleep[0].bytes == pytest.approx(gpu.rollout["weights"] * 8)


def test_device_memory_setting_moves_the_limit(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "validate", "qwen3.5-122b", S, "--set", "DEVICE_MEM_GIB=48").rc == 2
    res = run(capsys, "validate", "qwen3.5-122b", S, "--set", "DEVICE_MEM_GIB=96")
    assert res.rc == 0 and "of 96.0 GiB per die" in res.err


def test_offloading_less_costs_memory_in_every_phase() -> None:
    base = recipe_estimate("qwen3.5-397b")
    r, res = resolve(Request("qwen3.5-397b"), environ={})
    launch = render(r, res, ["actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_cpu_offload=false"])
    knobs = Knobs.from_launch(launch.overrides, launch.extra, launch.env)
    est = estimate(r.name, r.engine, r.model, res.values, knobs)
    # 12 bytes per parameter over its data-parallel size (expert DP is 1) on the die in the update, plus margin
    optimizer = 12 * (1_493_371_264 / 32 + 1_509_949_440)
    assert term(est, "update", "optimizer state") == pytest.approx(optimizer)
    assert phase_total(est, "update") - phase_total(base, "update") == pytest.approx(1.1 * optimizer)
    assert est.host_total < base.host_total


# ---- render --json and the run record carry the estimate ---------------------------------------------------
def test_render_json_carries_the_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run(capsys, "render", "qwen3.5-397b", "--json").doc
    mem = doc["memory"]
    assert mem["unit"] == "GiB" and mem["device"] == 64.0
    assert mem["peak_phase"] == "rollout" and mem["peak"] == 51.35
    assert set(mem["phases"]) == {"rollout", "log-prob", "update", "weight-sync"}
    assert mem["phases"]["update"]["terms"]["logits (update)"] == round(5_339_873_280 / GIB, 2)
    assert mem["rollout"]["sequences_per_rank"] == 528
    assert mem["rollout"]["kv_per_token_kib"] == 15.0
    assert mem["rollout"]["state_per_sequence_mib"] == round(12_003_840 / MIB, 2)


def test_run_record_carries_the_estimate(tmp_path: Path) -> None:
    from verl_recipe.prepare import prepare
    from verl_recipe.run.record import new_run_dir, write_run_record

    shared = make_shared(tmp_path)
    launch, res, problems = prepare(Request("qwen3.5-397b", sets=[f"{k}={v}" for k, v in shared.items()]))
    assert problems == []
    run_dir = write_run_record(new_run_dir(res), launch, res, {})
    record = json.loads((run_dir / "settings.json").read_text())
    assert launch.memory is not None and launch.memory["peak_phase"] == "rollout"
    assert record["memory_estimate"] == launch.memory
    assert json.loads((run_dir / "launch.json").read_text())["memory"] == launch.memory


@pytest.mark.parametrize("command", ["validate", "render"])
def test_an_extra_override_that_drives_a_setting_is_in_the_recorded_plan(tmp_path: Path, command: str) -> None:
    """The plan a launch records (and render --json prints) is the one validate checked: over the values with the
    extra overrides folded in, as `--set` would give them (it was once the recipe's, before the fold)."""
    from verl_recipe.prepare import prepare
    from verl_recipe.validate import rendered_memory

    sets = [f"{k}={v}" for k, v in make_shared(tmp_path).items()]

    def plan(req: Request) -> dict | None:
        if command == "validate":
            launch, _, problems = prepare(req)
            assert problems == []
            return launch.memory
        r, res = resolve(req, environ={})
        return rendered_memory(r, render(r, res, req.extra), res.values)

    by_set = plan(Request("qwen3.5-397b", sets=[*sets, "MAX_RESPONSE_LENGTH=8192"]))
    by_extra = plan(Request("qwen3.5-397b", sets=sets, extra=["data.max_response_length=8192"]))
    recipe_own = plan(Request("qwen3.5-397b", sets=sets))
    assert by_set is not None and recipe_own is not None
    assert by_extra == by_set
    assert by_set["phases"]["update"] != recipe_own["phases"]["update"], "the override must change the plan"


def test_render_of_an_impossible_layout_still_renders(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "render", "qwen3.5-397b", "--json", "--set", "TP=0")
    assert res.rc == 0
    assert res.doc["memory"] is None
