"""render: the whole launch, byte-stable, with the upstream defects fixed and the workaround baked in."""

from __future__ import annotations

from pathlib import Path

import pytest
from verl_recipe.recipes import recipe_names

from .helpers import run

RECIPES = recipe_names()
MM_KEY = "actor_rollout_ref.rollout.engine_kwargs.vllm.mm_processor_cache_gb"


def test_the_products_four_recipes_exist() -> None:
    # the three commands of the product name these; a new model size adds a recipe beside them
    assert {"qwen3.5-122b", "qwen3.5-35b", "qwen3.5-35b-fsdp", "qwen3.5-397b"} <= set(RECIPES)


@pytest.mark.parametrize("recipe", RECIPES)
def test_render_json_is_byte_stable(capsys: pytest.CaptureFixture[str], recipe: str) -> None:
    first = run(capsys, "render", recipe, "--json")
    second = run(capsys, "render", recipe, "--json")
    assert first.rc == 0 and second.rc == 0
    assert first.out == second.out
    assert set(first.doc) == {"recipe", "env", "argv", "memory"}
    assert first.doc["argv"][:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    keys = [a.split("=", 1)[0].lstrip("+") for a in first.doc["argv"][3:]]
    assert len(keys) == len(set(keys)), "each Hydra key must be rendered once"


@pytest.mark.parametrize("recipe", RECIPES)
def test_npu_defaults_fix_upstream_defects(capsys: pytest.CaptureFixture[str], recipe: str) -> None:
    res = run(capsys, "render", recipe, "--json")
    o = res.overrides()
    assert o["trainer.device"] == "npu"
    assert o["ray_kwargs.ray_init.address"] == "auto"
    assert o["trainer.resume_mode"] == "auto"
    assert o["trainer.default_local_dir"].startswith("/")
    assert int(o["trainer.save_freq"]) > 0
    assert "wandb" not in o["trainer.logger"]
    assert o[MM_KEY] == "0"
    env = res.doc["env"]
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"] == "1"
    assert env["ASCEND_RT_VISIBLE_DEVICES"] == ",".join(str(i) for i in range(16))
    # The launch environment must reach Ray workers, not only the driver.
    for key, value in env.items():
        assert o[f"ray_kwargs.ray_init.runtime_env.env_vars.{key}"] == "'" + value + "'"


@pytest.mark.parametrize(
    ("recipe", "layout"),
    [
        (
            "qwen3.5-397b",
            {
                "trainer.nnodes": "16",
                "actor_rollout_ref.actor.megatron.tensor_model_parallel_size": "2",
                "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size": "4",
                "actor_rollout_ref.actor.megatron.expert_model_parallel_size": "64",
                "actor_rollout_ref.rollout.tensor_model_parallel_size": "16",
                "actor_rollout_ref.rollout.data_parallel_size": "16",
                "actor_rollout_ref.rollout.expert_parallel_size": "256",
            },
        ),
        (
            "qwen3.5-122b",
            {
                "trainer.nnodes": "4",
                "actor_rollout_ref.actor.megatron.expert_model_parallel_size": "16",
                "actor_rollout_ref.rollout.n": "6",
                "data.truncation": "right",
            },
        ),
        (
            "qwen3.5-35b",
            {
                "trainer.nnodes": "1",
                "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size": "2",
                "actor_rollout_ref.actor.megatron.expert_model_parallel_size": "8",
            },
        ),
        (
            "qwen3.5-35b-fsdp",
            {
                "trainer.nnodes": "1",
                "actor_rollout_ref.actor.strategy": "fsdp2",
                "actor_rollout_ref.actor.fsdp_config.fsdp_size": "16",
                "actor_rollout_ref.rollout.tensor_model_parallel_size": "4",
            },
        ),
    ],
)
def test_npu_layouts_are_upstream_tested_ones(
    capsys: pytest.CaptureFixture[str], recipe: str, layout: dict[str, str]
) -> None:
    o = run(capsys, "render", recipe, "--json").overrides()
    for key, value in layout.items():
        assert o[key] == value, key


def test_megatron_npu_uses_ascend_bridge_and_gpu_keeps_vanilla(capsys: pytest.CaptureFixture[str]) -> None:
    npu = run(capsys, "render", "qwen3.5-35b", "--json").overrides()
    gpu = run(capsys, "render", "qwen3.5-35b", "--json", "--set", "DEVICE=gpu").overrides()
    assert npu["actor_rollout_ref.actor.megatron.vanilla_mbridge"] == "False"
    assert npu["actor_rollout_ref.actor.megatron.override_transformer_config.use_flash_attn"] == "True"
    assert gpu["actor_rollout_ref.actor.megatron.vanilla_mbridge"] == "True"
    assert "actor_rollout_ref.actor.megatron.override_transformer_config.use_flash_attn" not in gpu
    assert gpu["trainer.device"] == "cuda"
    assert gpu["trainer.n_gpus_per_node"] == "8"
    assert gpu["actor_rollout_ref.actor.megatron.pipeline_model_parallel_size"] == "1"
    gpu_env = run(capsys, "render", "qwen3.5-35b", "--json", "--set", "DEVICE=gpu").doc["env"]
    assert not any(k.startswith("HCCL_") for k in gpu_env)


def test_precedence_recipe_site_env_set_extra(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site.yaml"
    site.write_text("---\nTP: 4\nPP: 2\nEP: 32\nSAVE_FREQ: 7\nenv:\n  HCCL_BUFFSIZE: 400\n")
    base = ["render", "qwen3.5-397b", "--json", "--site", str(site)]
    o = run(capsys, *base).overrides()
    tp = "actor_rollout_ref.actor.megatron.tensor_model_parallel_size"
    assert (o[tp], o["trainer.save_freq"]) == ("4", "7")
    monkeypatch.setenv("TP", "8")
    monkeypatch.setenv("HCCL_BUFFSIZE", "500")
    res = run(capsys, *base)
    assert res.overrides()[tp] == "8"
    assert res.doc["env"]["HCCL_BUFFSIZE"] == "500"
    res = run(capsys, *base, "--set", "TP=16", "--set", "env.HCCL_BUFFSIZE=600")
    assert res.overrides()[tp] == "16"
    assert res.doc["env"]["HCCL_BUFFSIZE"] == "600"
    res = run(capsys, *base, "--set", "TP=16", "--", f"{tp}=1")
    assert res.doc["argv"][-1] == f"{tp}=1", "extra Hydra overrides come last and win"


@pytest.mark.parametrize(
    ("alias", "canonical", "key"),
    [
        ("HF_MODEL_PATH", "MODEL_PATH", "actor_rollout_ref.model.path"),
        ("train_path", "TRAIN_FILES", "data.train_files"),
        ("train_files", "TRAIN_FILES", "data.train_files"),
        ("TRAIN_FILE", "TRAIN_FILES", "data.train_files"),
        ("test_path", "VAL_FILES", "data.val_files"),
        ("test_files", "VAL_FILES", "data.val_files"),
        ("TEST_FILE", "VAL_FILES", "data.val_files"),
        ("nnodes", "NNODES", "trainer.nnodes"),
        ("n_devices_per_node", "NDEVICES_PER_NODE", "trainer.n_gpus_per_node"),
    ],
)
def test_upstream_aliases_apply_with_a_warning(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, alias: str, canonical: str, key: str
) -> None:
    value = "8" if canonical in ("NNODES", "NDEVICES_PER_NODE") else "/data/x.parquet"
    res = run(capsys, "render", "qwen3.5-397b", "--json", "--set", f"{alias}={value}")
    assert res.rc == 0
    assert res.overrides()[key] == value
    assert f"'{alias}' is upstream's spelling; use '{canonical}'" in res.err
    monkeypatch.setenv(alias, value)
    res = run(capsys, "render", "qwen3.5-397b", "--json")
    assert res.overrides()[key] == value, "the upstream spelling in the environment is honoured too"
    assert canonical in res.err


def test_save_path_alias_sets_checkpoint_root(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "render", "qwen3.5-35b", "--json", "--set", "save_path=/ckpt")
    assert res.overrides()["trainer.default_local_dir"] == "/ckpt/verl_grpo_qwen3_5/qwen3.5-35b"


@pytest.mark.parametrize(
    ("typo", "hint"),
    [
        ("TPP", "TP"),
        ("GEN_TPP", "GEN_TP"),
        ("MODEL_PTH", "MODEL_PATH"),
        ("NNODE", "NNODES"),
        ("ROLLOUT_NN", "ROLLOUT_N"),
    ],
)
def test_typos_are_refused_with_did_you_mean(capsys: pytest.CaptureFixture[str], typo: str, hint: str) -> None:
    res = run(capsys, "render", "qwen3.5-397b", "--set", f"{typo}=1")
    assert res.rc == 2
    assert f"did you mean '{hint}'?" in res.err
    assert res.out == ""


def test_unknown_recipe_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "render", "qwen3.5-397")
    assert res.rc == 2
    assert "did you mean 'qwen3.5-397b'?" in res.err


def test_mm_cache_rule_is_keyed_to_pinned_vllm_off_npu_only(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verl_recipe import manifest

    res = run(capsys, "render", "qwen3.5-35b-fsdp", "--json")
    assert res.overrides()[MM_KEY] == "0"
    # A pin that contains the fix drops the workaround off NPU; on NPU it stays (workarounds.MM_CACHE_KEPT_ON).
    text = manifest.CHECKOUT_MANIFEST.read_text().replace("version: 0.18.0\n", "version: 0.22.1\n", 1)
    assert "version: 0.22.1" in text
    moved = tmp_path / "versions.yaml"
    moved.write_text(text)
    monkeypatch.setenv("VERL_RECIPE_MANIFEST", str(moved))
    manifest.load_manifest.cache_clear()
    try:
        assert run(capsys, "render", "qwen3.5-35b-fsdp", "--json").overrides()[MM_KEY] == "0"
        assert MM_KEY not in run(capsys, "render", "qwen3.5-35b-fsdp", "--json", "--set", "DEVICE=gpu").overrides()
        on_npu = run(capsys, "validate", "qwen3.5-35b-fsdp", "--skip-path-checks", "--set", "MM_PROCESSOR_CACHE_GB=4")
        assert on_npu.rc == 2 and "MM_PROCESSOR_CACHE_GB=4" in on_npu.err
    finally:
        manifest.load_manifest.cache_clear()


def test_mm_cache_positive_refused_on_npu_unless_forced(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "validate", "qwen3.5-397b", "--skip-path-checks", "--set", "MM_PROCESSOR_CACHE_GB=4")
    assert res.rc == 2
    assert "MM_PROCESSOR_CACHE_GB=4" in res.err and "vllm-project/vllm#42995" in res.err
    forced = run(
        capsys,
        "validate",
        "qwen3.5-397b",
        "--skip-path-checks",
        "--set",
        "MM_PROCESSOR_CACHE_GB=4",
        "--set",
        "FORCE_MM_CACHE=true",
    )
    assert forced.rc == 0, forced.err
    gpu = run(
        capsys,
        "validate",
        "qwen3.5-35b",
        "--skip-path-checks",
        "--set",
        "DEVICE=gpu",
        "--set",
        "MM_PROCESSOR_CACHE_GB=4",
    )
    assert gpu.rc == 0, gpu.err


def test_list_shows_layouts(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "list")
    assert res.rc == 0
    line = next(row for row in res.out.splitlines() if row.startswith("qwen3.5-397b"))
    assert "16x16" in line and "EP=64" in line and "GEN_EP=256" in line


def test_device_cpu_takes_the_overlay_its_package_registers(capsys: pytest.CaptureFixture[str]) -> None:
    """The CPU stand-ins (installed in the dev venv as in verl-recipe:sim) register `cpu` under verl_recipe.devices;
    render takes their overlay through it."""
    from verl_sim_standin import ROLLOUT_NAME

    res = run(capsys, "render", "qwen3.5-35b-fsdp", "--json", "--set", "DEVICE=cpu")
    assert res.rc == 0, res.err
    assert res.overrides()["actor_rollout_ref.rollout.name"] == ROLLOUT_NAME


def test_device_cpu_without_its_package_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from verl_recipe import devices

    monkeypatch.setattr(devices, "entry_points", lambda **_: [])
    res = run(capsys, "render", "qwen3.5-35b-fsdp", "--set", "DEVICE=cpu")
    assert res.rc == 2 and res.out == ""
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "DEVICE=cpu" in lines[0] and "fix: DEVICE=npu on A3 hosts" in lines[0], res.err
