"""The shared paths (model, data) and free space for checkpoints."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .. import a3facts
from ..layers import default_site_file, read_site_yaml
from ..memory.checkpoint import tb
from ..settingtypes import SettingsError
from .findings import PATH_VARS, Finding


def with_site_paths(env: dict[str, str]) -> dict[str, str]:
    """The path settings the environment lacks, from the site file's site-wide part (deploy.yml's site.yaml holds
    TRAIN_FILES and VAL_FILES; node.env holds the rest)."""
    site = default_site_file(env)
    if site is None or not site.is_file():
        return env
    try:
        data = read_site_yaml(site)
    except SettingsError:
        return env  # the launch's own validation names what is wrong with the site file
    if not isinstance(data, dict):
        return env
    merged = dict(env)
    for var in PATH_VARS:
        value = data.get(var)
        if var not in merged and isinstance(value, (str, list)):
            merged[var] = value if isinstance(value, str) else ",".join(str(v) for v in value)
    return merged


def recipe_model_paths(env: dict[str, str]) -> dict[str, str]:
    """Each recipe's MODEL_PATH from the site file's per-recipe sections (deploy.yml writes the inventory's
    site_models there: one checkpoint folder per recipe, no site-wide MODEL_PATH)."""
    site = default_site_file(env)
    try:
        data = read_site_yaml(site) if site is not None and site.is_file() else None
    except SettingsError:
        return {}
    recipes = data.get("recipes") if isinstance(data, dict) else None
    if not isinstance(recipes, dict):
        return {}
    return {
        str(name): str(section["MODEL_PATH"])
        for name, section in sorted(recipes.items())
        if isinstance(section, dict) and isinstance(section.get("MODEL_PATH"), str)
    }


def check_paths(env: dict[str, str]) -> list[Finding]:
    out: list[Finding] = []
    env = with_site_paths(env)
    for var in PATH_VARS:
        value = env.get(var, "")
        per_recipe = recipe_model_paths(env) if var == "MODEL_PATH" and not value else {}
        for recipe, path in per_recipe.items():
            ok = Path(path).exists()
            fix = f"put {recipe}'s checkpoint there, or correct its site_models entry and deploy again"
            out.append(Finding(f"path:MODEL_PATH:{recipe}", "ok" if ok else "fail", path if ok else f"{path} not found",
                               "" if ok else fix))  # fmt: skip
        if per_recipe:
            continue
        if not value:
            fix = f"set {var} in node.env or the site file (deploy.yml writes both)"
            out.append(Finding(f"path:{var}", "fail", "not set", fix))
            continue
        missing = [p for p in value.split(",") if p and not Path(p).exists()]
        if missing:
            out.append(
                Finding(
                    f"path:{var}",
                    "fail",
                    f"{', '.join(missing)} not found",
                    f"mount the shared storage at the same path on every host and put the files there ({var})",
                )
            )
        else:
            out.append(Finding(f"path:{var}", "ok", value))
    return out


def nearest_existing(path: Path) -> Path:
    return Path(a3facts.nearest_existing(str(path)))


def recipe_needs() -> list[tuple[str, float]]:
    """Each recipe's peak at CKPT_DIR with its defaults (checks/storage.py: CKPT_KEEP saves plus the one being
    written), smallest first: the figure validate refuses a launch on."""
    from ..checks.storage import plan
    from ..recipes import load_recipe, recipe_names

    needs = []
    for name in recipe_names():
        r = load_recipe(name)
        if int(r.settings.get("SAVE_FREQ") or 0) > 0:
            sp = plan(r.model, r.engine, r.settings)
            needs.append((name, sp.peak * sp.size.total))
    return sorted(needs, key=lambda x: x[1])


def _ckpt_base(env: dict[str, str]) -> Path | Finding:
    """The existing folder CKPT_DIR lies in, or the failed finding when it is unset or not writable."""
    value = env.get("CKPT_DIR", "")
    if not value:
        return Finding("ckpt-space", "fail", "CKPT_DIR not set", "set CKPT_DIR (on the shared storage) in node.env")
    base = nearest_existing(Path(value))
    if not os.access(base, os.W_OK):
        return Finding("ckpt-space", "fail", f"{base} is not writable", f"make {value} writable for the container user")
    return base


def check_recipes_space(env: dict[str, str]) -> Finding:
    """Free space at CKPT_DIR against every recipe's checkpoints: fail below the smallest, warn naming the recipes it
    cannot hold."""
    base = _ckpt_base(env)
    if isinstance(base, Finding):
        return base
    free = float(shutil.disk_usage(base).free)
    needs = recipe_needs()
    fits = [f"{n} ({tb(b)})" for n, b in needs if b <= free]
    short = [f"{n} ({tb(b)})" for n, b in needs if b > free]
    detail = f"{tb(free)} free at {base}" + (f"; holds {', '.join(fits)}" if fits else "")
    fix = "free space there or point CKPT_DIR at a larger volume; a lower CKPT_KEEP needs less (`verl-recipe plan`)"
    if not short:
        return Finding("ckpt-space", "ok", detail)
    detail += f"; not {', '.join(short)} (CKPT_KEEP saves plus the one being written)"
    return Finding("ckpt-space", "warn" if fits else "fail", detail, fix)


def check_ckpt_space(env: dict[str, str], min_free_gb: float) -> Finding:
    base = _ckpt_base(env)
    if isinstance(base, Finding):
        return base
    free_gb = shutil.disk_usage(base).free / 1e9
    if free_gb < min_free_gb:
        return Finding(
            "ckpt-space",
            "fail",
            f"{free_gb:.1f} GB free at {base}, need {min_free_gb:g} GB",
            "free space on the shared storage or lower --min-free-gb for a smaller model",
        )
    return Finding("ckpt-space", "ok", f"{free_gb:.1f} GB free at {base}")
