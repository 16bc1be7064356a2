"""An exported Hugging Face folder checked against the base model it was trained from, from the safetensors headers
alone (hfweights.py; no tensor is loaded, so a 397B export is checked in seconds). Backend-neutral: verl's FSDP
merger output and the Megatron actor's own `huggingface/` folder are read the same way.

Refused, one line each: no weights, a shard the index names that is missing or cut short, a tensor the index puts in
a shard that does not hold it, a tensor of the base model missing (other than the MTP head), a tensor the base does
not have, a shape that differs, a config of another model type, no tokenizer or chat template. Said, not refused: the
MTP head's absence (verl's save does not write it: Megatron-Bridge de93536e maps no `mtp.*`, transformers drops them on
load), the expert form where it differs from the base's, the parameter count, and the transformers the folder needs."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import hfweights
from ..checks.problem import Problem
from ..hfweights import HeaderError, Tensor
from ..memory.checkpoint import tb

# The multi-token-prediction head of the Qwen3.5 checkpoints (`mtp.*`): in the base model, never in verl's save.
MTP = re.compile(r"(^|\.)mtp\.")
# A tokenizer is one of these beside tokenizer_config.json (a fast tokenizer's JSON, a sentencepiece model, BPE files).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
TOKENIZER_CONFIG = "tokenizer_config.json"
CHAT_TEMPLATE = "chat_template.jinja"
# transformers 5 writes this class name for a fast tokenizer; 4.x cannot load it ("Tokenizer class
# TokenizersBackend does not exist", verl-ascend-recipe sapo/README.md Q4).
TF5_TOKENIZER = "TokenizersBackend"
NAMES_SHOWN = 3


@dataclass
class Report:
    folder: Path
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    params: int = 0
    bytes: int = 0
    absent: list[str] = field(default_factory=list)  # base tensors not in the export (the MTP head)
    expert_form: str = ""
    transformers: str = ""  # the transformers the folder needs, e.g. ">=5"

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> dict[str, Any]:
        return {
            "params": self.params,
            "bytes": self.bytes,
            "absent": len(self.absent),
            "expert_form": self.expert_form,
            "transformers": self.transformers,
            "notes": self.notes,
        }


def _names(names: list[str]) -> str:
    shown = ", ".join(sorted(names)[:NAMES_SHOWN])
    return shown + (f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _weights(r: Report, again: str) -> dict[str, Tensor] | None:
    """The export's tensors as its index places them; problems for what is missing or unreadable."""
    folder = r.folder
    try:
        wm = hfweights.weight_map(folder)
    except (OSError, HeaderError) as exc:
        r.problems.append(Problem(str(folder), f"its weights cannot be read ({exc})", again))
        return None
    if not wm:
        r.problems.append(Problem(str(folder), f"holds no {hfweights.INDEX} and no {hfweights.SINGLE}", again))
        return None
    by_file: dict[str, list[str]] = {}
    for name, shard in wm.items():
        by_file.setdefault(shard, []).append(name)
    tensors: dict[str, Tensor] = {}
    for shard, names in sorted(by_file.items()):
        path = folder / shard
        if not path.is_file():
            r.problems.append(Problem(str(path), f"is missing: the index names it for {len(names)} tensors", again))
            continue
        try:
            header = hfweights.read_header(path)
        except (OSError, HeaderError) as exc:
            r.problems.append(Problem(str(path), f"cannot be read ({exc})", again))
            continue
        r.bytes += path.stat().st_size
        absent = [n for n in names if n not in header]
        if absent:
            r.problems.append(
                Problem(
                    str(path),
                    f"does not hold {len(absent)} tensors the index puts in it: {_names(absent)}",
                    again,
                )
            )
        tensors.update({n: header[n] for n in names if n in header})
    return tensors


def _against_base(r: Report, tensors: dict[str, Tensor], base: dict[str, Tensor], again: str) -> None:
    got, form = hfweights.fused_view(tensors)
    want, base_form = hfweights.fused_view(base)
    r.expert_form = form
    missing = [n for n in want if n not in got]
    r.absent = [n for n in missing if MTP.search(n)]
    lost = [n for n in missing if not MTP.search(n)]
    if lost:
        r.problems.append(Problem(str(r.folder), f"lacks {len(lost)} tensors of the base model: {_names(lost)}", again))
    extra = [n for n in got if n not in want]
    if extra:
        r.problems.append(
            Problem(
                str(r.folder),
                f"holds {len(extra)} tensors the base model does not have: {_names(extra)}",
                "export from a checkpoint of this base model (MODEL_PATH of the run)",
            )
        )
    for n in sorted(n for n in got if n in want and got[n].shape != want[n].shape)[:NAMES_SHOWN]:
        r.problems.append(
            Problem(
                f"tensor {n}",
                f"has shape {list(got[n].shape)}, the base model's is {list(want[n].shape)}",
                "export from a checkpoint of this base model (MODEL_PATH of the run)",
            )
        )
    if r.absent:
        r.notes.append(
            f"absent: the MTP head ({len(r.absent)} tensors, mtp.*, {sum(want[n].numel for n in r.absent):,} "
            "parameters): verl's save does not write it; transformers loads the folder without it, a server that "
            "uses MTP speculative decoding needs it copied from the base model"
        )
    if form and base_form and form != base_form:
        r.notes.append(
            f"experts: {form} in this folder, {base_form} in the base model (transformers 5 loads both; "
            "Megatron-Bridge at de93536e and verl's mbridge load only the fused form, verl #5765)"
        )


def _config_and_tokenizer(r: Report, base_folder: Path) -> None:
    folder = r.folder
    cfg = _read_json(folder / hfweights.CONFIG)
    base_cfg = _read_json(base_folder / hfweights.CONFIG) or {}
    if cfg is None:
        r.problems.append(Problem(str(folder / hfweights.CONFIG), "is missing or not JSON", "export again"))
    elif base_cfg.get("model_type") and cfg.get("model_type") != base_cfg.get("model_type"):
        r.problems.append(
            Problem(
                str(folder / hfweights.CONFIG),
                f"model_type {cfg.get('model_type')!r}, the base model's is {base_cfg.get('model_type')!r}",
                "export from a checkpoint of this base model",
            )
        )
    tok = _read_json(folder / TOKENIZER_CONFIG)
    if tok is None or not any((folder / f).is_file() for f in TOKENIZER_FILES):
        r.problems.append(
            Problem(
                str(folder),
                f"holds no tokenizer ({TOKENIZER_CONFIG} and one of {', '.join(TOKENIZER_FILES)})",
                "copy the tokenizer files of MODEL_PATH into it (verl-recipe export does)",
            )
        )
    base_tok = _read_json(base_folder / TOKENIZER_CONFIG) or {}
    base_has_template = (base_folder / CHAT_TEMPLATE).is_file() or "chat_template" in base_tok
    if base_has_template and not ((folder / CHAT_TEMPLATE).is_file() or "chat_template" in (tok or {})):
        r.problems.append(
            Problem(str(folder), "holds no chat template, the base model has one", "copy chat_template.jinja into it")
        )
    needs = []
    version = str((cfg or {}).get("transformers_version") or "")
    if version[:1].isdigit() and int(version.split(".")[0]) >= 5:
        needs.append(f"config.json written by transformers {version}")
    if (tok or {}).get("tokenizer_class") == TF5_TOKENIZER:
        needs.append(f"tokenizer_class {TF5_TOKENIZER}")
    if str((cfg or {}).get("model_type") or "").startswith("qwen3_5"):
        needs.append(f"model_type {cfg.get('model_type') if cfg else ''} (transformers 5.2 and later)")
    if needs:
        r.transformers = ">=5"
        r.notes.append(f"needs transformers >= 5 to load ({'; '.join(needs)}): a serving image with 4.x cannot")


def check_export(folder: Path, base_folder: Path, again: str = "export again") -> Report:
    """The export at `folder` against the base model at `base_folder` (MODEL_PATH)."""
    r = Report(folder)
    tensors = _weights(r, again)
    if tensors is not None:
        try:
            base = hfweights.folder_tensors(base_folder)
        except (OSError, HeaderError) as exc:
            r.problems.append(Problem(f"MODEL_PATH={base_folder}", f"its weights cannot be read ({exc})", again))
            base = {}
        if base:
            _against_base(r, tensors, base, again)
        else:
            r.notes.append(f"the base model at {base_folder} has no safetensors to compare with: names not checked")
        r.params = sum(t.numel for t in tensors.values())
        data = sum(t.nbytes for t in tensors.values())
        r.notes.append(f"{r.params:,} parameters in {tb(r.bytes)} ({tb(data)} of tensor data)")
    _config_and_tokenizer(r, base_folder)
    return r
