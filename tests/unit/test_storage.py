"""The checkpoint's storage: what a save writes, how many saves are there at once under CKPT_KEEP (against a
step-by-step model of verl's saves and the run's pruning), the refusal of a CKPT_DIR too small, the pruning across
attempts, and the health rule that fires before a save the disk cannot hold."""

from __future__ import annotations

import shutil
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest
from verl_recipe.checks import storage
from verl_recipe.contracts import checkpoints
from verl_recipe.contracts.health_rules import CHECKPOINT_SPACE
from verl_recipe.memory.checkpoint import peak_saves, save_size, saves_ahead
from verl_recipe.recipes import load_recipe
from verl_recipe.run.retention import prune
from verl_recipe.watch.health import Health, Thresholds

Usage = namedtuple("Usage", "total used free")


@pytest.mark.parametrize(
    ("recipe", "params_b", "per_param", "total_tb"),
    [("qwen3.5-397b", 396.8, 14, 5.56), ("qwen3.5-122b", None, 14, None), ("qwen3.5-35b-fsdp", 35.1, 12, 0.42)],
)
def test_a_save_is_weights_and_optimizer_by_engine(
    recipe: str, params_b: float | None, per_param: int, total_tb: float | None
) -> None:
    r = load_recipe(recipe)
    size = save_size(r.model, r.engine)
    assert size.per_param == per_param
    if params_b is not None:
        assert abs(size.params / 1e9 - params_b) < 0.1
    if total_tb is not None:
        assert abs(size.total / 1e12 - total_tb) < 0.01, size.text()
    assert size.weights < size.optimizer and size.extra < 1e9


def brute_saves(total: int, freq: int, resumed: int) -> int:
    return sum(1 for s in range(resumed + 1, total + 1) if s % freq == 0 or s == total)


def test_saves_ahead_counts_verls_saves() -> None:
    for total in range(1, 40):
        for freq in range(1, 15):
            for resumed in range(0, total + 2):
                assert saves_ahead(total, freq, resumed) == brute_saves(total, freq, resumed), (total, freq, resumed)
    assert saves_ahead(10, -1, 0) == 0


def simulate_peak(keep: int, existing: int, ahead: int) -> int:
    """Saves on disk, step by step: pruned to `keep` at the launch; each save written beside what is there, then
    the complete saves pruned to `keep` again (verl's own max_actor_ckpt_to_keep only deletes earlier)."""
    on_disk = min(existing, keep)
    peak = on_disk
    for _ in range(ahead):
        peak = max(peak, on_disk + 1)  # the one being written
        on_disk = min(on_disk + 1, keep)
    return peak


def test_peak_saves_matches_a_step_by_step_model() -> None:
    for keep in range(1, 8):
        for existing in range(0, 12):
            for ahead in range(0, 12):
                assert peak_saves(keep, existing, ahead) == simulate_peak(keep, existing, ahead), (
                    keep,
                    existing,
                    ahead,
                )


def folder_with(tmp_path: Path, steps: list[int], tracker: int | None) -> Path:
    folder = tmp_path / "ckpt" / "proj" / "exp"
    for s in steps:
        (folder / checkpoints.step_dir(s) / "actor").mkdir(parents=True)
        (folder / checkpoints.step_dir(s) / "actor" / "model.pt").write_bytes(b"x" * 10)
    folder.mkdir(parents=True, exist_ok=True)
    if tracker is not None:
        (folder / checkpoints.TRACKER).write_text(str(tracker))
    return folder


@pytest.mark.parametrize("keep", [1, 2, 3, 10])
def test_prune_keeps_the_newest_complete_saves_and_never_one_being_written(tmp_path: Path, keep: int) -> None:
    folder = folder_with(tmp_path, [2, 4, 6, 8, 10, 12], tracker=10)  # 12 is being written
    removed = prune(folder, keep)
    left = storage.step_saves(folder)
    complete = [2, 4, 6, 8, 10]
    assert left == complete[-keep:] + [12], left
    assert sorted(p.name for p in removed) == sorted(checkpoints.step_dir(s) for s in complete[:-keep])
    assert prune(folder, keep) == [], "a second pass removes nothing"


def test_prune_removes_nothing_it_cannot_place(tmp_path: Path) -> None:
    assert prune(folder_with(tmp_path / "a", [1, 2, 3], tracker=None), 1) == []
    assert prune(folder_with(tmp_path / "b", [1, 2, 3], tracker=9), 1) == [], "the tracker names a missing save"
    assert prune(tmp_path / "nothing-here", 1) == []


def values(tmp_path: Path, **more: Any) -> dict[str, Any]:
    return {
        "CKPT_DIR": str(tmp_path / "ckpt"),
        "PROJECT_NAME": "proj",
        "EXPERIMENT_NAME": "exp",
        "CKPT_KEEP": 2,
        "MODEL_PATH": str(tmp_path / "no-model-here"),
        "SAVE_FREQ": 5,
        "TOTAL_TRAINING_STEPS": 100,
        "RESUME_MODE": "auto",
        **more,
    }


def with_free(monkeypatch: pytest.MonkeyPatch, free: float) -> None:
    monkeypatch.setattr(storage.shutil, "disk_usage", lambda _p: Usage(free * 2, free, free))


@pytest.mark.parametrize("keep", [1, 2, 5])
def test_validate_refuses_a_ckpt_dir_that_cannot_hold_the_kept_saves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep: int
) -> None:
    r = load_recipe("qwen3.5-397b")
    one = save_size(r.model, r.engine).total
    v = values(tmp_path, CKPT_KEEP=keep)
    with_free(monkeypatch, (keep + 1) * one - 1)
    problems, notes = storage.check(r.model, r.engine, v)
    assert len(problems) == 1 and not notes
    line = str(problems[0])
    assert line.startswith(f"error: CKPT_DIR={tmp_path / 'ckpt'}: ") and f"CKPT_KEEP={keep}" in line, line
    assert f"up to {keep + 1} saves at once" in line and "5.56 TB each" in line and "fix: " in line, line
    with_free(monkeypatch, (keep + 1) * one)
    problems, notes = storage.check(r.model, r.engine, v)
    assert problems == [] and notes[0].startswith("note: storage: 5.56 TB a save"), notes


def test_saves_already_there_count_and_a_short_run_needs_less(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = load_recipe("qwen3.5-397b")
    one = save_size(r.model, r.engine).total
    folder_with(tmp_path, [5, 10], tracker=10)
    with_free(monkeypatch, one + 1)  # two kept there, one more being written
    assert storage.check(r.model, r.engine, values(tmp_path))[0] == []
    with_free(monkeypatch, one - 1)
    assert len(storage.check(r.model, r.engine, values(tmp_path))[0]) == 1
    # one save ahead only (the last step), nothing there: one save's room is enough
    with_free(monkeypatch, one + 1)
    assert storage.check(r.model, r.engine, values(tmp_path / "x", TOTAL_TRAINING_STEPS=3))[0] == []
    problems, notes = storage.check(r.model, r.engine, values(tmp_path / "y", SAVE_FREQ=-1))
    assert problems == [] and "writes no save" in notes[0]


@pytest.mark.parametrize(
    ("rehearse", "simulated", "device", "skips"),
    [
        (True, False, "npu", True),  # a rehearsal on the real cluster starts no verl
        (True, True, "cpu", True),
        (False, True, "npu", True),  # the simulation ends a launch on simulated dies before verl
        (False, True, "cpu", False),  # the CPU stand-ins train and save for real
        (False, False, "npu", False),  # a real training launch
    ],
)
def test_a_launch_that_writes_no_save_is_told_what_a_training_one_would_meet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rehearse: bool, simulated: bool, device: str, skips: bool
) -> None:
    r = load_recipe("qwen3.5-397b")
    v = values(tmp_path, DEVICE=device)
    why = storage.no_saves(rehearse, simulated, v)
    assert bool(why) is skips, why
    with_free(monkeypatch, 1e9)  # far too little for one 397B save
    problems, notes = storage.check(r.model, r.engine, v, why)
    if skips:
        assert problems == [] and len(notes) == 1, (problems, notes)
        assert notes[0].startswith(f"note: storage: {why}; a training launch would be refused: error: CKPT_DIR=")
        assert "fix: " in notes[0], notes
    else:
        assert len(problems) == 1 and notes == [], (problems, notes)
    with_free(monkeypatch, 1e15)  # room enough: the figures as a note either way
    problems, notes = storage.check(r.model, r.engine, v, why)
    assert problems == [] and len(notes) == 1 and notes[0].startswith("note: storage: 5.56 TB a save"), notes


def health(tmp_path: Path, free: float | None, save_bytes: float = 5e9) -> Health:
    from verl_recipe.contracts.health_rules import THRESHOLD_DEFAULTS

    vals = {**THRESHOLD_DEFAULTS, "HEALTH_STOP": []}
    return Health(
        Thresholds.from_values(vals),
        checkpoint_dir=tmp_path / "ckpt" / "proj" / "exp",
        total_steps=20,
        save_bytes=save_bytes,
        save_freq=5,
        disk_free=lambda _p: free,
    )


def test_the_checkpoint_space_rule_fires_before_the_save_once(tmp_path: Path) -> None:
    h = health(tmp_path, free=4e9)
    fired = h.on_record({"step": 3, "data": {}})
    assert [a.rule for a in fired] == [CHECKPOINT_SPACE]
    line = fired[0].line
    assert f"free at {tmp_path}" in line and "the save at step 5 writes about 5 GB" in line and "fix:" in line, line
    assert h.on_record({"step": 4, "data": {}}) == [], "said once while it holds"
    assert health(tmp_path, free=6e9).on_record({"step": 3, "data": {}}) == []
    assert health(tmp_path, free=None).on_record({"step": 3, "data": {}}) == [], "free space unreadable: quiet"
    assert health(tmp_path, free=1.0, save_bytes=0).on_record({"step": 3, "data": {}}) == [], "no save: off"
    last = health(tmp_path, free=1.0)
    assert last.on_record({"step": 20, "data": {}}) == [], "after the last step no save comes"


def test_disk_free_reads_the_nearest_existing_folder(tmp_path: Path) -> None:
    from verl_recipe.watch.health import disk_free

    got = disk_free(tmp_path / "not" / "yet")
    assert got is not None and abs(got - shutil.disk_usage(tmp_path).free) < 1e9


@pytest.mark.parametrize(
    ("free_tb", "status", "named"),
    [(1.0, "fail", "not qwen3.5-35b-fsdp"), (2.0, "warn", "not qwen3.5-122b"), (20.0, "ok", "qwen3.5-397b (16.67 TB)")],
)
def test_doctor_checks_every_recipes_kept_saves_not_a_flat_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free_tb: float, status: str, named: str
) -> None:
    from verl_recipe.doctor import storage as doctor_storage

    monkeypatch.setattr(doctor_storage.shutil, "disk_usage", lambda _p: Usage(1e15, 0, free_tb * 1e12))
    found = doctor_storage.check_recipes_space({"CKPT_DIR": str(tmp_path / "ckpt")})
    assert found.status == status and named in found.detail, found
    assert f"{free_tb:.2f} TB free at {tmp_path}" in found.detail, found.detail
    if status != "ok":
        assert "CKPT_DIR" in found.fix


def test_docs_table_of_saves_is_the_codes() -> None:
    from verl_recipe.memory.checkpoint import tb
    from verl_recipe.recipes import recipe_names

    text = (Path(__file__).resolve().parents[2] / "docs" / "memory.md").read_text()
    for name in recipe_names():
        r = load_recipe(name)
        sp = storage.plan(r.model, r.engine, r.settings)
        row = f"| {name} | {sp.size.params / 1e9:.1f} B | {tb(sp.size.total)} | {tb(sp.peak * sp.size.total)} |"
        assert row in text, row


def test_the_checkpoints_own_parameter_count_from_its_safetensors_headers(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    save_file({"a": torch.zeros(3, 4), "b": torch.zeros(5)}, str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file({"c": torch.zeros(2, 2, 2)}, str(tmp_path / "model-00002-of-00002.safetensors"))
    assert storage.safetensors_params(tmp_path) == 12 + 5 + 8
    (tmp_path / "model-00003-of-00003.safetensors").write_bytes(b"\xff" * 8)  # a header length past the bound
    assert storage.safetensors_params(tmp_path) is None
    assert storage.safetensors_params(tmp_path / "none") is None
    r = load_recipe("qwen3.5-35b-fsdp")
    assert save_size(r.model, r.engine, params=25).total == 25 * 12 + save_size(r.model, r.engine).extra
