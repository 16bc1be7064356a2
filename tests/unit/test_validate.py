"""validate: every bad input gives exit 2, names the culprit and a fix, and starts nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .fixtures import make_shared, set_args
from .helpers import run

S = "--skip-path-checks"

# (recipe, arguments, text that must name the culprit in the one-line error)
BAD_LAYOUTS = [
    ("qwen3.5-397b", ["--set", "TP=3"], "TP=3"),
    ("qwen3.5-397b", ["--set", "PP=7"], "PP=7"),
    ("qwen3.5-397b", ["--set", "CP=2"], "CP=2: Gated DeltaNet"),
    ("qwen3.5-397b", ["--set", "EP=48"], "EP=48"),
    ("qwen3.5-397b", ["--set", "ETP=3"], "ETP=3"),
    ("qwen3.5-397b", ["--set", "NNODES=15"], "does not divide the world of 240"),
    ("qwen3.5-397b", ["--set", "GEN_TP=3", "--set", "GEN_EP=1"], "GEN_TP=3"),
    ("qwen3.5-397b", ["--set", "GEN_EP=128"], "GEN_EP=128 GEN_TP=16 GEN_DP=16"),
    ("qwen3.5-397b", ["--set", "GEN_DP=3", "--set", "GEN_EP=48"], "a rollout replica of 48 devices"),
    ("qwen3.5-397b", ["--set", "VPP=2"], "VPP=2: 15 layers per pipeline stage"),
    ("qwen3.5-397b", ["--set", "VPP=3"], "VPP=3 PP=4: the interleaved schedule"),
    ("qwen3.5-35b", ["--set", "NNODES=16"], "TRAIN_BATCH_SIZE=32 ROLLOUT_N=5"),
    ("qwen3.5-35b-fsdp", ["--set", "NNODES=16"], "TRAIN_BATCH_SIZE=64 ROLLOUT_N=5"),
    ("qwen3.5-35b", ["--set", "TRAIN_BATCH_SIZE=16"], "TRAIN_BATCH_SIZE=16 PPO_MINI_BATCH_SIZE=32"),
    ("qwen3.5-35b", ["--set", "ROLLOUT_N=0"], "ROLLOUT_N=0"),
    ("qwen3.5-35b-fsdp", ["--set", "FSDP_SIZE=6"], "FSDP_SIZE=6: does not divide the world of 16"),
    ("qwen3.5-35b-fsdp", ["--set", "SP_SIZE=3"], "SP_SIZE=3"),
    ("qwen3.5-122b", ["--set", "PP=5"], "PP=5: qwen3.5-122b-a10b has 48 layers"),
    ("qwen3.5-397b", ["--", "trainer.nnodes=15"], "does not divide the world of 240"),
]
BAD_SETTINGS = [
    ("qwen3.5-397b", ["--set", "TP=abc"], "TP='abc' is not an integer"),
    ("qwen3.5-397b", ["--set", "SAVE_FREQ=0"], "SAVE_FREQ=0"),
    ("qwen3.5-397b", ["--set", "CKPT_DIR=checkpoints"], "CKPT_DIR=checkpoints: must be absolute"),
    ("qwen3.5-397b", ["--set", "LOG_DIR=runs"], "LOG_DIR=runs: must be absolute"),
    ("qwen3.5-397b", ["--set", "MODEL_PATH=Qwen/Qwen3.5-397B-A17B"], "MODEL_PATH=Qwen/Qwen3.5-397B-A17B"),
    ("qwen3.5-397b", ["--set", "LOGGER=console,wandb"], "'wandb' is chosen but WANDB_API_KEY is not set"),
    ("qwen3.5-397b", ["--set", "LOGGER=console,foo"], "'foo' is not a verl 0.8.0 tracker"),
    ("qwen3.5-397b", ["--set", "LOGGER=console,tensorboard"], "LOGGER=console,tensorboard: has no 'file'"),
    ("qwen3.5-35b-fsdp", ["--", "trainer.logger=[console]"], "LOGGER=console: has no 'file'"),
    ("qwen3.5-397b", ["--set", "DEVICE=tpu"], "DEVICE='tpu' is not one of npu, gpu"),
    ("qwen3.5-397b", ["--set", "RESUME_MODE=sometimes"], "RESUME_MODE='sometimes'"),
    ("qwen3.5-397b", ["--set", "EXPERIMENT_NAME=a/b"], "EXPERIMENT_NAME='a/b'"),
    ("qwen3.5-397b", ["--set", "TRAIN_FILES=data/train.parquet"], "TRAIN_FILES=data/train.parquet"),
    ("qwen3.5-397b", ["--set", "TP"], "expected KEY=VALUE"),
    ("qwen3.5-397b", ["--set", "MM_PROCESSOR_CACHE_GB=-1"], "MM_PROCESSOR_CACHE_GB=-1"),
    (
        "qwen3.5-397b",
        ["--", "trainer.nnode=4"],
        "Could not override 'trainer.nnode'; fix: did you mean 'trainer.nnodes'?",
    ),
    (
        "qwen3.5-397b",
        ["--", "actor_rollout_ref.actor.megatron.tensor_modle_parallel_size=2"],
        "did you mean 'actor_rollout_ref.actor.megatron.tensor_model_parallel_size'?",
    ),
]


@pytest.mark.parametrize(("recipe", "args", "culprit"), BAD_LAYOUTS + BAD_SETTINGS)
def test_bad_input_exit_2_names_culprit(
    capsys: pytest.CaptureFixture[str], recipe: str, args: list[str], culprit: str
) -> None:
    own, extra = (args[: args.index("--")], args[args.index("--") :]) if "--" in args else (args, [])
    res = run(capsys, "validate", recipe, S, *own, *extra)
    assert res.rc == 2, res.err
    assert culprit in res.err
    assert res.out == ""
    errors = [line for line in res.err.splitlines() if line.startswith("error:")]
    assert errors, res.err
    assert all(
        "fix:" in line or "unknown setting" in line or "expected KEY=VALUE" in line or "is not" in line
        for line in errors
    ), errors


def test_all_problems_reported_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(
        capsys,
        "validate",
        "qwen3.5-397b",
        S,
        "--set",
        "TP=3",
        "--set",
        "CP=2",
        "--set",
        "SAVE_FREQ=0",
        "--set",
        "CKPT_DIR=rel",
        "--",
        "trainer.nnode=4",
        "trainer.foo=1",
    )
    assert res.rc == 2
    errors = [line for line in res.err.splitlines() if line.startswith("error:")]
    assert len(errors) >= 6, errors
    for culprit in ("TP=3", "CP=2", "SAVE_FREQ=0", "CKPT_DIR=rel", "trainer.nnode", "trainer.foo"):
        assert any(culprit in line for line in errors), culprit


@pytest.mark.parametrize("recipe", ["qwen3.5-35b", "qwen3.5-35b-fsdp", "qwen3.5-122b", "qwen3.5-397b"])
def test_defaults_validate(capsys: pytest.CaptureFixture[str], recipe: str) -> None:
    res = run(capsys, "validate", recipe, S)
    assert res.rc == 0, res.err
    assert res.out.startswith(f"ok: {recipe}")


def test_scaled_35b_with_fixed_batches_validates(capsys: pytest.CaptureFixture[str]) -> None:
    """The refusal's fix works: 16 nodes with batches that divide the data-parallel size."""
    res = run(
        capsys,
        "validate",
        "qwen3.5-35b",
        S,
        "--set",
        "NNODES=16",
        "--set",
        "TRAIN_BATCH_SIZE=64",
        "--set",
        "PPO_MINI_BATCH_SIZE=64",
    )
    assert res.rc == 0, res.err


def test_path_checks_pass_on_a_complete_tree(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    paths = make_shared(tmp_path)
    res = run(capsys, "validate", "qwen3.5-397b", *set_args(paths))
    assert res.rc == 0, res.err


@pytest.mark.parametrize(
    ("breakage", "culprit"),
    [
        ("no-model", "is not a directory"),
        ("no-config", "has no config.json"),
        ("no-weights", "holds no weights"),
        ("wrong-model", "config.json does not describe qwen3.5-397b-a17b: num_hidden_layers=40"),
        ("no-train", "TRAIN_FILES="),
        ("no-val", "VAL_FILES="),
        ("ckpt-not-writable", "CKPT_DIR="),
    ],
)
def test_bad_paths(capsys: pytest.CaptureFixture[str], tmp_path: Path, breakage: str, culprit: str) -> None:
    paths = make_shared(tmp_path)
    model = Path(paths["MODEL_PATH"])
    if breakage == "no-model":
        paths["MODEL_PATH"] = str(tmp_path / "missing")
    elif breakage == "no-config":
        (model / "config.json").unlink()
    elif breakage == "no-weights":
        (model / "model-00001-of-00001.safetensors").unlink()
    elif breakage == "wrong-model":
        cfg = json.loads((model / "config.json").read_text())
        cfg["text_config"].update(num_hidden_layers=40, num_experts=256)
        (model / "config.json").write_text(json.dumps(cfg))
    elif breakage == "no-train":
        Path(paths["TRAIN_FILES"]).unlink()
    elif breakage == "no-val":
        Path(paths["VAL_FILES"]).unlink()
    elif breakage == "ckpt-not-writable":
        blocker = tmp_path / "blocker"
        blocker.write_text("a file where a directory should be")
        paths["CKPT_DIR"] = str(blocker / "ckpt")
    res = run(capsys, "validate", "qwen3.5-397b", *set_args(paths))
    assert res.rc == 2
    assert culprit in res.err
    assert "fix:" in res.err


def test_real_config_json_values_drive_layout_checks(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A checkpoint whose config.json says 48 experts makes EP=64 wrong, whatever the recipe assumed."""
    paths = make_shared(tmp_path)
    cfg_path = Path(paths["MODEL_PATH"]) / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["text_config"]["num_experts"] = 48
    cfg_path.write_text(json.dumps(cfg))
    res = run(capsys, "validate", "qwen3.5-397b", *set_args(paths))
    assert res.rc == 2
    assert "num_experts=48 (expected 512)" in res.err
    assert "EP=64: qwen3.5-397b-a17b has 48 experts" in res.err


def test_missing_site_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    res = run(capsys, "validate", "qwen3.5-397b", S, "--site", str(tmp_path / "nope.yaml"))
    assert res.rc == 2
    assert "nope.yaml does not exist" in res.err


def test_site_file_typo(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text("---\nCKPT_DIRR: /x\n")
    res = run(capsys, "validate", "qwen3.5-397b", S, "--site", str(site))
    assert res.rc == 2
    assert "unknown setting 'CKPT_DIRR'; did you mean 'CKPT_DIR'?" in res.err
