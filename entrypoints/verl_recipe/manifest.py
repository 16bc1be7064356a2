"""The versions manifest (docker/versions.yaml): found in the checkout, or inside the image."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import yaml

# Inside the image the manifest is copied here by the recipe layer; in a checkout it sits in docker/.
IMAGE_MANIFEST = Path("/opt/verl-recipe/versions.yaml")
CHECKOUT_MANIFEST = Path(__file__).resolve().parents[2] / "docker" / "versions.yaml"


def manifest_path() -> Path:
    override = os.environ.get("VERL_RECIPE_MANIFEST")
    if override:
        return Path(override)
    if CHECKOUT_MANIFEST.is_file():
        return CHECKOUT_MANIFEST
    return IMAGE_MANIFEST


@cache
def load_manifest(path: str | None = None) -> dict[str, Any]:
    p = Path(path) if path else manifest_path()
    if not p.is_file():
        raise FileNotFoundError(f"versions manifest not found at {p}: set VERL_RECIPE_MANIFEST to docker/versions.yaml")
    data = yaml.safe_load(p.read_text())
    if not isinstance(data, dict) or data.get("schema") != 1:
        raise ValueError(f"{p}: not a schema-1 versions manifest")
    return data


def version_tuple(v: str) -> tuple[int, ...]:
    """'0.18.0' -> (0, 18, 0); non-numeric tails ('rc1', 'post2') are ignored."""
    out: list[int] = []
    for part in v.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if digits == "":
            break
        out.append(int(digits))
        if not part.isdigit():
            break
    return tuple(out)
