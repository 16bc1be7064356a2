"""launch: validate, write the run record, run the exact rendered command, report its exit code."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .fixtures import install_fake_verl, make_shared, set_args
from .helpers import run

# A stand-in for `python3 -m verl.trainer.main_ppo` placed first on PYTHONPATH: it records what it received.
FAKE_MAIN = """
import json, os, sys
out = {"argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in ("HCCL_CONNECT_TIMEOUT", "HF_HUB_OFFLINE",
       "TENSORBOARD_DIR", "TORCH_HCCL_DEBUG_INFO_TEMP_FILE")}}
print("fake verl started")
if os.environ.get("FAKE_VERL_SAY"):
    print(os.environ["FAKE_VERL_SAY"])
with open(os.environ["FAKE_VERL_OUT"], "w") as f:
    json.dump(out, f)
sys.exit(int(os.environ.get("FAKE_VERL_RC", "0")))
"""


@pytest.fixture
def fake_verl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    install_fake_verl(tmp_path, monkeypatch, FAKE_MAIN)
    out = tmp_path / "fake_out.json"
    monkeypatch.setenv("FAKE_VERL_OUT", str(out))
    return out


def test_launch_writes_run_record_and_runs_rendered_argv(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fake_verl: Path
) -> None:
    paths = make_shared(tmp_path / "shared")
    args = ["qwen3.5-397b", *set_args(paths), "--set", "env.HCCL_CONNECT_TIMEOUT=1234"]
    rendered = run(capsys, "render", *args, "--json")
    assert rendered.rc == 0
    res = run(capsys, "launch", *args)
    assert res.rc == 0, res.err
    received = json.loads(fake_verl.read_text())
    # What is launched is exactly what was rendered, plus where verl's own metric stream goes (the run record).
    runs = list((Path(paths["LOG_DIR"]) / "verl_grpo_qwen3_5" / "qwen3.5-397b" / "runs").iterdir())
    metrics = "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH="
    assert [a for a in received["argv"] if not a.startswith(metrics)] == rendered.doc["argv"][3:]
    assert f"{metrics}'{runs[0] / 'metrics.jsonl'}'" in received["argv"]
    assert received["env"]["HCCL_CONNECT_TIMEOUT"] == "1234"
    assert received["env"]["HF_HUB_OFFLINE"] == "1"
    runs = list((Path(paths["LOG_DIR"]) / "verl_grpo_qwen3_5" / "qwen3.5-397b" / "runs").iterdir())
    assert len(runs) == 1
    run_dir = runs[0]
    recorded = json.loads((run_dir / "launch.json").read_text())
    assert recorded["argv"][3:] == received["argv"], "the record holds what ran"
    settings = json.loads((run_dir / "settings.json").read_text())
    assert settings["settings"]["MODEL_PATH"] == {"value": paths["MODEL_PATH"], "from": "--set"}
    assert settings["settings"]["TP"]["from"] == "recipe qwen3.5-397b"
    assert settings["env_from"]["HCCL_CONNECT_TIMEOUT"] == "--set"
    assert "fake verl started" in (run_dir / "train.log").read_text()
    assert (run_dir / "exit_code").read_text().strip() == "0"
    assert "qwen3.5-397b" in (run_dir / "run.html").read_text(), "the run page is drawn at the end"
    assert "verl.trainer.main_ppo" in (run_dir / "command.sh").read_text()
    link = os.path.normpath(run_dir / os.readlink(run_dir / "nodes"))
    assert link == str(Path(paths["LOG_DIR"]) / "nodes"), "node logs are one hop away"


def test_the_flight_recorder_dumps_into_the_run_folder_unless_told_elsewhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fake_verl: Path
) -> None:
    """The hang-debugging profile (docs/troubleshooting.md): the trace buffer on and no dump path given, every rank's
    dump goes into the run folder; a path the user gives is kept; with the recorder off, nothing is added."""
    paths = make_shared(tmp_path / "shared")
    base = ["qwen3.5-397b", *set_args(paths)]
    assert run(capsys, "launch", *base, "--set", "env.TORCH_HCCL_TRACE_BUFFER_SIZE=2000").rc == 0
    (run_dir,) = (Path(paths["LOG_DIR"]) / "verl_grpo_qwen3_5" / "qwen3.5-397b" / "runs").iterdir()
    assert json.loads(fake_verl.read_text())["env"]["TORCH_HCCL_DEBUG_INFO_TEMP_FILE"] == f"{run_dir}/hang-dump-rank-"
    mine = str(tmp_path / "dumps" / "rank-")
    sets = ["--set", "env.TORCH_HCCL_TRACE_BUFFER_SIZE=2000", "--set", f"env.TORCH_HCCL_DEBUG_INFO_TEMP_FILE={mine}"]
    assert run(capsys, "launch", *base, *sets).rc == 0
    assert json.loads(fake_verl.read_text())["env"]["TORCH_HCCL_DEBUG_INFO_TEMP_FILE"] == mine
    assert run(capsys, "launch", *base).rc == 0
    assert json.loads(fake_verl.read_text())["env"]["TORCH_HCCL_DEBUG_INFO_TEMP_FILE"] is None


def test_launch_propagates_exit_code(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fake_verl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = make_shared(tmp_path / "shared")
    monkeypatch.setenv("FAKE_VERL_RC", "7")
    res = run(capsys, "launch", "qwen3.5-397b", *set_args(paths))
    assert res.rc == 7


def test_failed_launch_diagnoses_itself(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fake_verl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = make_shared(tmp_path / "shared")
    monkeypatch.setenv("FAKE_VERL_RC", "1")
    monkeypatch.setenv("FAKE_VERL_SAY", "ValueError: Total available GPUs 0 is less than total desired GPUs 256")
    res = run(capsys, "launch", "qwen3.5-397b", *set_args(paths))
    assert res.rc == 1
    (run_dir,) = (Path(paths["LOG_DIR"]) / "verl_grpo_qwen3_5" / "qwen3.5-397b" / "runs").iterdir()
    found = json.loads((run_dir / "diagnosis.json").read_text())["findings"]
    assert found and found[0]["file"] == "train.log", found
    last = res.err.strip().splitlines()[-1]
    assert last.startswith("diagnosis: ") and "fix: " in last, res.err


def test_invalid_launch_starts_nothing_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fake_verl: Path
) -> None:
    paths = make_shared(tmp_path / "shared")
    res = run(capsys, "launch", "qwen3.5-397b", *set_args(paths), "--set", "TP=3")
    assert res.rc == 2
    assert not fake_verl.exists()
    assert not Path(paths["LOG_DIR"]).exists()
