"""Resume that cannot pick up the wrong checkpoint: each launch leaves what its checkpoints are written with beside
them; the next launch with RESUME_MODE=auto is compared with it before anything starts; a finished run trains
nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from verl_recipe.checks import resume
from verl_recipe.contracts import checkpoints
from verl_recipe.run.record import write_checkpoint_identity

from .fixtures import install_fake_verl, make_shared, set_args
from .helpers import run

RECIPE = "qwen3.5-35b-fsdp"
MODEL = "qwen3.5-35b-a3b"
# A valid layout on its own (the batch sizes follow the world), only not the checkpoint's.
TWO_NODES = ["--set", "NNODES=2", "--set", "TRAIN_BATCH_SIZE=64", "--set", "PPO_MINI_BATCH_SIZE=32"]
FAKE_MAIN = """
import os, sys
open(os.environ["FAKE_VERL_OUT"], "w").write("ran")
sys.exit(0)
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    install_fake_verl(tmp_path, monkeypatch, FAKE_MAIN)
    monkeypatch.setenv("FAKE_VERL_OUT", str(tmp_path / "fake_out"))
    return make_shared(tmp_path / "shared", MODEL)


def ckpt_folder(paths: dict[str, str]) -> Path:
    return Path(paths["CKPT_DIR"]) / "verl_grpo_qwen3_5" / RECIPE


def saved(paths: dict[str, str], step: int, folder: bool = True) -> Path:
    """What verl leaves after a save of `step`: the step folder, then the tracker naming it."""
    ckpt = ckpt_folder(paths)
    if folder:
        (ckpt / checkpoints.step_dir(step) / "actor").mkdir(parents=True)
    ckpt.mkdir(parents=True, exist_ok=True)
    (ckpt / checkpoints.TRACKER).write_text(f"{step}\n")
    return ckpt


def launched(capsys: pytest.CaptureFixture[str], tmp_path: Path, paths: dict[str, str], *extra: str) -> None:
    res = run(capsys, "launch", RECIPE, *set_args(paths), *extra)
    assert res.rc == 0, res.err
    assert (tmp_path / "fake_out").read_text() == "ran"
    (tmp_path / "fake_out").unlink()


def test_a_launch_leaves_its_identity_and_the_same_launch_resumes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, site: dict[str, str]
) -> None:
    launched(capsys, tmp_path, site)
    written = json.loads((ckpt_folder(site) / checkpoints.IDENTITY).read_text())
    assert written["recipe"] == RECIPE
    assert written["engine"] == "fsdp"
    assert written["model_path"] == site["MODEL_PATH"]
    assert written["layout"]["world_size"] == 16
    assert written["train_files"] == [site["TRAIN_FILES"]]
    assert len(written["model_config_sha256"]) == 64
    assert not list(ckpt_folder(site).glob(".*.tmp")), "replaced whole, no temporary left"
    saved(site, 2)
    res = run(capsys, "validate", RECIPE, *set_args(site))
    assert res.rc == 0, res.err
    said = [x for x in (res.out + res.err).splitlines() if not x.startswith("note: storage: ")]
    assert "checkpoint" not in "\n".join(said), "nothing to say about a matching checkpoint (its storage aside)"


def test_another_layout_is_refused_before_anything_starts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, site: dict[str, str]
) -> None:
    launched(capsys, tmp_path, site)
    ckpt = saved(site, 3)
    res = run(capsys, "launch", RECIPE, *set_args(site), *TWO_NODES)
    assert res.rc == 2
    assert "1 problem(s)" in res.err, "the checkpoint is the only problem"
    line = next(x for x in res.err.splitlines() if str(ckpt / "global_step_3") in x)
    assert "was written with world_size=16" in line
    assert "this launch has world_size=32" in line
    assert "fix:" in line and "EXPERIMENT_NAME" in line and "RESUME_MODE=disable" in line
    assert not (tmp_path / "fake_out").exists(), "verl never started"
    # the way out the line names: a new experiment, or training from scratch over it
    assert run(capsys, "validate", RECIPE, *set_args(site), *TWO_NODES, "--set", "EXPERIMENT_NAME=b").rc == 0
    assert run(capsys, "validate", RECIPE, *set_args(site), *TWO_NODES, "--set", "RESUME_MODE=disable").rc == 0


def test_another_model_is_refused_by_its_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, site: dict[str, str]
) -> None:
    launched(capsys, tmp_path, site)
    saved(site, 1)
    cfg = Path(site["MODEL_PATH"]) / "config.json"
    doc = json.loads(cfg.read_text())
    doc["text_config"]["rope_theta"] = 12345  # same shape, other weights' config: still another model
    cfg.write_text(json.dumps(doc))
    res = run(capsys, "validate", RECIPE, *set_args(site))
    assert res.rc == 2
    assert "was written with config.json sha256" in res.err


def test_a_tracker_naming_a_missing_step_folder_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, site: dict[str, str]
) -> None:
    launched(capsys, tmp_path, site)
    saved(site, 4, folder=False)
    res = run(capsys, "validate", RECIPE, *set_args(site))
    assert res.rc == 2
    assert "names step 4, whose folder is missing" in res.err


def test_a_save_cut_short_is_never_the_one_compared(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, site: dict[str, str]
) -> None:
    """verl moves the tracker only after a save is written: a half-written global_step_3 beside a tracker on 2
    is not what resumes, and what is compared is step 2."""
    launched(capsys, tmp_path, site)
    saved(site, 2)
    (ckpt_folder(site) / checkpoints.step_dir(3)).mkdir()
    assert resume.latest_step(ckpt_folder(site)) == 2
    res = run(capsys, "validate", RECIPE, *set_args(site), *TWO_NODES)
    assert res.rc == 2
    assert "global_step_2" in res.err and "global_step_3" not in res.err


def test_a_checkpoint_without_identity_resumes_with_a_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, site: dict[str, str]
) -> None:
    saved(site, 2)  # written by another tool, or before this check existed
    res = run(capsys, "validate", RECIPE, *set_args(site))
    assert res.rc == 0, res.err
    assert f"has no {checkpoints.IDENTITY}" in res.out + res.err


def test_a_finished_run_started_again_trains_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, site: dict[str, str]
) -> None:
    steps = ["--set", "TOTAL_TRAINING_STEPS=3"]
    launched(capsys, tmp_path, site, *steps)
    saved(site, 3)
    res = run(capsys, "launch", RECIPE, *set_args(site), *steps)
    assert res.rc == 0, res.err
    assert "complete:" in res.out and "step 3 of TOTAL_TRAINING_STEPS=3" in res.out
    assert not (tmp_path / "fake_out").exists(), "verl never started"
    # a larger total goes on from the checkpoint
    launched(capsys, tmp_path, site, "--set", "TOTAL_TRAINING_STEPS=5")


def test_an_identity_that_cannot_be_written_is_said_and_the_run_goes_on(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the checkpoint folder goes")
    values = {
        "CKPT_DIR": str(blocker),
        "PROJECT_NAME": "p",
        "EXPERIMENT_NAME": "e",
        "NNODES": 1,
        "NDEVICES_PER_NODE": 16,
        "MODEL_PATH": str(tmp_path / "model"),
    }
    assert write_checkpoint_identity(RECIPE, "fsdp", values) is None
    assert "not written" in capsys.readouterr().err
    values["CKPT_DIR"] = str(tmp_path / "ckpt")
    path = write_checkpoint_identity(RECIPE, "fsdp", values)
    assert path is not None
    assert json.loads(path.read_text())["model_config_sha256"] is None, "no config.json: model_path still compares"
