"""Run inside the simulated runtime image (torch, transformers 5, verl): the logits of a fixed prompt from three
models, as JSON: the export (transformers' own loading of the folder), the trained actor (its FSDP rank files put
together here, not by verl's merger: each DTensor's local shards concatenated along its sharded dimension) and the
base model. Usage: python export_logits.py ACTOR_DIR EXPORT_DIR BASE_DIR"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForImageTextToText


def actor_state(actor: Path) -> dict[str, torch.Tensor]:
    world = json.loads((actor / "fsdp_config.json").read_text())["world_size"]
    ranks = [torch.load(actor / f"model_world_size_{world}_rank_{r}.pt", weights_only=False) for r in range(world)]
    out = {}
    for name, first in ranks[0].items():
        placements = getattr(first, "placements", None)
        if placements is None:
            out[name] = first
            continue
        dims = [p.dim for p in placements if p.is_shard()]
        parts = [sd[name]._local_tensor for sd in ranks]
        out[name] = torch.cat(parts, dim=dims[0]) if dims else parts[0]
    return out


def logits(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(input_ids=ids).logits.float()


def main() -> None:
    actor, export, base = (Path(a) for a in sys.argv[1:4])
    torch.manual_seed(0)
    ids = torch.tensor([[1, 5, 9, 2, 7, 3, 11, 4]])
    exported = AutoModelForImageTextToText.from_pretrained(export, dtype=torch.float32)
    trained = AutoModelForImageTextToText.from_config(AutoConfig.from_pretrained(actor / "huggingface"))
    state = {k: v.to(torch.bfloat16).to(torch.float32) for k, v in actor_state(actor).items()}  # the export is bf16
    missing, unexpected = trained.load_state_dict(state, strict=False)
    original = AutoModelForImageTextToText.from_pretrained(base, dtype=torch.float32)
    a, e, b = logits(trained, ids), logits(exported, ids), logits(original, ids)
    print(
        json.dumps(
            {
                "missing": list(missing),
                "unexpected": list(unexpected),
                "export_vs_actor": float((e - a).abs().max()),
                "export_vs_base": float((e - b).abs().max()),
                "scale": float(a.abs().max()),
            }
        )
    )


if __name__ == "__main__":
    main()
