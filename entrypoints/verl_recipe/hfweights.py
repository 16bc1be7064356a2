"""A Hugging Face weights folder read without loading a tensor: each safetensors file's header (8 bytes of
little-endian length, then a JSON map of tensor name to dtype, shape and data offsets; huggingface/safetensors,
"Format") and the index that maps tensor names to files (`model.safetensors.index.json`, transformers'
`save_pretrained`). The storage plan counts a checkpoint's parameters from it, the export checker its tensors."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

HEADER_MAX_BYTES = 100 * 1024 * 1024  # the safetensors format's own bound on its JSON header
INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
CONFIG = "config.json"
INDEX_MAX_BYTES = 256 * 1024 * 1024

# Bytes per element of safetensors' dtype names (safetensors' Dtype enum).
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip


class HeaderError(ValueError):
    """A safetensors file whose header cannot be read, or whose data is shorter than its header says."""


@dataclass(frozen=True)
class Tensor:
    dtype: str
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES.get(self.dtype, 0)


def read_header(path: Path) -> dict[str, Tensor]:
    """The tensors one safetensors file holds. HeaderError when the header is not one, or when the file is
    shorter than the data its header places (a copy or a save cut short); OSError when it cannot be opened."""
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise HeaderError("shorter than a safetensors header")
        size = int.from_bytes(head, "little")
        if not 0 < size <= HEADER_MAX_BYTES:
            raise HeaderError(f"a header length of {size} bytes is not a safetensors header")
        raw = fh.read(size)
        fh.seek(0, 2)
        file_bytes = fh.tell()
    if len(raw) < size:
        raise HeaderError(f"the header is cut short ({len(raw)} of {size} bytes)")
    try:
        header = json.loads(raw)
        out: dict[str, Tensor] = {}
        data_end = 0
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            out[name] = Tensor(str(entry["dtype"]), tuple(int(d) for d in entry["shape"]))
            data_end = max(data_end, int(entry["data_offsets"][1]))
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise HeaderError(f"the header is not a safetensors header ({type(exc).__name__})") from exc
    if file_bytes < 8 + size + data_end:
        raise HeaderError(f"{file_bytes} bytes where its header places {8 + size + data_end}: cut short")
    return out


def weight_map(folder: Path) -> dict[str, str] | None:
    """Tensor name -> file, from the index, or from the one `model.safetensors`; None when the folder has neither.
    Raises HeaderError for an index that cannot be read, OSError for a folder that cannot."""
    index = folder / INDEX
    if index.is_file():
        if index.stat().st_size > INDEX_MAX_BYTES:
            raise HeaderError(f"{INDEX} is over {INDEX_MAX_BYTES} bytes")
        try:
            wm = json.loads(index.read_text())["weight_map"]
            return {str(k): str(v) for k, v in wm.items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise HeaderError(f"{INDEX} has no readable weight_map ({type(exc).__name__})") from exc
    single = folder / SINGLE
    if single.is_file():
        return dict.fromkeys(read_header(single), SINGLE)
    return None


def folder_tensors(folder: Path) -> dict[str, Tensor]:
    """Every tensor of every safetensors file in the folder (index or not); raises HeaderError/OSError."""
    out: dict[str, Tensor] = {}
    for f in sorted(folder.glob("*.safetensors")):
        out.update(read_header(f))
    return out


def params(folder: Path) -> int | None:
    """The parameters the folder's safetensors files hold; None when there are none or one cannot be read."""
    try:
        return sum(t.numel for t in folder_tensors(folder).values()) or None
    except (OSError, HeaderError):
        return None


# Mixture-of-experts weights come in two forms: per expert (`...mlp.experts.<e>.gate_proj.weight`, [I, H]; up_proj
# the same; down_proj [H, I]), as transformers' save_original_format and verl's FSDP merger write them, and fused
# (`...mlp.experts.gate_up_proj` [E, 2I, H], `...mlp.experts.down_proj` [E, H, I]), as the published Qwen3.5
# checkpoints and transformers 5's Qwen3_5MoeExperts hold them.
PER_EXPERT = re.compile(r"^(?P<pre>.*\.experts)\.(?P<e>\d+)\.(?P<proj>gate_proj|up_proj|down_proj)\.weight$")
FUSED = "fused"
PER_EXPERT_FORM = "per-expert"


def fused_view(tensors: dict[str, Tensor]) -> tuple[dict[str, Tensor], str]:
    """The tensors with per-expert MoE weights folded into the fused names and shapes, and the form found ("fused",
    "per-expert", or "" without experts). A layer whose experts are not all there, or not alike, stays as it is, so
    a comparison names what is missing."""
    groups: dict[str, dict[str, dict[int, Tensor]]] = {}
    rest: dict[str, Tensor] = {}
    for name, t in tensors.items():
        m = PER_EXPERT.match(name)
        if m:
            groups.setdefault(m["pre"], {}).setdefault(m["proj"], {})[int(m["e"])] = t
        else:
            rest[name] = t
    form = PER_EXPERT_FORM if groups else (FUSED if any(n.endswith(".experts.gate_up_proj") for n in rest) else "")
    for pre, projs in groups.items():
        folded = _fold(projs)
        if folded is None:
            for proj, by_e in projs.items():
                rest.update({f"{pre}.{e}.{proj}.weight": t for e, t in by_e.items()})
        else:
            rest[f"{pre}.gate_up_proj"], rest[f"{pre}.down_proj"] = folded
    return rest, form


def _fold(projs: dict[str, dict[int, Tensor]]) -> tuple[Tensor, Tensor] | None:
    gate, up, down = (projs.get(p, {}) for p in ("gate_proj", "up_proj", "down_proj"))
    n = len(gate)
    if not n or set(gate) != set(range(n)) or set(up) != set(gate) or set(down) != set(gate):
        return None
    shapes = {(gate[e].shape, up[e].shape, down[e].shape) for e in range(n)}
    dtypes = {t.dtype for d in (gate, up, down) for t in d.values()}
    if len(shapes) != 1 or len(dtypes) != 1:
        return None
    (g, u, d), dtype = shapes.pop(), dtypes.pop()
    if len(g) != 2 or g != u or len(d) != 2 or d != (g[1], g[0]):
        return None
    return Tensor(dtype, (n, 2 * g[0], g[1])), Tensor(dtype, (n, d[0], d[1]))
