"""verl-recipe export: the checker over folders in both expert forms and both engines' layouts, damaged one way at a
time; the save located and refused when it is not complete; the export built, checked and renamed only when whole.
Weights are real safetensors files with small tensors (the checker reads headers only)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.numpy import save_file
from verl_recipe import hfweights
from verl_recipe.contracts import checkpoints
from verl_recipe.export import check, source, write
from verl_recipe.export.check import check_export

E, W, H, V = 4, 3, 8, 16  # experts, expert width, hidden, vocab
LAYERS = 2


def fused(prefix: str = "model.language_model.layers") -> dict[str, np.ndarray]:
    t: dict[str, np.ndarray] = {"model.language_model.embed_tokens.weight": np.zeros((V, H), np.float16)}
    for n in range(LAYERS):
        p = f"{prefix}.{n}"
        t[f"{p}.mlp.experts.gate_up_proj"] = np.zeros((E, 2 * W, H), np.float16)
        t[f"{p}.mlp.experts.down_proj"] = np.zeros((E, H, W), np.float16)
        t[f"{p}.mlp.gate.weight"] = np.zeros((E, H), np.float16)
        t[f"{p}.input_layernorm.weight"] = np.zeros((H,), np.float16)
    t["lm_head.weight"] = np.zeros((V, H), np.float16)
    return t


def per_expert(prefix: str = "model.language_model.layers") -> dict[str, np.ndarray]:
    t = {k: v for k, v in fused(prefix).items() if ".experts." not in k}
    for n in range(LAYERS):
        for e in range(E):
            p = f"{prefix}.{n}.mlp.experts.{e}"
            t[f"{p}.gate_proj.weight"] = np.zeros((W, H), np.float16)
            t[f"{p}.up_proj.weight"] = np.zeros((W, H), np.float16)
            t[f"{p}.down_proj.weight"] = np.zeros((H, W), np.float16)
    return t


MTP_TENSORS = {"mtp.fc.weight": np.zeros((H, 2 * H), np.float16), "mtp.norm.weight": np.zeros((H,), np.float16)}


def write_folder(folder: Path, tensors: dict[str, np.ndarray], shards: int = 2, tokenizer: bool = True) -> Path:
    """A Hugging Face folder as save_pretrained writes one: shards, their index, config, tokenizer, template."""
    folder.mkdir(parents=True, exist_ok=True)
    names = sorted(tensors)
    wm = {}
    for s in range(shards):
        part = names[s::shards]
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        save_file({n: tensors[n] for n in part}, str(folder / fname))
        wm.update(dict.fromkeys(part, fname))
    (folder / hfweights.INDEX).write_text(json.dumps({"metadata": {}, "weight_map": wm}))
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3_5_moe", "transformers_version": "5.3.0"}))
    if tokenizer:
        (folder / "tokenizer.json").write_text("{}")
        (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "Qwen2Tokenizer"}))
        (folder / "chat_template.jinja").write_text("{{ messages }}")
    return folder


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return write_folder(tmp_path / "base", {**fused(), **MTP_TENSORS})


def lines(report: check.Report) -> str:
    return "\n".join(str(p) for p in report.problems)


@pytest.mark.parametrize("form", ["fused", "per-expert"])
@pytest.mark.parametrize("shards", [1, 3])
def test_an_export_in_either_expert_form_passes_and_says_what_is_absent(
    tmp_path: Path, base: Path, form: str, shards: int
) -> None:
    out = write_folder(tmp_path / "out", fused() if form == "fused" else per_expert(), shards=shards)
    r = check_export(out, base)
    assert r.ok, lines(r)
    assert r.expert_form == form and sorted(r.absent) == sorted(MTP_TENSORS)
    assert any(n.startswith("absent: the MTP head (2 tensors") for n in r.notes), r.notes
    assert any(n.startswith("experts: per-expert in this folder, fused") for n in r.notes) is (form != "fused")
    assert r.params == sum(a.size for a in fused().values())
    assert any("needs transformers >= 5" in n for n in r.notes) and r.transformers == ">=5"


def test_a_missing_shard_is_named(tmp_path: Path, base: Path) -> None:
    out = write_folder(tmp_path / "out", per_expert(), shards=3)
    (out / "model-00002-of-00003.safetensors").unlink()
    r = check_export(out, base)
    assert len(r.problems) >= 1
    first = str(r.problems[0])
    assert first.startswith(f"error: {out}/model-00002-of-00003.safetensors: is missing: the index names it for ")
    assert "fix: export again" in first


def test_a_tensor_the_index_places_in_a_shard_that_lacks_it_is_named(tmp_path: Path, base: Path) -> None:
    out = write_folder(tmp_path / "out", fused(), shards=2)
    index = json.loads((out / hfweights.INDEX).read_text())
    wm = index["weight_map"]
    # move one tensor's entry to the shard that does not hold it
    other = {"model-00001-of-00002.safetensors": "model-00002-of-00002.safetensors"}
    other |= {v: k for k, v in other.items()}
    wm["lm_head.weight"] = other[wm["lm_head.weight"]]
    (out / hfweights.INDEX).write_text(json.dumps(index))
    r = check_export(out, base)
    text = lines(r)
    assert "does not hold 1 tensors the index puts in it: lm_head.weight" in text, text


def test_a_shape_that_differs_and_a_tensor_lost_are_named(tmp_path: Path, base: Path) -> None:
    t = fused()
    t["lm_head.weight"] = np.zeros((V + 1, H), np.float16)
    del t["model.language_model.layers.0.input_layernorm.weight"]
    r = check_export(write_folder(tmp_path / "out", t), base)
    text = lines(r)
    assert f"tensor lm_head.weight: has shape [{V + 1}, {H}], the base model's is [{V}, {H}]" in text, text
    assert "lacks 1 tensors of the base model: model.language_model.layers.0.input_layernorm.weight" in text, text


def test_an_expert_missing_in_per_expert_form_is_named_not_folded(tmp_path: Path, base: Path) -> None:
    t = per_expert()
    del t["model.language_model.layers.1.mlp.experts.2.up_proj.weight"]
    r = check_export(write_folder(tmp_path / "out", t), base)
    text = lines(r)
    assert "lacks 2 tensors of the base model" in text and "layers.1.mlp.experts.gate_up_proj" in text, text
    assert "tensors the base model does not have" in text, text


def test_a_shard_cut_short_is_named(tmp_path: Path, base: Path) -> None:
    out = write_folder(tmp_path / "out", fused(), shards=2)
    shard = out / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-10])
    r = check_export(out, base)
    assert f"error: {shard}: cannot be read (" in lines(r) and "cut short" in lines(r), lines(r)


def test_no_tokenizer_no_template_and_another_model_type_are_named(tmp_path: Path, base: Path) -> None:
    out = write_folder(tmp_path / "out", fused(), tokenizer=False)
    (out / "config.json").write_text(json.dumps({"model_type": "qwen3_moe"}))
    text = lines(check_export(out, base))
    assert "holds no tokenizer" in text and "holds no chat template" in text, text
    assert "model_type 'qwen3_moe', the base model's is 'qwen3_5_moe'" in text, text


def test_an_empty_folder_is_refused(tmp_path: Path, base: Path) -> None:
    (tmp_path / "out").mkdir()
    text = lines(check_export(tmp_path / "out", base))
    assert "holds no model.safetensors.index.json and no model.safetensors" in text, text


@settings(max_examples=40, deadline=None)
@given(
    experts=st.integers(1, 6),
    width=st.integers(1, 5),
    hidden=st.integers(1, 7),
    drop=st.one_of(st.none(), st.integers(0, 5)),
)
def test_per_expert_weights_fold_to_the_fused_shapes_only_when_every_expert_is_there(
    experts: int, width: int, hidden: int, drop: int | None
) -> None:
    t = {}
    for e in range(experts):
        t[f"a.experts.{e}.gate_proj.weight"] = hfweights.Tensor("BF16", (width, hidden))
        t[f"a.experts.{e}.up_proj.weight"] = hfweights.Tensor("BF16", (width, hidden))
        t[f"a.experts.{e}.down_proj.weight"] = hfweights.Tensor("BF16", (hidden, width))
    if drop is not None and drop < experts:
        del t[f"a.experts.{drop}.down_proj.weight"]
    view, form = hfweights.fused_view(t)
    assert form == hfweights.PER_EXPERT_FORM
    if drop is not None and drop < experts:
        assert "a.experts.gate_up_proj" not in view and len(view) == len(t)
    else:
        assert view == {
            "a.experts.gate_up_proj": hfweights.Tensor("BF16", (experts, 2 * width, hidden)),
            "a.experts.down_proj": hfweights.Tensor("BF16", (experts, hidden, width)),
        }


# ---- the save located


def ckpt_folder(
    tmp_path: Path, engine: str, base: Path, steps: tuple[int, ...] = (2, 4), tracker: int | None = 4
) -> Path:
    folder = tmp_path / "ckpt" / "proj" / "exp"
    folder.mkdir(parents=True)
    ident = {"schema": 1, "recipe": "qwen3.5-35b-fsdp" if engine == "fsdp" else "qwen3.5-35b", "engine": engine}
    (folder / checkpoints.IDENTITY).write_text(json.dumps({**ident, "model_path": str(base)}))
    if tracker is not None:
        (folder / checkpoints.TRACKER).write_text(f"{tracker}\n")
    for s in steps:
        actor = folder / checkpoints.step_dir(s) / source.ACTOR
        actor.mkdir(parents=True)
        if engine == "fsdp":
            (actor / source.FSDP_CONFIG).write_text(json.dumps({"FSDP_version": 2, "world_size": 2}))
            for r in range(2):
                (actor / source.fsdp_rank_file(2, r)).write_bytes(b"shard")
        else:
            write_folder(actor / source.HF_DIR, {**fused(), **MTP_TENSORS})
    return folder


@pytest.mark.parametrize("engine", ["fsdp", "megatron"])
def test_the_newest_complete_save_is_located_and_an_incomplete_one_refused(
    tmp_path: Path, base: Path, engine: str
) -> None:
    folder = ckpt_folder(tmp_path, engine, base, steps=(2, 4, 6))
    src = source.locate(folder, None)
    assert isinstance(src, source.Source) and src.step == 4 and src.engine == engine and src.model_path == base
    past = source.locate(folder, 6)
    assert isinstance(past, check.Problem) and "is past the tracker's step 4" in str(past), past
    nothere = source.locate(folder, 3)
    assert isinstance(nothere, check.Problem) and "(complete saves: 2, 4)" in str(nothere), nothere
    assert isinstance(source.locate(folder, 2), source.Source)
    if engine == "fsdp":
        (folder / "global_step_4" / "actor" / source.fsdp_rank_file(2, 1)).unlink()
        lacks = source.locate(folder, 4)
        assert isinstance(lacks, check.Problem) and "lacks 1 of its 2 rank files" in str(lacks), lacks
    else:
        shutil.rmtree(folder / "global_step_4" / "actor" / source.HF_DIR)
        gone = source.locate(folder, 4)
        assert isinstance(gone, check.Problem) and "huggingface: is missing" in str(gone), gone


def test_a_folder_without_identity_or_tracker_is_refused(tmp_path: Path, base: Path) -> None:
    (tmp_path / "x").mkdir()
    assert "has no verl_recipe_checkpoint.json" in str(source.locate(tmp_path / "x", None))
    folder = ckpt_folder(tmp_path, "fsdp", base, tracker=None)
    assert "has no latest_checkpointed_iteration.txt" in str(source.locate(folder, None))


# ---- the export written


def fake_merger(tensors: dict[str, np.ndarray], rc: int = 0) -> Any:
    """Stands in for verl's merger here (the e2e tier runs the real one on a real FSDP save): writes what it
    writes, a per-expert folder with transformers 5's tokenizer files."""

    def merge(actor: Path, target: Path) -> tuple[int, str]:
        if rc:
            return rc, "Traceback ...\nRuntimeError: merge failed"
        write_folder(target, tensors)
        (target / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "TokenizersBackend"}))
        return 0, "saved"

    return merge


def plenty() -> float:
    return 1e15


def test_an_fsdp_export_is_checked_given_a_manifest_and_the_base_tokenizer(tmp_path: Path, base: Path) -> None:
    src = source.locate(ckpt_folder(tmp_path, "fsdp", base), None)
    assert isinstance(src, source.Source)
    out = tmp_path / "export"
    problems, report = write.export(src, out, "op@head", merge=fake_merger(per_expert()), ram=plenty)
    assert problems == [] and report is not None and report.ok
    assert not out.with_name("export.partial").exists()
    m = json.loads((out / write.MANIFEST).read_text())
    assert m["source"]["step"] == 4 and m["source"]["engine"] == "fsdp" and m["by"] == "op@head"
    assert m["check"]["expert_form"] == "per-expert" and m["check"]["absent"] == 2
    assert set(m["files"]) == {f.name for f in out.iterdir() if f.name != write.MANIFEST}
    for name, digest in m["files"].items():
        assert write.sha256_of(out / name) == digest
    # the tokenizer as the base model ships it, not transformers 5's re-save
    assert json.loads((out / "tokenizer_config.json").read_text())["tokenizer_class"] == "Qwen2Tokenizer"
    again, _ = write.export(src, out, "op@head", merge=fake_merger(per_expert()), ram=plenty)
    assert "exists already" in str(again[0])


@pytest.mark.parametrize("damage", ["merger-fails", "lost-tensor", "ram", "disk"])
def test_a_failed_or_refused_export_leaves_nothing_named_out(
    tmp_path: Path, base: Path, damage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = source.locate(ckpt_folder(tmp_path, "fsdp", base), None)
    assert isinstance(src, source.Source)
    t = per_expert()
    if damage == "lost-tensor":
        del t["lm_head.weight"]
    if damage == "disk":
        from collections import namedtuple

        usage = namedtuple("usage", "total used free")
        monkeypatch.setattr(write.shutil, "disk_usage", lambda _p: usage(10, 10, 10))
    out = tmp_path / "export"
    problems, _ = write.export(
        src,
        out,
        "op@head",
        merge=fake_merger(t, rc=1 if damage == "merger-fails" else 0),
        ram=(lambda: 10.0) if damage == "ram" else plenty,
    )
    expected = {
        "merger-fails": "verl's merger failed (exit 1): RuntimeError: merge failed",
        "lost-tensor": "lacks 1 tensors of the base model: lm_head.weight",
        "ram": "of memory available, verl's merger needs about",
        "disk": "the export needs",
    }[damage]
    assert len(problems) == 1 and expected in str(problems[0]), problems
    assert not out.exists() and not out.with_name("export.partial").exists()


def test_a_megatron_export_links_the_actors_folder_and_drops_the_mtp_entries_without_tensors(
    tmp_path: Path, base: Path
) -> None:
    folder = ckpt_folder(tmp_path, "megatron", base)
    hf = folder / "global_step_4" / "actor" / source.HF_DIR
    # Megatron-Bridge with strict=False: the MTP head stays in the index, its tensors were never written
    shutil.rmtree(hf)
    write_folder(hf, fused())
    index = json.loads((hf / hfweights.INDEX).read_text())
    index["weight_map"].update(dict.fromkeys(MTP_TENSORS, "model-00001-of-00002.safetensors"))
    (hf / hfweights.INDEX).write_text(json.dumps(index))
    before = (hf / hfweights.INDEX).read_text()
    src = source.locate(folder, None)
    assert isinstance(src, source.Source)
    out = tmp_path / "export"
    problems, report = write.export(src, out, "op@head", merge=fake_merger({}, rc=9), ram=plenty)
    assert problems == [] and report is not None
    assert any("dropped 2 index entries of the MTP head" in n for n in report.notes), report.notes
    assert (hf / hfweights.INDEX).read_text() == before, "the save's own index is untouched"
    shard = "model-00001-of-00002.safetensors"
    assert os.stat(out / shard).st_ino == os.stat(hf / shard).st_ino, "linked, not copied, on one file system"
    # a ghost entry that is not the MTP head stays, and the checker refuses it
    index["weight_map"]["model.language_model.norm.weight"] = shard
    (hf / hfweights.INDEX).write_text(json.dumps(index))
    problems, _ = write.export(src, tmp_path / "export2", "op@head", ram=plenty)
    ghost = "does not hold 1 tensors the index puts in it: model.language_model.norm.weight"
    assert any(ghost in str(p) for p in problems), problems
    assert not (tmp_path / "export2").exists()


def test_the_cli_checks_a_folder_and_exports_a_checkpoint_folder(
    tmp_path: Path, base: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from verl_recipe.cli import export as cli

    good = write_folder(tmp_path / "good", fused())
    assert cli.main(["--check", str(good), "--base", str(base)]) == 0
    assert f"checked: {good}" in capsys.readouterr().out
    (good / "model-00001-of-00002.safetensors").unlink()
    assert cli.main(["--check", str(good), "--base", str(base)]) == 1
    assert "is missing: the index names it" in capsys.readouterr().err
    assert cli.main(["--check", str(good)]) == 2
    folder = ckpt_folder(tmp_path, "megatron", base)
    assert cli.main([str(folder)]) == 0
    out = capsys.readouterr()
    default = folder / checkpoints.EXPORT_DIR / "global_step_4"
    assert f"exported: {default}" in out.out and (default / write.MANIFEST).is_file(), out
    assert cli.main([str(folder), "--step", "3"]) == 2
    assert "no global_step_3" in capsys.readouterr().err
    assert cli.main([str(tmp_path / "nowhere"), "--log-dir", str(tmp_path / "runs")]) == 2
    assert "is neither a run under" in capsys.readouterr().err
