"""Installed packages against the versions manifest's pins, and the image record against what is installed now."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .findings import DIST_NAMES, GIT_DISTS, RECORD_FILE, SIM_STRICT, Finding
from .probes import installed_version, same_version
from .record import installed_packages

# ---------------------------------------------------------------------------------------------------------------
# checks


def check_packages(manifest: dict[str, Any], simulated: bool) -> list[Finding]:
    out: list[Finding] = []
    pins: dict[str, Any] = manifest.get("python_packages", {})
    for key, pin in pins.items():
        dist = DIST_NAMES.get(key, key.replace("_", "-"))
        have = installed_version(dist)
        name = f"package:{dist}"
        if simulated and key not in SIM_STRICT:
            if key == "torch" and have:
                out.append(Finding(name, "expected", f"CPU stand-in {have} (the NPU image pins {pin})"))
            elif have and same_version(have, str(pin)):
                out.append(Finding(name, "ok", f"{have}"))
            else:
                out.append(Finding(name, "expected", f"{have or 'not installed'}: NPU image only (pin {pin})"))
            continue
        if have is None:
            out.append(Finding(name, "fail", f"not installed (pin {pin})", "rebuild the image with `make image-npu`"))
        elif not same_version(have, str(pin)):
            out.append(
                Finding(
                    name,
                    "fail",
                    f"installed {have}, manifest pins {pin}",
                    f"rebuild the image from docker/versions.yaml; never `pip install {dist}` in a container",
                )
            )
        else:
            out.append(Finding(name, "ok", have))
    for key, dist in GIT_DISTS.items():
        src = manifest.get("git_sources", {}).get(key)
        if not src:
            continue
        pin = str(src.get("version", ""))
        have = installed_version(dist)
        name = f"package:{dist}"
        if simulated and key != "verl":
            out.append(Finding(name, "expected", f"{have or 'not installed'}: NPU image only (pin {pin})"))
        elif have is None:
            out.append(Finding(name, "fail", f"not installed (pin {pin})", "rebuild the image with `make image-npu`"))
        elif not same_version(have, pin) and not have.startswith(pin):
            out.append(Finding(name, "fail", f"installed {have}, manifest pins {pin}", "rebuild the image"))
        else:
            out.append(Finding(name, "ok", have))
    return out


def check_record(record_dir: Path) -> Finding:
    record = record_dir / RECORD_FILE
    if not record.is_file():
        return Finding("image-record", "warn", f"{record} not found (not running in a verl-recipe image)")
    try:
        data = json.loads(record.read_text())
        recorded: dict[str, str] = data["packages"]
    except (ValueError, KeyError, TypeError):
        return Finding("image-record", "fail", f"{record} is unreadable", "rebuild the image")
    now = installed_packages()
    changed = sorted({k for k in recorded.keys() | now.keys() if recorded.get(k) != now.get(k) and k != "verl-recipe"})
    if changed:
        shown = ", ".join(f"{k} {recorded.get(k, '-')}->{now.get(k, '-')}" for k in changed[:8])
        return Finding(
            "image-record",
            "fail",
            f"{len(changed)} package(s) differ from the image build: {shown}",
            "packages were changed inside the container: recreate it from the image (`docker compose up` again)",
        )
    return Finding(
        "image-record", "ok", f"{len(recorded)} packages as built ({data.get('meta', {}).get('vcs_ref', '?')})"
    )


def expected_dies(manifest: dict[str, Any], env: dict[str, str]) -> tuple[str, int]:
    """(the setting it comes from, dies per node): node.env's NODE_DIES (as for the Ray node), a recipe's
    NDEVICES_PER_NODE, else the manifest's A3 figure. ValueError names the variable and its bad value."""
    for var in ("NODE_DIES", "NDEVICES_PER_NODE"):
        raw = env.get(var, "").strip()
        if raw:
            if not raw.isdigit() or int(raw) < 1:
                raise ValueError(f"{var}={raw!r} is not a whole number of dies >= 1")
            return var, int(raw)
    return "host.dies_per_node.a3", int(manifest.get("host", {}).get("dies_per_node", {}).get("a3", 16))
