"""A save written out as a complete Hugging Face folder: built in `<out>.partial`, checked against the base model
(export/check.py), given a manifest, and only then renamed to `<out>`; a failed or refused export leaves nothing
named `<out>`.

FSDP: verl's own merger (`python -m verl.model_merger merge --backend fsdp`, verl 0.8.0 verl/model_merger/), which
gathers every rank's shard on the CPU. Megatron: the actor's own `huggingface/` folder (Megatron-Bridge's
save_hf_weights at each save) linked or copied; the index entries of the MTP head that `checkpoint.strict=False`
leaves without a tensor are dropped (Megatron-Bridge state.py keeps them; redai-studio/Relax #148). Either way the
tokenizer, its chat template and the generation and processor configs come from MODEL_PATH, as the base model ships
them."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import hfweights
from ..a3facts import nearest_existing
from ..checks.problem import Problem
from ..checks.resume import config_sha256
from ..hfweights import HeaderError
from ..memory.checkpoint import tb
from .check import MTP, Report, check_export
from .source import HF_DIR, Source

MANIFEST = "verl_recipe_export.json"
MANIFEST_SCHEMA = 1
PARTIAL_SUFFIX = ".partial"
# From MODEL_PATH, as the base model ships them (the ones a save writes come from transformers 5 and name
# TokenizersBackend, which a 4.x serving image cannot load).
FROM_BASE = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "generation_config.json",
    "preprocessor_config.json",
    "video_preprocessor_config.json",
    "processor_config.json",
)
# verl's FSDP merger holds every fp32 shard and its bf16 copy in memory: about 1.5 to 2 times the fp32 model
# (verl/model_merger/fsdp_model_merger.py, _load_and_merge_state_dicts).
MERGE_RAM_FACTOR = 1.5
FP32_BYTES = 4
HASH_CHUNK = 16 * 1024 * 1024

Merger = Callable[[Path, Path], tuple[int, str]]


def fsdp_merge(actor: Path, target: Path) -> tuple[int, str]:
    """verl's merger in a process of its own; its exit code and its last lines."""
    argv = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp"]
    argv += ["--local_dir", str(actor), "--target_dir", str(target)]
    p = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-5:])
    return p.returncode, tail


def mem_available() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)  # same file system: the export costs no space, and the save stays as it is
    except OSError:
        shutil.copy2(src, dst)


def _megatron_folder(actor: Path, target: Path) -> list[str]:
    """The actor's huggingface/ folder into `target`; the MTP index entries without a tensor, dropped."""
    hf = actor / HF_DIR
    target.mkdir(parents=True)
    for f in sorted(hf.iterdir()):
        if f.is_file():
            _link_or_copy(f, target / f.name)
    index = target / hfweights.INDEX
    if not index.is_file():
        return []
    data = json.loads(index.read_text())
    wm: dict[str, str] = data.get("weight_map", {})
    held: dict[str, set[str]] = {}
    for shard in set(wm.values()):
        try:
            held[shard] = set(hfweights.read_header(target / shard))
        except (OSError, HeaderError):
            held[shard] = set()  # the checker names the shard
    ghosts = [n for n, s in wm.items() if MTP.search(n) and n not in held.get(s, set())]
    if ghosts:
        data["weight_map"] = {n: s for n, s in wm.items() if n not in ghosts}
        index.unlink()  # a hard link: the save's own index stays as it was
        index.write_text(json.dumps(data, indent=2) + "\n")
    return ghosts


def _from_base(model_path: Path, target: Path) -> list[str]:
    copied = []
    for name in FROM_BASE:
        src = model_path / name
        if src.is_file():
            dst = target / name
            if dst.exists():
                dst.unlink()
            shutil.copy2(src, dst)
            copied.append(name)
    return copied


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in ("verl", "transformers", "torch", "safetensors", "verl-recipe"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def read_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def manifest(
    src: Source, report: Report, target: Path, by: str, copied: list[str], dropped: list[str]
) -> dict[str, Any]:
    files = {f.name: sha256_of(f) for f in sorted(target.iterdir()) if f.is_file() and f.name != MANIFEST}
    return {
        "schema": MANIFEST_SCHEMA,
        "source": {
            "checkpoint": str(src.folder),
            "step": src.step,
            "actor": str(src.actor),
            "engine": src.engine,
            "recipe": src.recipe,
        },
        "base_model": {"path": str(src.model_path), "config_sha256": config_sha256(str(src.model_path))},
        "check": report.summary(),
        "from_base_model": copied,
        "index_entries_dropped": len(dropped),
        "files": files,
        "versions": _versions(),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "by": by,
    }


def _space(src: Source, out: Path, base: dict[str, hfweights.Tensor]) -> Problem | None:
    """Room for the export where it goes: the base model's weights again (Megatron's hard links need none)."""
    need = float(sum(t.nbytes for t in base.values()))
    where = Path(nearest_existing(str(out)))
    if src.engine == "megatron":
        try:
            if os.stat(where).st_dev == os.stat(src.actor).st_dev:
                return None
        except OSError:
            pass
    free = float(shutil.disk_usage(where).free)
    if free < need:
        return Problem(
            f"--out {out}",
            f"{tb(free)} free at {where}, the export needs {tb(need)} (the base model's weights)",
            "free space there or give --out on a larger volume",
        )
    return None


def export(
    src: Source,
    out: Path,
    by: str,
    *,
    merge: Merger = fsdp_merge,
    ram: Callable[[], float | None] = mem_available,
) -> tuple[list[Problem], Report | None]:
    """Write the export; the problems that refused or failed it (nothing named `out` then), or the check's report."""
    if out.exists():
        return [Problem(f"--out {out}", "exists already", "remove it or give another --out")], None
    try:
        base = hfweights.folder_tensors(src.model_path)  # read once: the room, the merger's memory
        full = _space(src, out, base)
    except (OSError, HeaderError) as exc:
        return [Problem(f"MODEL_PATH={src.model_path}", f"its weights cannot be read ({exc})", "fix MODEL_PATH")], None
    if full:
        return [full], None
    partial = out.with_name(out.name + PARTIAL_SUFFIX)
    shutil.rmtree(partial, ignore_errors=True)  # one left by an export cut short
    partial.parent.mkdir(parents=True, exist_ok=True)
    dropped: list[str] = []
    try:
        if src.engine == "fsdp":
            params = sum(t.numel for t in base.values())
            need, have = MERGE_RAM_FACTOR * FP32_BYTES * params, ram()
            if have is not None and have < need:
                return [
                    Problem(
                        f"host {os.uname().nodename}",
                        f"{have / 1e9:.0f} GB of memory available, verl's merger needs about {need / 1e9:.0f} GB "
                        f"({MERGE_RAM_FACTOR:g} times the {params:,} parameters in fp32)",
                        "export on a host with more free memory",
                    )
                ], None
            rc, tail = merge(src.actor, partial)
            if rc != 0:
                last = tail.splitlines()[-1] if tail else "no output"
                failed = Problem(str(src.actor), f"verl's merger failed (exit {rc}): {last}", "see the line above")
                return [failed], None
        else:
            dropped = _megatron_folder(src.actor, partial)
        copied = _from_base(src.model_path, partial)
        report = check_export(partial, src.model_path, again=f"export step {src.step} again")
        if dropped:
            report.notes.append(f"dropped {len(dropped)} index entries of the MTP head that name no tensor")
        if not report.ok:
            return report.problems, report
        (partial / MANIFEST).write_text(
            json.dumps(manifest(src, report, partial, by, copied, dropped), indent=2) + "\n"
        )
        os.rename(partial, out)
        report.folder = out
        return [], report
    finally:
        shutil.rmtree(partial, ignore_errors=True)
